"""What no pipeline can beat: the inference ceiling and the per-stage CPU costs.

* ``CeilingRun``: inference only. The model compiled as vidpipe compiles it (THROUGHPUT hint,
  u8 NHWC input converted in the graph, the Focus rewrite; vidpipe also leaves the output
  transpose to numpy, 0.1-0.25 ms a frame the ceiling still spends), an ``AsyncInferQueue``
  of the optimal size, every request bound once to its own preallocated input holding a real
  letterboxed frame of the clip, and one thread that keeps every request busy.
* ``stage_costs``: CPU milliseconds per frame of each stage, measured one stage at a time on
  one thread after the ceiling window: decode (OpenCV FFmpeg, one decoder thread),
  preprocess (vidpipe's ``letterbox_into`` a preallocated u8 buffer; the float conversion runs
  inside inference), postprocess (decode + NMS of the clip's real outputs). Inference is the
  process CPU time per frame during the ceiling window, i.e. at saturation.
  ``stage bound = cores x 1000 / sum(ms)``: the fps a perfect pipeline would reach if every
  core did nothing but these stages.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from benchmarks.capture import LoopingReader
from benchmarks.contenders import BaselineRun, compile_model, describe_compiled
from vidpipe.bench.common import PointSpec, cores
from vidpipe.postprocess.decode import DecodeParams, decode_yolox
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.letterbox import hwc_to_chw_float, letterbox_into
from vidpipe.types import Letterbox


class CeilingRun(BaselineRun):
    """Inference only, every request always busy, inputs preallocated."""

    name = "ceiling"

    def __init__(self, spec: PointSpec) -> None:
        super().__init__(spec, cameras=1)

    def start(self) -> None:
        import openvino as ov

        compiled, w, h = compile_model(self.spec, "THROUGHPUT", u8_nhwc=True, focus=True)
        self.compiled, self.w, self.h = compiled, w, h
        self.details = describe_compiled(compiled, "THROUGHPUT")
        self.precision = self.details["precision"]
        n_requests = self.details["optimal_requests"]
        self.details["requests"] = n_requests
        reader = LoopingReader(self.spec.clip)
        frame = reader.read()
        reader.close()
        self.queue = ov.AsyncInferQueue(compiled, n_requests)
        self._inputs = []
        for i in range(n_requests):
            hwc = np.full((h, w, 3), 114, np.uint8)
            letterbox_into(frame, hwc)
            self._inputs.append(hwc)
            self.queue[i].set_input_tensor(ov.Tensor(hwc[np.newaxis], shared_memory=True))
        self.queue.set_callback(self._on_done)
        thread = threading.Thread(target=self._submit, name="ceiling", daemon=True)
        self.threads.append(thread)
        thread.start()

    def _on_done(self, _request: Any, t_submit: float) -> None:
        self.log.record(0, t_submit)  # latency here = submit to completion

    def _submit(self) -> None:
        try:
            while not self.stop_event.is_set():
                self.queue.start_async(None, time.monotonic())  # blocks until a request idles
        except Exception as exc:  # reported in the point's result
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            self.queue.wait_all()

    def stage_costs(self, infer_cpu_ms: float) -> dict[str, Any]:
        """Per-stage CPU ms per frame for this clip (run after ``stop``)."""
        return stage_costs(self.spec, self.compiled, self.w, self.h, infer_cpu_ms)


def _cpu_ms_per(fn: Any, n: int, clock: Any = time.process_time) -> float:
    t0 = clock()
    fn(n)
    return (clock() - t0) * 1000.0 / n


def stage_costs(
    spec: PointSpec, compiled: Any, w: int, h: int, infer_cpu_ms: float
) -> dict[str, Any]:
    """CPU ms per frame of decode, preprocess, inference and postprocess, and the stage bound.

    Args:
        spec: the point (clip, thresholds, ``extra["stage_frames"]``).
        compiled: the compiled model (u8 NHWC input), to produce the clip's real outputs.
        w: model input width.
        h: model input height.
        infer_cpu_ms: inference CPU ms per frame at saturation (from the ceiling window).
    """
    n = max(10, int(spec.extra.get("stage_frames", 300)))
    time.sleep(0.5)  # let the inference threads go idle: process CPU time is measured
    decode_ms, decode_thread_ms, kept = _decode_costs(spec.clip, n)
    hwc = np.full((h, w, 3), 114, np.uint8)
    preprocess_ms, preprocess_float_ms = _preprocess_costs(kept, hwc, n)
    outputs, boxes = _real_outputs(compiled, kept, hwc)
    params = DecodeParams(w, h, spec.score_threshold)
    detections = [
        len(postprocess([o], lb, decode_yolox, params, spec.iou_threshold))
        for o, lb in zip(outputs, boxes, strict=True)
    ]

    def post(k: int) -> None:
        for i in range(k):
            j = i % len(outputs)
            postprocess([outputs[j]], boxes[j], decode_yolox, params, spec.iou_threshold)

    postprocess_ms = _cpu_ms_per(post, n)
    total = decode_ms + preprocess_ms + infer_cpu_ms + postprocess_ms
    return {
        "decode_ms": decode_ms,
        "decode_thread_ms": decode_thread_ms,
        "preprocess_ms": preprocess_ms,
        "preprocess_float_ms": preprocess_float_ms,
        "infer_ms": infer_cpu_ms,
        "postprocess_ms": postprocess_ms,
        "total_ms": total,
        "cores": cores(),
        "stage_bound_fps": cores() * 1000.0 / total,
        "detections_per_frame": float(np.mean(detections)) if detections else 0.0,
        "frames_timed": n,
    }


def _decode_costs(clip: str, n: int) -> tuple[float, float, list[np.ndarray]]:
    """Decode CPU ms per frame (process, then this thread's alone) and up to 16 frames kept
    from across the ``n`` timed ones for the later stages."""
    reader = LoopingReader(clip)
    for _ in range(5):  # open, first keyframe: not steady state
        reader.read()
    kept: list[np.ndarray] = []

    def decode(k: int) -> None:
        for i in range(k):
            img = reader.read()
            if i % max(1, k // 16) == 0 and len(kept) < 16:
                kept.append(img)

    decode_ms = _cpu_ms_per(decode, n)
    decode_thread_ms = _cpu_ms_per(
        lambda k: [reader.read() for _ in range(k)], 30, time.thread_time
    )
    reader.close()
    return decode_ms, decode_thread_ms, kept


def _preprocess_costs(kept: list[np.ndarray], hwc: np.ndarray, n: int) -> tuple[float, float]:
    """Letterbox CPU ms per frame into ``hwc`` (u8, as vidpipe does), then with the float
    CHW conversion added (as a pipeline without the in-graph conversion does)."""
    h, w = hwc.shape[:2]
    chw = np.zeros((3, h, w), np.float32)

    def preprocess(k: int) -> None:
        for i in range(k):
            letterbox_into(kept[i % len(kept)], hwc)

    def preprocess_float(k: int) -> None:
        for i in range(k):
            letterbox_into(kept[i % len(kept)], hwc)
            hwc_to_chw_float(hwc, chw)

    return _cpu_ms_per(preprocess, n), _cpu_ms_per(preprocess_float, n)


def _real_outputs(
    compiled: Any, kept: list[np.ndarray], hwc: np.ndarray
) -> tuple[list[np.ndarray], list[Letterbox]]:
    """The model's outputs for the kept frames, copied, with each frame's letterbox."""
    request = compiled.create_infer_request()
    outputs = []
    boxes = []
    for img in kept:
        lb = letterbox_into(img, hwc)
        request.infer({0: hwc[np.newaxis]})
        outputs.append(np.array(request.get_output_tensor(0).data[0], copy=True))
        boxes.append(lb)
    return outputs, boxes
