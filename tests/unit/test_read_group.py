"""Read groups (``vidpipe.capture.group``): one thread runs several sessions' frame steps.

Plain steps stand in for a camera's frame loop; the worker over a fake PyNvVideoCodec is
tested in ``tests/component/test_nvdec_groups_fake_gpu.py``.
"""

from __future__ import annotations

import threading
import time

import pytest

from vidpipe.capture.group import ReadGroup, ReadGroups, group_size_of
from vidpipe.capture.pacing import Pacer
from vidpipe.config import CameraConfig, CaptureConfig


def _serve_in_thread(group: ReadGroup, name: str, step, cancel: threading.Event):  # type: ignore[no-untyped-def]
    result: dict[str, BaseException | None] = {"error": None}

    def run() -> None:
        try:
            group.serve(name, step, cancel)
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=run, name=f"reader-{name}", daemon=True)
    thread.start()
    return thread, result


def _counting_step(log: list[str], name: str, frames: int):  # type: ignore[no-untyped-def]
    left = [frames]

    def step() -> float | None:
        log.append(name)
        left[0] -= 1
        return 0.0 if left[0] > 0 else None

    return step


def test_members_take_turns_in_order_and_each_runs_to_its_end() -> None:
    group = ReadGroup("g", clock=lambda: 0.0)  # every step due at once: order is FIFO
    log: list[str] = []
    start = threading.Event()

    def gated(step):  # type: ignore[no-untyped-def]
        def run() -> float | None:
            start.wait(5.0)
            return step()

        return run

    a = _serve_in_thread(group, "a", gated(_counting_step(log, "a", 4)), threading.Event())
    b = _serve_in_thread(group, "b", _counting_step(log, "b", 2), threading.Event())
    # a's first step holds the group thread; release it only once b waits for its turn, or
    # a loaded machine can let a run all its steps before b's thread has joined the group
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        with group._lock:
            if any(entry[2].name == "b" for entry in group._due):
                break
        time.sleep(0.001)
    start.set()
    for thread, result in (a, b):
        thread.join(5.0)
        assert not thread.is_alive(), "serve returned once the member's steps ended"
        assert result["error"] is None
    assert log.count("a") == 4 and log.count("b") == 2
    # after a's first step both are due: they alternate while both are members
    first_b = log.index("b")
    assert log[first_b - 1 : first_b + 3] == ["a", "b", "a", "b"]


def test_a_failing_step_reaches_its_reader_and_the_others_go_on() -> None:
    group = ReadGroup("g", clock=lambda: 0.0)
    log: list[str] = []

    def broken() -> float | None:
        raise RuntimeError("decoder exploded")

    ok = _serve_in_thread(group, "ok", _counting_step(log, "ok", 50), threading.Event())
    bad = _serve_in_thread(group, "bad", broken, threading.Event())
    for thread, _ in (ok, bad):
        thread.join(5.0)
        assert not thread.is_alive()
    assert isinstance(bad[1]["error"], RuntimeError), "re-raised on the reader's thread"
    assert ok[1]["error"] is None and log.count("ok") == 50


def test_a_cancelled_member_waiting_for_its_frame_is_handed_back() -> None:
    group = ReadGroup("g")
    cancel = threading.Event()
    steps = [0]

    def paced() -> float | None:
        steps[0] += 1
        return 60.0  # next frame a minute away

    thread, result = _serve_in_thread(group, "slow", paced, cancel)
    deadline = threading.Event()
    while steps[0] == 0 and not deadline.wait(0.01):
        pass
    cancel.set()
    thread.join(5.0)
    assert not thread.is_alive(), "cancel (stop, watchdog) does not wait for the next frame"
    assert result["error"] is None and steps[0] == 1


def test_the_thread_ends_with_its_last_member_and_a_new_one_starts() -> None:
    group = ReadGroup("g", clock=lambda: 0.0)
    log: list[str] = []
    for name in ("a", "b"):
        thread, result = _serve_in_thread(
            group, name, _counting_step(log, name, 3), threading.Event()
        )
        thread.join(5.0)
        assert not thread.is_alive() and result["error"] is None
        for t in threading.enumerate():  # the group's thread is gone once it has no member
            if t.name == "g":
                t.join(5.0)
        assert not any(t.name == "g" for t in threading.enumerate())
    assert group.threads_started == 2 and log == ["a"] * 3 + ["b"] * 3


def test_groups_fill_up_to_their_size_and_members_leave() -> None:
    groups = ReadGroups(clock=lambda: 0.0)
    release = threading.Event()
    running = threading.Semaphore(0)

    def waiting() -> float | None:
        running.release()
        release.wait(5.0)
        return None

    readers = [
        threading.Thread(
            target=groups.serve, args=(3, f"c{i}", waiting, threading.Event()), daemon=True
        )
        for i in range(5)
    ]
    for r in readers:
        r.start()
    assert running.acquire(timeout=5.0)  # one step runs at a time per group: 2 groups
    assert running.acquire(timeout=5.0)
    deadline = time.monotonic() + 5.0
    while sum(groups.members()) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)  # the last reader may still be joining
    assert sorted(groups.members()) == [2, 3]
    release.set()
    for r in readers:
        r.join(5.0)
        assert not r.is_alive()
    assert groups.members() == [0, 0]


def _cam(**kw: object) -> CameraConfig:
    return CameraConfig.model_validate({"name": "c", "url": "a.mp4", **kw})


@pytest.mark.parametrize(
    ("camera", "defaults", "policy", "size"),
    [
        ({"decoder": "nvdec", "realtime": True}, {}, "newest", 8),
        ({"realtime": True}, {"decoder": "nvdec"}, "newest", 8),
        ({"realtime": True}, {}, "newest", 1),  # pyav
        ({"decoder": "nvdec"}, {}, "block", 1),  # unpaced file: waits for its consumer
        ({"decoder": "nvdec", "realtime": True}, {}, "block", 1),
        ({"decoder": "nvdec", "url": "rtsp://cam/1"}, {}, "newest", 1),  # a network stream
    ],
)
def test_which_cameras_are_grouped(
    camera: dict[str, object], defaults: dict[str, object], policy: str, size: int
) -> None:
    capture = CaptureConfig.model_validate({"nvdec_group_size": 8, **defaults})
    assert group_size_of(_cam(**camera), capture, policy) == size
    assert group_size_of(_cam(**camera), CaptureConfig(), policy) == 1, "off by default"


def test_pacer_wait_can_be_asked_again_without_skipping_a_frame() -> None:
    pacer = Pacer()
    assert pacer.wait_s(10.0, 25.0) == 0.0  # frame 0: due now
    assert pacer.wait_s(10.0, 25.0) == pytest.approx(0.04)  # frame 1
    assert pacer.wait_s(10.01, 25.0) == pytest.approx(0.03), "still frame 1"
    assert pacer.wait_s(10.04, 25.0) == 0.0
    assert pacer.wait_s(10.04, 25.0) == pytest.approx(0.04), "frame 2, one period later"
    pacer.reset()
    assert pacer.wait_s(20.0, 25.0) == 0.0, "a new schedule after reset"
