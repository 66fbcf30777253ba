"""The turn clock's forecast (pure arithmetic on given times) and the hub's use of it."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tests.component.capture_rig import wait_until
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.schedule.turn_clock import TurnClock
from vidpipe.types import Frame

MS = 0.001


def _measured(clock: TurnClock, *, service: float, decode: float, fill: float) -> None:
    """One request of ``service`` seconds run alone, one decode, one letterbox."""
    clock.taken()
    clock.filled(fill)
    clock.submitted(1, 100.0, 2)
    clock.completed(1, 100.0 + service)
    clock.decoded(decode)


def test_before_anything_is_measured_a_turn_is_due_at_once() -> None:
    clock = TurnClock(2)
    assert clock.due(0, 5.0) == 5.0
    clock.submitted(1, 5.0, 2)
    assert clock.due(1, 5.0) == 5.0  # still no completion, no decode: no forecast


def test_a_turn_is_given_a_decode_and_letterbox_before_its_request_frees() -> None:
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    assert clock.service_s == pytest.approx(20 * MS)
    lead = 8 * MS + 1 * MS + 2 * MS  # decode + letterbox + margin (no spread yet)
    assert clock.lead_s == pytest.approx(lead)
    for key in (2, 3):  # two requests running, started at t=200 and t=210
        clock.taken()
        clock.submitted(key, 200.0 + (key - 2) * 10 * MS, 2)
    now = 200.010
    # the cap (2) is full: the next frame is needed when the first request ends, at 200.020
    assert clock.due(0, now) == pytest.approx(200.020 - lead)
    # with one turn already out, the one after it is needed when the second ends, at 200.030
    assert clock.due(1, now) == pytest.approx(200.030 - lead)
    # beyond the requests in flight: one more per service / streams
    assert clock.due(2, now) == pytest.approx(200.040 - lead)


def test_a_free_place_in_the_cap_makes_the_turn_due_now() -> None:
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    clock.submitted(2, 300.0, 2)  # one running, the cap of 2 has a free place
    assert clock.due(0, 300.001) < 300.001
    assert clock.due(1, 300.001) == pytest.approx(300.020 - clock.lead_s)


def test_a_frame_taken_but_not_submitted_comes_before_the_next_turn() -> None:
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    clock.submitted(2, 400.0, 2)  # ends at 400.020
    clock.submitted(3, 400.010, 2)  # ends at 400.030
    before = clock.due(0, 400.011)
    assert before == pytest.approx(400.020 - clock.lead_s)
    clock.taken()  # the scheduler holds a letterboxed frame for the first free place
    assert clock.due(0, 400.011) == pytest.approx(400.030 - clock.lead_s)
    clock.released()  # dropped (too old): its place is the next turn's again
    assert clock.due(0, 400.011) == pytest.approx(before)


def test_a_request_queued_behind_the_streams_starts_when_one_completes() -> None:
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    for key in (2, 3, 4):  # cap 3: two run, the third waits in the device's queue
        clock.submitted(key, 500.0, 3)
    # completions forecast at 500.020, 500.020 and 500.040 (the queued one, once started)
    assert clock.due(2, 500.001) == pytest.approx(500.040 - clock.lead_s)
    clock.completed(2, 500.020)  # the queued request starts now
    assert clock.service_s == pytest.approx(20 * MS)
    clock.completed(3, 500.025)
    clock.completed(4, 500.050)  # ran 30 ms from its start at 500.020, not 50 from submit
    assert clock.service_s == pytest.approx(
        20 * MS + 0.125 * (5 * MS) + 0.125 * (30 * MS - 20.625 * MS)
    )


def test_a_frame_is_needed_when_a_stream_frees_for_it_not_when_the_cap_takes_it() -> None:
    clock = TurnClock(2)
    # 8 ms of decode against a frame every 10 ms: not cheap (that case is the next test)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    clock.submitted(2, 800.000, 3)  # runs until 800.020
    clock.submitted(3, 800.010, 3)  # runs until 800.030
    clock.submitted(4, 800.012, 3)  # queued: starts at 800.020, on the first stream to free
    # the cap takes the next frame at 800.020, but then both streams are busy (the queued
    # request, and the one ending at 800.030): it would only wait in the device's queue
    assert clock.due(0, 800.013) == pytest.approx(800.030 - clock.lead_s)
    # the one after it: taken at 800.030, run when the queued request ends at 800.040
    assert clock.due(1, 800.013) == pytest.approx(800.040 - clock.lead_s)


def test_a_cheap_decode_is_ready_when_the_cap_takes_its_frame() -> None:
    """A decode under half the device's frame interval: its frame waits in the device's
    queue rather than leave a stream idle when a request ends early."""
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=3 * MS, fill=1 * MS)  # 3 ms against 10
    clock.submitted(2, 800.000, 3)  # runs until 800.020
    clock.submitted(3, 800.010, 3)  # runs until 800.030
    clock.submitted(4, 800.012, 3)  # queued: starts at 800.020
    # taken at 800.020, when the first request ends (it would run from 800.030)
    assert clock.due(0, 800.013) == pytest.approx(800.020 - clock.lead_s)
    assert clock.due(1, 800.013) == pytest.approx(800.030 - clock.lead_s)
    for _ in range(40):  # the decodes grow past half the interval: timed to the stream
        clock.decoded(6 * MS)
    assert clock.due(0, 800.013) == pytest.approx(800.030 - clock.lead_s)
    latency = TurnClock(2, decode_beside=False)  # inference on every core: never early
    _measured(latency, service=20 * MS, decode=3 * MS, fill=1 * MS)
    for key in (2, 3, 4):
        latency.submitted(key, 800.000 + (key - 2) * 10 * MS, 3)
    assert latency.due(0, 800.021) == pytest.approx(800.030)


def test_with_two_requests_queued_behind_the_streams_turns_are_not_timed() -> None:
    """Many cameras per stream: the cap queues two; a frame decoded early keeps the streams
    busy from the device's queue, so its turn is due at once instead of held back."""
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    for key in (2, 3, 4):  # cap 3: the same forecast as above, turns held back
        clock.submitted(key, 900.0, 3)
    assert clock.due(2, 900.001) == pytest.approx(900.040 - clock.lead_s)
    clock.submitted(5, 900.001, 4)  # cap 4: two queued behind the two streams
    assert clock.due(2, 900.002) == 900.002
    clock.submitted(6, 900.003, 3)  # back to one queued (cameras left): timed again
    assert clock.due(2, 900.004) > 900.004


def test_where_inference_takes_every_core_the_turn_waits_for_it_to_end() -> None:
    clock = TurnClock(1, decode_beside=False)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    assert clock.lead_s == 0.0
    clock.submitted(2, 900.000, 1)  # runs until 900.020
    assert clock.due(0, 900.001) == pytest.approx(900.020)  # not a decode earlier
    beside = TurnClock(1)
    _measured(beside, service=20 * MS, decode=8 * MS, fill=1 * MS)
    beside.submitted(2, 900.000, 1)
    assert beside.due(0, 900.001) == pytest.approx(900.020 - beside.lead_s)
    assert beside.lead_s > 5 * MS


def test_a_refused_request_teaches_no_run_time_and_frees_its_stream() -> None:
    clock = TurnClock(1)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    clock.submitted(2, 700.0, 2)  # runs
    clock.submitted(3, 700.0, 2)  # queued behind it
    clock.withdrawn(2, 700.001)  # the backend refused it: it never ran
    assert clock.service_s == pytest.approx(20 * MS)
    clock.completed(3, 700.021)  # the queued one started when 2 left the model
    assert clock.service_s == pytest.approx(20 * MS)


def test_an_idle_gap_does_not_lengthen_the_service_time() -> None:
    clock = TurnClock(2)
    _measured(clock, service=20 * MS, decode=8 * MS, fill=1 * MS)
    clock.submitted(2, 600.0, 2)
    clock.completed(2, 600.020)
    clock.submitted(3, 605.0, 2)  # nothing ran for five seconds (no frames)
    clock.completed(3, 605.020)
    assert clock.service_s == pytest.approx(20 * MS)


def test_the_lead_covers_the_spread_of_decode_times() -> None:
    clock = TurnClock(2)
    for seconds in (10 * MS, 20 * MS) * 20:
        clock.decoded(seconds)
    assert clock.decode_s is not None and 13 * MS < clock.decode_s < 17 * MS
    assert clock.lead_s > clock.decode_s + 3 * MS  # about one mean deviation (5 ms) more


def test_a_completion_tells_the_hub_without_holding_the_clock_lock() -> None:
    clock = TurnClock(1)
    seen: list[float] = []
    clock.on_moved = lambda: seen.append(clock.due(0, 1.0))  # would deadlock under the lock
    clock.submitted(1, 0.5, 1)
    clock.completed(1, 0.6)
    assert seen == [1.0]


# ---------------------------------------------------------------------- the hub


class _FixedClock(TurnClock):
    """A real clock whose forecast the test sets: the next turn is due at ``at``."""

    def __init__(self) -> None:
        super().__init__(1)
        self.at = 0.0
        self.asked = 0

    def due(self, outstanding: int, now: float) -> float:
        self.asked += 1
        return self.at


def _frame(seq: int) -> Frame:
    return Frame("cam", seq, time.monotonic(), np.zeros((2, 2, 3), np.uint8), 0, 0)


def test_the_hub_gives_no_turn_before_the_clock_says_and_one_after() -> None:
    hub, clock, stop = FrameHub(), _FixedClock(), threading.Event()
    hub.set_ahead_limit(2)
    hub.set_turn_clock(clock)
    box = hub.add("cam", "block", lambda _f: None)
    clock.at = time.monotonic() + 60.0
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    assert box.wait_empty(stop) is False  # held back until stopped
    assert clock.asked >= 1
    clock.at = 0.0
    assert box.wait_empty(threading.Event()) is True


def test_a_completion_wakes_the_reader_the_clock_held_back() -> None:
    hub, clock = FrameHub(), _FixedClock()
    hub.set_ahead_limit(2)
    hub.set_turn_clock(clock)
    box = hub.add("cam", "block", lambda _f: None)
    clock.at = time.monotonic() + 60.0
    got: list[float] = []
    t0 = time.monotonic()
    reader = threading.Thread(
        target=lambda: got.append(
            box.wait_empty(threading.Event(), poll_s=30.0) and time.monotonic()
        )
    )
    reader.start()
    time.sleep(0.2)
    assert not got  # still held back
    clock.at = 0.0  # a request ended early: the turn is due now
    assert clock.on_moved is not None
    clock.on_moved()
    reader.join(5.0)
    assert got and got[0] - t0 < 5.0  # woken, not left to its 30 s poll


def test_the_hub_reports_each_decode_time_to_the_clock() -> None:
    hub, clock = FrameHub(), TurnClock(1)
    hub.set_ahead_limit(2)
    hub.set_turn_clock(clock)
    box = hub.add("cam", "block", lambda _f: None)
    assert box.wait_empty(threading.Event())  # nothing measured: a turn at once
    time.sleep(0.05)
    assert box.put(_frame(0), threading.Event())
    assert clock.decode_s is not None and 0.04 < clock.decode_s < 1.0
    assert hub.take(0.1) is not None


def test_only_a_completion_sooner_than_forecast_wakes_the_hub() -> None:
    clock = TurnClock(1)
    woken: list[int] = []
    clock.on_moved = lambda: woken.append(1)
    clock.submitted(1, 0.0, 1)
    clock.completed(1, 0.020)  # the first: nothing forecast, so it may move the turn
    assert len(woken) == 1
    clock.submitted(2, 1.0, 1)
    clock.completed(2, 1.021)  # as forecast (20 ms) or later: the held turn stays as it was
    assert len(woken) == 1
    clock.submitted(3, 2.0, 1)
    clock.completed(3, 2.010)  # 10 ms early: the reader held back asks again
    assert len(woken) == 2
    clock.taken()
    clock.released()  # a taken frame dropped: its place goes to the next turn, sooner
    assert len(woken) == 3


class _CountingCondition(threading.Condition):
    """A box's condition that counts its reader's waits (each one a sleep and a wake-up)."""

    def __init__(self, lock: threading.Lock) -> None:
        super().__init__(lock)
        self.waits = 0

    def wait(self, timeout: float | None = None) -> bool:
        self.waits += 1
        return super().wait(timeout)


def _counted(hub: FrameHub, name: str) -> tuple[Mailbox, _CountingCondition]:
    box = hub.add(name, "block", lambda _f: None)
    box._changed = counting = _CountingCondition(hub.lock)
    return box, counting


def test_a_reader_is_woken_only_when_its_turn_can_be_given() -> None:
    """Limit 1. ``a``'s reader waits with its frame still in the box, ``b``'s waits in line
    for the turn. Taking ``a``'s frame lines ``a`` up behind ``b`` without waking it, and
    giving ``b`` the turn wakes nobody else (the limit is reached); ``a`` wakes once, when
    ``b``'s frame is taken. (Woken to line up and after each turn given, it slept 3 times.)"""
    hub, stop = FrameHub(), threading.Event()
    hub.set_ahead_limit(1)
    a, a_waits = _counted(hub, "a")
    b, b_waits = _counted(hub, "b")
    assert a.wait_empty(stop)
    assert a.put(_frame(0), stop)
    a_got: list[bool] = []
    a_reader = threading.Thread(target=lambda: a_got.append(a.wait_empty(stop, poll_s=30.0)))
    a_reader.start()
    wait_until(lambda: a_waits.waits == 1, 5.0, "a asleep with its frame in the box")
    b_got: list[bool] = []
    b_reader = threading.Thread(target=lambda: b_got.append(b.wait_empty(stop, poll_s=30.0)))
    b_reader.start()
    wait_until(lambda: b_waits.waits == 1, 5.0, "b in line behind the turn a's frame holds")
    assert hub.take(0.1) is not None  # a's frame: b gets the turn, a is lined up behind it
    b_reader.join(5.0)
    assert b_got == [True]
    assert a_got == [] and a_waits.waits == 1
    assert b.put(_frame(1), stop)
    assert hub.take(0.1) is not None  # b's frame: the turn is a's now
    a_reader.join(5.0)
    assert a_got == [True]
    assert a_waits.waits == 1


def test_a_completion_that_moves_the_turn_later_wakes_nobody() -> None:
    hub, clock = FrameHub(), _FixedClock()
    hub.set_ahead_limit(2)
    hub.set_turn_clock(clock)
    box, waits = _counted(hub, "cam")
    clock.at = time.monotonic() + 60.0
    got: list[bool] = []
    reader = threading.Thread(
        target=lambda: got.append(box.wait_empty(threading.Event(), poll_s=30.0))
    )
    reader.start()
    wait_until(lambda: waits.waits == 1, 5.0, "the reader held back")
    assert clock.on_moved is not None
    clock.at += 5.0  # later: the reader would only ask again and sleep
    clock.on_moved()
    clock.at -= 5.0 + 0.0001  # sooner, by less than a switch is worth
    clock.on_moved()
    time.sleep(0.1)
    assert waits.waits == 1 and not got
    clock.at = 0.0  # due now: woken
    clock.on_moved()
    reader.join(5.0)
    assert got == [True]
    assert waits.waits == 1
