"""The GPU inference backends' factory (types ``tensorrt`` and ``torch``).

Both run on the stream set (``streamset.py``); they differ only in the executor. Their config,
``GpuConfig``, is in ``vidpipe.config.inference``. This module imports nothing heavy:
cuda-python, PyTorch and TensorRT are imported when a backend is built.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from vidpipe.config import GpuConfig
from vidpipe.infer.base import BackendError

if TYPE_CHECKING:
    from vidpipe.infer.cuda_rt import CudaRuntime
    from vidpipe.infer.gpu_base import BatchExecutor
    from vidpipe.infer.streamset import StreamSetBackend

log = logging.getLogger(__name__)


def build_gpu_backend(model_path: Path, cfg: GpuConfig) -> StreamSetBackend:
    """A ``StreamSetBackend`` with one stream set per configured GPU.

    Raises:
        BackendError: a missing package, device or model problem, with a clear message.
    """
    from vidpipe.infer.cuda_rt import CudaRuntime
    from vidpipe.infer.streamset import StreamSetBackend

    devices: list[tuple[CudaRuntime, BatchExecutor]] = []
    try:
        for dev in cfg.devices:
            rt = CudaRuntime(dev)
            devices.append((rt, make_executor(model_path, rt, cfg, background=True)))
    except BaseException:
        for _, ex in devices:
            ex.close()
        raise
    adv = cfg.advanced
    backend = StreamSetBackend(devices, adv.streams, adv.batch_timeout_ms)
    log.info(
        "GPU backend %s on %s, %d stream(s) per GPU", cfg.type, backend.info.device, adv.streams
    )
    return backend


def make_executor(
    model_path: Path, rt: CudaRuntime, cfg: GpuConfig, background: bool = False
) -> BatchExecutor:
    """The executor named by ``cfg.type`` for one device; ``background``: a service's start,
    where what can wait (torch: the CUDA graphs of all but the largest batch) is done while
    the cameras run."""
    adv = cfg.advanced
    if cfg.type == "torch":
        from vidpipe.infer.torch_executor import TorchExecutor

        return TorchExecutor(
            model_path,
            rt.device,
            adv.max_batch,
            cfg.precision,
            adv.cuda_graphs is not False,
            cache_dir=adv.cache_dir,
            background=background,
        )
    if cfg.type == "tensorrt":
        from vidpipe.infer.tensorrt import TensorRTExecutor

        return TensorRTExecutor(
            model_path, rt, adv.max_batch, cfg.precision, adv.workspace, adv.cache_dir
        )
    raise BackendError(f"unknown GPU backend {cfg.type!r}")  # pragma: no cover
