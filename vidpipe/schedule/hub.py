"""The bounded hand-off between capture workers and the shared preprocessing stage.

Each camera owns one ``Mailbox`` with room for a single frame. Two policies:

* ``newest`` (live streams): ``put`` never blocks; a frame that was not taken yet is replaced
  and counted as dropped with reason ``overwritten``. A reader that finds its last frame
  still waiting (``unread_seq``) may drop its new one instead, before making it
  (``mailbox_full``: ``CaptureWorker._emit`` says when and why).
* ``block`` (files): the reader asks for a *turn* (``wait_empty``) before it decodes, and
  ``put`` waits until the previous frame was taken, so a file is read as fast as inference can
  use it and no decoded frame is wasted.

``FrameHub`` joins the mailboxes and hands frames out round-robin across cameras, so one busy
camera can never starve another.

Two costs this module avoids (measured with ``vidpipe bench``, vidpipe against the naive
loop; benchmarks/README.md):

* **Decoding ahead of need.** Without a limit every file camera keeps one decoded frame
  waiting, so at 8 cameras 8 frames wait on top of those in inference, and by Little's law
  each one adds a frame interval to every frame's latency. ``set_ahead_limit`` caps the turns
  out at once (decoding or decoded, not yet taken) across all block cameras; turns are given
  in the order they were asked for, so every camera still gets its share. A ``TurnClock``
  (``set_turn_clock``) also times them: a turn is given only when its frame, once decoded,
  will be needed soon (``vidpipe.schedule.turn_clock``).
* **Waking threads for nothing.** Every mailbox has its own condition (its reader is the only
  one that waits on it) and the scheduler has another, all on the hub's one lock: a ``put``
  wakes the scheduler, a ``take`` wakes the first reader in line. One condition shared by all
  used to wake every reader twice per frame, each wake-up a context switch and a trip through
  the GIL, and on a busy box a preempted inference thread. A reader is woken only when its
  turn may be given: a ``take`` puts the reader whose frame went in line without waking it,
  a turn given wakes the next reader only if the limit leaves room for it, and a completion
  wakes the reader the clock holds back only if its turn moved sooner. At 4 cameras of
  768x432 on 2 cores that took the readers from 3.5 waits per frame to 2.2 and their context
  switches from 9.1 to 5.9 per frame (``python -m benchmarks.thread_split``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from vidpipe.capture.mailbox import Policy
from vidpipe.types import Frame

if TYPE_CHECKING:
    from vidpipe.schedule.turn_clock import TurnClock


# A turn that was given but led to no frame for this long (the reader failed, is backing off,
# or skips decimated frames) stops counting against the limit: a camera in trouble must not
# hold back the others. Decoding one frame takes milliseconds.
_TURN_TTL_S = 1.0
# The shortest sleep of a reader whose turn is due: a turn due "now" may still be a few
# microseconds ahead when asked, and must not cost a whole poll interval.
_MIN_WAIT_S = 0.0002
# A turn brought forward by less than this is given when its reader wakes anyway: waking it
# earlier costs a context switch for a fraction of a millisecond.
_MOVED_EARLIER_S = 0.0005


# A scheduler's wait for frames ends when it is handed one (or a nudge); False: when its
# thread runs again (``benchmarks.overload --share-rule woken`` measures the difference).
WAIT_ENDS_AT_HANDOVER = True


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
        self._changed = threading.Condition(hub.lock)  # this box's reader waits on it
        self._turn_since: float | None = None  # block: when the current turn was given
        self._asking = False  # block: its reader waits in ``wait_empty``

    @property
    def starting(self) -> bool:
        """No scheduler takes from the hub yet (``FrameHub.starting``)."""
        return self._hub.starting

    @property
    def fit(self) -> tuple[int, int] | None:
        """The input size (width, height) of the model the frames are for (``FrameHub.fit``)."""
        return self._hub.fit

    @property
    def wait_clock(self) -> FrameHub:
        """The hub, whose ``waited_s`` says how long inference waited for frames."""
        return self._hub

    def put(self, frame: Frame, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Offer a frame. Returns False only if ``stop`` was set while waiting (block policy)."""
        with self._hub.lock:
            if self.policy == "block":
                while self._frame is not None:
                    if stop.is_set():
                        return False
                    self._changed.wait(poll_s)
                clock = self._hub._turn_clock
                if clock is not None and self._turn_since is not None:
                    clock.decoded(time.monotonic() - self._turn_since)
                self._turn_since = None  # the turn now counts as the waiting frame
            old, self._frame = self._frame, frame
            self._hub.woken_locked()
        if old is not None:
            self._on_drop(old)
        return True

    def unread_seq(self) -> int | None:
        """The ``seq`` of the frame waiting untaken, None if none.

        Read without the hub's lock, which every camera and the scheduler share: the answer
        may be a moment stale (a frame taken just now still reads as waiting), and only this
        box's reader puts, so no frame appears behind its back.
        """
        waiting = self._frame
        return None if waiting is None else waiting.seq

    def wait_taken(self, seq: int, stop: threading.Event, timeout_s: float) -> bool:
        """Wait until frame ``seq`` has left the box (taken), at most ``timeout_s``; woken by
        the take's notify. True if it left; False on timeout, or if ``stop`` was set."""
        deadline = time.monotonic() + timeout_s
        with self._hub.lock:
            while (waiting := self._frame) is not None and waiting.seq == seq:
                left = deadline - time.monotonic()
                if left <= 0 or stop.is_set():
                    return False
                self._changed.wait(min(left, 0.1))  # 0.1: ``stop`` notifies nobody
        return True

    def wait_empty(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Block policy: wait until the previous frame was taken and this camera has a turn,
        so the next frame is decoded only when it can be used soon (its capture time is then
        close to when it enters inference). Asking again before ``put`` keeps the same turn.
        Newest policy: returns at once. False if ``stop`` was set.
        """
        if self.policy != "block":
            return True
        hub = self._hub
        with hub.lock:
            self._asking = True
            try:
                while True:
                    if self._frame is None and (
                        self._turn_since is not None or hub._give_turn_locked(self)
                    ):
                        return True
                    if stop.is_set():
                        hub._forget_turn_locked(self)
                        return False
                    self._changed.wait(hub._wait_s_locked(self, poll_s))
            finally:
                self._asking = False

    def _holds_turn_locked(self, now: float) -> bool:
        if self.policy != "block":
            return False
        if self._frame is not None:
            return True
        return self._turn_since is not None and now - self._turn_since < _TURN_TTL_S

    def take_locked(self) -> Frame | None:
        """Remove and return the frame; caller holds the hub's lock.

        A reader waiting in ``wait_empty`` is put in line for its next turn here rather than
        woken to ask for it: the hub wakes it once its turn may be given.
        """
        frame, self._frame = self._frame, None
        if frame is not None:
            if self._asking and self._hub._ahead_limit is not None:
                self._hub._line_up_locked(self)
            else:
                self._changed.notify()  # its reader waits in ``put``, or needs no turn
        return frame

    def clear(self) -> Frame | None:
        """Remove whatever is waiting (used when a camera stops)."""
        with self._hub.lock:
            frame = self.take_locked()
            self._turn_since = None
            self._hub._wake_next_locked()
            return frame


class FrameHub:
    """All cameras' mailboxes, taken from in round-robin order."""

    def __init__(self, starting: bool = False) -> None:
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)  # the scheduler waits on it for frames
        # True until a scheduler takes from the hub: the daemon starts its cameras before its
        # schedulers (before the models load, with inference.stream_while_loading), and a
        # live camera's frames meanwhile are dropped unmade (``starting``)
        self.starting = starting
        self._boxes: list[Mailbox] = []
        self._next = 0
        self._ahead_limit: int | None = None
        self._queue: deque[Mailbox] = deque()  # block readers waiting for a turn, in order
        self._turn_clock: TurnClock | None = None
        self._due = 0.0  # the turn clock's time for the first reader in line
        self._takers = 0  # schedulers waiting in ``take``
        # Seconds schedulers waited in ``take`` for a frame, all told: the time inference had
        # room (``vidpipe/capture/group_budget.py`` reads it). Written under the lock.
        self.waited_s = 0.0
        # When a waiting ``take`` was first given a frame or a nudge: its wait ends there, not
        # when its thread runs again, which behind a hundred busy reader threads is the GIL's
        # hand-over, time in which inference had no room.
        self._woken_at: float | None = None
        self._nudged = False  # ``take`` returns at once
        # The model input (width, height) of the scheduler taking from the hub: readers convert
        # their frames at that size only (``Picture.image_for``). None: whole frames.
        self.fit: tuple[int, int] | None = None

    def set_ahead_limit(self, limit: int | None) -> None:
        """At most ``limit`` block cameras decode or hold a decoded frame at once (None: no
        limit; every file camera then keeps one frame decoded ahead)."""
        if limit is not None and limit < 1:
            raise ValueError(f"ahead limit must be >= 1 or None, got {limit}")
        with self.lock:
            self._ahead_limit = limit
            self._wake_next_locked()

    def set_turn_clock(self, clock: TurnClock | None) -> None:
        """Give block cameras their turns when the clock says the frame will be needed."""
        with self.lock:
            self._turn_clock = clock
            self._due = 0.0
            self._wake_next_locked()
        if clock is not None:
            clock.on_moved = self._turn_clock_moved

    def add(self, camera: str, policy: Policy, on_drop: Callable[[Frame], None]) -> Mailbox:
        box = Mailbox(camera, self, policy, on_drop)
        with self.lock:
            self._boxes.append(box)
        return box

    def remove(self, box: Mailbox) -> None:
        with self.lock:
            if box in self._boxes:
                self._boxes.remove(box)
                self._next = 0
            self._forget_turn_locked(box)
            box._turn_since = None
            box._changed.notify_all()
            self.ready.notify_all()

    def take(self, timeout_s: float) -> Frame | None:
        """Next frame in round-robin order, waiting up to ``timeout_s``; None on timeout, or
        at once if ``nudge`` was called since the last ``take``."""
        with self.lock:
            frame = self._take_locked()
            if frame is None and not self._nudged:
                self._takers += 1
                t_wait, self._woken_at = time.monotonic(), None
                try:
                    if self.ready.wait(timeout_s):
                        frame = self._take_locked()
                finally:
                    self._takers -= 1
                    woken_at = self._woken_at if WAIT_ENDS_AT_HANDOVER else None
                    self.waited_s += (time.monotonic() if woken_at is None else woken_at) - t_wait
            self._nudged = False
            return frame

    def nudge(self) -> None:
        """End the scheduler's wait in ``take`` (or its next one): it has other work, a
        completion to postprocess (``vidpipe.schedule.completions``). Any thread."""
        with self.lock:
            self._nudged = True
            if self._takers:
                # all: while a pool is rebuilt, two schedulers take from one hub for a moment
                self.woken_locked(every=True)

    def woken_locked(self, every: bool = False) -> None:
        """Wake a scheduler waiting in ``take`` (``every``: all of them), noting when its wait
        ended. Under the lock."""
        if self._takers and self._woken_at is None:
            self._woken_at = time.monotonic()
        if every:
            self.ready.notify_all()
        else:
            self.ready.notify()

    def _take_locked(self) -> Frame | None:
        n = len(self._boxes)
        for i in range(n):
            idx = (self._next + i) % n
            frame = self._boxes[idx].take_locked()
            if frame is not None:
                self._next = (idx + 1) % n
                if not self._due:  # a reader the clock holds back: a take only delays it
                    self._wake_next_locked()
                return frame
        return None

    # ------------------------------------------------------------------ turns (block policy)

    def _line_up_locked(self, box: Mailbox) -> None:
        if box not in self._queue:
            self._queue.append(box)

    def _give_turn_locked(self, box: Mailbox) -> bool:
        """Give ``box`` a turn if the limit allows and no camera asked before it."""
        if self._ahead_limit is None:
            box._turn_since = time.monotonic()
            return True
        self._line_up_locked(box)
        if self._queue[0] is not box:
            return False
        now = time.monotonic()
        self._due = 0.0  # 0: not held back by the clock
        out = self._outstanding_locked(now)
        if out >= self._ahead_limit:
            return False
        if self._turn_clock is not None:
            due = self._turn_clock.due(out, now)
            if due > now:
                self._due = due
                return False
        self._queue.popleft()
        box._turn_since = now
        if out + 1 < self._ahead_limit:  # the limit allows the next one in line as well
            self._wake_next_locked()
        return True

    def _outstanding_locked(self, now: float) -> int:
        """Turns out: block cameras decoding or holding a decoded frame."""
        return sum(b._holds_turn_locked(now) for b in self._boxes)

    def _wait_s_locked(self, box: Mailbox, poll_s: float) -> float:
        """How long ``box``'s reader sleeps before asking again: until its turn is due if the
        turn clock alone held it back (a completion that brings the turn forward wakes it
        early, ``_turn_clock_moved``), else a poll."""
        if self._due and self._queue and self._queue[0] is box:
            return min(poll_s, max(self._due - time.monotonic(), _MIN_WAIT_S))
        return poll_s

    def _turn_clock_moved(self) -> None:
        """The clock's forecast changed (a request completed): if the turn of the first reader
        in line, which the clock held back, is now due sooner, wake it to ask again (any
        thread; called without the clock's lock). A turn due later needs no wake-up: the
        reader wakes at the old time and asks again then."""
        with self.lock:
            clock = self._turn_clock
            if not self._due or clock is None:
                return
            now = time.monotonic()
            if clock.due(self._outstanding_locked(now), now) < self._due - _MOVED_EARLIER_S:
                self._wake_next_locked()

    def _forget_turn_locked(self, box: Mailbox) -> None:
        if box in self._queue:
            was_first = self._queue[0] is box
            self._queue.remove(box)
            if was_first:
                self._wake_next_locked()

    def _wake_next_locked(self) -> None:
        if self._queue:
            self._queue[0]._changed.notify()

    # ------------------------------------------------------------------ shutdown

    def clear_all(self) -> list[Frame]:
        """Remove and return every waiting frame (shutdown accounting)."""
        with self.lock:
            frames = [f for f in (b.take_locked() for b in self._boxes) if f is not None]
            self._wake_next_locked()
        return frames

    def pending(self) -> int:
        with self.lock:
            return sum(1 for b in self._boxes if b._frame is not None)
