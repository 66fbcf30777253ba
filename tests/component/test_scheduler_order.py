"""Results reach on_result in each camera's capture order, though requests finish out of order.

Stateful steps after the engine (the tracker) depend on it. With 4 requests on 2 OpenVINO
streams, about one completion in five overtakes an earlier one (measured on the walkway clip:
289 of 1394 JSONL lines came before an earlier frame's, before this ordering existed).
"""

from __future__ import annotations

import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.component.test_scheduler import make_engine
from tests.precision import openvino_kwargs
from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
from vidpipe.infer.openvino import OpenVINOBackend
from vidpipe.schedule.scheduler import Scheduler
from vidpipe.types import Completion, Frame, FrameResult

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def images(assets_dir: Path) -> list[np.ndarray]:
    """Frames of different sizes and content, so that requests take different times."""
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "bottle-detection.mp4"))
    out = []
    for _ in range(6):
        ok, img = cap.read()
        assert ok
        out.append(img)
    cap.release()
    big = cv2.imread(str(assets_dir / "images" / "000000000139.jpg"))
    assert big is not None
    return [*out, cv2.resize(big, (1920, 1080))]


def engine_with(assets_dir: Path, sink) -> Scheduler:  # type: ignore[no-untyped-def]
    backend = OpenVINOBackend(
        assets_dir / "models" / "yolox_nano.onnx",
        OpenVINOConfig(advanced=OpenVINOAdvanced(num_requests=4), **openvino_kwargs()),
    )
    return make_engine(backend, assets_dir, sink)[0]


def test_results_are_handed_on_in_capture_order_per_camera(assets_dir, images) -> None:
    results: list[FrameResult] = []
    engine = engine_with(assets_dir, results.append)
    completions: list[int] = []
    on_done = engine._on_done

    def record(completion: Completion) -> None:  # the order inference finished in
        completions.append(completion.tag.frame.seq)
        on_done(completion)

    engine._on_done = record  # type: ignore[method-assign]
    engine.start()
    try:
        for seq in range(120):
            frame = Frame(f"cam{seq % 2}", seq, time.monotonic(), images[seq % len(images)])
            assert engine.submit(frame)
        assert engine.stop(90)
    finally:
        engine.close()
    assert len(results) == 120
    for cam in ("cam0", "cam1"):
        seqs = [r.seq for r in results if r.camera == cam]
        assert seqs == sorted(seqs) and len(seqs) == 60
    # the ordering had something to do: inference itself finished out of order
    assert completions != sorted(completions)
