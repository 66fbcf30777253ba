"""The result chain: each stage gets what the one before it returned; None ends the way."""

from __future__ import annotations

import dataclasses

from vidpipe.stages import chain
from vidpipe.types import Detections, FrameResult


def _result(seq: int) -> FrameResult:
    return FrameResult("cam", seq, 0.0, 0.0, 0.0, 640, 480, Detections.empty())


def test_each_stage_gets_what_the_one_before_returned_in_order() -> None:
    seen: list[tuple[str, int]] = []

    def renumber(r: FrameResult) -> FrameResult:
        seen.append(("renumber", r.seq))
        return dataclasses.replace(r, seq=r.seq + 100)

    def keep(r: FrameResult) -> FrameResult:
        seen.append(("keep", r.seq))
        return r

    out: list[FrameResult] = []
    run = chain([renumber, keep, out.append])
    run(_result(1))
    run(_result(2))
    assert seen == [("renumber", 1), ("keep", 101), ("renumber", 2), ("keep", 102)]
    assert [r.seq for r in out] == [101, 102]


def test_a_stage_that_returns_none_ends_the_chain() -> None:
    after: list[FrameResult] = []
    run = chain([lambda r: None if r.seq % 2 else r, after.append])
    for seq in range(4):
        run(_result(seq))
    assert [r.seq for r in after] == [0, 2]
