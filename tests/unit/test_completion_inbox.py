"""Which thread postprocesses completions (``CompletionInbox``), and the hub's ``nudge``."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.component.capture_rig import wait_until
from vidpipe.schedule.completions import CompletionInbox
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import Completion


def _inbox() -> tuple[CompletionInbox, list[tuple[Any, str]]]:
    handled: list[tuple[Any, str]] = []
    inbox = CompletionInbox(lambda c: handled.append((c.tag, threading.current_thread().name)))
    return inbox, handled


def test_its_own_thread_handles_completions_in_arrival_order() -> None:
    inbox, handled = _inbox()
    inbox.start()
    for tag in range(50):
        inbox.put(Completion(tag, ()))
    wait_until(lambda: len(handled) == 50, 5, "50 completions handled")
    assert [t for t, _ in handled] == list(range(50))
    assert {name for _, name in handled} == {"vidpipe-postprocess"}
    assert inbox.close(5)


def test_an_adopting_thread_is_woken_and_handles_them_itself() -> None:
    inbox, handled = _inbox()
    inbox.start()
    wakes: list[int] = []
    inbox.adopt(lambda: wakes.append(1))
    for tag in range(3):
        inbox.put(Completion(tag, ()))
    time.sleep(0.2)
    assert handled == [] and len(wakes) == 3  # the inbox's own thread left them alone
    assert inbox.drain() == 3
    assert handled == [(0, "MainThread"), (1, "MainThread"), (2, "MainThread")]
    assert inbox.drain() == 0
    inbox.put(Completion(3, ()))
    inbox.release()  # what waits, and what comes later, goes to the inbox's own thread
    inbox.put(Completion(4, ()))
    wait_until(lambda: len(handled) == 5, 5, "the last two handled")
    assert handled[3:] == [(3, "vidpipe-postprocess"), (4, "vidpipe-postprocess")]
    assert len(wakes) == 4
    assert inbox.close(5)


def test_close_handles_what_is_waiting_and_ends_the_thread() -> None:
    inbox, handled = _inbox()
    inbox.start()
    inbox.adopt(lambda: None)
    for tag in range(4):
        inbox.put(Completion(tag, ()))
    assert inbox.close(5)
    assert [t for t, _ in handled] == [0, 1, 2, 3]


def test_a_failing_handler_does_not_end_the_thread() -> None:
    handled: list[int] = []

    def handle(c: Completion) -> None:
        if c.tag == 1:
            raise RuntimeError("boom")
        handled.append(c.tag)

    inbox = CompletionInbox(handle)
    inbox.start()
    for tag in range(3):
        inbox.put(Completion(tag, ()))
        time.sleep(0.05)
    wait_until(lambda: handled == [0, 2], 5, "the completion after the failure handled")
    assert inbox.close(5)


def test_a_nudge_ends_the_wait_in_take_or_the_next_one() -> None:
    hub = FrameHub()
    hub.add("cam", "block", lambda f: None)
    t0 = time.monotonic()
    threading.Timer(0.1, hub.nudge).start()
    assert hub.take(10.0) is None
    assert time.monotonic() - t0 < 5.0
    hub.nudge()  # nobody waits: the next take returns at once
    t0 = time.monotonic()
    assert hub.take(10.0) is None
    assert time.monotonic() - t0 < 5.0
    t0 = time.monotonic()
    assert hub.take(0.2) is None  # the nudge was used up: this one waits its time
    assert time.monotonic() - t0 >= 0.15


def test_only_the_adopting_thread_drains_when_adopted() -> None:
    inbox, handled = _inbox()  # its own thread not started: nothing else handles them
    inbox.put(Completion(0, ()))
    inbox.drain_if_adopted()
    assert handled == []
    inbox.adopt(lambda: None)
    other = threading.Thread(target=inbox.drain_if_adopted)
    other.start()
    other.join()
    assert handled == []
    inbox.drain_if_adopted()
    assert handled == [(0, "MainThread")]
