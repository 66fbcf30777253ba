"""Without TensorRT the tensorrt backend and build-engine fail with a clear message."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from vidpipe.cli import main
from vidpipe.infer.base import BackendError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed here"
)


def test_import_tensorrt_says_what_to_do() -> None:
    from vidpipe.infer.tensorrt import import_tensorrt

    with pytest.raises(BackendError, match=r"needs NVIDIA TensorRT 10 or 11.*use type 'torch'"):
        import_tensorrt()


def test_build_engine_refuses_a_non_tensorrt_config(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model:\n  path: m.onnx\ninference:\n  type: torch\n")
    assert main(["build-engine", "--config", str(cfg)]) == 2
    assert "build-engine needs 'tensorrt'" in capsys.readouterr().err


def test_build_engine_without_a_gpu_or_tensorrt_exits_2(tmp_path: Path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("model:\n  path: m.onnx\ninference:\n  type: tensorrt\n")
    assert main(["build-engine", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "cudaGetDeviceCount failed" in err or "TensorRT" in err
