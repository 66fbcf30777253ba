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
import time
from pathlib import Path
from typing import Any

from vidpipe.infer import onnx_prep
from vidpipe.infer.base import BackendError
from vidpipe.infer.gpu_base import ExecutorInfo
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

    The graphs are captured when the context is made, before any camera starts. Captured in
    the background while NVDEC cameras decoded, the capture was invalidated by the cameras'
    stream work, and their copies failed (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``), on
    the H200 (``benchmarks/results/gpu/overload-h200-background-capture.jsonl``).
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
        self._graphs: dict[int, Any] = {}
        self._held: collections.deque[tuple[Any, list[Any]]] = collections.deque()
        if ex.cuda_graphs:
            self._capture()

    def _run(self, batch: int) -> None:
        ys = self._ex.module(self._input[:batch])
        if isinstance(ys, self._ex.torch.Tensor):
            ys = (ys,)
        for dst, y in zip(self._outputs, ys, strict=True):
            dst[:batch].copy_(y)

    def _capture(self) -> None:
        """Capture every graph size, largest first, sharing one memory pool per slot."""
        torch = self._ex.torch
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream(device=self._ex.device)
        with torch.cuda.device(self._ex.device), torch.inference_mode():
            for size in sorted(graph_sizes(self._ex.max_batch), reverse=True):
                with torch.cuda.stream(side):
                    self._run(size)  # eager first: lazy initialisation must not be captured
                side.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(
                    graph, pool=pool, stream=side, capture_error_mode="thread_local"
                ):
                    self._run(size)
                self._graphs[size] = graph
            side.synchronize()
        self._sizes = sorted(self._graphs)

    def enqueue(self, batch: int) -> None:
        """Queue the model on the slot's stream; returns once the work is queued."""
        torch = self._ex.torch
        with torch.cuda.device(self._ex.device), torch.cuda.stream(self.stream):
            if self._graphs:
                size = next(s for s in self._sizes if s >= batch)
                self._graphs[size].replay()
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
        with torch.cuda.device(self._ex.device), torch.cuda.stream(self.stream):
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
        self.stream.synchronize()  # the held pictures' readers have run
        self._held.clear()
        self._graphs = {}
        self._input = None
        self._outputs = []


class TorchExecutor:
    """The ONNX model as a PyTorch module on one CUDA device (``BatchExecutor``)."""

    def __init__(
        self,
        model_path: Path,
        device: int,
        max_batch: int,
        precision: str,
        cuda_graphs: bool = True,
    ) -> None:
        self.torch = torch = _torch()
        self.cuda_graphs = cuda_graphs
        try:
            import onnx2torch
        except ImportError as exc:
            raise BackendError(f"inference type 'torch' needs onnx2torch ({exc})") from None
        self.device = torch.device("cuda", device)
        self.max_batch = max_batch
        model, self.io = onnx_prep.prepare(
            onnx_prep.load_model(model_path), model_path, "f16" if precision == "f16" else "f32"
        )
        try:
            module = onnx2torch.convert(model)
        except Exception as exc:
            raise BackendError(f"onnx2torch cannot convert {model_path}: {exc}") from None
        module = module.eval().to(self.device)
        if precision == "f16":
            module = module.half()
        self._keep_shape_buffers_on_host(module)
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        self.module = module
        self.precision = precision
        # NVDEC pictures are letterboxed on the GPU: one fused kernel where it compiles
        self.letterbox_kernel, letterbox = compile_letterbox(torch, self.device)
        self.info = ExecutorInfo(
            backend="torch",
            model=model_path.name,
            precision=precision,
            runtime=f"onnx2torch {getattr(onnx2torch, '__version__', '?')}, "
            f"torch {torch.__version__}, cuda graphs {'on' if cuda_graphs else 'off'}, "
            f"gpu letterbox {letterbox}",
        )
        self._warm_up()

    @staticmethod
    def _keep_shape_buffers_on_host(module: Any) -> None:
        for owner in module.modules():
            for name, buf in list(owner.named_buffers(recurse=False)):
                if buf is not None and buf.numel() <= _SMALL_BUFFER:
                    setattr(owner, name, buf.cpu())

    def _warm_up(self) -> None:
        """Every batch size that will run once: cuDNN autotunes per shape (never during a
        graph capture, nor later on a stream the pipeline waits for)."""
        torch = self.torch
        shape = self.io.input.shape
        t0 = time.perf_counter()
        sizes = graph_sizes(self.max_batch) if self.cuda_graphs else range(1, self.max_batch + 1)
        with torch.cuda.device(self.device), torch.inference_mode():
            for b in sizes:
                x = torch.full((b, *shape), 114, dtype=torch.uint8, device=self.device)
                self.module(x)
            torch.cuda.synchronize(self.device)
        log.info(
            "torch executor on %s: warmed up batch sizes %s in %.1f s",
            self.device,
            list(sizes),
            time.perf_counter() - t0,
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
        with torch.cuda.device(self._ex.device), torch.inference_mode():
            return self._post(
                out, [r.letterbox for r in requests], [r.score_threshold for r in requests], masks
            )
