"""The supervisor's plan (processes, cameras per process), CUDA MPS detection and the metrics
merge, as a specification. MPS hardware is absent here: the tests that need a control daemon
use a fake ``nvidia-cuda-mps-control`` executable and say so in their names (``fake_mps``)."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest

from vidpipe.config import Config
from vidpipe.reload import active_cameras, diff_configs
from vidpipe.shard import Shard
from vidpipe.supervisor.children import describe_exit
from vidpipe.supervisor.merge import merge_families
from vidpipe.supervisor.mps import CONTROL, PIPE_ENV, MpsDaemon, plan_mps, running_pipe_dir
from vidpipe.supervisor.plan import (
    CAMERAS_PER_PROCESS,
    PROCESS_HOLDS,
    crowded,
    outgrown,
    plan_processes,
    process_count,
)


def config(inference: dict, cameras: int) -> Config:
    return Config.model_validate(
        {
            "model": {"path": "m.onnx"},
            "inference": inference,
            "cameras": [{"name": f"cam{i}", "url": f"rtsp://h/{i}"} for i in range(cameras)],
        }
    )


TORCH = {"type": "torch", "processes": "auto"}


@pytest.mark.parametrize(
    ("inference", "cameras", "cores", "expected"),
    [
        ({"type": "openvino"}, 100, 16, 1),  # the default (auto): OpenVINO stays in one
        ({"type": "torch"}, 80, 16, 3),  # the default (auto): a GPU config fans out
        ({"type": "openvino", "processes": "auto"}, 100, 16, 1),  # OpenVINO fills the cores
        ({"type": "openvino", "processes": 3}, 4, 16, 3),  # a number is taken as given
        (TORCH, 1, 16, 1),
        (TORCH, CAMERAS_PER_PROCESS, 16, 1),
        (TORCH, CAMERAS_PER_PROCESS + 1, 16, 2),
        (TORCH, 160, 16, 5),
        (TORCH, 160, 3, 3),  # never more processes than host cores
        (TORCH, 0, 16, 1),
        ({"type": "tensorrt", "processes": "auto"}, 100, 16, 4),
    ],
)
def test_process_count(inference: dict, cameras: int, cores: int, expected: int) -> None:
    assert process_count(config(inference, cameras), cores) == expected


def test_auto_counts_enabled_cameras_only() -> None:
    cfg = config(TORCH, 40)
    cfg = cfg.model_copy(
        update={
            "cameras": [c.model_copy(update={"enabled": i < 10}) for i, c in enumerate(cfg.cameras)]
        }
    )
    assert process_count(cfg, 16) == 1


def test_a_gpu_process_given_more_cameras_than_it_holds_is_warned_about() -> None:
    one = config({"type": "torch", "processes": 1}, 96)
    warning = crowded(one, plan_processes(one, 16), cores=16)
    assert warning is not None
    assert "a process runs 96 cameras" in warning
    assert "set inference.processes: auto (here 3)" in warning
    capped = config(TORCH, 160)
    plan = plan_processes(capped, 2)
    warning = crowded(capped, plan)
    assert warning is not None
    assert f"a process runs {max(len(s) for s in plan.shards)} cameras" in warning
    assert "capped by the host's 2 core(s)" in warning


@pytest.mark.parametrize(
    ("inference", "cameras"),
    [
        ({"type": "torch"}, 160),  # the default (auto) fans out: 32 a process
        ({"type": "torch", "processes": 1}, PROCESS_HOLDS),  # at what one process holds
        ({"type": "openvino", "processes": 1}, 200),  # not a GPU: OpenVINO sizes itself
    ],
)
def test_plans_within_a_process_s_count_have_no_warning(inference: dict, cameras: int) -> None:
    cfg = config(inference, cameras)
    assert crowded(cfg, plan_processes(cfg, 16)) is None


def test_a_reload_that_takes_a_gpu_process_past_its_count_is_warned_about() -> None:
    cfg = config(TORCH, 80)
    warning = outgrown(cfg, PROCESS_HOLDS, PROCESS_HOLDS + 8)
    assert warning is not None
    assert f"now runs {PROCESS_HOLDS + 8} cameras" in warning
    assert "restart the service (inference.processes: auto plans" in warning
    assert outgrown(cfg, PROCESS_HOLDS, PROCESS_HOLDS) is None  # at its count: no warning
    assert outgrown(cfg, PROCESS_HOLDS + 1, PROCESS_HOLDS + 2) is None  # said once, not again
    assert outgrown(config({"type": "openvino"}, 80), 10, 80) is None  # not a GPU


def test_processes_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 or auto"):
        config({"type": "openvino", "processes": 0}, 1)


def test_plan_is_the_daemons_own_split() -> None:
    cfg = config({"type": "openvino", "processes": 3}, 10)
    plan = plan_processes(cfg)
    assert plan.processes == 3
    assert [list(s) for s in plan.shards] == [
        list(active_cameras(cfg, Shard(i, 3))) for i in range(3)
    ]
    assert sorted(n for s in plan.shards for n in s) == sorted(c.name for c in cfg.cameras)
    assert all(plan.owner(n) == i for i, s in enumerate(plan.shards) for n in s)
    assert not plan.gpu


# -- CUDA MPS --------------------------------------------------------------------------------


def test_mps_absent_on_this_machine(caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """The real branch here: no control daemon runs and none is installed."""
    env = {"PATH": os.environ.get("PATH", ""), PIPE_ENV: str(tmp_path / "none")}
    plan = plan_mps(True, 2, env)
    assert plan.mode == "absent"
    assert "time-slice" in plan.describe()
    with caplog.at_level(logging.WARNING):
        assert MpsDaemon(plan, tmp_path).start() == {}
    assert CONTROL in caplog.text


@pytest.mark.parametrize(("gpu", "processes"), [(False, 4), (True, 1)])
def test_mps_not_needed(gpu: bool, processes: int) -> None:
    assert plan_mps(gpu, processes, {"PATH": ""}).mode == "not needed"


def test_running_mps_found_by_its_control_pipe_fake_mps(tmp_path: Path) -> None:
    pipe_dir = tmp_path / "mps"
    pipe_dir.mkdir()
    assert running_pipe_dir({PIPE_ENV: str(pipe_dir)}) is None
    os.mkfifo(pipe_dir / "control")
    plan = plan_mps(True, 2, {PIPE_ENV: str(pipe_dir), "PATH": ""})
    assert (plan.mode, plan.pipe_dir) == ("running", pipe_dir)
    assert MpsDaemon(plan, tmp_path).start() == {PIPE_ENV: str(pipe_dir)}


FAKE_CONTROL = """#!/bin/sh
# fake nvidia-cuda-mps-control: records each call, makes the control pipe on -d
echo "$* pipe=$CUDA_MPS_PIPE_DIRECTORY stdin=$(test "$1" = -d || cat)" >> "$FAKE_MPS_LOG"
if [ "$1" = -d ]; then mkfifo "$CUDA_MPS_PIPE_DIRECTORY/control"; fi
"""


def test_mps_started_and_quit_by_the_supervisor_fake_mps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / CONTROL
    fake.write_text(FAKE_CONTROL)
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_MPS_LOG", str(log))
    monkeypatch.delenv(PIPE_ENV, raising=False)
    env = {"PATH": str(bin_dir)}
    plan = plan_mps(True, 2, env)
    assert plan.mode == "start" and plan.control == str(fake)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    daemon = MpsDaemon(plan, run_dir)
    child_env = daemon.start()
    pipe_dir = run_dir / "mps-pipe"
    assert child_env[PIPE_ENV] == str(pipe_dir)
    assert running_pipe_dir(child_env) == pipe_dir  # the children will find it
    daemon.stop()
    daemon.stop()  # idempotent: one quit
    calls = log.read_text().splitlines()
    assert calls == [f"-d pipe={pipe_dir} stdin=", f" pipe={pipe_dir} stdin=quit"]


# -- metrics merge and exits -------------------------------------------------------------------


def test_merge_labels_every_sample_with_its_shard_and_keeps_one_family() -> None:
    a = (
        "# HELP vidpipe_camera_up 1 while streaming\n# TYPE vidpipe_camera_up gauge\n"
        'vidpipe_camera_up{camera="a"} 1.0\n'
        "# HELP vidpipe_pool_size slots\n# TYPE vidpipe_pool_size gauge\nvidpipe_pool_size 4.0\n"
    )
    b = a.replace('camera="a"', 'camera="b"').replace("4.0", "2.0")
    families = {f.name: f for f in merge_families([(0, a), (1, b)])}
    assert sorted(families) == ["vidpipe_camera_up", "vidpipe_pool_size"]
    up = [(s.labels, s.value) for s in families["vidpipe_camera_up"].samples]
    assert up == [({"camera": "a", "shard": "0"}, 1.0), ({"camera": "b", "shard": "1"}, 1.0)]
    pool = [(s.labels, s.value) for s in families["vidpipe_pool_size"].samples]
    assert pool == [({"shard": "0"}, 4.0), ({"shard": "1"}, 2.0)]


@pytest.mark.parametrize(
    ("code", "text"), [(0, "exit code 0"), (1, "exit code 1"), (-9, "killed by SIGKILL")]
)
def test_describe_exit(code: int, text: str) -> None:
    assert describe_exit(code) == text


def test_changing_processes_rebuilds_no_inference_pool() -> None:
    before = config({"type": "openvino", "processes": 2}, 4)
    after = config({"type": "openvino", "processes": 3, "start_timeout_s": 30}, 4)
    assert not diff_configs(before, after, Shard(0, 2)).rebuild_inference
    assert diff_configs(
        before, config({"type": "openvino", "hint": "latency"}, 4)
    ).rebuild_inference
