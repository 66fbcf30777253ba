"""The scheduler over a GPU stream set keeps the device busy when it is given about three
times the cameras the device can infer: it sheds the rest fairly and never collapses.

The GPU is faked (none here): ``tests/fake_gpu.py``'s streams run each batch for a fixed time,
so the device's capacity is known (2 streams x 32 frames / 0.1 s = 640 frames a second). The
stream set, the scheduler, the frame hub and the live cameras' ``newest`` mailboxes are the
real ones. On the H200 one process collapsed past its count because its camera threads
starved the threads that return the device's I/O sets of the GIL; this test holds the
scheduling side to the property, with counters (frames completed in a window), not timings.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from tests.component.test_streamset_fake_gpu import echo_scheduler
from tests.fake_gpu import FakeExecutor, FakeGpuRuntime, device_frame
from vidpipe.infer.streamset import StreamSetBackend
from vidpipe.schedule.hub import FrameHub
from vidpipe.types import Frame

STREAMS, MAX_BATCH, KERNEL_S = 2, 32, 0.1
CAPACITY_FPS = STREAMS * MAX_BATCH / KERNEL_S
CAMERAS, CAMERA_FPS = 72, 25.0  # 1,800 frames a second offered: 2.8x the capacity
WARMUP_S, WINDOW_S = 1.5, 4.0


def _camera(box: object, index: int, stop: threading.Event) -> None:
    """A live camera: a frame every 1/25 s on its own thread, whether taken or not."""
    k, start = 0, time.monotonic()
    while not stop.is_set():
        delay = start + k / CAMERA_FPS - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        frame = Frame(f"cam{index}", k, time.monotonic(), device_frame(index % 256, k % 256))
        box.put(frame, stop)  # type: ignore[attr-defined]
        k += 1


def test_three_times_the_cameras_keep_the_device_busy_and_shed_fairly_fake_gpu() -> None:
    rt = FakeGpuRuntime(0, KERNEL_S)
    backend = StreamSetBackend([(rt, FakeExecutor(rt, MAX_BATCH))], STREAMS, 20.0)
    engine, results = echo_scheduler(backend)
    hub, stop = FrameHub(), threading.Event()
    overwritten = Counter[str]()
    boxes = [
        hub.add(f"cam{i}", "newest", lambda f: overwritten.update([f.camera]))
        for i in range(CAMERAS)
    ]
    engine.start(hub)
    cams = [
        threading.Thread(target=_camera, args=(b, i, stop), daemon=True)
        for i, b in enumerate(boxes)
    ]
    for t in cams:
        t.start()
    try:
        time.sleep(WARMUP_S)
        t0 = time.monotonic()
        time.sleep(WINDOW_S)
        t1 = time.monotonic()
    finally:
        stop.set()
        for t in cams:
            t.join(5)
        engine.close(10.0)
    window = [r for r in results if t0 <= r.t_done < t1]
    per_camera = Counter(r.camera for r in window)
    total_fps = len(window) / (t1 - t0)
    mean = len(window) / CAMERAS
    report = (
        f"{total_fps:.0f} fps of {CAPACITY_FPS:.0f}; per camera {min(per_camera.values())}-"
        f"{max(per_camera.values())} (mean {mean:.1f}); overwritten {sum(overwritten.values())}"
    )
    print(report)
    assert len(per_camera) == CAMERAS, report  # every camera is served
    assert total_fps >= 0.9 * CAPACITY_FPS, report  # the device stays busy
    assert min(per_camera.values()) >= 0.8 * mean, report  # shed fairly
    assert sum(overwritten.values()) > 0, report  # shedding is counted
