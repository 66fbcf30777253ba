"""Config validation of the GPU backends (types tensorrt and torch)."""

from __future__ import annotations

import pytest

from vidpipe.config import DEFAULT_ENGINE_CACHE, ConfigError, GpuAdvanced, GpuConfig, parse_config

BASE = "model:\n  path: m.onnx\n"


def parse(inference: str):
    return parse_config(BASE + "inference:\n" + inference, "test.yaml", env={})


def test_torch_backend_parses_with_defaults() -> None:
    cfg = parse("  type: torch\n")
    assert isinstance(cfg.inference, GpuConfig)
    inf, adv = cfg.inference, cfg.inference.advanced
    assert (inf.type, inf.devices, adv.streams, adv.max_batch) == ("torch", [0], 2, 8)
    assert adv.batch_timeout_ms == 5.0 and inf.precision == "f32"


def test_tensorrt_backend_takes_its_own_options() -> None:
    inf = parse(
        "  type: tensorrt\n  devices: [0, 1]\n  precision: f16\n  advanced:\n"
        "    max_batch: 64\n    workspace_mib: 2048\n    engine_cache_dir: /var/cache/vidpipe\n"
    ).inference
    assert isinstance(inf, GpuConfig)
    assert inf.devices == [0, 1] and inf.advanced.workspace == 2048
    assert inf.advanced.max_batch == 64
    assert str(inf.advanced.cache_dir) == "/var/cache/vidpipe"
    assert GpuConfig(type="tensorrt").advanced.cache_dir == DEFAULT_ENGINE_CACHE.expanduser()
    assert GpuAdvanced().workspace == 1024


ADV = "  type: torch\n  advanced:\n"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "  type: torch\n  devices: [0, 0]\n",
            "inference.devices (line 5): each device may appear once",
        ),
        ("  type: torch\n  devices: []\n", "inference.devices (line 5)"),
        ("  type: torch\n  devices: [-1]\n", "device indices must be >= 0"),
        (ADV + "    max_batch: 0\n", "inference.advanced.max_batch (line 6)"),
        (ADV + "    streams: 17\n", "inference.advanced.streams (line 6)"),
        (ADV + "    batch_timeout_ms: -1\n", "inference.advanced.batch_timeout_ms (line 6)"),
        ("  type: torch\n  precision: bf16\n", "inference.precision (line 5)"),
        (
            ADV + "    workspace_mib: 512\n",
            "inference.advanced.workspace_mib (line 6): applies to type tensorrt only, not torch",
        ),
        (
            "  type: tensorrt\n  advanced:\n    cuda_graphs: true\n",
            "inference.advanced.cuda_graphs (line 6): applies to type torch only, not tensorrt",
        ),
        (ADV + "    max_bacth: 4\n", "unknown key (did you mean 'max_batch'?)"),
        ("  type: torch\n  advanced: 4\n", "inference.advanced (line 5)"),
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
    assert isinstance(cfg.inference, GpuConfig) and cfg.inference.advanced.max_batch == 16


@pytest.mark.parametrize(
    "key", ["streams", "max_batch", "batch_timeout_ms", "workspace_mib", "cuda_graphs"]
)
def test_a_knob_at_the_top_of_an_old_config_says_where_it_moved(key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse(f"  type: torch\n  {key}: 1\n")
    assert f"inference.{key} (line 5): moved to inference.advanced.{key}" in str(err.value)
    assert "1 problem(s)" in str(err.value)
