"""A box of several GPUs: each process on one GPU, its NVDEC cameras decoding there.

No GPU is touched: the plan, the per-process config and the children's command lines are
pure functions of the config (the H200 runs of tests/gpu exercise one GPU's daemon)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_cli import vidpipe
from vidpipe.cli import _print_processes
from vidpipe.config import Config, ConfigError
from vidpipe.reload import on_gpu
from vidpipe.supervisor.children import Children
from vidpipe.supervisor.plan import (
    CAMERAS_PER_PROCESS,
    placed_gpus,
    placement_problems,
    plan_processes,
    process_count,
)
from vidpipe.supervisor.runtime import SupervisorRuntime


def doc(cameras: int, devices: list[int], processes: Any = "auto", **camera: Any) -> dict:
    return {
        "model": {"path": "m.onnx"},
        "inference": {"type": "torch", "devices": devices, "processes": processes},
        "cameras": [{"name": f"cam{i}", "url": f"rtsp://h/{i}", **camera} for i in range(cameras)],
    }


def config(cameras: int, devices: list[int], processes: Any = "auto", **camera: Any) -> Config:
    return Config.model_validate(doc(cameras, devices, processes, **camera))


@pytest.mark.parametrize(
    ("cameras", "cores", "expected"),
    [
        (1, 16, 2),  # one process a GPU at least: no frame crosses between GPUs
        (2 * CAMERAS_PER_PROCESS, 16, 2),
        (2 * CAMERAS_PER_PROCESS + 1, 16, 4),  # 3 processes rounded up: 2 on each GPU
        (200, 16, 8),  # 7 rounded up
        (500, 15, 14),  # at most the cores, in whole pairs
        (10, 1, 1),  # fewer cores than GPUs: one process over both, as one GPU config runs
    ],
)
def test_auto_plans_the_same_number_of_processes_on_every_gpu(
    cameras: int, cores: int, expected: int
) -> None:
    assert process_count(config(cameras, [0, 1]), cores=cores) == expected


def test_processes_take_the_gpus_in_turn_and_one_process_is_not_placed() -> None:
    assert placed_gpus(config(8, [0, 1], processes=4), 4) == (0, 1, 0, 1)
    assert placed_gpus(config(8, [2, 5], processes=3), 3) == (2, 5, 2)
    assert placed_gpus(config(8, [0, 1], processes=1), 1) == ()  # the stream set spans both
    assert placed_gpus(config(8, [0], processes=4), 4) == ()  # one GPU: nothing to place
    cpu = Config.model_validate({"model": {"path": "m.onnx"}, "cameras": []})
    assert placed_gpus(cpu, 4) == ()
    plan = plan_processes(config(100, [0, 1]), cores=16)
    assert plan.gpus == (0, 1, 0, 1) and sum(len(s) for s in plan.shards) == 100


def test_a_process_runs_its_inference_and_its_nvdec_cameras_on_its_gpu_only() -> None:
    def box(devices: list[int], hw_gpu: int | None) -> Config:
        hw = {"name": "hw", "url": "rtsp://h/1", "decoder": "nvdec", "gpu": hw_gpu}
        return Config.model_validate(
            {
                **doc(0, devices, processes=2),
                "cameras": [
                    {**hw, "motion": {"enabled": False}},
                    {"name": "sw", "url": "rtsp://h/2", "decoder": "pyav"},
                ],
            }
        )

    cfg = box([0, 1], None)
    placed = on_gpu(cfg, 1)
    # what a user of a one-GPU box would write for GPU 1, as the schema accepts it
    assert placed.inference == box([1], 1).inference
    assert placed.cameras == box([1], 1).cameras
    assert placed.cameras[1].gpu is None  # a CPU-decoded camera has no GPU of its own
    assert on_gpu(cfg, None) is cfg


def test_a_cameras_own_gpu_is_refused_where_processes_are_placed() -> None:
    cfg = config(2, [0, 1], processes=4, decoder="nvdec", gpu=1, motion={"enabled": False})
    problems = placement_problems(cfg, plan_processes(cfg).gpus)
    assert len(problems) == 2
    assert problems[0].startswith("cameras[0].gpu: camera 'cam0': with 4 processes over GPUs")
    assert "remove gpu" in problems[0]
    one = config(2, [0, 1], processes=1, decoder="nvdec", gpu=1, motion={"enabled": False})
    assert placement_problems(one, plan_processes(one).gpus) == []  # one process: it holds


def test_check_prints_each_gpus_processes_and_cameras(capsys: pytest.CaptureFixture) -> None:
    cfg = config(100, [0, 1], processes=4)
    plan = plan_processes(cfg)
    _print_processes(cfg, plan)
    out = capsys.readouterr().out
    on_0 = len(plan.shards[0]) + len(plan.shards[2])
    assert f"GPU 0: process(es) 0, 2, {on_0} camera(s)" in out
    assert f"GPU 1: process(es) 1, 3, {100 - on_0} camera(s)" in out
    assert "warning" not in out


def test_check_warns_of_a_process_past_its_count(capsys: pytest.CaptureFixture) -> None:
    cfg = config(96, [0], processes=1)
    _print_processes(cfg, plan_processes(cfg, 16))
    out = capsys.readouterr().out
    assert "warning: inference.processes: a process runs 96 cameras" in out


def test_vidpipe_check_and_run_refuse_a_cameras_gpu_on_a_placed_box(tmp_path: Path) -> None:
    path = tmp_path / "box.yaml"
    data = doc(1, [0, 1], processes=2, decoder="nvdec", gpu=1, motion={"enabled": False})
    path.write_text(yaml.safe_dump(data))
    for command in ("check", "run"):
        proc = vidpipe(command, "-c", str(path))
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        assert "cameras[0].gpu: camera 'cam0': with 2 processes over GPUs [0, 1]" in proc.stderr


class _Spawned:
    pid = 4242


def test_each_child_is_started_on_its_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    argv: list[list[str]] = []

    def popen(args: list[str], **_kw: Any) -> _Spawned:
        argv.append(args)
        return _Spawned()

    monkeypatch.setattr(subprocess, "Popen", popen)
    children = Children(tmp_path / "c.yaml", 3, tmp_path, {}, 30.0, gpus=(0, 1, 0))
    children.start_all()
    assert [a[a.index("--gpu") + 1] for a in argv] == ["0", "1", "0"]
    assert [a[a.index("--shard") + 1] for a in argv] == ["0/3", "1/3", "2/3"]


def test_a_reload_that_gives_a_camera_its_own_gpu_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "box.yaml"
    path.write_text(yaml.safe_dump(doc(2, [0, 1], processes=2)))
    children = Children(path, 2, tmp_path, {}, 30.0, gpus=(0, 1))
    runtime = SupervisorRuntime(Config.model_validate(doc(2, [0, 1], 2)), path, children, None)
    assert runtime.load().cameras[0].gpu is None
    path.write_text(
        yaml.safe_dump(
            doc(2, [0, 1], processes=2, decoder="nvdec", gpu=0, motion={"enabled": False})
        )
    )
    with pytest.raises(ConfigError, match=r"cameras\[0\]\.gpu"):
        runtime.load()
