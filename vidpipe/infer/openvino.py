"""OpenVINO backend: a compiled model behind an ``AsyncInferQueue`` request pool.

Facts this module is built around (measured with openvino 2026.4.1 on a 2-core x86 machine;
the fault paths are exercised by ``tests/integration/test_pipeline_faults.py``):

* ``AsyncInferQueue.start_async`` is not safe with several submitting threads, so only the
  scheduler thread calls ``submit``.
* The Python callback runs with the GIL held and before its request returns to the idle pool,
  so it only copies the outputs and hands a ``Completion`` on.
* An exception escaping the callback is re-raised by the next queue call and the second one
  aborts the process: the callback body is fully guarded.
* A failed inference never calls the callback; the stored error surfaces from the next
  ``get_idle_request_id`` or ``start_async``. ``lend`` or ``submit`` then reclaims the slot of
  the request that failed.

Input memory: each request's own input tensor is lent to the scheduler, which letterboxes
straight into it; ``submit`` then starts that request with no inputs (nothing is copied or
rebound). ``AsyncInferQueue.start_async`` starts the request at the front of its idle queue,
which ``get_idle_request_id`` names (OpenVINO's own Python ``start_async`` copies inputs into
the request so named): with one submitting thread, the request lent is the request started.
A request is idle only once its callback has returned, so lent memory is never being read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import openvino as ov
from openvino.frontend import FrontEndManager

from vidpipe.config import OpenVINOConfig
from vidpipe.infer.base import (
    BackendError,
    BackendInfo,
    BatchObserver,
    SchedulingHints,
    ignore_batch,
)
from vidpipe.infer.ov_rewrites import rewrite_graph
from vidpipe.preprocess.buffers import InputBuffer, input_buffer
from vidpipe.preprocess.letterbox import DEFAULT_INPUT, ModelInput
from vidpipe.types import Completion, Outputs, TensorSpec

log = logging.getLogger(__name__)


_HINTS = {"throughput": "THROUGHPUT", "latency": "LATENCY"}
# A request that is idle while its submission still waits for a callback either is inside its
# callback right now or failed (OpenVINO then calls no callback at all). After this long it is
# the latter: the slot is reclaimed and the submission completes with an error.
_STUCK_AFTER_S = 2.0
_STUCK_CHECK_S = 0.25


def _first_line(exc: BaseException) -> str:
    """OpenVINO's exception texts run to dozens of lines; the first one that is not the
    "Exception from <source file>" or "Check '<expression>' failed" prefix says what is wrong."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if not line.startswith(("Exception from ", "Check '")):
            return line
    return lines[0] if lines else type(exc).__name__


def weights_path(path: Path) -> Path | None:
    """The ``.bin`` weights of an OpenVINO IR ``.xml`` (None for other formats such as ONNX)."""
    return path.with_suffix(".bin") if path.suffix.lower() == ".xml" else None


def _read_model(core: ov.Core, path: Path) -> ov.Model:
    if not path.is_file():
        raise BackendError(f"model file not found: {path}")
    weights = weights_path(path)
    if weights is not None and not weights.is_file():
        raise BackendError(
            f"model {path}: its weights file {weights.name} is missing (an OpenVINO IR is an "
            ".xml with a .bin of the same name beside it)"
        )
    try:
        if path.suffix.lower() == ".onnx":
            return _read_onnx(path)
        return core.read_model(str(path))
    except BackendError:
        raise
    except Exception as exc:  # OpenVINO raises RuntimeError subclasses with long texts
        if weights is not None:
            raise BackendError(
                f"cannot read OpenVINO IR {path}: {_first_line(exc)} ({weights.name} is "
                "truncated, damaged or belongs to another .xml)"
            ) from None
        raise BackendError(f"cannot read model {path}: {_first_line(exc)}") from None


def _read_onnx(path: Path) -> ov.Model:
    """An ``.onnx`` file through OpenVINO's ONNX frontend alone.

    ``Core.read_model`` offers a file every frontend in turn: on a damaged file the
    TensorFlow one logs its parse errors straight to fd 2 through absl, quoting the file's
    raw bytes (tests/integration/test_pipeline_faults.py feeds random bytes and reads stderr
    as text). Asking the ONNX frontend only also gives the one relevant reason.
    """
    frontend = FrontEndManager().load_by_framework("onnx")
    if not frontend.supported(str(path)):
        raise BackendError(f"cannot read model {path}: it is not an ONNX model (parsing failed)")
    return frontend.convert(frontend.load(str(path)))


def _in_order(output: np.ndarray, order: tuple[int, ...] | None) -> np.ndarray:
    """An output whose last ``Transpose`` was taken out of the graph, as the model's own
    shape (a view)."""
    return output if order is None else output.transpose(order)


def model_precision(model: ov.Model, compiled_precision: str) -> str:
    """``int8`` for a quantized model (it has FakeQuantize operations: NNCF's INT8 IR), else
    the precision the device runs the model at (``f32``, ``bf16`` ...)."""
    if any(op.get_type_name() == "FakeQuantize" for op in model.get_ops()):
        return "int8"
    return compiled_precision


def _static_input_shape(
    model: ov.Model, path: Path, size: tuple[int, int] | None = None
) -> list[int]:
    """The model's N x 3 x H x W input dims, reshaped to batch 1 and, given ``size`` (width,
    height), to that picture size."""
    if len(model.inputs) != 1:
        raise BackendError(f"model {path}: expected one input, found {len(model.inputs)}")
    pshape = model.input().get_partial_shape()
    if pshape.rank.is_dynamic:
        raise BackendError(f"model {path}: input rank is dynamic")
    dims = [d.get_length() if d.is_static else -1 for d in pshape]
    if len(dims) != 4 or dims[1] != 3:
        raise BackendError(f"model {path}: expected an N x 3 x H x W image input, got {dims}")
    # this backend submits one frame per request
    wanted = [1, 3, *dims[2:]] if size is None else [1, 3, size[1], size[0]]
    if wanted != dims:
        _reshape(model, path, wanted, size)
        dims = wanted
    if any(d <= 0 for d in dims):
        raise BackendError(f"model {path}: input spatial size must be static, got {pshape}")
    return dims


def _reshape(model: ov.Model, path: Path, dims: list[int], size: tuple[int, int] | None) -> None:
    try:
        model.reshape({model.input().get_any_name(): ov.PartialShape(dims)})
    except RuntimeError as exc:
        if size is None:
            raise BackendError(f"model {path}: cannot run at batch 1: {_first_line(exc)}") from None
        # e.g. NanoDet-m's export: its channel shuffles reshape to the 416x416 grid's sizes
        raise BackendError(
            f"model {path}: cannot run at input_size {size[0]}x{size[1]}: its graph fixes "
            f"its input size ({_first_line(exc)}); remove model.input_size or export the "
            "model at that size"
        ) from None


def _input_spec(model: ov.Model, path: Path, size: tuple[int, int] | None = None) -> TensorSpec:
    """The spec of the input the scheduler writes: the model's own f32 NCHW image input, at
    ``size`` (width, height) where given.

    Converting u8 NHWC in the graph instead (OpenVINO's PrePostProcessor) cost OpenVINO's
    threads 0.6-0.8 ms a frame more than it saved the scheduler on 2-core bf16 machines,
    where the channel split and widening take 0.07 ms (benchmarks/README.md).
    """
    dims = _static_input_shape(model, path, size)
    return TensorSpec(model.input().get_any_name(), (1, 3, dims[2], dims[3]), "f32", "NCHW")


def _normalise_in_graph(model: ov.Model, model_input: ModelInput) -> ov.Model:
    """``model`` taking 0-255 pixels where it was trained on ``(x - mean) / std``.

    The scheduler writes every model's input the same way (0-255 f32 NCHW, pad included);
    the subtraction and division go into the graph (PrePostProcessor), where OpenVINO runs
    them on its own threads, fused with what follows where it can, instead of two more passes
    over the tensor on the scheduler's thread. The pad is normalised too, as NanoDet's
    reference pads before it normalises.
    """
    if not model_input.normalised:
        return model
    ppp = ov.preprocess.PrePostProcessor(model)
    ppp.input().model().set_layout(ov.Layout("NCHW"))
    steps = ppp.input().preprocess()
    if model_input.mean is not None:
        steps.mean(list(model_input.mean))
    if model_input.std is not None:
        steps.scale(list(model_input.std))
    return ppp.build()


class OpenVINOBackend:
    """An OpenVINO request pool implementing ``InferenceBackend``."""

    def __init__(
        self,
        model_path: Path,
        cfg: OpenVINOConfig,
        core: ov.Core | None = None,
        model_input: ModelInput = DEFAULT_INPUT,
        input_size: tuple[int, int] | None = None,
    ) -> None:
        self._core = core or ov.Core()
        # ``hint: auto`` still unresolved here was built with no cameras to count (``vidpipe
        # detect``, ``check``, tests): as for none, the throughput hint
        cfg = cfg.for_cameras(0)
        model = _read_model(self._core, model_path)
        self.input_spec = _input_spec(model, model_path, input_size)
        self.output_shapes = [tuple(int(d) for d in o.get_shape()) for o in model.outputs]
        self.model_input = model_input
        model = _normalise_in_graph(model, model_input)
        # after the shapes: the outputs keep the model's own shapes, as numpy views
        rewrites = rewrite_graph(model)
        self._output_orders = rewrites.output_orders
        self._compiled = self._compile(model, cfg, model_path)
        optimal = int(self._compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        streams = int(self._compiled.get_property("NUM_STREAMS"))
        self._size_pool(cfg, optimal, streams)
        self._queue = ov.AsyncInferQueue(self._compiled, self.capacity)
        self._queue.set_callback(self._on_complete)
        # Each request's own input tensor, lent to the scheduler in turn (the Tensor objects
        # are kept: their numpy views do not own the memory).
        self._input_tensors = [self._queue[i].get_input_tensor(0) for i in range(self.capacity)]
        self.buffers = tuple(
            input_buffer(self.input_spec, i, t.data, model_input)
            for i, t in enumerate(self._input_tensors)
        )
        self._lent: InputBuffer | None = None
        self._warm_up()
        self._cond = threading.Condition()
        self._inflight: dict[int, tuple[Any, Callable[[Completion], None], float]] = {}
        self._next_id = 0
        self._closed = False
        self._observe_batch: BatchObserver = ignore_batch
        self._suspects: dict[int, float] = {}  # submission -> first seen idle without callback
        self._last_stuck_check = 0.0
        self.callback_errors = 0
        self.info = self._describe(model, cfg, model_path, rewrites.describe(), optimal, streams)

    def _size_pool(self, cfg: OpenVINOConfig, optimal: int, streams: int) -> None:
        """The request pool's size, the scheduler's in-flight floor and its hints."""
        # The design rule: about twice the device's concurrency, so every stream has its next
        # request queued when one finishes. `vidpipe bench` A/B on 2 cores
        # (benchmarks/results/ab-vidpipe-defaults.md): 4 requests vs 2 gave +1.6 % fps at 4
        # cameras and a tie at 8, 100 % CPU instead of 98 %, and about +60 ms p50 latency.
        # Under the latency hint (one stream) as well: the scheduler's in-flight cap keeps the
        # second request out of the device's queue while one camera runs, and letterboxes
        # into it meanwhile, so that the stream does not wait for the letterbox.
        self.capacity = cfg.advanced.num_requests or 2 * optimal
        # With the default pool the scheduler may keep fewer requests in flight when fewer
        # cameras than requests have frames (``Scheduler``): never fewer than one per stream.
        # An explicit ``advanced.num_requests`` is kept as given (None: no cap).
        self.in_flight_floor = (
            None if cfg.advanced.num_requests else max(1, min(streams, self.capacity))
        )
        # File cameras' decodes are timed to this pool's requests, and completions are
        # postprocessed on the scheduler's thread between submissions: that thread mostly
        # waits for exactly those completions (a free request) anyway
        # (``vidpipe.schedule.completions``).
        self.hints = SchedulingHints(
            capacity=self.capacity,
            in_flight_floor=self.in_flight_floor,
            uses_every_core=cfg.device.upper() == "CPU" and streams == 1,
            time_turns=True,
            completions_on_scheduler=True,
        )

    def _describe(
        self,
        model: ov.Model,
        cfg: OpenVINOConfig,
        model_path: Path,
        rewrites: str,
        optimal: int,
        streams: int,
    ) -> BackendInfo:
        hint = self._compiled.get_property("INFERENCE_PRECISION_HINT")
        precision = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
        return BackendInfo(
            backend="openvino",
            device=cfg.device,
            model=model_path.name,
            precision=model_precision(model, precision),
            float_precision=precision,
            hint=cfg.hint,
            requests=self.capacity,
            streams=streams,
            optimal_requests=optimal,
            runtime=f"openvino {ov.__version__.split('-')[0]}, graph rewrites: {rewrites}",
        )

    def _warm_up(self) -> None:
        """One synchronous inference, and every output tensor's buffer touched, on this thread.

        The first access to ``Tensor.data`` from two completion callbacks at once was seen to
        deadlock OpenVINO's bindings (3 hangs in 58 cold starts in the benchmark harness, none
        after such a warm-up); it also takes the first-inference cost out of the pipeline.
        """
        self.buffers[0].tensor[...] = 114
        self.buffers[0].padded_for = None  # written here, not by ``fill``
        self._queue[0].infer()
        for i in range(self.capacity):
            for j in range(len(self._output_orders)):
                _ = self._queue[i].get_output_tensor(j).data

    def _compile(self, model: ov.Model, cfg: OpenVINOConfig, path: Path) -> ov.CompiledModel:
        props: dict[str, Any] = {"PERFORMANCE_HINT": _HINTS[cfg.hint]}
        if cfg.precision != "auto":
            props["INFERENCE_PRECISION_HINT"] = cfg.precision
        if cfg.advanced.num_streams:
            props["NUM_STREAMS"] = cfg.advanced.num_streams
        if cfg.advanced.cpu_pinning is not None:
            props["ENABLE_CPU_PINNING"] = cfg.advanced.cpu_pinning
        try:
            return self._core.compile_model(model, cfg.device, props)
        except Exception as exc:
            raise BackendError(
                f"cannot compile {path} for device {cfg.device!r} with {props}: {_first_line(exc)}"
            ) from None

    # ------------------------------------------------------------------ submission

    def lend(self, timeout_s: float) -> InputBuffer | None:
        """The input tensor of the request the next ``submit`` starts, once one is idle."""
        with self._cond:
            free = self._cond.wait_for(
                lambda: self._closed or len(self._inflight) < self.capacity, timeout_s
            )
            if self._closed:
                raise BackendError("backend is closed")
        if not free:
            self._reclaim_stuck()  # a pool full of failed requests would otherwise never free up
            return None
        try:
            # Blocks only while a finished request's callback returns (our bookkeeping ends
            # inside the callback, the request is idle after it).
            index = self._queue.get_idle_request_id()
        except Exception as exc:  # an earlier failed inference surfaced here
            self._reclaim_failed(exc, None)
            return None
        self._lent = self.buffers[index]
        return self._lent

    def in_flight(self) -> int:
        """Requests submitted and not yet completed (diagnostics)."""
        with self._cond:
            return len(self._inflight)

    def submit(self, buffer: InputBuffer, tag: Any, on_done: Callable[[Completion], None]) -> None:
        """Start the request whose input tensor ``buffer`` is. Call from one thread only,
        after ``lend``."""
        if buffer.device is not None:  # config validation refuses nvdec with openvino
            raise BackendError("OpenVINO cannot take a GPU frame (decoder nvdec)")
        if buffer is not self._lent:
            raise BackendError("submit takes the buffer of this backend's last lend()")
        with self._cond:
            if self._closed:
                raise BackendError("backend is closed")
            sub_id = self._next_id
            self._next_id += 1
            self._inflight[sub_id] = (tag, on_done, time.perf_counter())
        self._lent = None
        try:
            # No inputs: the lent tensor is the request's own and holds the frame already.
            self._queue.start_async(None, sub_id)
            self._observe_batch(1)  # a request holds one frame
        except Exception as exc:
            # Either our own request was refused, or an earlier failed inference surfaced here.
            self._reclaim_failed(exc, sub_id)

    def _reclaim_failed(self, exc: Exception, sub_id: int | None) -> None:
        log.error("inference request failed: %s", _first_line(exc))
        idle = self._idle_submissions()
        if sub_id is not None:
            idle.add(sub_id)
        for sid in idle:
            self._finish(sid, exc)

    def _reclaim_stuck(self) -> None:
        """Complete, with an error, submissions whose request failed without a callback.

        Called on every timed-out ``lend`` poll (the normal state of a saturated pool), so
        the requests are looked at no more than once every ``_STUCK_CHECK_S``.
        """
        now = time.monotonic()
        if now - self._last_stuck_check < _STUCK_CHECK_S:
            return
        self._last_stuck_check = now
        idle = self._idle_submissions()
        self._suspects = {sid: self._suspects.get(sid, now) for sid in idle}
        stuck = [sid for sid, t in self._suspects.items() if now - t >= _STUCK_AFTER_S]
        if stuck:
            log.error("%d inference request(s) failed without a completion; reclaimed", len(stuck))
        for sid in stuck:
            self._suspects.pop(sid, None)
            self._finish(sid, BackendError("inference failed (no completion callback)"))

    def _idle_submissions(self) -> set[int]:
        """Submissions whose request is idle although no callback came (failed inference)."""
        userdata = list(self._queue.userdata)
        with self._cond:
            pending = set(self._inflight)
        busy = {u for i, u in enumerate(userdata) if not self._request_idle(i)}
        return {u for u in userdata if u in pending and u not in busy}

    def _request_idle(self, index: int) -> bool:
        try:
            return bool(self._queue[index].wait_for(0))
        except Exception:
            return True  # a request that holds an error is not running

    def _on_complete(self, request: ov.InferRequest, sub_id: Any) -> None:
        """AsyncInferQueue callback: copy outputs out, hand them on. Never raises."""
        try:
            outputs = tuple(
                _in_order(np.array(request.get_output_tensor(i).data, copy=True), order)
                for i, order in enumerate(self._output_orders)
            )
            self._finish(sub_id, outputs)
        except BaseException as exc:
            self.callback_errors += 1
            try:
                self._finish(sub_id, exc)
            except BaseException:
                log.exception("inference completion handler failed")

    def _finish(self, sub_id: int, result: Outputs | BaseException) -> None:
        with self._cond:
            entry = self._inflight.pop(sub_id, None)
            self._cond.notify_all()
        if entry is None:
            return
        tag, on_done, t0 = entry
        on_done(Completion(tag, result, time.perf_counter() - t0))

    def observe_batches(self, observer: BatchObserver) -> None:
        """``observer`` is called with 1 for every request started (a request holds one
        frame), on the scheduler's thread."""
        self._observe_batch = observer

    # ------------------------------------------------------------------ shutdown

    def drain(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            with self._cond:
                if self._cond.wait_for(lambda: not self._inflight, max(0.0, min(left, 0.25))):
                    return True
            if left <= 0:
                return False
            self._reclaim_stuck()

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
        if not self.drain(5.0):
            log.warning("closing with %d inference requests still running", self.in_flight())
            return  # leave the queue alive rather than destroy requests that still run
        # Our bookkeeping ends inside the callback, before the request is back in the idle
        # pool; destroying the queue then aborts the process (std::terminate). wait_all()
        # returns once every request is really idle.
        try:
            self._queue.wait_all()
        except Exception as exc:
            log.error("inference error at shutdown: %s", _first_line(exc))
