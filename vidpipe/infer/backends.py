"""The inference backend types: one registration each, and ``build_backend``.

Every factory imports its backend's module when called: OpenVINO, cuda-python, PyTorch and
TensorRT are heavy, and a deployment uses one of them. The config class of each type is
declared in ``vidpipe.config.inference``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from vidpipe.config import BACKENDS, GpuConfig, InferenceConfig, OpenVINOConfig
from vidpipe.infer.base import BackendError, InferenceBackend
from vidpipe.preprocess.letterbox import DEFAULT_INPUT, ModelInput

_C = TypeVar("_C", contravariant=True)


class BackendFactory(Protocol[_C]):
    """``factory(model_path, cfg, model_input, input_size)``: ``model_input`` is the model
    type's input (letterbox placement, pad, normalisation), which the backend's buffers and
    graph follow; ``input_size`` the ``(width, height)`` to run the model at (None: its own)."""

    def __call__(
        self, model_path: Path, cfg: _C, model_input: ModelInput, input_size: tuple[int, int] | None
    ) -> InferenceBackend: ...


def register_backend(*types: str) -> Callable[[BackendFactory[_C]], BackendFactory[_C]]:
    """Decorator: the factory of the backend ``types`` (declared in ``vidpipe.config``)."""
    return BACKENDS.register(*types)


@register_backend("openvino")
def _openvino(
    model_path: Path,
    cfg: OpenVINOConfig,
    model_input: ModelInput,
    input_size: tuple[int, int] | None,
) -> InferenceBackend:
    from vidpipe.infer.openvino import OpenVINOBackend

    return OpenVINOBackend(model_path, cfg, model_input=model_input, input_size=input_size)


@register_backend("tensorrt", "torch")
def _gpu(
    model_path: Path, cfg: GpuConfig, model_input: ModelInput, input_size: tuple[int, int] | None
) -> InferenceBackend:
    # Config validation refuses both already; this is for callers that build a backend
    # without a validated Config.
    if input_size is not None:
        raise BackendError(
            f"inference type {cfg.type!r} runs the model at the size it was exported with; "
            f"it cannot reshape it to {input_size[0]}x{input_size[1]}"
        )
    if model_input != DEFAULT_INPUT:
        raise BackendError(
            f"inference type {cfg.type!r} letterboxes top-left with pad 114 and 0-255 pixels "
            f"only; this model wants {model_input.describe()} (use inference type openvino)"
        )
    from vidpipe.infer.gpu import build_gpu_backend

    return build_gpu_backend(model_path, cfg)


def build_backend(
    model_path: Path,
    cfg: InferenceConfig,
    model_input: ModelInput = DEFAULT_INPUT,
    input_size: tuple[int, int] | None = None,
) -> InferenceBackend:
    """The backend registered for ``cfg.type``, over the model at ``model_path`` run at
    ``input_size`` (None: the model's own), fed as ``model_input`` says."""
    factory: BackendFactory[InferenceConfig] = BACKENDS.factory(cfg.type)
    return factory(model_path, cfg, model_input, input_size)
