"""The GPU stream set's own code with only the GPU faked (tests/fake_gpu.py).

Batching, routing, fairness through the Scheduler, least-loaded multi-GPU, error paths and
release of every resource. Nothing here needs CUDA; tests/gpu/ runs the same code on a GPU.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from tests.fake_gpu import FakeExecutor, FakeGpuRuntime, tagged_frame
from tests.lending import lend_and_submit
from vidpipe.infer.base import BackendError, FatalDeviceError
from vidpipe.infer.streamset import StreamSetBackend
from vidpipe.metrics import Metrics
from vidpipe.postprocess.decode import DecodeParams
from vidpipe.preprocess.buffers import input_buffer
from vidpipe.schedule.hub import FrameHub
from vidpipe.schedule.scheduler import CameraRules, Scheduler
from vidpipe.types import Completion, Detections, Frame, FrameResult, TensorSpec

pytestmark = pytest.mark.timeout(60)


def make_backend(
    devices: int = 1,
    streams: int = 2,
    max_batch: int = 4,
    timeout_ms: float = 1000.0,
    kernel_s: Sequence[float] = (0.0,),
) -> tuple[StreamSetBackend, list[FakeGpuRuntime], list[FakeExecutor]]:
    rts = [FakeGpuRuntime(i, kernel_s[i % len(kernel_s)]) for i in range(devices)]
    exs = [FakeExecutor(rt, max_batch) for rt in rts]
    backend = StreamSetBackend(list(zip(rts, exs, strict=True)), streams, timeout_ms)
    return backend, rts, exs


class Collector:
    def __init__(self) -> None:
        self.items: list[Completion] = []
        self.cond = threading.Condition()

    def __call__(self, c: Completion) -> None:
        with self.cond:
            self.items.append(c)
            self.cond.notify_all()

    def wait(self, n: int, timeout_s: float = 20.0) -> list[Completion]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.items) >= n, timeout_s), (
                f"{len(self.items)} of {n} completions"
            )
            return list(self.items)


def submit(backend: StreamSetBackend, tag: tuple[int, int], done: Collector) -> None:
    lend_and_submit(backend, tagged_frame(*tag), tag, done)


def test_full_batches_are_dispatched_at_max_batch_fake_gpu() -> None:
    backend, _, exs = make_backend(max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        for i in range(16):
            submit(backend, (1, i), done)
        got = done.wait(16, timeout_s=5.0)  # far below the 10 s timeout: batches were full
        assert all(c.error is None for c in got)
        assert sorted(int(c.outputs[0][0, 3]) for c in got) == [4] * 16  # type: ignore[index]
        assert sum(len(ctx.batches) for ctx in exs[0].contexts) == 4
        assert [(s.batches, s.frames) for s in backend.sets] == [(4, 16)]
    finally:
        backend.close()


def test_partial_batch_waits_for_the_timeout_fake_gpu() -> None:
    backend, _, _ = make_backend(max_batch=8, timeout_ms=150)
    done = Collector()
    try:
        t0 = time.monotonic()
        for i in range(3):
            submit(backend, (2, i), done)
        got = done.wait(3)
        assert time.monotonic() - t0 >= 0.14  # dispatched by the timer, not earlier
        assert [int(c.outputs[0][0, 3]) for c in got] == [3, 3, 3]  # type: ignore[index]
    finally:
        backend.close()


def test_each_result_reaches_its_own_frame_fake_gpu() -> None:
    """Many cameras, tagged frames, 2 GPUs x 3 streams, slow kernels: nothing is mixed up."""
    backend, _, _ = make_backend(
        devices=2, streams=3, max_batch=5, timeout_ms=2, kernel_s=(0.002, 0.001)
    )
    done = Collector()
    tags = [(cam, seq) for seq in range(40) for cam in range(12)]
    try:
        for tag in tags:
            submit(backend, tag, done)
        got = done.wait(len(tags))
        assert all(c.error is None for c in got)
        assert sorted(c.tag for c in got) == sorted(tags)
        for c in got:
            assert c.outputs is not None and c.outputs[0].shape == (1, 4)
            assert tuple(int(v) for v in c.outputs[0][0, :2]) == c.tag
        assert all(s.frames > 0 for s in backend.sets)
        assert backend.in_flight() == 0
    finally:
        backend.close()


def test_least_loaded_gpu_gets_more_batches_fake_gpu() -> None:
    backend, _, _ = make_backend(
        devices=2, streams=1, max_batch=2, timeout_ms=1, kernel_s=(0.05, 0.0)
    )
    done = Collector()
    try:
        for i in range(60):
            submit(backend, (0, i % 256), done)
        done.wait(60)
        gpu0, gpu1 = (s.frames for s in backend.sets)
        assert gpu1 > 2 * gpu0, (gpu0, gpu1)
    finally:
        backend.close()


def test_lend_waits_while_every_io_set_is_busy_fake_gpu() -> None:
    backend, _, _ = make_backend(streams=1, max_batch=1, timeout_ms=0, kernel_s=(0.5,))
    done = Collector()
    try:
        assert backend.capacity == 2
        submit(backend, (0, 0), done)
        submit(backend, (0, 1), done)
        assert backend.lend(0.05) is None
        assert backend.in_flight() == 2
        done.wait(1)
        assert backend.lend(5.0) is not None
        done.wait(2)
    finally:
        backend.close()


def test_enqueue_failure_fails_only_that_batch_fake_gpu() -> None:
    backend, _, exs = make_backend(max_batch=2, timeout_ms=10_000)
    done = Collector()
    try:
        exs[0].fail_next_enqueue = True
        for i in range(4):
            submit(backend, (3, i), done)
        got = done.wait(4)
        failed = [c for c in got if c.error is not None]
        assert sorted(c.tag for c in failed) == [(3, 0), (3, 1)]
        assert all(isinstance(c.error, BackendError) for c in failed)
        assert not any(isinstance(c.error, FatalDeviceError) for c in failed)
        assert backend.fatal is None
        submit(backend, (3, 9), done)
        submit(backend, (3, 10), done)
        assert all(c.error is None for c in done.wait(6)[4:])
    finally:
        backend.close()


def test_sticky_cuda_error_makes_the_backend_fatal_fake_gpu() -> None:
    backend, rts, _ = make_backend(max_batch=2, timeout_ms=10_000)
    done = Collector()
    try:
        rts[0].sticky_on_next_wait = "cudaErrorIllegalAddress"
        submit(backend, (4, 0), done)
        submit(backend, (4, 1), done)
        got = done.wait(2)
        assert all(isinstance(c.error, FatalDeviceError) for c in got)
        assert "cudaErrorIllegalAddress" in str(got[0].error.__cause__)  # type: ignore[union-attr]
        assert isinstance(backend.fatal, FatalDeviceError)
        t0 = time.monotonic()
        with pytest.raises(FatalDeviceError):
            backend.lend(5.0)
        assert time.monotonic() - t0 < 1.0  # nobody is kept waiting on a dead device
    finally:
        backend.close()


def test_wrong_input_is_refused_with_its_shape_fake_gpu() -> None:
    backend, _, _ = make_backend()
    try:
        foreign = input_buffer(TensorSpec("x", (1, 4, 4, 3), "u8", "NHWC"), 0)
        with pytest.raises(BackendError, match=r"uint8 frame of shape \(8, 8, 3\)"):
            backend.submit(foreign, None, lambda c: None)
    finally:
        backend.close()


def test_close_releases_every_resource_and_refuses_work_fake_gpu() -> None:
    backend, rts, exs = make_backend(devices=2, streams=3, max_batch=4, timeout_ms=5)
    done = Collector()
    for i in range(7):
        submit(backend, (5, i), done)
    backend.close()
    assert len(done.wait(7)) == 7  # drain dispatched the open batch
    backend.close()  # idempotent
    for rt, ex in zip(rts, exs, strict=True):
        assert rt._mem == {} and rt._streams == {} and rt._events == {}
        assert ex.closed and all(ctx.closed for ctx in ex.contexts)
    with pytest.raises(BackendError, match="closed"):
        backend.lend(1.0)


# ------------------------------------------------------------------ through the Scheduler


def echo_decoder(outputs: Sequence[np.ndarray], params: DecodeParams) -> Detections:
    """The fake model's echo as one detection: class = camera index, score codes the seq."""
    a, b, _, _ = (float(v) for v in outputs[0])
    return Detections(np.array([[0, 0, 1, 1]], np.float32), np.array([(b + 0.5) / 256]), [a])


def echo_scheduler(
    backend: StreamSetBackend, **extra: object
) -> tuple[Scheduler, list[FrameResult]]:
    """A Scheduler over ``backend`` with the echo decoder and 16 labels, and the list its
    results are appended to (under a lock; read it after the scheduler stopped)."""
    results: list[FrameResult] = []
    lock = threading.Lock()

    def sink(r: FrameResult) -> None:
        with lock:
            results.append(r)

    engine = Scheduler(
        backend,
        echo_decoder,
        [str(i) for i in range(16)],
        Metrics(),
        sink,
        default_rules=CameraRules(DecodeParams(8, 8, 0.0), None),
        iou_threshold=0.5,
        max_frame_age_s=60.0,
        **extra,  # type: ignore[arg-type]
    )
    return engine, results


def test_engine_round_robin_and_routing_over_the_stream_set_fake_gpu() -> None:
    backend, _, _ = make_backend(devices=2, streams=2, max_batch=4, timeout_ms=3, kernel_s=(0.002,))
    engine, results = echo_scheduler(backend)
    hub, stop, cams, per_cam = FrameHub(), threading.Event(), 8, 30
    boxes = [hub.add(f"cam{i}", "block", lambda f: None) for i in range(cams)]
    engine.start(hub)

    def produce(i: int) -> None:
        for seq in range(per_cam):
            img = np.empty((16, 16, 3), np.uint8)
            img[...] = (i, seq, 0)
            boxes[i].put(Frame(f"cam{i}", seq, time.monotonic(), img), stop)

    threads = [threading.Thread(target=produce, args=(i,)) for i in range(cams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    try:
        deadline = time.monotonic() + 30
        while len(results) < cams * per_cam and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(results) == cams * per_cam
        for r in results:
            assert int(r.detections.class_id[0]) == int(r.camera[3:])
            assert int(r.detections.score[0] * 256) == r.seq
        # Round robin: at every point of the completion order, no camera is ahead by more
        # than what is in flight at once.
        counts = dict.fromkeys(range(cams), 0)
        for r in results:
            counts[int(r.camera[3:])] += 1
            assert max(counts.values()) - min(counts.values()) <= backend.capacity
    finally:
        stop.set()
        engine.close(5.0)


def test_engine_reports_a_fatal_device_once_fake_gpu() -> None:
    backend, rts, _ = make_backend(max_batch=1, timeout_ms=0)
    fatal: list[BaseException] = []
    engine = Scheduler(
        backend,
        echo_decoder,
        ["0"],
        Metrics(),
        lambda r: None,
        default_rules=CameraRules(DecodeParams(8, 8, 0.0), None),
        iou_threshold=0.5,
        max_frame_age_s=60.0,
        on_fatal=fatal.append,
    )
    engine.start()
    try:
        rts[0].sticky_on_next_wait = "cudaErrorLaunchFailure"
        img = np.zeros((8, 8, 3), np.uint8)
        engine.submit(Frame("cam", 0, time.monotonic(), img))
        assert engine.stop(10.0)
        with pytest.raises(FatalDeviceError):
            engine.submit(Frame("cam", 1, time.monotonic(), img))
        assert len(fatal) == 1 and isinstance(fatal[0], FatalDeviceError)
    finally:
        engine.close(5.0)


def test_batch_size_metric_counts_every_dispatched_batch_fake_gpu() -> None:
    """``vidpipe_batch_size``: one observation per batch sent to a GPU, summing to the frames."""
    backend, _, _ = make_backend(streams=2, max_batch=4, timeout_ms=20)
    metrics = Metrics()
    engine = Scheduler(
        backend,
        echo_decoder,
        ["0"],
        metrics,
        lambda r: None,
        default_rules=CameraRules(DecodeParams(8, 8, 0.0), None),
        iou_threshold=0.5,
        max_frame_age_s=60.0,
    )
    engine.start()
    try:
        for seq in range(10):  # 4 + 4 fill their batches; the last 2 go on the timeout
            img = np.zeros((8, 8, 3), np.uint8)
            assert engine.submit(Frame("cam", seq, time.monotonic(), img))
        assert engine.stop(10.0)
        ((batches, frames),) = [(s.batches, s.frames) for s in backend.sets]
    finally:
        engine.close(5.0)

    def sample(name: str) -> float:  # summed over the model label (one model here)
        return sum(s.value for f in metrics.registry.collect() for s in f.samples if s.name == name)

    assert sample("vidpipe_batch_size_sum") == frames == 10
    assert sample("vidpipe_batch_size_count") == batches
    assert batches < 10  # frames were batched, so the mean is above 1
