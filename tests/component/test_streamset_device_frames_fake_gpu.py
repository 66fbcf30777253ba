"""Frames that stay on the GPU (NVDEC pictures) through the stream set, with the GPU faked.

``tests/fake_gpu.py``'s context letterboxes a fake picture by writing its first three bytes
into its row's pixel (0, 0), and the fake model echoes that pixel: a tag comes back only if the
picture went through the GPU letterbox into its own row. The real letterbox and model run in
tests/gpu/ on the H200.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

from tests.component.test_streamset_fake_gpu import (
    Collector,
    echo_scheduler,
    make_backend,
    submit,
)
from tests.fake_gpu import device_frame, tagged_frame
from tests.lending import lend_and_submit
from vidpipe.infer.base import BackendError
from vidpipe.metrics import Metrics
from vidpipe.postprocess.decode import DECODERS, DecodeParams
from vidpipe.schedule.hub import FrameHub
from vidpipe.schedule.scheduler import CameraRules, Scheduler
from vidpipe.types import (
    DeviceImage,
    Frame,
    FrameResult,
    Letterbox,
    PostprocessRequest,
    SubmitTag,
)

pytestmark = pytest.mark.timeout(60)


def _tag(c: object) -> tuple[int, int]:
    out = c.outputs[0][0]  # type: ignore[attr-defined]
    return int(out[0]), int(out[1])


def test_device_and_host_frames_share_a_batch_each_to_its_own_row_fake_gpu() -> None:
    backend, _rts, exs = make_backend(max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        for i in range(8):
            frame = device_frame(2, i) if i % 2 else tagged_frame(1, i)
            lend_and_submit(backend, frame, (1 + i % 2, i), done)
        got = done.wait(8, timeout_s=5.0)
        assert all(c.error is None for c in got)
        assert sorted(_tag(c) for c in got) == sorted(c.tag for c in got)
        letterboxed = [rows for ctx in exs[0].contexts for rows in ctx.letterboxed]
        assert sorted(letterboxed) == [[1, 3], [1, 3]], "one call per batch, device rows only"
    finally:
        backend.close()


def test_a_batch_of_device_frames_copies_no_pixels_up_fake_gpu() -> None:
    backend, rts, _exs = make_backend(max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        for i in range(4):
            submit(backend, (1, i), done)
        done.wait(4)
        host_batch_copies = rts[0].copies  # one copy up, one copy down
        for i in range(4):
            lend_and_submit(backend, device_frame(2, i), (2, i), done)
        got = done.wait(8)
        assert rts[0].copies - host_batch_copies == host_batch_copies - 1, "only the copy down"
        assert sorted(_tag(c) for c in got[4:]) == [(2, i) for i in range(4)]
    finally:
        backend.close()


def test_device_frames_run_on_their_own_gpu_fake_gpu() -> None:
    backend, _rts, exs = make_backend(devices=2, max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        # a host frame opens a batch on the least-loaded GPU (0); a GPU-1 frame must not
        # join it: that batch goes out as it is and the frame opens one on GPU 1
        submit(backend, (1, 0), done)
        for i in range(4):
            lend_and_submit(backend, device_frame(2, i, gpu=1), (2, i), done)
        got = done.wait(5, timeout_s=5.0)
        assert sorted(_tag(c) for c in got) == [(1, 0)] + [(2, i) for i in range(4)]
        on_gpu1 = sum(len(rows) for ctx in exs[1].contexts for rows in ctx.letterboxed)
        on_gpu0 = sum(len(rows) for ctx in exs[0].contexts for rows in ctx.letterboxed)
        assert (on_gpu0, on_gpu1) == (0, 4)
        assert [b for ctx in exs[0].contexts for b in ctx.batches] == [1]
    finally:
        backend.close()


def test_a_frame_from_a_gpu_the_backend_lacks_is_refused_fake_gpu() -> None:
    backend, _, _ = make_backend(devices=1)
    try:
        with pytest.raises(BackendError, match=r"decoded on GPU 3.*GPU\(s\) \[0\]"):
            lend_and_submit(backend, device_frame(1, 1, gpu=3), None, Collector())
    finally:
        backend.close()


def test_a_letterbox_failure_fails_only_that_batch_fake_gpu() -> None:
    backend, _, exs = make_backend(max_batch=2, timeout_ms=10_000)
    done = Collector()
    try:
        exs[0].fail_letterbox = True
        for i in range(2):
            lend_and_submit(backend, device_frame(2, i), (2, i), done)
        failed = done.wait(2)
        assert all(isinstance(c.error, BackendError) for c in failed)
        exs[0].fail_letterbox = False
        for i in range(2):
            lend_and_submit(backend, device_frame(3, i), (3, i), done)
        ok = done.wait(4)[2:]
        assert sorted(_tag(c) for c in ok) == [(3, 0), (3, 1)]
    finally:
        backend.close()


def test_scheduler_sends_device_frames_as_they_are_and_keeps_them_for_sinks_fake_gpu() -> None:
    """Through the real Scheduler: a device frame is never letterboxed on the host, its
    result maps back to its own size, and the picture reaches sinks undownloaded."""
    backend, _, exs = make_backend(devices=1, max_batch=4, timeout_ms=3)
    downloads: list[int] = []
    engine, results = echo_scheduler(backend, keep_images=True)
    hub, stop = FrameHub(), threading.Event()
    boxes = [hub.add(f"cam{i}", "block", lambda f: None) for i in range(2)]
    engine.start(hub)
    try:
        for seq in range(12):
            for i, box in enumerate(boxes):
                if i == 0:  # a CPU camera
                    image: np.ndarray | DeviceImage = np.full((16, 16, 3), (i, seq, 0), np.uint8)
                else:  # an NVDEC camera
                    nv12 = np.zeros((18, 16), np.uint8)
                    nv12[0, :3] = (i, seq, 0)
                    image = DeviceImage(
                        nv12, 0, 16, 12, lambda s=seq: downloads.append(s) or np.zeros(0)
                    )
                box.put(Frame(f"cam{i}", seq, time.monotonic(), image), stop)
        deadline = time.monotonic() + 20
        while len(results) < 24 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(results) == 24
        for r in results:
            assert (int(r.detections.class_id[0]), int(r.detections.score[0] * 256)) == (
                int(r.camera[3:]),
                r.seq,
            )
        gpu = [r for r in results if r.camera == "cam1"]
        assert all(isinstance(r.image, DeviceImage) for r in gpu), "kept on the GPU for sinks"
        assert {(r.width, r.height) for r in gpu} == {(16, 12)}
        assert downloads == [], "no picture was downloaded: nobody asked for one"
        assert sum(len(rows) for ctx in exs[0].contexts for rows in ctx.letterboxed) == 12
    finally:
        stop.set()
        engine.close(5.0)


# ------------------------------------------------------------------ postprocessing on the device


def _yolox_scheduler(
    backend: object, sink: Callable[[FrameResult], None], classes: frozenset[int] | None = None
) -> Scheduler:
    """A Scheduler whose model type is yolox: the fake model's (4,) outputs would break the
    host's YOLOX decoder, so a result proves the device postprocessing ran."""
    return Scheduler(
        backend,  # type: ignore[arg-type]
        DECODERS["yolox"],
        [str(i) for i in range(16)],
        Metrics(),
        sink,
        default_rules=CameraRules(DecodeParams(8, 8, 0.3), classes),
        iou_threshold=0.6,
        max_frame_age_s=60.0,
    )


def test_device_postprocessing_returns_only_detections_to_each_frame_fake_gpu() -> None:
    backend, rts, exs = make_backend(devices=1, streams=2, max_batch=4, timeout_ms=3)
    results: list[FrameResult] = []
    lock = threading.Lock()

    def sink(r: FrameResult) -> None:
        with lock:
            results.append(r)

    engine = _yolox_scheduler(backend, sink, frozenset({1, 2}))
    hub, stop = FrameHub(), threading.Event()
    boxes = [hub.add(f"cam{i}", "block", lambda f: None) for i in range(3)]
    engine.start(hub)
    try:
        for seq in range(20):
            for i, box in enumerate(boxes):
                if i == 2:  # an NVDEC camera of another size
                    image: np.ndarray | DeviceImage = device_frame(i, seq)
                else:
                    image = np.full((8 + 4 * i, 8, 3), (i, seq, 0), np.uint8)
                box.put(Frame(f"cam{i}", seq, time.monotonic(), image), stop)
        deadline = time.monotonic() + 20
        while len(results) < 60 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(results) == 60
        for r in results:
            got = (int(r.detections.class_id[0]), int(r.detections.score[0] * 256))
            assert got == (int(r.camera[3:]), r.seq)
            assert r.detections.xyxy[0].tolist() == [0, 0, r.width, r.height]
        batches = sum(len(ctx.batches) for ctx in exs[0].contexts)
        # one copy up per batch with a host frame, and not one copy down
        assert rts[0].copies <= batches and rts[0].device_copies == batches
        posts = exs[0].postprocessors
        assert sum(sum(p.batches) for p in posts) == 60
        assert len(posts) <= 2 and all(len(p.thread) == 1 for p in posts), "one per slot thread"
    finally:
        stop.set()
        engine.close(5.0)


def test_device_postprocessing_copies_nothing_down_but_detections_fake_gpu() -> None:
    backend, rts, _exs = make_backend(devices=1, streams=1, max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        lb = Letterbox(1.0, 8, 8)
        request = PostprocessRequest("yolox", lb, 0.3, None, 0.45)
        for i in range(4):
            lend_and_submit(backend, device_frame(5, i), SubmitTag(request), done)
        got = done.wait(4)
        assert all(c.outputs is None and c.detections is not None for c in got)
        assert sorted(int(c.detections.score[0] * 256) for c in got) == [0, 1, 2, 3]  # type: ignore[union-attr]
        assert (rts[0].copies, rts[0].device_copies) == (0, 1), "no copy up, no copy down"
        # a tag without a request (or another decoder) gets raw outputs, as before
        submit(backend, (1, 7), done)
        backend.flush()
        raw = done.wait(5)[4]
        assert raw.outputs is not None and raw.detections is None and _tag(raw) == (1, 7)
    finally:
        backend.close()


def test_a_device_postprocessing_failure_fails_only_that_batch_fake_gpu() -> None:
    backend, _, exs = make_backend(devices=1, streams=1, max_batch=2, timeout_ms=10_000)
    done = Collector()
    request = PostprocessRequest("yolox", Letterbox(1.0, 8, 8), 0.3, None, 0.45)
    try:
        exs[0].fail_postprocess = True
        for i in range(2):
            lend_and_submit(backend, device_frame(5, i), SubmitTag(request), done)
        assert all(isinstance(c.error, BackendError) for c in done.wait(2))
        exs[0].fail_postprocess = False
        for i in range(2):
            lend_and_submit(backend, device_frame(6, i), SubmitTag(request), done)
        ok = done.wait(4)[2:]
        assert all(c.error is None and c.detections is not None for c in ok)
    finally:
        backend.close()
