"""Not decoding the frames that ``detect_fps`` would drop anyway.

A camera at ``detect_fps: 5`` on a 10 fps stream passes every other frame to detection, yet
the decoder used to reconstruct all of them. A frame that no other frame is predicted from (a
*non-reference* frame: most B-frames, and the non-reference P-frames of cameras with
temporal scalability) can be left undecoded without harming any other: FFmpeg's
``skip_frame = NONREF`` does that for the packets it is set on, and the decoder decides which
packets are non-reference. So before each packet the source asks whether a frame at that time
would be wanted, and only if not, lets the decoder skip it.

Measured on the walkway clip (768x432, 10 fps, 59 % non-reference B-frames), one decoder
thread: 1.07 ms of CPU per packet decoding everything, 0.85 ms when the frames that
``detect_fps: 5`` drops may be skipped (``python benchmarks/reader_cost.py``).

A frame is only skipped when the worker's decimator would not pass it even half a frame later,
and the decimator's next due time only moves forward, so the frames that reach detection are
the same ones as without skipping (``tests/component/test_capture_skipping.py``). Skipped
frames are still counted: captured and dropped as ``decimated``, and they keep their place in
the camera's frame numbering.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from vidpipe.capture.group_budget import GroupBudget, SharedShare, shed_groups
from vidpipe.capture.pacing import Decimator
from vidpipe.config import CameraConfig, CaptureConfig

Wanted = Callable[[float], bool]
"""``wanted(ahead_s)``: would a frame ``ahead_s`` seconds after the last frame handed to the
worker be passed to detection? Only asked for frames the decoder has not produced yet."""


class NonRefSkipper:
    """Per packet: may the decoder skip it if it is non-reference; afterwards, how many frames
    it did skip (in presentation order, so the count is exact).

    Timestamps are the packets' ``pts``; a packet without one is always decoded.
    """

    def __init__(self, wanted: Wanted) -> None:
        self._wanted = wanted
        self._anchor: int | None = None  # pts of the last frame handed to the worker
        self._marked: list[int] = []  # pts of packets the decoder was allowed to skip, sorted

    def may_skip(self, pts: int | None, time_base: Fraction | None) -> bool:
        """Whether the decoder may drop this packet's frame (only if it is non-reference)."""
        anchor = self._anchor
        if pts is None or anchor is None or time_base is None or pts <= anchor:
            return False  # nothing to measure from yet, or time went backwards
        if self._wanted(float((pts - anchor) * time_base)):
            return False
        bisect.insort(self._marked, pts)
        return True

    def handed(self, pts: int | None) -> int:
        """A decoded frame goes to the worker: returns how many allowed-to-skip frames before
        it never came out of the decoder (skipped), and measures from this frame on."""
        if pts is None:
            return 0
        if self._anchor is not None and pts < self._anchor:
            self._marked.clear()  # timestamps restarted: the old marks cannot be matched
        cut = bisect.bisect_left(self._marked, pts)
        skipped = cut
        if cut < len(self._marked) and self._marked[cut] == pts:
            cut += 1  # this one was allowed to go but was a reference frame: decoded
        del self._marked[:cut]
        self._anchor = pts
        return skipped


def skip_unwanted_frames(source: Any, decimator: Decimator, fps: float | None) -> None:
    """Let ``source`` skip the non-reference frames ``decimator`` will drop, if it can (a
    source with ``skip_unwanted``) and the frame rate is known."""
    skip_unwanted = getattr(source, "skip_unwanted", None)
    if skip_unwanted is not None and fps:
        skip_unwanted(decimator.wanted_after(1.0 / fps))


def leave_undecoded(
    source: Any,
    fps: float | None,
    camera: CameraConfig,
    defaults: CaptureConfig,
    decimator: Decimator,
    policy: str,
    shared: SharedShare,
) -> GroupBudget | None:
    """Let a freshly opened ``source`` leave undecoded what the camera's settings allow:
    the non-reference frames detection would not use (``capture.skip_unused_frames``), and,
    for a live camera (``newest``), whole groups of pictures past what inference takes
    (``capture.shed_gops``). The groups' budget, if any."""
    if camera.detect_fps and defaults.skip_unused_frames:
        skip_unwanted_frames(source, decimator, fps)
    if policy != "newest" or not defaults.shed_gops:
        return None
    return shed_groups(source, shared, defaults.shed_gop_max_s)
