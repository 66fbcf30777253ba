"""The TensorRT engine cache: key, atomic files, refusal of what does not match."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vidpipe.infer.engine_cache import EngineCache, EngineKey, file_sha256

KEY = EngineKey(
    model_sha256="ab" * 32,
    tensorrt_version="10.13.0",
    gpu_name="NVIDIA H200",
    compute_capability="9.0",
    precision="f16",
    min_batch=1,
    opt_batch=8,
    max_batch=8,
    workspace_mib=1024,
)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model_sha256", "cd" * 32),
        ("tensorrt_version", "11.4.0"),
        ("gpu_name", "NVIDIA L4"),
        ("compute_capability", "8.9"),
        ("precision", "f32"),
        ("max_batch", 16),
        ("opt_batch", 4),
        ("workspace_mib", 2048),
    ],
)
def test_every_key_field_changes_the_file(field: str, value: object, tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    other = dataclasses.replace(KEY, **{field: value})
    assert cache.path_for("m", other) != cache.path_for("m", KEY)


def test_store_then_load_round_trips(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path / "engines")
    path = cache.store("yolox", KEY, b"engine-bytes")
    assert path.parent == tmp_path / "engines" and path.suffix == ".engine"
    assert cache.load("yolox", KEY) == b"engine-bytes"
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_a_changed_or_truncated_file_is_not_loaded(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    path = cache.store("yolox", KEY, b"engine-bytes")
    path.write_bytes(b"engine")  # truncated: size no longer matches the sidecar
    assert cache.load("yolox", KEY) is None
    path.with_suffix(".json").write_text("{not json")
    assert cache.load("yolox", KEY) is None


def test_discard_removes_engine_and_sidecar(tmp_path: Path) -> None:
    cache = EngineCache(tmp_path)
    path = cache.store("yolox", KEY, b"x")
    cache.discard("yolox", KEY)
    assert not path.exists() and not path.with_suffix(".json").exists()
    cache.discard("yolox", KEY)  # nothing left: no error
    assert cache.load("yolox", KEY) is None


def test_file_sha256(tmp_path: Path) -> None:
    p = tmp_path / "m.onnx"
    p.write_bytes(b"abc")
    assert file_sha256(p) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
