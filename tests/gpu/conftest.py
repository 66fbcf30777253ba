"""tests/gpu: run on a machine with an NVIDIA GPU (scripts/gpu-tests.sh). Skipped elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest


def _cuda_devices() -> int:
    try:
        from vidpipe.infer.cuda_rt import device_count

        return device_count()
    except Exception:
        return 0


DEVICES = _cuda_devices()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="no CUDA device (cuda-python found no GPU or no driver)")
    here = Path(__file__).parent
    for item in items:
        if DEVICES == 0 and here in Path(str(item.fspath)).parents:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def model_path(assets_dir: Path) -> Path:
    return assets_dir / "models" / "yolox_nano.onnx"
