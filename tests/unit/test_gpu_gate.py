"""The GPU gate: a capture waits for GPU work in progress, and new work waits for the capture."""

from __future__ import annotations

import threading

from vidpipe.gpu_gate import GpuGate


def test_a_capture_waits_for_work_in_progress_and_new_work_waits_for_it() -> None:
    gate = GpuGate()
    log: list[str] = []
    in_work, release_work = threading.Event(), threading.Event()
    in_capture, release_capture = threading.Event(), threading.Event()

    def worker() -> None:
        with gate.work():
            in_work.set()
            release_work.wait(10)
            log.append("work 1 ends")

    def capture() -> None:
        with gate.exclusive():
            log.append("capture starts")
            in_capture.set()
            release_capture.wait(10)
            log.append("capture ends")

    def late_worker() -> None:
        with gate.work():
            log.append("work 2 runs")

    first = threading.Thread(target=worker)
    first.start()
    assert in_work.wait(10)
    cap = threading.Thread(target=capture)
    cap.start()
    assert not in_capture.wait(0.2)  # the capture waits for work 1
    release_work.set()
    assert in_capture.wait(10)
    late = threading.Thread(target=late_worker)
    late.start()
    late.join(0.2)
    assert late.is_alive()  # work 2 waits for the capture
    release_capture.set()
    for t in (first, cap, late):
        t.join(10)
    assert log == ["work 1 ends", "capture starts", "capture ends", "work 2 runs"]


def test_work_without_a_capture_never_waits_and_nests_across_threads() -> None:
    gate = GpuGate()
    done = []

    def worker(i: int) -> None:
        with gate.work():
            done.append(i)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    with gate.work():  # one already inside does not hold the others up
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
    assert sorted(done) == list(range(16))
    with gate.exclusive():  # nobody inside any more
        pass
