"""Where the fused GPU letterbox kernel cannot be compiled, the torch executor keeps the
PyTorch form and says why. A fake ``torch`` stands in for a GPU build (none here); the
kernel itself is checked against the PyTorch form on the H200 (tests/gpu)."""

from __future__ import annotations

import contextlib
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from vidpipe.preprocess.gpu_kernel import compile_letterbox


def fake_torch(compile_kernel: Any = None) -> Any:
    entered: list[object] = []

    @contextlib.contextmanager
    def device(d: object) -> Any:
        entered.append(d)
        yield

    cuda = SimpleNamespace(device=device)
    if compile_kernel is not None:
        cuda._compile_kernel = compile_kernel  # type: ignore[attr-defined]
    return SimpleNamespace(cuda=cuda, __version__="2.7.0", entered=entered)


def test_a_torch_without_nvrtc_compilation_keeps_pytorch_ops() -> None:
    kernel, how = compile_letterbox(fake_torch(), "cuda:0")
    assert kernel is None
    assert how == "PyTorch ops (torch 2.7.0 has no NVRTC kernel compiler)"


def test_a_compile_error_is_logged_and_keeps_pytorch_ops(caplog: pytest.LogCaptureFixture) -> None:
    def refuse(source: str, name: str) -> None:
        raise RuntimeError("NVRTC error: NVRTC_ERROR_COMPILATION\nline 2 of the log")

    with caplog.at_level(logging.WARNING, logger="vidpipe.preprocess.gpu_kernel"):
        kernel, how = compile_letterbox(fake_torch(refuse), "cuda:1")
    assert kernel is None
    assert how == (
        "PyTorch ops (kernel not compiled: RuntimeError: NVRTC error: NVRTC_ERROR_COMPILATION)"
    )
    assert "NVRTC_ERROR_COMPILATION" in caplog.text and "line 2" not in how


def test_the_kernel_is_compiled_on_the_executors_device() -> None:
    seen: list[tuple[str, str]] = []
    torch = fake_torch(lambda source, name: seen.append((source, name)) or "compiled")
    kernel, how = compile_letterbox(torch, "cuda:3")
    assert (kernel, how) == ("compiled", "fused kernel (NVRTC)")
    assert torch.entered == ["cuda:3"]
    assert seen[0][1] == "nv12_letterbox" and "__global__ void nv12_letterbox(" in seen[0][0]
