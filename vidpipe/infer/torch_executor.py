"""PyTorch executor: the ONNX model converted once with onnx2torch, run on the slots' streams.

For users with PyTorch but no TensorRT, and how the stream set is proven on real hardware.
Each slot's context wraps the slot's own CUDA stream in ``torch.cuda.ExternalStream`` and its
device buffers (allocated by cuda-python) as tensors through ``__cuda_array_interface__``, so
PyTorch reads the input and writes the outputs where the stream set's copies expect them, in
the stream's order. The batch dimension is dynamic (``onnx_prep``).

Two things keep the enqueue from blocking on the GPU:

* onnx2torch keeps ONNX initializers as buffers. Those that are not weights (Reshape targets,
  Slice bounds, Resize scales) are read on the host by the converted modules; on the GPU each
  read would be a device-to-host copy and a stream synchronisation. They stay on the CPU.
* cuDNN autotuning (``cudnn.benchmark``) runs for each batch size on its first use: the
  constructor warms up batch 1 and ``max_batch``.

Precision: ``f32`` disables TF32 (process-wide ``torch.backends`` flags), ``tf32`` allows it,
``f16`` runs the model in half precision (outputs are returned as float32).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from pathlib import Path
from typing import Any

from vidpipe.gpu_gate import GPU_GATE
from vidpipe.infer import onnx_prep
from vidpipe.infer.base import BackendError
from vidpipe.infer.gpu_base import ExecutorInfo
from vidpipe.infer.torch_cache import cached_module, module_key
from vidpipe.postprocess.gpu import GPU_POSTPROCESSORS, GpuPostprocess
from vidpipe.preprocess.gpu import nv12_letterbox_batch_into
from vidpipe.preprocess.gpu_kernel import compile_letterbox, letterbox_rows
from vidpipe.types import Detections, DeviceImage, PostprocessRequest

log = logging.getLogger(__name__)

_SMALL_BUFFER = 64  # elements; the model's shape parameters are far smaller than any weight


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise BackendError(f"inference type 'torch' needs PyTorch with CUDA ({exc})") from None
    if not torch.cuda.is_available():
        raise BackendError("inference type 'torch': PyTorch sees no CUDA device")
    return torch


class _DeviceArray:
    """A raw device pointer seen as an array by ``torch.as_tensor`` (zero copy)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (ptr, False),
            "version": 2,
        }


def graph_sizes(max_batch: int) -> list[int]:
    """Batch sizes captured as CUDA graphs: powers of two below ``max_batch``, and it."""
    sizes = {max_batch}
    b = 1
    while b < max_batch:
        sizes.add(b)
        b *= 2
    return sorted(sizes)


class TorchContext:
    """One slot: its stream as an ExternalStream, its buffers as tensors.

    With CUDA graphs, the model is captured once per size of ``graph_sizes`` reading this
    slot's device input and writing its device outputs (their addresses never change), and an
    enqueue is one ``replay`` on the slot's stream. A batch of ``n`` frames replays the
    smallest captured size ``>= n``; the rows past ``n`` compute on stale input and are never
    read. Without graphs, each enqueue runs the module eagerly, and the Python of its ~300
    operations holds the GIL for milliseconds per batch: measured on the H200 to starve the
    other pipeline threads (benchmarks/README.md).

    A context starts with the graphs of the sizes its creating thread warmed up: every size,
    or in a service (``TorchExecutor(background=True)``) ``max_batch`` alone, which every batch
    fits; the executor's background thread adds the others (``capture_more``). A capture waits
    for this context's enqueues (``_lock``) and pauses the process's other GPU work
    (``GPU_GATE``): captured while NVDEC cameras decoded, the capture was invalidated by the
    cameras' stream work, and their copies failed (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``),
    on the H200 (``benchmarks/results/gpu/overload-h200-background-capture.jsonl``).
    """

    def __init__(self, ex: TorchExecutor, stream: int, d_input: int, d_outputs: list[int]) -> None:
        torch = ex.torch
        self._ex = ex
        self.stream = torch.cuda.ExternalStream(stream, device=ex.device)
        b = ex.max_batch
        self._input = torch.as_tensor(
            _DeviceArray(d_input, (b, *ex.io.input.shape), "|u1"), device=ex.device
        )
        self._outputs = [
            torch.as_tensor(_DeviceArray(ptr, (b, *o.shape), "<f4"), device=ex.device)
            for ptr, o in zip(d_outputs, ex.io.outputs, strict=True)
        ]
        self._lock = threading.Lock()  # enqueue and letterbox against a background capture
        #: Captured graphs by batch size; replaced whole (read by enqueue without a copy).
        self._graphs: dict[int, Any] = {}
        self._held: collections.deque[tuple[Any, list[Any]]] = collections.deque()
        if ex.cuda_graphs:
            self._pool = torch.cuda.graph_pool_handle()
            self._side = torch.cuda.Stream(device=ex.device)
            with GPU_GATE.exclusive():  # another executor's background warm-up, a reload's
                self._capture(ex.sizes_for_new_context())
        ex.contexts.append(self)

    def _run(self, batch: int) -> None:
        ys = self._ex.module(self._input[:batch])
        if isinstance(ys, self._ex.torch.Tensor):
            ys = (ys,)
        for dst, y in zip(self._outputs, ys, strict=True):
            dst[:batch].copy_(y)

    def _capture(self, sizes: list[int]) -> None:
        """Capture ``sizes``, largest first, into this slot's one memory pool.

        Before each capture the module runs once on the side stream, on a tensor of its own:
        lazy per-stream initialisation must not be captured, and this slot's buffers may be
        in use by batches still running on its stream."""
        torch = self._ex.torch
        t0 = time.perf_counter()
        graphs = dict(self._graphs)
        shape = self._ex.io.input.shape
        with torch.cuda.device(self._ex.device), torch.inference_mode():
            for size in sorted(sizes, reverse=True):
                with torch.cuda.stream(self._side):
                    self._ex.module(
                        torch.full((size, *shape), 114, dtype=torch.uint8, device=self._ex.device)
                    )
                self._side.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(
                    graph, pool=self._pool, stream=self._side, capture_error_mode="thread_local"
                ):
                    self._run(size)
                graphs[size] = graph
            self._side.synchronize()
        self._graphs = graphs
        log.info(
            "torch executor on %s: graphs of batch sizes %s captured in %.1f s",
            self._ex.device,
            sorted(graphs),
            time.perf_counter() - t0,
        )

    def capture_more(self, sizes: list[int]) -> None:
        """Add graphs of ``sizes`` (warmed up on the calling thread), with no enqueue on this
        context and no other GPU work of the process running meanwhile."""
        with self._lock, GPU_GATE.exclusive():
            if self._outputs:  # not closed
                self._capture([s for s in sizes if s not in self._graphs])

    def enqueue(self, batch: int) -> None:
        """Queue the model on the slot's stream; returns once the work is queued."""
        torch = self._ex.torch
        self._ex.start_later()
        with self._lock, torch.cuda.device(self._ex.device), torch.cuda.stream(self.stream):
            graphs = self._graphs
            if graphs:
                graphs[min(s for s in graphs if s >= batch)].replay()
                return
            with torch.inference_mode():
                self._run(batch)

    def letterbox(self, rows: list[tuple[int, DeviceImage]]) -> None:
        """Letterbox GPU pictures into their rows of this slot's input, on the slot's stream.

        Pictures of one size are converted together (one pass of kernels per size, not per
        frame). The stream first waits for each picture's ``ready`` event (it was copied on
        the decoding thread's stream). The pictures are then held, with an event recorded
        after the kernels that read them, until that event has passed, so that PyTorch's
        allocator does not hand their memory out again before the kernels ran.

        Not ``Tensor.record_stream``: it ties the picture's memory to this slot's stream, a
        cuda-python stream that the backend destroys at close, and freeing a picture after
        that (one still in a camera's mailbox) aborted the process in the allocator ("CUDA
        error: context is destroyed", tests/gpu/test_nvdec_daemon_gpu.py on the H200).
        """
        torch = self._ex.torch
        by_size: dict[tuple[int, int], list[tuple[int, DeviceImage]]] = {}
        for row, image in rows:
            by_size.setdefault((image.height, image.width), []).append((row, image))
        with self._lock, torch.cuda.device(self._ex.device), torch.cuda.stream(self.stream):
            for group in by_size.values():
                for _, image in group:
                    if image.ready is not None:
                        self.stream.wait_event(image.ready)
                idx = [row for row, _ in group]
                pictures = [image.nv12 for _, image in group]
                if self._ex.letterbox_kernel is not None:
                    letterbox_rows(torch, self._ex.letterbox_kernel, pictures, idx, self._input)
                    continue
                nv12 = torch.stack(pictures)
                if idx == list(range(idx[0], idx[0] + len(idx))):  # contiguous rows: a view
                    nv12_letterbox_batch_into(torch, nv12, self._input[idx[0] : idx[0] + len(idx)])
                    continue
                out = torch.empty(
                    (len(idx), *self._input.shape[1:]), dtype=torch.uint8, device=self._ex.device
                )
                nv12_letterbox_batch_into(torch, nv12, out)
                self._input.index_copy_(0, torch.tensor(idx, device=self._ex.device), out)
            self._hold([image.nv12 for _, image in rows])

    def _hold(self, pictures: list[Any]) -> None:
        """Keep ``pictures`` alive until the work queued so far on this stream has run, and
        let go of those of earlier batches whose work has."""
        done = self._ex.torch.cuda.Event()
        done.record(self.stream)
        while self._held and self._held[0][0].query():
            self._held.popleft()
        self._held.append((done, pictures))

    def close(self) -> None:
        with self._lock:
            self.stream.synchronize()  # the held pictures' readers have run
            self._held.clear()
            self._graphs = {}
            self._input = None
            self._outputs = []


class TorchExecutor:
    """The ONNX model as a PyTorch module on one CUDA device (``BatchExecutor``).

    Args:
        cuda_graphs: capture the model per size of ``graph_sizes`` (else run it eagerly).
        autotune: cuDNN's per-shape autotuning (``cudnn.benchmark``): 4 s a size at start-up
            on the H200, 7 % more img/s at batch 64 (``benchmarks.startup_phases``).
        cache_dir: where the converted module is kept between starts (``torch_cache``).
        background: warm up and capture ``max_batch`` only, and every other size on a
            background thread while the pipeline runs (a service's start); else every size
            before this returns (tests and benchmarks, which time a steady state).
    """

    def __init__(
        self,
        model_path: Path,
        device: int,
        max_batch: int,
        precision: str,
        cuda_graphs: bool = True,
        autotune: bool = True,
        cache_dir: Path | None = None,
        background: bool = False,
    ) -> None:
        t0 = time.perf_counter()
        self.torch = torch = _torch()
        #: Seconds of each start-up phase (logged; ``benchmarks.startup_phases`` reads it).
        self.timings: dict[str, float] = {"import_s": time.perf_counter() - t0}
        self.cuda_graphs = cuda_graphs
        self.device = torch.device("cuda", device)
        self.max_batch = max_batch
        self.precision = precision
        self.module = self._load(model_path, precision, cache_dir)
        self.timings["convert_s"] = time.perf_counter() - t0 - self.timings["import_s"]
        torch.backends.cudnn.benchmark = autotune
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        # NVDEC pictures are letterboxed on the GPU: one fused kernel where it compiles
        t1 = time.perf_counter()
        self.letterbox_kernel, letterbox = compile_letterbox(torch, self.device)
        self.timings["letterbox_s"] = time.perf_counter() - t1
        self.info = ExecutorInfo(
            backend="torch",
            model=model_path.name,
            precision=precision,
            runtime=f"onnx2torch {self._onnx2torch_version}, torch {torch.__version__}, "
            f"cuda graphs {'on' if cuda_graphs else 'off'}, gpu letterbox {letterbox}",
        )
        self.contexts: list[TorchContext] = []
        sizes = graph_sizes(max_batch) if cuda_graphs else list(range(1, max_batch + 1))
        first = [max_batch] if background and cuda_graphs else sizes
        self._warm_up(first)
        self._closing = threading.Event()
        self._later = [s for s in sizes if s not in first]
        self._thread: threading.Thread | None = None

    def start_later(self) -> None:
        """Start the background thread, once the pipeline runs (the first enqueue): its
        warm-ups would invalidate the captures of contexts still being made."""
        if self._later and self._thread is None:
            self._thread = threading.Thread(
                target=self._capture_later, name=f"vidpipe-graphs-{self.device}", daemon=True
            )
            self._thread.start()

    def _load(self, model_path: Path, precision: str, cache_dir: Path | None) -> Any:
        """The module on the device, converted by onnx2torch (or from ``cache_dir``)."""
        torch = self.torch
        try:
            import onnx2torch
        except ImportError as exc:
            raise BackendError(f"inference type 'torch' needs onnx2torch ({exc})") from None
        self._onnx2torch_version = getattr(onnx2torch, "__version__", "?")
        prep = "f16" if precision == "f16" else "f32"
        model, self.io = onnx_prep.prepare(onnx_prep.load_model(model_path), model_path, prep)

        def convert() -> Any:
            try:
                return onnx2torch.convert(model)
            except Exception as exc:
                raise BackendError(f"onnx2torch cannot convert {model_path}: {exc}") from None

        key = module_key(model_path, prep, torch, onnx2torch)
        module, cached = cached_module(cache_dir, model_path, key, torch, convert)
        self.timings["cached"] = float(cached)
        module = module.eval().to(self.device)
        if precision == "f16":
            module = module.half()
        self._keep_shape_buffers_on_host(module)
        return module

    @staticmethod
    def _keep_shape_buffers_on_host(module: Any) -> None:
        for owner in module.modules():
            for name, buf in list(owner.named_buffers(recurse=False)):
                if buf is not None and buf.numel() <= _SMALL_BUFFER:
                    setattr(owner, name, buf.cpu())

    def _warm_up(self, sizes: list[int]) -> None:
        """Run each batch size once on this thread: cuDNN plans (and autotunes) per shape and
        per thread, and must never do so during a graph capture, nor later on a stream the
        pipeline waits for."""
        torch = self.torch
        shape = self.io.input.shape
        t0 = time.perf_counter()
        with GPU_GATE.work(), torch.cuda.device(self.device), torch.inference_mode():
            for b in sizes:
                t1 = time.perf_counter()
                x = torch.full((b, *shape), 114, dtype=torch.uint8, device=self.device)
                self.module(x)
                torch.cuda.synchronize(self.device)
                self.timings[f"warm_up_{b}_s"] = time.perf_counter() - t1
        self.timings["warm_up_s"] = self.timings.get("warm_up_s", 0.0) + time.perf_counter() - t0
        log.info(
            "torch executor on %s: warmed up batch sizes %s in %.1f s (import %.1f s, "
            "conversion %.1f s%s, letterbox kernel %.1f s)",
            self.device,
            list(sizes),
            time.perf_counter() - t0,
            self.timings["import_s"],
            self.timings["convert_s"],
            " from the cache" if self.timings["cached"] else "",
            self.timings["letterbox_s"],
        )

    def sizes_for_new_context(self) -> list[int]:
        """The graph sizes a new context captures at once: ``max_batch`` while the background
        thread will still add the others, else every size."""
        if self._later and (self._thread is None or self._thread.is_alive()):
            return [self.max_batch]
        return graph_sizes(self.max_batch)

    def _capture_later(self) -> None:
        """The background thread: warm up each remaining size (cuDNN plans per thread, and a
        capture pauses the process's GPU work, so the slow part comes first, outside it) and
        add its graphs to every context, smallest first (small batches are the common case of
        a lightly loaded process). A failure leaves the contexts with the graphs they have,
        which every batch fits."""
        t0 = time.perf_counter()
        try:
            for size in sorted(self._later):
                if self._closing.is_set():
                    return
                self._warm_up([size])
                for ctx in list(self.contexts):
                    ctx.capture_more([size])
            for ctx in list(self.contexts):  # contexts made while the sizes above were done
                ctx.capture_more(graph_sizes(self.max_batch))
        except Exception as exc:
            log.warning(
                "torch executor on %s: background graph capture stopped (%s); every batch "
                "runs the graphs captured so far",
                self.device,
                exc,
            )
            return
        self.timings["background_s"] = time.perf_counter() - t0
        log.info(
            "torch executor on %s: every graph size ready, %.1f s after the start",
            self.device,
            self.timings["background_s"],
        )

    def device_postprocess(self, decoder: str) -> TorchDevicePostprocess | None:
        """Decode, score filter and class-aware NMS on this GPU, for the model types that
        ``vidpipe.postprocess.gpu`` registers; others: None (the host postprocesses)."""
        if decoder not in GPU_POSTPROCESSORS or len(self.io.outputs) != 1:
            return None
        return TorchDevicePostprocess(self, GPU_POSTPROCESSORS[decoder])

    def create_context(self, stream: int, d_input: int, d_outputs: list[int]) -> TorchContext:
        return TorchContext(self, stream, d_input, d_outputs)

    def close(self) -> None:
        self._closing.set()
        if self._thread is not None:
            self._thread.join(30.0)
        self.module = None


class TorchDevicePostprocess:
    """``DevicePostprocess``: the I/O set's device output copy seen as a tensor (no copy),
    postprocessed by the model type's ``GpuPostprocess``. One per completion thread (it keeps
    per-call state)."""

    def __init__(self, ex: TorchExecutor, kind: type[GpuPostprocess]) -> None:
        self._ex = ex
        self._shape = ex.io.outputs[0].shape  # one frame's output
        h, w = ex.io.input.shape[:2]
        self._post = kind(ex.torch, ex.device, w, h, kind.classes_in(self._shape), 0.45)

    def __call__(
        self, d_outputs: list[int], batch: int, requests: list[PostprocessRequest]
    ) -> list[Detections]:
        torch = self._ex.torch
        out = torch.as_tensor(
            _DeviceArray(d_outputs[0], (batch, *self._shape), "<f4"), device=self._ex.device
        )
        masks = self._post.masks_for([r.class_ids for r in requests])
        self._post.iou_threshold = float(requests[0].iou_threshold)
        with GPU_GATE.work(), torch.cuda.device(self._ex.device), torch.inference_mode():
            return self._post(
                out, [r.letterbox for r in requests], [r.score_threshold for r in requests], masks
            )
