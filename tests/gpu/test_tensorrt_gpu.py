"""TensorRT executor and engine cache on a real GPU: run only where tensorrt is importable."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip(
    "tensorrt", reason="TensorRT is not installed here (its PyPI wheels download from NVIDIA)"
)

from tests.lending import lend_and_submit
from vidpipe.config import GpuAdvanced
from vidpipe.infer.cuda_rt import CudaRuntime
from vidpipe.infer.engine_cache import EngineCache
from vidpipe.infer.gpu import GpuConfig, build_gpu_backend
from vidpipe.infer.tensorrt import TensorRTExecutor

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(1200)]


def test_engine_is_built_cached_and_rebuilt_when_foreign_gpu(model_path: Path, tmp_path: Path):
    rt = CudaRuntime(0)
    ex = TensorRTExecutor(model_path, rt, 4, "f32", 1024, tmp_path)
    engines = list(tmp_path.glob("*.engine"))
    assert len(engines) == 1
    ex.close()
    engines[0].write_bytes(b"not an engine")
    (tmp_path / engines[0].with_suffix(".json").name).unlink()
    ex = TensorRTExecutor(model_path, rt, 4, "f32", 1024, tmp_path)  # rebuilt, no crash
    assert engines[0].stat().st_size > 1000
    ex.close()
    assert EngineCache(tmp_path).directory == tmp_path


def test_tensorrt_backend_runs_batches_gpu(model_path: Path, tmp_path: Path) -> None:
    backend = build_gpu_backend(
        model_path,
        GpuConfig(type="tensorrt", advanced=GpuAdvanced(max_batch=4, engine_cache_dir=tmp_path)),
    )
    out = []
    try:
        for _ in range(8):
            lend_and_submit(backend, np.full((1, 416, 416, 3), 114, np.uint8), None, out.append)
        assert backend.drain(30)
        assert len(out) == 8 and all(c.error is None for c in out)
    finally:
        backend.close()
