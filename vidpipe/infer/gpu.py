"""The GPU inference backends' config and factory (types ``tensorrt`` and ``torch``).

Both run on the stream set (``streamset.py``); they differ only in the executor. The config
lives here, beside its code, and joins the ``inference:`` union in ``vidpipe.config``. This
module imports nothing heavy: cuda-python, PyTorch and TensorRT are imported when a backend
is built.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vidpipe.infer.base import BackendError

if TYPE_CHECKING:
    from vidpipe.infer.cuda_rt import CudaRuntime
    from vidpipe.infer.gpu_base import BatchExecutor
    from vidpipe.infer.streamset import StreamSetBackend

log = logging.getLogger(__name__)

DEFAULT_ENGINE_CACHE = Path("~/.cache/vidpipe/engines")


class GpuConfig(BaseModel):
    """GPU stream-set backend: TensorRT engines, or the ONNX model run by PyTorch."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    type: Literal["tensorrt", "torch"] = Field(
        description="tensorrt: TensorRT engine (built and cached); torch: the ONNX model "
        "converted with onnx2torch and run by PyTorch"
    )
    devices: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="CUDA device indices; one stream set each, batches go to the least loaded",
    )
    streams: int = Field(2, ge=1, le=16, description="slots (CUDA streams) per GPU")
    max_batch: int = Field(
        8, ge=1, le=256, description="frames gathered across cameras into one batch"
    )
    batch_timeout_ms: float = Field(
        5.0, ge=0, le=1000, description="an incomplete batch is dispatched after this long"
    )
    precision: Literal["f32", "tf32", "f16"] = Field(
        "f32", description="f32 (full float32), tf32 (TF32 matmul/conv) or f16 (half)"
    )
    workspace_mib: int | None = Field(
        None, ge=16, description="TensorRT builder workspace limit, MiB (tensorrt only; 1024)"
    )
    cuda_graphs: bool | None = Field(
        None,
        description="torch only: capture the model as CUDA graphs per slot (default true); "
        "false runs it eagerly, whose Python holds the GIL for milliseconds per batch",
    )
    engine_cache_dir: Path | None = Field(
        None,
        description=f"where built engines are kept (tensorrt only; {DEFAULT_ENGINE_CACHE})",
    )

    @field_validator("devices")
    @classmethod
    def _distinct_devices(cls, v: list[int]) -> list[int]:
        if any(d < 0 for d in v):
            raise ValueError(f"device indices must be >= 0, got {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"each device may appear once, got {v}")
        return v

    @model_validator(mode="after")
    def _tensorrt_only(self) -> GpuConfig:
        if self.type == "torch":
            for name in ("workspace_mib", "engine_cache_dir"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} applies to type tensorrt only, not torch")
        elif self.cuda_graphs is not None:
            raise ValueError("cuda_graphs applies to type torch only, not tensorrt")
        return self

    @property
    def workspace(self) -> int:
        return self.workspace_mib or 1024

    @property
    def cache_dir(self) -> Path:
        return (self.engine_cache_dir or DEFAULT_ENGINE_CACHE).expanduser()


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
            devices.append((rt, make_executor(model_path, rt, cfg)))
    except BaseException:
        for _, ex in devices:
            ex.close()
        raise
    names = ", ".join(f"cuda:{rt.device} {rt.name}" for rt, _ in devices)
    desc = {
        **devices[0][1].description,
        "device": names,
        "hint": f"max_batch {cfg.max_batch}, timeout {cfg.batch_timeout_ms:g} ms",
        "streams": str(cfg.streams * len(devices)),
        "input": f"u8 NHWC {[1, *devices[0][1].io.input.shape]}",
    }
    log.info("GPU backend %s on %s, %d stream(s) per GPU", cfg.type, names, cfg.streams)
    return StreamSetBackend(devices, cfg.streams, cfg.batch_timeout_ms, desc)


def make_executor(model_path: Path, rt: CudaRuntime, cfg: GpuConfig) -> BatchExecutor:
    """The executor named by ``cfg.type`` for one device."""
    if cfg.type == "torch":
        from vidpipe.infer.torch_executor import TorchExecutor

        return TorchExecutor(
            model_path, rt.device, cfg.max_batch, cfg.precision, cfg.cuda_graphs is not False
        )
    if cfg.type == "tensorrt":
        from vidpipe.infer.tensorrt import TensorRTExecutor

        return TensorRTExecutor(
            model_path, rt, cfg.max_batch, cfg.precision, cfg.workspace, cfg.cache_dir
        )
    raise BackendError(f"unknown GPU backend {cfg.type!r}")  # pragma: no cover
