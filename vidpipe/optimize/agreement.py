"""How well a candidate model (INT8, bf16 ...) agrees with the original, frame by frame.

The rule: every reference detection scoring at least ``strong`` (0.4) must be matched by a
candidate detection of the same class with IoU >= ``min_iou`` (0.5) scoring at least ``weak``
(0.25); and every candidate detection scoring at least ``strong`` must likewise be matched by
a reference one. *Recall* is the matched share of the strong reference detections, *precision*
the matched share of the strong candidate detections. The weak side's lower threshold keeps a
detection that sits at the threshold in one model and just under it in the other from counting
as a miss. bf16 against f32 on 286 frames and images scores recall 1.000, precision 0.998.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from vidpipe.postprocess.nms import box_iou
from vidpipe.types import Detections

STRONG = 0.4
WEAK = 0.25
MIN_IOU = 0.5


@dataclass
class Agreement:
    """Matched and total strong detections, both ways, with misses per class name."""

    ref_strong: int = 0
    ref_matched: int = 0
    cand_strong: int = 0
    cand_matched: int = 0
    frames: int = 0
    missed: dict[str, int] = field(default_factory=dict)  # strong reference, not matched
    extra: dict[str, int] = field(default_factory=dict)  # strong candidate, not matched

    @property
    def recall(self) -> float:
        return self.ref_matched / self.ref_strong if self.ref_strong else 1.0

    @property
    def precision(self) -> float:
        return self.cand_matched / self.cand_strong if self.cand_strong else 1.0

    def passes(self, gate: float) -> bool:
        """Both recall and precision at least ``gate``."""
        return self.recall >= gate and self.precision >= gate

    def add(self, ref: Detections, cand: Detections, labels: Sequence[str]) -> None:
        """Count one frame's detections (both from the same input, in the same pixels)."""
        self.frames += 1
        ref_strong, cand_strong = (
            int((ref.score >= STRONG).sum()),
            int((cand.score >= STRONG).sum()),
        )
        self.ref_strong += ref_strong
        self.ref_matched += ref_strong - _count_misses(ref, cand, self.missed, labels)
        self.cand_strong += cand_strong
        self.cand_matched += cand_strong - _count_misses(cand, ref, self.extra, labels)

    def as_dict(self) -> dict[str, object]:
        return {
            "frames": self.frames,
            "recall": round(self.recall, 4),
            "precision": round(self.precision, 4),
            "reference_detections": self.ref_strong,
            "candidate_detections": self.cand_strong,
            "missed_by_class": dict(sorted(self.missed.items())),
            "extra_by_class": dict(sorted(self.extra.items())),
            "rule": f"score >= {STRONG} matched by same class, IoU >= {MIN_IOU}, score >= {WEAK}",
        }


def unmatched(a: Detections, b: Detections) -> np.ndarray:
    """Indices of ``a``'s strong detections that no weak detection of ``b`` matches."""
    strong = np.flatnonzero(a.score >= STRONG)
    if not len(strong):
        return strong
    weak = np.flatnonzero(b.score >= WEAK)
    if not len(weak):
        return strong
    iou = box_iou(a.xyxy[strong], b.xyxy[weak])
    same = a.class_id[strong][:, None] == b.class_id[weak][None, :]
    ok = ((iou >= MIN_IOU) & same).any(axis=1)
    return strong[~ok]


def _count_misses(a: Detections, b: Detections, into: dict[str, int], labels: Sequence[str]) -> int:
    misses = unmatched(a, b)
    for cid in a.class_id[misses].tolist():
        name = labels[cid] if 0 <= cid < len(labels) else str(cid)
        into[name] = into.get(name, 0) + 1
    return len(misses)
