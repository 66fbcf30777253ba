"""tests/gpu: run on a machine with an NVIDIA GPU (scripts/gpu-tests.sh). Skipped elsewhere.

Tests that take the ``torch_device`` fixture run their tensors on ``$VIDPIPE_TORCH_DEVICE``
(default ``cuda:0``). With ``VIDPIPE_TORCH_DEVICE=cpu`` and a CPU build of PyTorch they run
without a GPU too (the GPU postprocessing against the CPU decoders); the rest stay skipped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest


def _cuda_devices() -> int:
    try:
        from vidpipe.infer.cuda_rt import device_count

        return device_count()
    except Exception:
        return 0


DEVICES = _cuda_devices()
TORCH_DEVICE = os.environ.get("VIDPIPE_TORCH_DEVICE", "cuda:0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="no CUDA device (cuda-python found no GPU or no driver)")
    here = Path(__file__).parent
    for item in items:
        on_cpu = TORCH_DEVICE == "cpu" and "torch_device" in getattr(item, "fixturenames", ())
        if DEVICES == 0 and here in Path(str(item.fspath)).parents and not on_cpu:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def torch_device() -> Any:
    """The device the test's tensors live on (``$VIDPIPE_TORCH_DEVICE``, default cuda:0)."""
    torch = pytest.importorskip("torch")
    return torch.device(TORCH_DEVICE)


@pytest.fixture(scope="session")
def model_path(assets_dir: Path) -> Path:
    return assets_dir / "models" / "yolox_nano.onnx"


@pytest.fixture(scope="module")
def clip(assets_dir: Path) -> Path:
    """The H.264 clip the NVDEC tests decode: ``$VIDPIPE_GPU_CLIP`` (the 1080p25 clip of
    scripts/gpu-clip.sh), else the assets' car clip."""
    env = os.environ.get("VIDPIPE_GPU_CLIP")
    # absolute: the daemon tests run `vidpipe run` in a directory of their own
    return Path(env).resolve() if env else assets_dir / "videos" / "car-detection.mp4"
