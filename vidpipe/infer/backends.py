"""The inference backend types: one registration each, and ``build_backend``.

Every factory imports its backend's module when called: OpenVINO, cuda-python, PyTorch and
TensorRT are heavy, and a deployment uses one of them. The config class of each type is
declared in ``vidpipe.config.inference``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from vidpipe.config import BACKENDS, GpuConfig, InferenceConfig, OpenVINOConfig
from vidpipe.infer.base import InferenceBackend

_C = TypeVar("_C")
BackendFactory = Callable[[Path, _C], InferenceBackend]


def register_backend(*types: str) -> Callable[[BackendFactory[_C]], BackendFactory[_C]]:
    """Decorator: the factory of the backend ``types`` (declared in ``vidpipe.config``)."""
    return BACKENDS.register(*types)


@register_backend("openvino")
def _openvino(model_path: Path, cfg: OpenVINOConfig) -> InferenceBackend:
    from vidpipe.infer.openvino import OpenVINOBackend

    return OpenVINOBackend(model_path, cfg)


@register_backend("tensorrt", "torch")
def _gpu(model_path: Path, cfg: GpuConfig) -> InferenceBackend:
    from vidpipe.infer.gpu import build_gpu_backend

    return build_gpu_backend(model_path, cfg)


def build_backend(model_path: Path, cfg: InferenceConfig) -> InferenceBackend:
    """The backend registered for ``cfg.type``, over the model at ``model_path``."""
    factory: BackendFactory[InferenceConfig] = BACKENDS.factory(cfg.type)
    return factory(model_path, cfg)
