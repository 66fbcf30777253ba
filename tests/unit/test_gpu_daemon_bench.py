"""The daemon camera-count bench's own arithmetic and configs (the bench runs on the H200)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from benchmarks.gpu_daemon import point_config, summarise


def _args(inference: str) -> argparse.Namespace:
    return argparse.Namespace(
        inference=inference,
        device=1,
        streams=2,
        max_batch=64,
        batch_timeout_ms=20.0,
        precision="f16",
        nvdec_group_size=4,
        nvdec_prefetch=3,
        nvdec_open_concurrency=5,
        nvdec_processes=2,
        shard_assignment="balanced",
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
    assert cfg.capture.nvdec_prefetch == 3, "--nvdec-prefetch reaches the daemon"
    assert cfg.capture.nvdec_open_concurrency == 5, "--nvdec-open-concurrency reaches it"
    assert cfg.capture.nvdec_processes == 2, "--nvdec-processes reaches the daemon"
    assert cfg.sharding.assignment == "balanced", "--shard-assignment reaches the daemon"
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


def test_snapshot_reads_every_camera_in_one_pass_as_get_sample_value_would() -> None:
    from benchmarks.gpu_daemon import _snapshot
    from vidpipe.metrics import Metrics

    metrics = Metrics()
    for i in range(5):
        metrics.frames_captured.labels(camera=f"cam{i}").inc(10 * i + 1)
        metrics.frames_inferred.labels(camera=f"cam{i}").inc(9 * i)
        metrics.e2e_latency.labels(camera=f"cam{i}").observe(0.03 * (i + 1))
    metrics.frames_dropped.labels(camera="cam1", reason="overwritten").inc(4)
    metrics.frames_dropped.labels(camera="cam3", reason="overwritten").inc(2)
    metrics.frames_captured.labels(camera="other").inc(99)  # not one of the bench's cameras
    for n in (8, 24):
        metrics.model("yolox").batch_size.observe(n)
    metrics.inference_latency.labels(model="yolox").observe(0.25)
    reg = metrics.registry
    calls: list[int] = []
    collect = reg.collect

    def counted_collect() -> Any:
        calls.append(1)
        return collect()

    reg.collect = counted_collect  # type: ignore[method-assign]

    got = _snapshot(reg, [f"cam{i}" for i in range(5)])

    assert len(calls) == 1, "one collect of the registry, whatever the camera count"
    reg.collect = collect  # type: ignore[method-assign]
    for i in range(5):
        labels = {"camera": f"cam{i}"}
        assert got["cams"][f"cam{i}"] == {
            "captured": reg.get_sample_value("vidpipe_frames_captured_total", labels),
            "inferred": reg.get_sample_value("vidpipe_frames_inferred_total", labels),
        }
    assert got["drops"] == {"overwritten": 6.0}
    assert (got["batches"], got["frames"]) == (2.0, 32.0)
    assert (got["infers"], got["infer_s"]) == (1.0, 0.25)
    assert got["buckets"][float("inf")] == 5.0 and got["buckets"][0.05] == 1.0


def _fake_mps_control(tmp_path: Path) -> Path:
    """A stand-in for the driver's nvidia-cuda-mps-control: it logs its arguments, what it
    read on stdin and the pipe directory it was given."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "nvidia-cuda-mps-control"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -d ]; then echo "start $CUDA_MPS_PIPE_DIRECTORY" >> "$MPS_FAKE_LOG";\n'
        'else echo "stdin $(cat) $CUDA_MPS_PIPE_DIRECTORY" >> "$MPS_FAKE_LOG"; fi\n'
    )
    fake.chmod(0o755)
    return bindir


def test_mps_starts_for_the_run_with_a_private_pipe_then_quits_fake_mps_control(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from benchmarks.gpu_daemon import mps_for_the_run

    log = tmp_path / "mps.log"
    monkeypatch.setenv("PATH", f"{_fake_mps_control(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("MPS_FAKE_LOG", str(log))
    monkeypatch.delenv("CUDA_MPS_PIPE_DIRECTORY", raising=False)
    with mps_for_the_run(True):
        pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]  # what the shards' processes inherit
        assert Path(pipe).is_dir() and "vidpipe-mps-" in pipe
        assert log.read_text().split() == ["start", pipe]
    assert log.read_text().splitlines()[1].split() == ["stdin", "quit", pipe]
    assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ, "the run's setting does not outlive it"
    assert not Path(pipe).exists()
    with mps_for_the_run(False):  # off: nothing is started
        assert "CUDA_MPS_PIPE_DIRECTORY" not in os.environ
    assert len(log.read_text().splitlines()) == 2


def test_mps_without_the_driver_tool_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.gpu_daemon import mps_for_the_run

    monkeypatch.setenv("PATH", str(tmp_path))
    with (
        pytest.raises(SystemExit, match="nvidia-cuda-mps-control is not on PATH"),
        mps_for_the_run(True),
    ):
        pass
