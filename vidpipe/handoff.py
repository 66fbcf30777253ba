"""The bounded hand-off between capture workers and the shared preprocessing stage.

Each camera owns one ``Mailbox`` with room for a single frame. Two policies:

* ``newest`` (live streams): ``put`` never blocks; a frame that was not taken yet is replaced
  and counted as dropped with reason ``overwritten``.
* ``block`` (files): ``put`` waits until the previous frame was taken, so a file is read as
  fast as inference can use it and no decoded frame is wasted.

``FrameHub`` joins the mailboxes and hands frames out round-robin across cameras, so one busy
camera can never starve another.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from vidpipe.types import Frame

Policy = Literal["newest", "block"]


class Mailbox:
    """A one-frame slot for one camera."""

    def __init__(
        self, camera: str, hub: FrameHub, policy: Policy, on_drop: Callable[[Frame], None]
    ) -> None:
        self.camera = camera
        self.policy = policy
        self._hub = hub
        self._frame: Frame | None = None
        self._on_drop = on_drop

    def put(self, frame: Frame, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Offer a frame. Returns False only if ``stop`` was set while waiting (block policy)."""
        cond = self._hub.cond
        with cond:
            if self.policy == "block":
                while self._frame is not None:
                    if stop.is_set():
                        return False
                    cond.wait(poll_s)
            old, self._frame = self._frame, frame
            cond.notify_all()
        if old is not None:
            self._on_drop(old)
        return True

    def wait_empty(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Block policy: wait until the previous frame was taken, so the next one is decoded
        only when it can be used (its capture time is then when it enters the pipeline, not a
        frame interval earlier). Newest policy: returns at once. False if ``stop`` was set.
        """
        if self.policy != "block":
            return True
        cond = self._hub.cond
        with cond:
            while self._frame is not None:
                if stop.is_set():
                    return False
                cond.wait(poll_s)
        return True

    def take_locked(self) -> Frame | None:
        """Remove and return the frame; caller holds the hub's condition."""
        frame, self._frame = self._frame, None
        return frame

    def clear(self) -> Frame | None:
        """Remove whatever is waiting (used when a camera stops)."""
        with self._hub.cond:
            frame = self.take_locked()
            self._hub.cond.notify_all()
            return frame


class FrameHub:
    """All cameras' mailboxes, taken from in round-robin order."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._boxes: list[Mailbox] = []
        self._next = 0

    def add(self, camera: str, policy: Policy, on_drop: Callable[[Frame], None]) -> Mailbox:
        box = Mailbox(camera, self, policy, on_drop)
        with self.cond:
            self._boxes.append(box)
        return box

    def remove(self, box: Mailbox) -> None:
        with self.cond:
            if box in self._boxes:
                self._boxes.remove(box)
                self._next = 0
            self.cond.notify_all()

    def take(self, timeout_s: float) -> Frame | None:
        """Next frame in round-robin order, waiting up to ``timeout_s``; None on timeout."""
        with self.cond:
            frame = self._take_locked()
            if frame is None and self.cond.wait(timeout_s):
                frame = self._take_locked()
            if frame is not None:
                self.cond.notify_all()  # a blocked file reader may put again
            return frame

    def _take_locked(self) -> Frame | None:
        n = len(self._boxes)
        for i in range(n):
            idx = (self._next + i) % n
            frame = self._boxes[idx].take_locked()
            if frame is not None:
                self._next = (idx + 1) % n
                return frame
        return None

    def clear_all(self) -> list[Frame]:
        """Remove and return every waiting frame (shutdown accounting)."""
        with self.cond:
            frames = [f for f in (b.take_locked() for b in self._boxes) if f is not None]
            self.cond.notify_all()
        return frames

    def pending(self) -> int:
        with self.cond:
            return sum(1 for b in self._boxes if b._frame is not None)
