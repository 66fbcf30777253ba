"""The converted-model cache of the torch backend (runs on CPU tensors too: make
test-torch-cpu)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vidpipe.infer.torch_cache import cached_module

pytestmark = pytest.mark.gpu


def _key(sha: str = "a" * 64) -> dict[str, Any]:
    return {"model_sha256": sha, "precision": "f16", "torch": "2", "onnx2torch": "1", "prep": 1}


def test_a_converted_module_is_kept_and_loaded_back_with_the_same_outputs_gpu(
    tmp_path: Path, torch_device: Any
) -> None:
    torch = pytest.importorskip("torch")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")
    calls = []

    def convert() -> Any:
        calls.append(1)
        torch.manual_seed(len(calls))
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU())

    first, cached = cached_module(tmp_path / "cache", model, _key(), torch, convert)
    assert not cached and calls == [1]
    again, cached = cached_module(tmp_path / "cache", model, _key(), torch, convert)
    assert cached and calls == [1]  # not converted again
    x = torch.rand(1, 3, 8, 8)
    assert torch.equal(first(x), again(x))
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".json", ".pt"]

    _, cached = cached_module(tmp_path / "cache", model, _key("b" * 64), torch, convert)
    assert not cached and calls == [1, 1]  # another model's key: converted


def test_an_unreadable_cache_file_is_converted_again_gpu(tmp_path: Path, torch_device: Any) -> None:
    torch = pytest.importorskip("torch")
    model = tmp_path / "m.onnx"
    model.write_bytes(b"onnx")

    def convert() -> Any:
        return torch.nn.Identity()

    cached_module(tmp_path, model, _key(), torch, convert)
    (pt,) = tmp_path.glob("*.pt")
    pt.write_bytes(b"truncated")
    module, cached = cached_module(tmp_path, model, _key(), torch, convert)
    assert not cached and isinstance(module, torch.nn.Identity)
    _, cached = cached_module(tmp_path, model, _key(), torch, convert)
    assert cached  # written again
