"""Per-thread CPU of a benchmark window (``python -m benchmarks.gpu``'s ``thread_cpu``)."""

from __future__ import annotations

import threading
import time

import pytest

from benchmarks.threads import thread_cores, thread_cpu_s

pytestmark = pytest.mark.timeout(30)


def spin(until: threading.Event) -> None:
    while not until.is_set():
        pass


def test_a_spinning_thread_shows_near_one_core_and_a_sleeping_one_near_none() -> None:
    """By Python name; the idle thread spins before the window only, which must not count."""
    stop, window = threading.Event(), threading.Event()

    def busy_then_idle() -> None:
        spin(window)
        stop.wait()

    busy = threading.Thread(target=spin, args=(stop,), name="probe-busy", daemon=True)
    idle = threading.Thread(target=busy_then_idle, name="probe-idle", daemon=True)
    busy.start()
    idle.start()
    try:
        time.sleep(0.2)
        window.set()
        time.sleep(0.02)  # the idle thread's last spin ends
        before, t0 = thread_cpu_s(), time.perf_counter()
        time.sleep(0.3)
        cores = thread_cores(before, thread_cpu_s(), time.perf_counter() - t0)
    finally:
        stop.set()
        busy.join(5.0)
        idle.join(5.0)
    # the spinner shares the GIL only with the test thread, which sleeps: well above 0.3
    assert cores["probe-busy"] > 0.3
    assert cores.get("probe-idle", 0.0) < 0.05
