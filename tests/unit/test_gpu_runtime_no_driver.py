"""cuda-python on a machine without an NVIDIA driver: imports, then fails clearly."""

from __future__ import annotations

import pytest

from vidpipe.infer import cuda_rt
from vidpipe.infer.base import BackendError


def _has_gpu() -> bool:
    try:
        return cuda_rt.device_count() > 0
    except BackendError:
        return False


pytestmark = pytest.mark.skipif(_has_gpu(), reason="this machine has a CUDA device")


def test_cuda_python_imports_without_a_driver() -> None:
    rt = cuda_rt.runtime_module()
    assert hasattr(rt, "cudaMallocHost")
    from cuda.bindings import runtime  # noqa: F401  (the import itself must not raise)


def test_cuda_calls_fail_with_a_named_error_without_a_driver() -> None:
    with pytest.raises(cuda_rt.CudaError) as err:
        cuda_rt.device_count()
    assert err.value.name in {"cudaErrorInsufficientDriver", "cudaErrorNoDevice"}
    assert "cudaGetDeviceCount failed" in str(err.value)
    assert not err.value.sticky


def test_gpu_backend_without_a_driver_is_a_backend_error(assets_dir) -> None:
    from vidpipe.infer.gpu import GpuConfig, build_gpu_backend

    with pytest.raises(BackendError, match="cudaGetDeviceCount failed"):
        build_gpu_backend(assets_dir / "models" / "yolox_nano.onnx", GpuConfig(type="torch"))


@pytest.mark.parametrize(
    ("name", "sticky"),
    [
        ("cudaErrorIllegalAddress", True),
        ("cudaErrorLaunchFailure", True),
        ("cudaErrorMemoryAllocation", False),
        ("cudaErrorInvalidValue", False),
    ],
)
def test_sticky_errors_are_classified(name: str, sticky: bool) -> None:
    assert cuda_rt.CudaError("x", name, "text").sticky is sticky
