"""The baseline designs vidpipe is measured against.

Each reads the same clip on one thread per camera (``capture.LoopingReader``: OpenCV FFmpeg,
one decoder thread, looped, unpaced), runs the same model at the same explicit precision, and
decodes with vidpipe's own postprocessing (``decode_yolox`` + class-aware NMS), so the
designs differ only in how frames reach the inference device:

* ``naive``: the "before" case. One thread per camera does everything itself: read,
  letterbox (allocating), convert to a float NCHW tensor in numpy, a blocking ``infer()`` on
  its own ``InferRequest`` of ONE model compiled with the THROUGHPUT hint, decode + NMS. It is
  what the OpenVINO Python samples lead a user to write.
* ``single``: Frigate's OpenVINO design. Camera threads letterbox into uint8 and hand the
  tensor to ONE detector thread through a queue, then wait for their result; the detector
  runs synchronous inference on a LATENCY-hint model with u8 NHWC input converted in the graph
  (as Frigate's ``openvino.py`` plugin does) and decodes.
* ``model_api``: OpenVINO's own ``openvino-model-api`` YOLOX wrapper and its
  ``AsyncPipeline`` (THROUGHPUT hint, resize embedded in the graph), fed by the same capture
  threads through a bounded queue, submitted and collected by one thread.
"""

from __future__ import annotations

import abc
import logging
import queue
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.capture import LoopingReader, ResultLog, start_camera_threads
from vidpipe.bench.common import PointSpec, cache_dir, precision_name
from vidpipe.infer.ov_rewrites import fuse_focus
from vidpipe.postprocess.decode import DecodeParams, decode_yolox
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.letterbox import letterbox
from vidpipe.types import Letterbox

log = logging.getLogger(__name__)

_POLL_S = 0.1


def ensure_ir(model: Path, cache: Path) -> Path:
    """The ONNX model saved as OpenVINO IR (f32 weights) in the cache, made once; an IR is
    used as it is."""
    import openvino as ov

    if model.suffix.lower() == ".xml":
        return model
    xml = cache / f"{model.stem}.xml"
    if xml.is_file() and xml.stat().st_mtime >= model.stat().st_mtime:
        return xml
    ov.save_model(ov.Core().read_model(str(model)), str(xml), compress_to_fp16=False)
    return xml


def compile_model(
    spec: PointSpec, hint: str, *, u8_nhwc: bool, path: str | None = None, focus: bool = False
) -> tuple[Any, int, int]:
    """Compile the benchmark model for the CPU at ``spec.precision``.

    Args:
        spec: the point (model path, precision).
        hint: ``THROUGHPUT`` or ``LATENCY``.
        u8_nhwc: take u8 NHWC input and convert to the model's f32 NCHW in the graph (as
            vidpipe and Frigate do); otherwise the model's own f32 NCHW input.
        path: another model file (default ``spec.model``).
        focus: rewrite YOLOX's Focus slices as vidpipe does at load (``ov_rewrites``); the
            baselines run the model as a user would, without it.

    Returns:
        ``(compiled_model, input_width, input_height)``.
    """
    import openvino as ov
    from openvino.preprocess import PrePostProcessor

    core = ov.Core()
    model = core.read_model(path or spec.model)
    if focus:
        fuse_focus(model)
    _, _, h, w = (int(d) for d in model.input().get_shape())
    if u8_nhwc:
        ppp = PrePostProcessor(model)
        ppp.input().tensor().set_element_type(ov.Type.u8).set_layout(ov.Layout("NHWC"))
        ppp.input().preprocess().convert_element_type(ov.Type.f32)
        ppp.input().model().set_layout(ov.Layout("NCHW"))
        model = ppp.build()
    props = {"PERFORMANCE_HINT": hint, "INFERENCE_PRECISION_HINT": spec.precision}
    return core.compile_model(model, "CPU", props), w, h


def describe_compiled(compiled: Any, hint: str) -> dict[str, Any]:
    """Precision, hint, streams and optimal request count of a compiled model."""
    return {
        "precision": precision_name(compiled.get_property("INFERENCE_PRECISION_HINT")),
        "hint": hint.lower(),
        "streams": int(compiled.get_property("NUM_STREAMS")),
        "optimal_requests": int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")),
    }


class BaselineRun(abc.ABC):
    """Camera threads, a stop event, a result log, and errors collected from every thread."""

    name = "baseline"

    def __init__(self, spec: PointSpec, cameras: int | None = None) -> None:
        self.spec = spec
        self.log = ResultLog(spec.cameras if cameras is None else cameras)
        self.stop_event = threading.Event()
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []
        self.precision = spec.precision
        self.details: dict[str, Any] = {}

    # --- what the worker reads
    def frames(self) -> int:
        return self.log.frames

    def per_camera(self) -> list[int]:
        return list(self.log.per_camera)

    def latencies_ms(self, t0_mono: float, t1_mono: float, _t0: float, _t1: float) -> list[float]:
        return self.log.latencies_ms(t0_mono, t1_mono)

    def allocations(self) -> int | None:
        return None

    def info(self) -> dict[str, Any]:
        return dict(self.details)

    # --- lifecycle
    @abc.abstractmethod
    def start(self) -> None:
        """Build the contender and start its threads (appended to ``self.threads``)."""

    def stop(self, timeout_s: float = 10.0) -> None:
        self.stop_event.set()
        deadline = time.monotonic() + timeout_s
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                self.errors.append(f"thread {t.name} still alive at stop")

    def guarded(self, body: Any, *args: Any) -> None:
        """Run a thread body; an exception is recorded and stops the run."""
        try:
            body(*args)
        except Exception as exc:  # reported in the point's result, not lost
            log.exception("%s thread failed", self.name)
            self.errors.append(f"{type(exc).__name__}: {exc}")
            self.stop_event.set()

    def params(self, w: int, h: int) -> DecodeParams:
        return DecodeParams(w, h, self.spec.score_threshold)


# ------------------------------------------------------------------------------ naive


class NaiveRun(BaselineRun):
    """One thread per camera: read, letterbox, float tensor, blocking infer, decode + NMS."""

    name = "naive"

    def start(self) -> None:
        compiled, self.w, self.h = compile_model(self.spec, "THROUGHPUT", u8_nhwc=False)
        self.compiled = compiled
        self.details = {**describe_compiled(compiled, "THROUGHPUT"), "requests": self.spec.cameras}
        self.precision = self.details["precision"]
        # One inference on this thread first: when several threads make their first
        # ``infer()`` with numpy inputs at the same moment, openvino 2026.4's bindings can
        # deadlock (one thread waits on a C++ static-initialisation guard holding the GIL,
        # the initialising thread waits for the GIL). Seen once in 8-camera runs.
        compiled.create_infer_request().infer({0: np.zeros((1, 3, self.h, self.w), np.float32)})
        self.threads = start_camera_threads(
            self.spec.cameras, lambda i: self.guarded(self._camera, i), "naive"
        )

    def _camera(self, index: int) -> None:
        reader = LoopingReader(self.spec.clip, realtime=self.spec.realtime)
        request = self.compiled.create_infer_request()
        params = self.params(self.w, self.h)
        try:
            while not self.stop_event.is_set():
                image = reader.read()
                t_capture = time.monotonic()
                padded, lb = letterbox(image, self.w, self.h)
                tensor = padded.transpose(2, 0, 1)[np.newaxis].astype(np.float32)
                request.infer({0: tensor})
                out = request.get_output_tensor(0).data
                postprocess([out[0]], lb, decode_yolox, params, self.spec.iou_threshold)
                self.log.record(index, t_capture)
        finally:
            reader.close()


# ------------------------------------------------------------------------------ single detector


class SingleDetectorRun(BaselineRun):
    """Frigate's design: camera threads -> one queue -> one synchronous LATENCY detector."""

    name = "single"

    def start(self) -> None:
        compiled, self.w, self.h = compile_model(self.spec, "LATENCY", u8_nhwc=True)
        self.request = compiled.create_infer_request()
        self.details = {**describe_compiled(compiled, "LATENCY"), "requests": 1}
        self.precision = self.details["precision"]
        n = self.spec.cameras
        self.inbox: queue.Queue[tuple[int, np.ndarray, Letterbox]] = queue.Queue(maxsize=n)
        self.done = [threading.Event() for _ in range(n)]
        self.threads = [
            threading.Thread(
                target=self.guarded, args=(self._detector,), name="single-detector", daemon=True
            )
        ]
        self.threads[0].start()
        self.threads += start_camera_threads(n, lambda i: self.guarded(self._camera, i), "single")

    def _camera(self, index: int) -> None:
        reader = LoopingReader(self.spec.clip, realtime=self.spec.realtime)
        done = self.done[index]
        try:
            while not self.stop_event.is_set():
                image = reader.read()
                t_capture = time.monotonic()
                padded, lb = letterbox(image, self.w, self.h)
                done.clear()
                self.inbox.put((index, padded[np.newaxis], lb))  # room for every camera
                while not done.wait(_POLL_S):  # Frigate's detect() waits for its result
                    if self.stop_event.is_set():
                        return
                self.log.record(index, t_capture)
        finally:
            reader.close()

    def _detector(self) -> None:
        params = self.params(self.w, self.h)
        while not self.stop_event.is_set():
            try:
                index, tensor, lb = self.inbox.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            self.request.infer({0: tensor})
            out = self.request.get_output_tensor(0).data
            postprocess([out[0]], lb, decode_yolox, params, self.spec.iou_threshold)
            self.done[index].set()


# ------------------------------------------------------------------------------ model_api


def model_api_unavailable() -> str | None:
    """Why the model_api contender cannot run here, or None when it can."""
    try:
        from model_api.models import YOLOX  # noqa: F401
        from model_api.pipelines import AsyncPipeline  # noqa: F401
    except Exception as exc:  # any import failure means "not available"
        return f"openvino-model-api is not importable: {type(exc).__name__}: {exc}"
    return None


def _model_api_yolox() -> type:
    """model_api's YOLOX wrapper with the one fix it needs to run (see ``ModelApiRun``)."""
    from model_api.models import YOLOX

    class _YOLOX(YOLOX):
        def preprocess(self, dict_inputs: dict, meta: dict) -> tuple[dict, dict]:
            height, width = meta["original_shape"][:2]
            meta["scale"] = min(self.w / width, self.h / height)
            return dict_inputs, meta

    return _YOLOX


class ModelApiRun(BaselineRun):
    """``openvino-model-api`` YOLOX + ``AsyncPipeline``, fed by the same capture threads.

    model_api 0.4.7 embeds the resize in the graph (``fit_to_window``: keep aspect, top-left,
    pad) but its YOLOX ``postprocess`` still reads ``meta["scale"]``, which only its Python
    resize path sets: out of the box every result raises ``KeyError: 'scale'``. The subclass
    adds that one value in ``preprocess``; nothing else is changed. model_api reads ONNX only
    with the ``onnx`` package, so it gets the same model saved as IR (``ensure_ir``, made once
    per run before the points: ``PointSpec.extra["model_ir"]``).
    """

    name = "model_api"

    def start(self) -> None:
        reason = model_api_unavailable()
        if reason:
            raise RuntimeError(reason)
        from model_api.adapters import OpenvinoAdapter, create_core
        from model_api.pipelines import AsyncPipeline

        adapter = OpenvinoAdapter(
            create_core(),
            self.spec.extra.get("model_ir") or str(ensure_ir(Path(self.spec.model), cache_dir())),
            device="CPU",
            plugin_config={
                "PERFORMANCE_HINT": "THROUGHPUT",
                "INFERENCE_PRECISION_HINT": self.spec.precision,
            },
            max_num_requests=0,  # 0: OPTIMAL_NUMBER_OF_INFER_REQUESTS
        )
        labels = [s.strip() for s in Path(self.spec.labels).read_text().splitlines() if s.strip()]
        config = {
            "labels": labels,
            "confidence_threshold": self.spec.score_threshold,
            "iou_threshold": self.spec.iou_threshold,
            "resize_type": "fit_to_window",
            "pad_value": 114,
        }
        model = _model_api_yolox()(adapter, config, preload=False)
        self.pipeline = AsyncPipeline(model)  # loads (compiles) the model
        compiled = adapter.compiled_model
        self.details = {
            **describe_compiled(compiled, "THROUGHPUT"),
            "requests": len(adapter.async_queue),
            "model_api": _version("openvino-model-api"),
        }
        self.precision = self.details["precision"]
        n = self.spec.cameras
        self.inbox: queue.Queue[tuple[int, float, np.ndarray]] = queue.Queue(maxsize=n)
        self.threads = [
            threading.Thread(
                target=self.guarded, args=(self._submitter,), name="model_api-submit", daemon=True
            )
        ]
        self.threads[0].start()
        self.threads += start_camera_threads(n, lambda i: self.guarded(self._camera, i), "mapi")

    def _camera(self, index: int) -> None:
        reader = LoopingReader(self.spec.clip, realtime=self.spec.realtime)
        try:
            while not self.stop_event.is_set():
                image = reader.read()
                item = (index, time.monotonic(), image)
                while not self.stop_event.is_set():
                    try:
                        self.inbox.put(item, timeout=_POLL_S)
                        break
                    except queue.Full:
                        continue
        finally:
            reader.close()

    def _submitter(self) -> None:
        pipeline = self.pipeline
        pending: set[int] = set()
        next_id = 0
        while not self.stop_event.is_set():
            for sub_id in list(pending):
                result = pipeline.get_result(sub_id)  # postprocesses a finished request
                if result is not None:
                    pending.discard(sub_id)
                    _dets, meta = result
                    self.log.record(meta["camera"], meta["t_capture"])
            if pipeline.is_ready():
                try:
                    index, t_capture, image = self.inbox.get(timeout=0.005 if pending else _POLL_S)
                except queue.Empty:
                    continue
                pipeline.submit_data(image, next_id, {"camera": index, "t_capture": t_capture})
                pending.add(next_id)
                next_id += 1
            else:
                pipeline.await_any()
        pipeline.await_all()


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None
