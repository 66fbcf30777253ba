"""The TensorRT executor's own logic with a fake ``tensorrt`` module (TensorRT is absent here).

What is faked is only the library: builder, parser, runtime, engine and context record what
they are asked and return what TensorRT documents (``build_serialized_network`` bytes or None,
``deserialize_cuda_engine`` an engine or None, booleans from the context). The real model,
the real ONNX rewrite and the real engine cache are used. Checked: the build options, the
cache (no second build), a refused cached engine rebuilt, the enqueue sequence, and FP16 on a
TensorRT without weak typing.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.fake_gpu import FakeGpuRuntime
from vidpipe.infer.base import BackendError

INPUT, OUTPUT = "images_u8_nhwc", "output"


class _Flag:
    FP16, TF32 = "FP16", "TF32"


def make_fake_tensorrt(version: str = "10.13.0", fp16_flag: bool = True) -> types.ModuleType:
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version  # type: ignore[attr-defined]
    log: dict[str, Any] = {"builds": 0, "deserialized": [], "calls": []}
    trt.log = log  # type: ignore[attr-defined]

    class ILogger:
        class Severity:
            INTERNAL_ERROR, ERROR, WARNING, INFO, VERBOSE = range(5)

        def __init__(self) -> None:
            pass

    class IProgressMonitor:
        def __init__(self) -> None:
            pass

    class Config:
        def __init__(self) -> None:
            self.flags: set[str] = set()
            self.pool: dict[str, int] = {}
            self.profiles: list[Any] = []
            self.progress_monitor = None

        def set_memory_pool_limit(self, kind: str, size: int) -> None:
            self.pool[kind] = size

        def set_flag(self, f: str) -> None:
            self.flags.add(f)

        def clear_flag(self, f: str) -> None:
            self.flags.discard(f)
            log["cleared"] = f

        def add_optimization_profile(self, p: Any) -> None:
            self.profiles.append(p)

    class Profile:
        def set_shape(self, name: str, lo: Any, opt: Any, hi: Any) -> None:
            log["profile"] = (name, tuple(lo), tuple(opt), tuple(hi))

    class Builder:
        def __init__(self, logger: Any) -> None:
            pass

        def create_network(self, flags: int) -> object:
            return object()

        def create_builder_config(self) -> Config:
            return Config()

        def create_optimization_profile(self) -> Profile:
            return Profile()

        def build_serialized_network(self, network: Any, config: Config) -> bytes:
            log["builds"] += 1
            log["flags"] = set(config.flags)
            log["workspace"] = config.pool.get("WORKSPACE")
            assert config.progress_monitor is not None
            return b"ENGINE:" + str(log["builds"]).encode()

    class OnnxParser:
        def __init__(self, network: Any, logger: Any) -> None:
            self.num_errors = 0

        def parse(self, data: bytes) -> bool:
            log["onnx_bytes"] = len(data)
            return True

    class Context:
        def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool:
            log["calls"].append(("shape", name, tuple(shape)))
            return True

        def set_tensor_address(self, name: str, ptr: int) -> bool:
            log["calls"].append(("address", name, ptr))
            return True

        def execute_async_v3(self, stream: int) -> bool:
            log["calls"].append(("execute", stream))
            return True

    class Engine:
        num_io_tensors = 2

        def get_tensor_name(self, i: int) -> str:
            return [INPUT, OUTPUT][i]

        def get_tensor_mode(self, name: str) -> str:
            return "INPUT" if name == INPUT else "OUTPUT"

        def get_tensor_dtype(self, name: str) -> str:
            return "UINT8" if name == INPUT else "FLOAT"

        def create_execution_context(self) -> Context:
            return Context()

    class Runtime:
        def __init__(self, logger: Any) -> None:
            pass

        def deserialize_cuda_engine(self, data: bytes) -> Engine | None:
            log["deserialized"].append(data)
            return Engine() if data.startswith(b"ENGINE:") else None

    trt.ILogger = ILogger  # type: ignore[attr-defined]
    trt.IProgressMonitor = IProgressMonitor  # type: ignore[attr-defined]
    trt.Builder = Builder  # type: ignore[attr-defined]
    trt.OnnxParser = OnnxParser  # type: ignore[attr-defined]
    trt.Runtime = Runtime  # type: ignore[attr-defined]
    trt.MemoryPoolType = types.SimpleNamespace(WORKSPACE="WORKSPACE")  # type: ignore[attr-defined]
    trt.TensorIOMode = types.SimpleNamespace(INPUT="INPUT")  # type: ignore[attr-defined]
    trt.DataType = types.SimpleNamespace(FLOAT="FLOAT")  # type: ignore[attr-defined]
    flags = _Flag if fp16_flag else types.SimpleNamespace(TF32="TF32")
    trt.BuilderFlag = flags  # type: ignore[attr-defined]
    return trt


@pytest.fixture
def fake_trt(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    trt = make_fake_tensorrt()
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    return trt


def executor(model: Path, cache: Path, precision: str = "f16") -> Any:
    from vidpipe.infer.tensorrt import TensorRTExecutor

    return TensorRTExecutor(model, FakeGpuRuntime(0), 8, precision, 512, cache)


def test_build_options_then_cache_hit_fake_tensorrt(
    fake_trt: Any, assets_dir: Path, tmp_path: Path
) -> None:
    model = assets_dir / "models" / "yolox_nano.onnx"
    ex = executor(model, tmp_path)
    log = fake_trt.log
    assert log["builds"] == 1
    assert log["profile"] == (INPUT, (1, 416, 416, 3), (8, 416, 416, 3), (8, 416, 416, 3))
    assert log["flags"] == {"FP16"} and log["workspace"] == 512 << 20
    assert log["onnx_bytes"] > 1_000_000  # the rewritten real model was parsed
    assert len(list(tmp_path.glob("yolox_nano-*.engine"))) == 1
    assert ex.info.runtime == "tensorrt 10.13.0"
    executor(model, tmp_path)  # same key: loaded from the cache, not built again
    assert log["builds"] == 1


def test_refused_cached_engine_is_rebuilt_fake_tensorrt(
    fake_trt: Any, assets_dir: Path, tmp_path: Path
) -> None:
    model = assets_dir / "models" / "yolox_nano.onnx"
    executor(model, tmp_path)
    engine = next(tmp_path.glob("*.engine"))
    size = engine.stat().st_size
    # A foreign engine of the same size (the sidecar still matches): TensorRT refuses it.
    engine.write_bytes(b"X" * size)
    executor(model, tmp_path)
    assert fake_trt.log["builds"] == 2
    assert engine.read_bytes().startswith(b"ENGINE:")


def test_enqueue_sets_shape_addresses_then_executes_fake_tensorrt(
    fake_trt: Any, assets_dir: Path, tmp_path: Path
) -> None:
    ex = executor(assets_dir / "models" / "yolox_nano.onnx", tmp_path, "f32")
    assert fake_trt.log["cleared"] == "TF32"  # f32 means no TF32
    ctx = ex.create_context(77, 1000, [2000])
    fake_trt.log["calls"].clear()
    ctx.enqueue(3)
    ctx.enqueue(3)
    assert fake_trt.log["calls"] == [
        ("shape", INPUT, (3, 416, 416, 3)),
        ("address", INPUT, 1000),
        ("address", OUTPUT, 2000),
        ("execute", 77),
        ("address", INPUT, 1000),  # same batch: no new shape, addresses bound again
        ("address", OUTPUT, 2000),
        ("execute", 77),
    ]


def test_fp16_without_weak_typing_is_explained_fake_tensorrt(
    monkeypatch: pytest.MonkeyPatch, assets_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_tensorrt("11.4.0", fp16_flag=False))
    with pytest.raises(BackendError, match=r"TensorRT 11.4.0 has no FP16 builder flag"):
        executor(assets_dir / "models" / "yolox_nano.onnx", tmp_path, "f16")
