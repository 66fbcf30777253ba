"""Not decoding the frames that ``detect_fps`` or a full mailbox would drop anyway.

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

A live camera past what inference takes drops a frame unmade when the due frame before it
still waits in its mailbox (``mailbox_full``, once in a row). Such a frame is left to the
decoder too, if it is non-reference: the frames that reach the mailbox are the same ones, and
the decoding of frames that were only dropped goes to inference. Those are counted as
``mailbox_full``, as the worker counts the ones it drops.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from fractions import Fraction
from typing import Any, NamedTuple

from vidpipe.capture.group_budget import GroupBudget, SharedShare, shed_groups
from vidpipe.capture.mailbox import WaitClock
from vidpipe.capture.pacing import Decimator
from vidpipe.config import CameraConfig, CaptureConfig

Wanted = Callable[[float], bool]
"""``wanted(ahead_s)``: would a frame ``ahead_s`` seconds after the last frame handed to the
worker be passed to detection? Only asked for frames the decoder has not produced yet."""

HeldBack = Callable[[], int]
"""``held_back()``: how many frames in a row the decoder of a live camera may leave undecoded
now, as the last due frame handed to the worker still waits, untaken, in its mailbox (0: it
was taken). The worker would drop the next frame unmade (``mailbox_full``), so the decoder may
as well leave it undecoded if nothing is predicted from it."""


class Skipped(NamedTuple):
    """Frames the decoder left undecoded, by why they were allowed to go."""

    unused: int  # detection would not use them (``detect_fps``): counted ``decimated``
    unread: int  # the frame before still waited untaken: counted ``mailbox_full``


class NonRefSkipper:
    """Per packet: may the decoder skip it if it is non-reference; afterwards, how many frames
    it did skip (in presentation order, so the count is exact), and why.

    Timestamps are the packets' ``pts``; a packet without one is always decoded.

    Args:
        wanted: whether detection would use a frame (None: every frame).
        held_back: how many frames in a row may go as the frame handed last still waits
            untaken (None: never asked).
            Past what inference takes, a live camera drops the frame after an untaken one
            before converting it; with B-frames, most such frames need not be decoded
            either, and the shares per camera stay as even as the mailbox makes them.
    """

    def __init__(self, wanted: Wanted | None, held_back: HeldBack | None = None) -> None:
        self._wanted = wanted
        self._held_back = held_back
        self._anchor: int | None = None  # pts of the last frame handed to the worker
        self._marked: list[int] = []  # pts of packets the decoder was allowed to skip, sorted
        self._unread: set[int] = set()  # of those, the ones allowed because of held_back

    def may_skip(self, pts: int | None, time_base: Fraction | None) -> bool:
        """Whether the decoder may drop this packet's frame (only if it is non-reference)."""
        anchor = self._anchor
        if pts is None or anchor is None or time_base is None or pts <= anchor:
            return False  # nothing to measure from yet, or time went backwards
        if self._wanted is None or self._wanted(float((pts - anchor) * time_base)):
            # ``held_back`` says how many in a row may go (``OnceInARow.held_back``: one)
            allowed = 0 if self._held_back is None else self._held_back()
            if len(self._unread) >= allowed:
                return False
            self._unread.add(pts)
        bisect.insort(self._marked, pts)
        return True

    def handed(self, pts: int | None) -> Skipped:
        """A decoded frame goes to the worker: returns the allowed-to-skip frames before it
        that never came out of the decoder (skipped), and measures from this frame on."""
        if pts is None:
            return Skipped(0, 0)
        if self._anchor is not None and pts < self._anchor:
            self._marked.clear()  # timestamps restarted: the old marks cannot be matched
            self._unread.clear()
        cut = bisect.bisect_left(self._marked, pts)
        gone = self._marked[:cut]
        unread = sum(p in self._unread for p in gone)
        if cut < len(self._marked) and self._marked[cut] == pts:
            cut += 1  # this one was allowed to go but was a reference frame: decoded
        if self._unread:
            self._unread.difference_update(self._marked[:cut])
        del self._marked[:cut]
        self._anchor = pts
        return Skipped(len(gone) - unread, unread)


def skip_unwanted_frames(source: Any, wanted: Wanted | None, held_back: HeldBack | None) -> None:
    """Let ``source`` skip the non-reference frames that detection will not use or that
    would replace an untaken one, if it can (a source with ``skip_unwanted``)."""
    skip_unwanted = getattr(source, "skip_unwanted", None)
    if skip_unwanted is not None and (wanted is not None or held_back is not None):
        skip_unwanted(wanted, held_back)


def leave_undecoded(
    source: Any,
    fps: float | None,
    camera: CameraConfig,
    defaults: CaptureConfig,
    decimator: Decimator,
    policy: str,
    shared: SharedShare,
    held_back: HeldBack,
    waits: WaitClock | None = None,
) -> GroupBudget | None:
    """Let a freshly opened ``source`` leave undecoded what the camera's settings allow:
    the non-reference frames detection would not use, or (a live camera, ``newest``) that
    would only replace an untaken frame (``capture.skip_unused_frames``); and, for a live
    camera, whole groups of pictures past what inference takes (``capture.shed_gops``). The
    groups' budget, if any."""
    if defaults.skip_unused_frames:
        wanted = decimator.wanted_after(1.0 / fps) if camera.detect_fps and fps else None
        skip_unwanted_frames(source, wanted, held_back if policy == "newest" else None)
    if policy != "newest" or not defaults.shed_gops:
        return None
    return shed_groups(source, shared, defaults.shed_gop_max_s, waits)
