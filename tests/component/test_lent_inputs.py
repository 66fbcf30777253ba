"""Backend-owned input memory with real OpenVINO and the real model.

The scheduler letterboxes each frame straight into the input tensor of the OpenVINO request
that runs it (``OpenVINOBackend.lend``): these tests check that the memory is the request's
own, that a request's memory is never lent while it runs, and that detections equal those of
the former path (our own buffer, bound to a request as a shared-memory tensor) by the golden
rule on the same frames.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import openvino as ov
import pytest

from tests.golden import match_golden
from tests.precision import openvino_kwargs
from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
from vidpipe.infer.openvino import OpenVINOBackend, _in_order
from vidpipe.metrics import Metrics
from vidpipe.model import load_labels
from vidpipe.postprocess.decode import DECODERS, DecodeParams
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.buffers import InputBuffer, input_buffer
from vidpipe.preprocess.letterbox import letterbox
from vidpipe.schedule.scheduler import CameraRules, Scheduler
from vidpipe.types import Completion, Detections, Frame, FrameResult

pytestmark = pytest.mark.timeout(120)

THRESHOLD = 0.3
PARAMS = DecodeParams(416, 416, THRESHOLD)


def clip_frames(path: Path, every: int, count: int) -> list[np.ndarray]:
    cap = cv2.VideoCapture(str(path))
    frames: list[np.ndarray] = []
    i = 0
    while len(frames) < count:
        ok, img = cap.read()
        if not ok:
            break
        if i % every == 0:
            frames.append(img)
        i += 1
    cap.release()
    assert len(frames) == count, f"{path.name}: only {len(frames)} frames"
    return frames


@pytest.fixture(scope="module")
def frames(assets_dir: Path) -> list[np.ndarray]:
    videos = assets_dir / "videos"
    return clip_frames(videos / "bottle-detection.mp4", 15, 12) + clip_frames(
        videos / "one-by-one-person-detection.mp4", 20, 12
    )


def make_backend(assets_dir: Path, **kw: Any) -> OpenVINOBackend:
    cfg = OpenVINOConfig(**{**openvino_kwargs(), **kw})
    return OpenVINOBackend(assets_dir / "models" / "yolox_nano.onnx", cfg)


def make_engine(backend: OpenVINOBackend, assets_dir: Path, sink: Any) -> Scheduler:
    return Scheduler(
        backend,
        DECODERS["yolox"],
        load_labels(assets_dir / "models" / "coco80.txt"),
        Metrics(),
        sink,
        default_rules=CameraRules(PARAMS, None),
        iou_threshold=0.45,
        max_frame_age_s=60.0,
    )


def record(source: str, image: np.ndarray, dets: Detections) -> dict[str, Any]:
    return {
        "source": source,
        "width": int(image.shape[1]),
        "height": int(image.shape[0]),
        "detections": [
            {"class_id": int(c), "score": float(s), "box": [float(v) for v in box]}
            for box, s, c in zip(dets.xyxy, dets.score, dets.class_id, strict=True)
        ],
    }


def former_path(backend: OpenVINOBackend, image: np.ndarray) -> Detections:
    """What the scheduler did before: letterbox into a buffer of its own, bind it to a
    request as a shared-memory tensor, infer, postprocess. Same compiled model."""
    buf = input_buffer(backend.input_spec, 0)
    lb = buf.fill(image)
    request = backend._compiled.create_infer_request()  # the same compiled model
    request.set_input_tensor(0, ov.Tensor(buf.tensor, shared_memory=True))
    request.infer()
    outputs = [  # in the model's own shape, as the backend hands them on
        _in_order(request.get_output_tensor(i).data.copy(), order)[0]
        for i, order in enumerate(backend._output_orders)
    ]
    return postprocess(outputs, lb, DECODERS["yolox"], PARAMS, 0.45, None)


def test_frames_go_into_the_request_input_tensor_never_busy(
    assets_dir: Path, frames: list[np.ndarray]
) -> None:
    """The submitted buffer is the request's own input tensor (no second copy, no rebinding),
    it holds the frame's letterbox when submitted, and no buffer is lent while its request
    runs (its callback has not returned)."""
    backend = make_backend(assets_dir, advanced=OpenVINOAdvanced(num_requests=3))
    lend, submit = backend.lend, backend.submit
    running: set[int] = set()
    lock = threading.Lock()
    problems: list[str] = []
    submitted: list[InputBuffer] = []

    def checked_lend(timeout_s: float) -> InputBuffer | None:
        buf = lend(timeout_s)
        with lock:
            if buf is not None and buf.index in running:
                problems.append(f"request {buf.index} lent while it runs")
        return buf

    def checked_submit(buf: InputBuffer, tag: Any, on_done: Any) -> None:
        request_input = backend._queue[buf.index].get_input_tensor(0).data
        if not np.shares_memory(buf.tensor, request_input):
            problems.append(f"buffer {buf.index} is not request {buf.index}'s input tensor")
        image = tag.frame.image
        expected, _ = letterbox(image, 416, 416)
        if not np.array_equal(buf.hwc, expected):
            problems.append(f"frame {tag.frame.seq}: the lent memory lacks its letterbox")
        np.testing.assert_array_equal(buf.tensor[0], expected.transpose(2, 0, 1))
        with lock:
            running.add(buf.index)
        submitted.append(buf)

        def done(c: Completion) -> None:
            with lock:
                running.discard(buf.index)
            on_done(c)

        submit(buf, tag, done)

    backend.lend = checked_lend  # type: ignore[method-assign]
    backend.submit = checked_submit  # type: ignore[method-assign]
    results: list[FrameResult] = []
    engine = make_engine(backend, assets_dir, results.append)
    engine.start()
    try:
        for seq in range(3 * len(frames)):
            image = frames[seq % len(frames)]
            assert engine.submit(Frame(f"cam{seq % 4}", seq // 4, time.monotonic(), image))
        assert engine.stop(60)
    finally:
        engine.close(10)
    assert problems == []
    assert len(results) == 3 * len(frames)
    assert {id(b) for b in submitted} == {id(b) for b in backend.buffers}  # every request used


def test_detections_through_lent_memory_equal_the_former_path(
    assets_dir: Path, frames: list[np.ndarray]
) -> None:
    """Golden rule (same model, same precision, same frames): the lent-memory path against a
    buffer of our own bound to the request, as the scheduler did before."""
    backend = make_backend(assets_dir)
    results: dict[int, FrameResult] = {}
    engine = make_engine(backend, assets_dir, lambda r: results.__setitem__(r.seq, r))
    engine.start()
    try:
        for seq, image in enumerate(frames):
            assert engine.submit(Frame("cam", seq, time.monotonic(), image))
        assert engine.stop(60)
        problems: list[str] = []
        found = 0
        for seq, image in enumerate(frames):
            reference = record(f"frame {seq}", image, former_path(backend, image))
            got = record(f"frame {seq}", image, results[seq].detections)
            found += len(reference["detections"])
            problems += match_golden(reference, got, threshold=THRESHOLD)
    finally:
        engine.close(10)
    assert found >= len(frames)  # bottles in every bottle frame, people in most others
    assert problems == []
