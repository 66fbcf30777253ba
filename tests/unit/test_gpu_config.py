"""Config validation of the GPU backends (types tensorrt and torch)."""

from __future__ import annotations

import pytest

from vidpipe.config import DEFAULT_ENGINE_CACHE, ConfigError, GpuConfig, parse_config

BASE = "model:\n  path: m.onnx\n"


def parse(inference: str):
    return parse_config(BASE + "inference:\n" + inference, "test.yaml", env={})


def test_torch_backend_parses_with_defaults() -> None:
    cfg = parse("  type: torch\n")
    assert isinstance(cfg.inference, GpuConfig)
    inf = cfg.inference
    assert (inf.type, inf.devices, inf.streams, inf.max_batch) == ("torch", [0], 2, 8)
    assert inf.batch_timeout_ms == 5.0 and inf.precision == "f32"


def test_tensorrt_backend_takes_its_own_options() -> None:
    inf = parse(
        "  type: tensorrt\n  devices: [0, 1]\n  max_batch: 64\n  precision: f16\n"
        "  workspace_mib: 2048\n  engine_cache_dir: /var/cache/vidpipe\n"
    ).inference
    assert isinstance(inf, GpuConfig)
    assert inf.devices == [0, 1] and inf.workspace == 2048
    assert str(inf.cache_dir) == "/var/cache/vidpipe"
    assert GpuConfig(type="tensorrt").cache_dir == DEFAULT_ENGINE_CACHE.expanduser()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "  type: torch\n  devices: [0, 0]\n",
            "inference.devices (line 5): each device may appear once",
        ),
        ("  type: torch\n  devices: []\n", "inference.devices (line 5)"),
        ("  type: torch\n  devices: [-1]\n", "device indices must be >= 0"),
        ("  type: torch\n  max_batch: 0\n", "inference.max_batch (line 5)"),
        ("  type: torch\n  streams: 17\n", "inference.streams (line 5)"),
        ("  type: torch\n  batch_timeout_ms: -1\n", "inference.batch_timeout_ms (line 5)"),
        ("  type: torch\n  precision: bf16\n", "inference.precision (line 5)"),
        ("  type: torch\n  workspace_mib: 512\n", "workspace_mib applies to type tensorrt only"),
        ("  type: torch\n  engine_cache_dir: /tmp\n", "engine_cache_dir applies to type tensorrt"),
        ("  type: tensorrt\n  cuda_graphs: true\n", "cuda_graphs applies to type torch only"),
        ("  type: torch\n  max_bacth: 4\n", "unknown key (did you mean 'max_batch'?)"),
        ("  type: cuda\n", "'openvino', 'tensorrt', 'torch'"),
    ],
)
def test_bad_gpu_config_is_refused_with_its_path(body: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(body)
    assert expected in str(err.value), str(err.value)


def test_openvino_stays_the_default_backend() -> None:
    cfg = parse_config(BASE, "test.yaml", env={})
    assert cfg.inference.type == "openvino"


def test_the_example_gpu_config_is_valid(assets_dir) -> None:
    from pathlib import Path

    from vidpipe.config import load_config

    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "configs" / "gpu.yaml", env={"VIDPIPE_ASSETS": str(assets_dir)})
    assert isinstance(cfg.inference, GpuConfig) and cfg.inference.max_batch == 16
