"""What a capture worker needs of the place its frames go: a small protocol.

The scheduling side (``vidpipe.schedule.hub.Mailbox``) implements it; capture depends on this
protocol only, so data keeps flowing one way in the import graph too.
"""

from __future__ import annotations

import threading
from typing import Literal, Protocol

from vidpipe.types import Frame

Policy = Literal["newest", "block"]


class WaitClock(Protocol):
    """The seconds inference waited for frames, all told (it had room meanwhile)."""

    waited_s: float


class FrameSink(Protocol):
    """A camera's one-frame hand-off to inference.

    ``newest`` (live streams): ``put`` never blocks; an untaken frame is replaced and counted.
    ``block`` (files): the reader waits for a turn (``wait_empty``) before it decodes.
    """

    policy: Policy

    @property
    def fit(self) -> tuple[int, int] | None:
        """The model's input size (width, height), for conversion at that size; None: unknown."""
        ...

    @property
    def starting(self) -> bool:
        """No inference takes frames yet (the models load): a live camera drops them unmade."""
        ...

    @property
    def wait_clock(self) -> WaitClock:
        """What counts the time inference waited for frames (shared by the cameras of one
        model)."""
        ...

    def unread_seq(self) -> int | None:
        """The ``seq`` of the frame waiting untaken (None: none), read without a lock."""
        ...

    def put(self, frame: Frame, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Hand ``frame`` on; False if ``stop`` was set first."""
        ...

    def wait_empty(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Wait for the reader's turn to decode; False if ``stop`` was set first."""
        ...

    def wait_taken(self, seq: int, stop: threading.Event, timeout_s: float) -> bool:
        """Wait until frame ``seq`` was taken, at most ``timeout_s``; False if it was not."""
        ...


class OnceInARow:
    """A live camera's rule for a due frame whose predecessor still waits in the mailbox: drop
    it unmade rather than make it only to replace that one, but never two in a row, so that the
    frame inferred is at most one due frame older than the newest. Used on the reader thread.

    Args:
        sink: the camera's mailbox (only ``newest`` mailboxes drop).
    """

    def __init__(self, sink: FrameSink) -> None:
        self._sink = sink
        self._last_due = -1  # seq of the last due frame (-1: none yet)

    def reset(self) -> None:
        """A new session: a frame of the last one never holds back the first."""
        self._last_due = -1

    def drop(self, seq: int, undecoded: bool) -> tuple[bool, int | None]:
        """Frame ``seq`` is due: whether to drop it unmade, and the frame waiting (None: none).

        ``undecoded``: a frame before it was left undecoded in place of this drop
        (``held_back``), which was then the one of the row."""
        previous, self._last_due = self._last_due, seq
        if self._sink.policy != "newest":
            return False, None
        waiting = self._sink.unread_seq()
        return (not undecoded and waiting == previous), waiting

    def held_back(self) -> int:
        """For the decoder (``skipping.HeldBack``): how many frames in a row it may leave
        undecoded now: none while the last due frame was taken, one while it waits (the next
        would be dropped; the one after replaces it).

        Why never a run: a skip leaves no frame to hand on, so the source feeds the next
        packet at once, and a run of B-frames would all go on what the mailbox held before
        the first. Runs let a 2-core Xeon infer 10-17 % more at 3 times the cameras it
        holds, but at 1.3 and 2 times the worst camera fell to 0.90-0.95 of the mean and the
        box inferred up to 8 % less (``python -m benchmarks.overload --device cpu --cameras
        14,28,42 --no-shed-gops``, with and without ``--no-skip-unused-frames``)."""
        last = self._last_due
        return 1 if last >= 0 and self._sink.unread_seq() == last else 0
