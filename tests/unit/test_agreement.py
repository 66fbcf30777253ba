"""The agreement rule of ``vidpipe optimize`` on hand-made detections."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.optimize.agreement import Agreement
from vidpipe.types import Detections

LABELS = ("person", "car")
BOX = (10.0, 10.0, 110.0, 110.0)
SHIFTED = (40.0, 10.0, 140.0, 110.0)  # IoU with BOX: 70 / 130 = 0.54
FAR = (60.0, 10.0, 160.0, 110.0)  # IoU with BOX: 50 / 150 = 0.33


def dets(*items: tuple[tuple[float, ...], float, int]) -> Detections:
    if not items:
        return Detections.empty()
    return Detections(
        np.array([b for b, _, _ in items], np.float32),
        np.array([s for _, s, _ in items], np.float32),
        np.array([c for _, _, c in items], np.int32),
    )


@pytest.mark.parametrize(
    ("ref", "cand", "recall", "precision"),
    [
        ([(BOX, 0.9, 0)], [(BOX, 0.9, 0)], 1.0, 1.0),
        ([(BOX, 0.9, 0)], [(SHIFTED, 0.3, 0)], 1.0, 1.0),  # weak, IoU 0.54: still a match
        ([(BOX, 0.9, 0)], [(FAR, 0.9, 0)], 0.0, 0.0),  # IoU 0.33: a miss both ways
        ([(BOX, 0.9, 0)], [(BOX, 0.9, 1)], 0.0, 0.0),  # another class
        ([(BOX, 0.9, 0)], [(BOX, 0.2, 0)], 0.0, 1.0),  # below the weak 0.25: missed
        ([(BOX, 0.35, 0)], [], 1.0, 1.0),  # below the strong 0.4: not counted
        ([], [(BOX, 0.5, 1)], 1.0, 0.0),  # an extra strong candidate
    ],
)
def test_rule(ref: list, cand: list, recall: float, precision: float) -> None:
    ag = Agreement()
    ag.add(dets(*ref), dets(*cand), LABELS)
    assert (ag.recall, ag.precision) == (recall, precision)


def test_misses_are_counted_per_class_and_the_gate_needs_both() -> None:
    ag = Agreement()
    ag.add(dets((BOX, 0.9, 0), (FAR, 0.8, 1)), dets((BOX, 0.9, 0)), LABELS)
    ag.add(dets((BOX, 0.9, 0)), dets((BOX, 0.9, 0), (FAR, 0.6, 0)), LABELS)
    assert ag.missed == {"car": 1} and ag.extra == {"person": 1}
    assert ag.recall == pytest.approx(2 / 3) and ag.precision == pytest.approx(2 / 3)
    assert not ag.passes(0.95) and ag.passes(0.6)
    report = ag.as_dict()
    assert report["frames"] == 2 and report["missed_by_class"] == {"car": 1}
