"""A realtime file camera past what inference takes waits for the take (``TakeWait``), on the
real hub and mailbox, with the pacer's clock in the test's hands where time matters."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from vidpipe.capture.pacing import Pacer
from vidpipe.capture.take_wait import TakeWait, take_wait_for
from vidpipe.config import CaptureConfig
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.types import Frame


def _frame(seq: int) -> Frame:
    return Frame("yard", seq, 0.0, np.zeros((2, 2, 3), np.uint8))


def _box(policy: str = "newest") -> tuple[FrameHub, Mailbox]:
    hub = FrameHub()
    return hub, hub.add("yard", policy, lambda _f: None)  # type: ignore[arg-type]


class SkipsAhead:
    skips_ahead = True


def test_pacer_counts_the_frames_due_past_the_one_let_through() -> None:
    pacer, now = Pacer(), 100.0
    assert pacer.behind(now, 10.0) == 0  # nothing scheduled yet
    assert pacer.wait_s(now, 10.0) == 0.0  # frame 0, due now
    assert pacer.behind(now, 10.0) == 0
    assert pacer.behind(100.35, 10.0) == 3  # frames 1, 2 and 3 came due meanwhile
    assert pacer.advance_s(3, 100.35, 10.0) == 0.0  # the read took their places: frame 3
    assert pacer.behind(100.35, 10.0) == 0
    assert pacer.wait_s(100.35, 10.0) == pytest.approx(0.05)  # frame 4 at 100.4
    assert pacer.behind(100.35, None) == 0  # no rate known: never behind


def test_the_wait_ends_at_the_take_not_at_its_timeout() -> None:
    hub, box = _box()
    stop = threading.Event()
    assert box.put(_frame(7), stop)
    wait = TakeWait(box, Pacer(), 25.0, time.monotonic)
    taker = threading.Timer(0.05, lambda: hub.take(1.0))
    t0 = time.monotonic()
    taker.start()
    assert wait.wait(stop)
    waited = time.monotonic() - t0
    taker.join()
    assert box.unread_seq() is None
    assert waited < TakeWait.WAIT_S  # woken by the take, not by the timeout


def test_an_untaken_frame_ends_the_wait_after_its_bound_and_stays() -> None:
    _, box = _box()
    stop = threading.Event()
    assert box.put(_frame(3), stop)
    wait = TakeWait(box, Pacer(), 25.0, time.monotonic)
    t0 = time.monotonic()
    assert wait.wait(stop)  # not stopped: the camera reads on
    assert time.monotonic() - t0 >= TakeWait.WAIT_S
    assert box.unread_seq() == 3  # nothing is lost: the reader's own rule decides next
    assert not box.wait_taken(3, stop, 0.01)
    stop.set()
    t0 = time.monotonic()
    assert not wait.wait(stop)  # stopped: read nothing more
    assert time.monotonic() - t0 < TakeWait.WAIT_S


def test_an_empty_mailbox_is_no_wait() -> None:
    _, box = _box()
    assert TakeWait(box, Pacer(), 25.0, time.monotonic).wait(threading.Event())


def test_the_decoder_may_let_go_what_the_pacer_says_is_due() -> None:
    _, box = _box()
    now = [50.0]
    pacer = Pacer()
    wait = TakeWait(box, pacer, 25.0, lambda: now[0])
    assert pacer.wait_s(now[0], 25.0) == 0.0
    assert wait.behind() == 0
    now[0] += 0.2  # five frames came due while the camera waited for the take
    assert wait.behind() == 5


@pytest.mark.parametrize(
    ("change", "applies"),
    [
        ({}, True),
        ({"policy": "block"}, False),  # a file read as fast as inference takes it
        ({"pacer": None}, False),  # not realtime
        ({"group_size": 8}, False),  # a group thread serves the others meanwhile
        ({"skip": False}, False),  # capture.skip_unused_frames: false
        ({"source": object()}, False),  # a decoder on this process's thread
    ],
)
def test_it_serves_realtime_files_on_a_thread_of_their_own_in_a_decode_process(
    change: dict[str, object], applies: bool
) -> None:
    _, box = _box(str(change.get("policy", "newest")))
    wait = take_wait_for(
        change.get("source", SkipsAhead()),
        CaptureConfig(skip_unused_frames=bool(change.get("skip", True))),
        box,
        change.get("pacer", Pacer()),  # type: ignore[arg-type]
        int(change.get("group_size", 1)),  # type: ignore[call-overload]
        25.0,
        time.monotonic,
    )
    assert (wait is not None) is applies
