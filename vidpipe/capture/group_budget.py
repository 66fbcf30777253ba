"""Leaving whole groups of pictures undecoded when inference cannot take the cameras' frames.

Past what a process can infer, a live camera's frames are shed after they were decoded
(``mailbox_full``, ``overwritten``): the decoding is wasted, and on a box whose cameras' streams
are large it is most of the work. 36 cameras of 1080p on a 2-core Xeon decoded 360 frames a
second for 1.4 cores and left OpenVINO a third of what 20 cameras left it: inference fell to a
third (``benchmarks/README.md``, "Past the decoding a CPU box can do"). A frame of an H.264 or
HEVC stream can only be left undecoded together with every frame predicted from it, so the
unit of shedding before the decoder is the group of pictures: from a keyframe to the next.

The cameras of a pipeline share one ``share`` of groups decoded in full. Each second it is set
from what inference did. When inference waited for frames more than ``IDLE`` of the second,
it has room and the share rises (by ``UP``), however many frames were replaced before it took
them: a GPU process whose batches take longer than a frame interval replaces a third of its
frames while its scheduler waits most of the time, and the share held there inferred 0.67 of
the process's capacity (``benchmarks/README.md``, "NVDEC cameras shedding groups of
pictures"). The wait is timed (``FrameHub.waited_s``), not sampled as frames come: frames come
in bursts, each burst ends the wait, and a scheduler that waited half the time was found
waiting by fewer of the frames. Otherwise, when less than ``LOW`` of the due frames found the
frame made before them taken, the share falls (by ``DOWN``, to at least ``MIN_SHARE``); above
``HIGH`` it rises.

Past a point, more frames decoded means fewer inferred, not the same number with more shed:
one H100 process of 180 cameras inferred up to 1,484 frames a second while its cameras decoded
up to 1,867 due frames a second, and mostly 280-1,375 while they decoded 1,973-2,984, for
seconds at a time (the readers' work for every frame starves the threads that run the
batches; a reader that fell behind then catches up in a burst). A share that overshoots is
not a little waste but a collapse, and it shows a group of pictures late: the cameras take a
new share at their next keyframe. So after each move the share holds for the longest group
seen (the period after a move still shows the share before it), and the share at which
frames were last left untaken is remembered: the share rises to ``NEAR`` of it in whole
steps, and past that by ``SLOW`` of a step, as TCP CUBIC nears the window of its last loss.

A group not decoded in full still has its keyframe decoded and handed on, so every camera
keeps a fresh frame at least once a group. Each camera spends the share on its own schedule
(a credit that starts at its own phase), so the cameras shed alike and not all in the same
groups: what GStreamer's decoders do on QoS events, and DeepStream's ``skip-frames``, by
hand.

Groups longer than ``capture.shed_gop_max_s`` are never shed: a camera would be blind for as
long.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Callable

from vidpipe.capture.mailbox import WaitClock

LOW = 0.6  # below this share of due frames finding the last one taken, decode fewer groups
HIGH = 0.9  # above it, more
IDLE = 0.25  # above this share of the time inference waited for frames, more
# Falls by a factor, rises by a step (as TCP's window): the cores go back to inference within
# seconds of an overload.
DOWN = 0.8
UP = 0.05
NEAR = 0.9  # of the share at the last fall: above it the share rises by SLOW of a step
SLOW = 0.25
HOLD_GROUPS = 1.0  # after a move the share holds for this many of the longest group
MIN_SHARE = 0.05
# Every 4 s or every second made no difference; every 10 s adapted too slowly (60 cameras: 45
# against 97 inferred fps, benchmarks/README.md).
PERIOD_S = 1.0
MIN_DUE = 10  # due frames a period needs before it moves the share
_GOLDEN = (5**0.5 - 1) / 2


class SharedShare:
    """The share of groups decoded in full, shared by a pipeline's cameras (made by
    ``CaptureContext.shared``). Bumped without a lock from many reader threads: a lost
    increment moves the measured share by a frame."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.share = 1.0
        self.group_s = 0.0  # the longest group of pictures a camera shedding them has
        self.due = 0
        self.taken = 0
        # the last period's due and taken frames and share of the time inference waited for
        # frames, for benches and tests
        self.last: tuple[int, int, float] = (0, 0, 0.0)
        self._clock = clock
        self._waits: weakref.WeakKeyDictionary[WaitClock, float] = weakref.WeakKeyDictionary()
        self._waits_lock = threading.Lock()  # cameras open while another thread ticks
        self._hold_until = 0.0  # the share stays until its last move shows
        self._ceiling = 1.0  # the share at the last fall (1.0: none, or risen past it since)
        self._falling = False
        self._since = clock()
        self._phases = itertools.count()

    def next_phase(self) -> float:
        """A phase for the next camera to open: the golden ratio's multiples, so that any
        number of cameras spread their phases evenly over [0, 1) (random phases cluster, and
        the cameras of a cluster would decode the same groups, every time)."""
        return (next(self._phases) * _GOLDEN) % 1.0

    def watch(self, clock: WaitClock) -> None:
        """Count the time inference waits for frames on ``clock`` (the hub of a camera that
        sheds groups; each hub once, forgotten with it)."""
        with self._waits_lock:
            if clock not in self._waits:
                self._waits[clock] = clock.waited_s

    def _waited(self, period_s: float) -> float:
        """The share of the last ``period_s`` (> 0) inference waited for frames, the mean
        over the clocks watched (0: none)."""
        with self._waits_lock:
            readings = [(clock, clock.waited_s - before) for clock, before in self._waits.items()]
            for clock, waited_s in readings:
                self._waits[clock] += waited_s
        if not readings:
            return 0.0
        return sum(w for _, w in readings) / (len(readings) * period_s)

    def tick(self) -> None:
        """Move the share once a period, from the due frames of every camera and the time
        inference waited for frames."""
        now = self._clock()
        if now - self._since < PERIOD_S:
            return
        due, taken = self.due, self.taken
        self.due = self.taken = 0
        waited = self._waited(now - self._since)
        self.last = (due, taken, round(waited, 3))
        self._since = now
        # held: ticks come about a period apart, so the one due as the hold ends still moves
        if due < MIN_DUE or now + PERIOD_S / 2 < self._hold_until:
            return
        before = self.share
        if waited > IDLE:
            self._rise()
        elif taken < LOW * due:
            self._fall()
        elif taken > HIGH * due:
            self._rise()
        if self.share != before:
            self._hold_until = now + HOLD_GROUPS * self.group_s

    def _rise(self) -> None:
        self._falling = False
        near = self.share + UP <= NEAR * self._ceiling
        self.share = min(1.0, self.share + (UP if near else UP * SLOW))
        if self.share > self._ceiling:
            self._ceiling = 1.0  # risen past the last fall's share without a fall: forgotten

    def _fall(self) -> None:
        if not self._falling:  # a second fall in a row says nothing new of the ceiling
            self._ceiling = self.share
        self._falling = True
        self.share = max(MIN_SHARE, self.share * DOWN)


class GroupBudget:
    """One camera's groups: which to decode in full. Used on its reader thread only."""

    def __init__(self, shared: SharedShare, max_group_s: float, phase: float = 0.0) -> None:
        self.shared = shared
        self.max_group_s = max_group_s
        self._phase = phase  # in [0, 1): where in its cycle of groups the camera starts
        self._credit = phase
        self._key_s: float | None = None  # media time of the current group's keyframe
        self._group_s: float | None = None  # the last group's length

    def keyframe(self, media_s: float | None) -> bool:
        """A keyframe starts a group at ``media_s`` (stream seconds; None: unknown): True to
        decode the whole group, False to decode the keyframe only.

        Why not a few frames of every group instead: cameras whose keyframes fall together
        would then all decode at the same moments, and inference would idle in between (a
        third of the throughput where whole groups kept nearly all of it)."""
        if media_s is not None and self._key_s is not None and media_s > self._key_s:
            self._group_s = group_s = media_s - self._key_s
            if self.shared.group_s < group_s <= self.max_group_s:
                self.shared.group_s = group_s
        self._key_s = media_s
        self.shared.tick()
        share = self.shared.share
        if self._group_s is None or self._group_s > self.max_group_s or share >= 1.0:
            self._credit = self._phase
            return True
        self._credit += share
        if self._credit >= 1.0:
            self._credit -= 1.0
            return True
        return False

    def due(self, taken: bool) -> None:
        """A due frame came: ``taken`` says whether inference took the frame made before it."""
        shared = self.shared
        shared.due += 1
        shared.taken += taken


def shed_groups(
    source: object, shared: SharedShare, max_group_s: float, waits: WaitClock | None = None
) -> GroupBudget | None:
    """Give ``source`` a budget of groups to decode, if it can shed them (a source with
    ``shed_groups``); the budget, or None. ``waits`` times inference's waits for the
    camera's frames."""
    attach = getattr(source, "shed_groups", None)
    if attach is None:
        return None
    if waits is not None:
        shared.watch(waits)
    budget = GroupBudget(shared, max_group_s, shared.next_phase())
    attach(budget)
    return budget
