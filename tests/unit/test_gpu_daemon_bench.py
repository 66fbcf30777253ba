"""The daemon camera-count bench's own arithmetic and configs (the bench runs on the H200)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from vidpipe.bench.gpu_daemon import point_config, quantile, summarise


def test_quantile_between_two_snapshots_of_cumulative_buckets() -> None:
    before = {0.05: 10.0, 0.1: 10.0, 0.2: 10.0, float("inf"): 10.0}
    after = {0.05: 60.0, 0.1: 100.0, 0.2: 109.0, float("inf"): 110.0}  # 100 new observations
    assert quantile(before, after, 0.5) == 0.05
    assert quantile(before, after, 0.9) == 0.1
    assert quantile(before, after, 0.95) == 0.2
    assert quantile(before, after, 1.0) == float("inf")
    assert quantile(after, after, 0.95) is None


def _args(inference: str) -> argparse.Namespace:
    return argparse.Namespace(
        inference=inference,
        device=1,
        streams=2,
        max_batch=64,
        batch_timeout_ms=20.0,
        precision="f16",
        nvdec_group_size=4,
        clip=Path("/clips/c.mp4"),
        model=Path("/m/yolox_nano.onnx"),
        labels=Path("/m/coco80.txt"),
    )


def test_point_configs_are_real_time_looping_cameras_on_the_chosen_decoder(tmp_path: Path) -> None:
    cfg = point_config(_args("torch"), "nvdec", 3, tmp_path / "r.jsonl")
    assert [c.name for c in cfg.cameras] == ["cam0", "cam1", "cam2"]
    assert all(c.realtime and c.loop and c.gpu == 1 for c in cfg.cameras)
    assert all(cfg.decoder_of(c) == "nvdec" for c in cfg.cameras)
    assert cfg.capture.nvdec_group_size == 4, "--nvdec-group-size reaches the daemon"
    cpu = point_config(_args("torch"), "pyav", 2, tmp_path / "r.jsonl")
    assert all(cpu.decoder_of(c) == "pyav" and c.gpu is None for c in cpu.cameras)
    with pytest.raises(ValueError, match="nvdec"):
        point_config(_args("openvino"), "nvdec", 1, tmp_path / "r.jsonl")


def _raw(shares: list[float], buckets: dict[float, float], cores: float) -> dict[str, object]:
    return {
        "shares": shares,
        "buckets": buckets,
        "batches": 10.0,
        "frames": 320.0,
        "infer_s": 0.1,
        "infers": 10.0,
        "cores": cores,
        "memory": 2.0 * 2**20,
        "gpu_util": {"sm": 30.0},
        "threads": {"native": cores / 2, "capture-cam#-reader-#": cores / 2},
        "drops": {"overwritten": 3.0},
    }


def test_shards_pool_into_one_point_worst_camera_one_histogram_summed_cores() -> None:
    inf = float("inf")
    fast = _raw([1.0, 0.995], {0.05: 90.0, 0.1: 100.0, 0.2: 100.0, inf: 100.0}, 0.5)
    slow = _raw([0.999], {0.05: 0.0, 0.1: 0.0, 0.2: 10.0, inf: 10.0}, 0.75)
    point = summarise("nvdec", 3, [fast, slow])
    assert point["cameras_per_process"] == [2, 1]
    assert point["worst_share"] == 0.995 and point["holds"] is True
    # 110 observations pooled: the 95th (104.5) lies in the 0.2 s bucket, which only the
    # slow shard filled; neither shard's own p95 says so for the fast one.
    assert point["p95_latency_s"] == 0.2
    assert point["host_cores"] == 1.25 and point["thread_cores"]["native"] == 0.625
    assert point["mean_batch"] == 32.0 and point["infer_ms"] == 10.0
    assert point["drops"] == {"overwritten": 6}
    late = _raw([0.98], {0.05: 10.0, 0.1: 10.0, 0.2: 10.0, inf: 10.0}, 0.1)
    assert summarise("nvdec", 3, [fast, late])["holds"] is False  # one camera below 99 %
