"""TensorRT executor and engine builder (TensorRT 10/11 Python API, ``enqueueV3`` style).

Written against the documented API; TensorRT itself could not be installed where this was
developed (its PyPI packages download from NVIDIA's servers), so this path has not been
executed here: see the README. The same rewritten ONNX graph as the PyTorch executor
(``onnx_prep``: u8 NHWC input, dynamic batch) is parsed by ``trt.OnnxParser`` and built with

* an optimisation profile for batch ``1..max_batch`` (opt = max_batch),
* a workspace limit (``MemoryPoolType.WORKSPACE``),
* FP16 when asked (``BuilderFlag.FP16``; TensorRT 11 removed weak typing, so there an FP16
  engine needs a model converted to mixed precision beforehand, and we say so),
* progress logged through an ``IProgressMonitor`` (builds take minutes).

Serialized engines are cached on disk (``engine_cache``); an engine the runtime refuses
(``deserialize_cuda_engine`` returns None: stale or foreign) is rebuilt once.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from vidpipe.infer import onnx_prep
from vidpipe.infer.base import BackendError
from vidpipe.infer.engine_cache import EngineCache, EngineKey, file_sha256
from vidpipe.infer.gpu_base import ExecutorInfo, GpuRuntime, ModelIO

log = logging.getLogger(__name__)


def import_tensorrt() -> Any:
    """The ``tensorrt`` module; BackendError saying how to get it when absent."""
    try:
        import tensorrt
    except ImportError as exc:
        raise BackendError(
            "inference type 'tensorrt' needs NVIDIA TensorRT 10 or 11 (the tensorrt wheels from "
            f"NVIDIA's index, or the Debian packages): {exc}. Without TensorRT use type 'torch'."
        ) from None
    return tensorrt


def _make_logger(trt: Any) -> Any:
    class _Logger(trt.ILogger):
        """TensorRT's messages into vidpipe's log."""

        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            level = {
                trt.ILogger.Severity.INTERNAL_ERROR: logging.CRITICAL,
                trt.ILogger.Severity.ERROR: logging.ERROR,
                trt.ILogger.Severity.WARNING: logging.WARNING,
                trt.ILogger.Severity.INFO: logging.DEBUG,
            }.get(severity, logging.DEBUG)
            log.log(level, "tensorrt: %s", msg)

    return _Logger()


def _make_progress(trt: Any) -> Any:
    class _Progress(trt.IProgressMonitor):
        """Log the builder's phases (must be thread-safe: TensorRT calls it from workers)."""

        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self._lock = threading.Lock()
            self._t0: dict[str, float] = {}

        def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
            with self._lock:
                self._t0[phase_name] = time.monotonic()
            if parent_phase is None:
                log.info("engine build: %s (%d steps)", phase_name, num_steps)

        def step_complete(self, phase_name: str, step: int) -> bool:
            return True  # never cancel

        def phase_finish(self, phase_name: str) -> None:
            with self._lock:
                t0 = self._t0.pop(phase_name, time.monotonic())
            log.debug("engine build: %s done in %.1f s", phase_name, time.monotonic() - t0)

    return _Progress()


def build_engine(
    trt: Any, onnx_bytes: bytes, io: ModelIO, max_batch: int, precision: str, workspace_mib: int
) -> bytes:
    """Build a serialized engine from the rewritten ONNX model.

    Raises:
        BackendError: the parser or the builder failed (their messages included).
    """
    logger = _make_logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode since TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(onnx_bytes):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise BackendError("TensorRT cannot parse the model: " + "; ".join(errors))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mib << 20)
    _set_precision(trt, config, precision)
    profile = builder.create_optimization_profile()
    shape = io.input.shape
    profile.set_shape(io.input.name, (1, *shape), (max_batch, *shape), (max_batch, *shape))
    config.add_optimization_profile(profile)
    progress = _make_progress(trt)  # kept referenced until the build returns
    config.progress_monitor = progress
    t0 = time.monotonic()
    log.info(
        "building a TensorRT engine (batch 1..%d, %s); this takes minutes", max_batch, precision
    )
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BackendError("TensorRT failed to build the engine (see the tensorrt log lines)")
    log.info("engine built in %.0f s", time.monotonic() - t0)
    return bytes(memoryview(serialized))


def _set_precision(trt: Any, config: Any, precision: str) -> None:
    flags = trt.BuilderFlag
    if precision == "f16":
        if not hasattr(flags, "FP16"):
            raise BackendError(
                f"TensorRT {trt.__version__} has no FP16 builder flag (strong typing only): "
                "convert the ONNX model to mixed precision (ModelOpt AutoCast) and use "
                "precision f32, which keeps the graph's own types"
            )
        config.set_flag(flags.FP16)
    elif precision == "f32" and hasattr(flags, "TF32"):
        config.clear_flag(flags.TF32)  # TF32 is on by default; f32 means full precision


class TensorRTContext:
    """One slot: an execution context bound to the slot's stream and buffers."""

    def __init__(
        self, ex: TensorRTExecutor, stream: int, d_input: int, d_outputs: list[int]
    ) -> None:
        self._ex = ex
        self._stream = stream
        self._addresses = [(ex.io.input.name, d_input)] + [
            (o.name, ptr) for o, ptr in zip(ex.io.outputs, d_outputs, strict=True)
        ]
        self._ctx = ex.engine.create_execution_context()
        if self._ctx is None:
            raise BackendError("TensorRT could not create an execution context (out of memory?)")
        self._batch = 0

    def enqueue(self, batch: int) -> None:
        """Set the batch shape, bind the tensor addresses, ``execute_async_v3``."""
        io = self._ex.io
        if batch != self._batch:
            if not self._ctx.set_input_shape(io.input.name, (batch, *io.input.shape)):
                raise BackendError(f"TensorRT refused input shape batch={batch}")
            self._batch = batch
        for name, ptr in self._addresses:
            if not self._ctx.set_tensor_address(name, ptr):
                raise BackendError(f"TensorRT refused the address of tensor {name!r}")
        if not self._ctx.execute_async_v3(self._stream):
            raise BackendError("TensorRT execute_async_v3 failed (see the tensorrt log lines)")

    def letterbox(self, rows: list[tuple[int, Any]]) -> None:
        raise BackendError("TensorRT cannot read GPU frames (decoder nvdec): use type torch")

    def close(self) -> None:
        self._ctx = None


class TensorRTExecutor:
    """A TensorRT engine for one GPU, loaded from the cache or built (``BatchExecutor``)."""

    def __init__(
        self,
        model_path: Path,
        runtime: GpuRuntime,
        max_batch: int,
        precision: str,
        workspace_mib: int,
        cache_dir: Path,
    ) -> None:
        self.trt = trt = import_tensorrt()
        self.max_batch = max_batch
        model, self.io = onnx_prep.prepare(onnx_prep.load_model(model_path), model_path)
        key = EngineKey(
            model_sha256=file_sha256(model_path),
            tensorrt_version=str(trt.__version__),
            gpu_name=runtime.name,
            compute_capability="{}.{}".format(*runtime.compute_capability),
            precision=precision,
            min_batch=1,
            opt_batch=max_batch,
            max_batch=max_batch,
            workspace_mib=workspace_mib,
        )
        runtime.activate()  # TensorRT builds and deserializes on the current device
        self._logger = _make_logger(trt)
        self._runtime = trt.Runtime(self._logger)
        cache = EngineCache(cache_dir)
        stem = model_path.stem

        def build() -> bytes:
            data = build_engine(
                trt, onnx_prep.serialize(model), self.io, max_batch, precision, workspace_mib
            )
            log.info("engine cached at %s", cache.store(stem, key, data))
            return data

        data = cache.load(stem, key)
        engine = self._runtime.deserialize_cuda_engine(data) if data is not None else None
        if engine is None:
            if data is not None:
                log.warning("cached engine for %s was refused by TensorRT; rebuilding", stem)
                cache.discard(stem, key)
            engine = self._runtime.deserialize_cuda_engine(build())
        if engine is None:
            raise BackendError(f"TensorRT cannot deserialize the engine it just built for {stem}")
        self.engine = engine
        self._check_io()
        self.info = ExecutorInfo(
            backend="tensorrt",
            model=model_path.name,
            precision=precision,
            runtime=f"tensorrt {trt.__version__}",
        )

    def _check_io(self) -> None:
        """The engine's tensors must be the rewritten model's (a foreign engine is refused)."""
        trt, eng = self.trt, self.engine
        names = {eng.get_tensor_name(i) for i in range(eng.num_io_tensors)}
        wanted = {self.io.input.name, *(o.name for o in self.io.outputs)}
        if names != wanted:
            raise BackendError(f"engine tensors {sorted(names)} differ from {sorted(wanted)}")
        if eng.get_tensor_mode(self.io.input.name) != trt.TensorIOMode.INPUT:
            raise BackendError(f"engine tensor {self.io.input.name!r} is not an input")
        for o in self.io.outputs:
            if eng.get_tensor_dtype(o.name) != trt.DataType.FLOAT:
                raise BackendError(f"engine output {o.name!r} is not float32")

    def create_context(self, stream: int, d_input: int, d_outputs: list[int]) -> TensorRTContext:
        return TensorRTContext(self, stream, d_input, d_outputs)

    def device_postprocess(self, decoder: str) -> None:
        return None  # outputs go to the host; postprocessing on the GPU needs type torch

    def close(self) -> None:
        self.engine = None
