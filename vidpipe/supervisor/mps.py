"""NVIDIA's Multi-Process Service for the processes of one GPU box.

Without MPS each process has a CUDA context of its own and the GPU time-slices between
them; under MPS their kernels share one context. On the H200, 4 processes of 120 NVDEC
cameras kept the SMs 81 % busy on 7.1 host cores without MPS, 55 % on 4.0 cores with it
(docs/gpu.md). So a supervisor of several processes on a GPU config uses MPS where it can:

1. a control daemon already running (``systemd/nvidia-mps.service``, or one started by hand)
   is found by the ``control`` pipe in its pipe directory: ``$CUDA_MPS_PIPE_DIRECTORY``, else
   ``/run/nvidia-mps`` (the unit's), else ``/tmp/nvidia-mps`` (the driver's default);
2. otherwise, if ``nvidia-cuda-mps-control`` is on ``PATH``, the supervisor starts one with a
   private pipe directory and stops it (``quit``) when it exits;
3. otherwise it logs once that the processes will time-slice the GPU, and runs without.

The children find the daemon through ``CUDA_MPS_PIPE_DIRECTORY`` in their environment; CUDA
reads it when it initialises, so it is set before a child starts.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CONTROL = "nvidia-cuda-mps-control"
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
#: The pipe directories looked at when ``$CUDA_MPS_PIPE_DIRECTORY`` is not set: the shipped
#: unit's (outside /tmp, which vidpipe.service makes private), then the driver's default.
DEFAULT_PIPE_DIRS = (Path("/run/nvidia-mps"), Path("/tmp/nvidia-mps"))


def running_pipe_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """The pipe directory of a running MPS control daemon, or None."""
    env = os.environ if env is None else env
    given = env.get(PIPE_ENV)
    for folder in (Path(given),) if given else DEFAULT_PIPE_DIRS:
        try:
            if stat.S_ISFIFO((folder / "control").stat().st_mode):
                return folder
        except OSError:
            continue
    return None


@dataclass(frozen=True, slots=True)
class MpsPlan:
    """What the supervisor will do about MPS: ``mode`` is ``running`` (use the daemon at
    ``pipe_dir``), ``start`` (start ``control``), ``absent`` or ``not needed``."""

    mode: str
    pipe_dir: Path | None = None
    control: str | None = None

    @property
    def used(self) -> bool:
        return self.mode in ("running", "start")

    def describe(self) -> str:
        """One line for ``vidpipe check`` and the start-up log."""
        if self.mode == "running":
            return f"yes (the control daemon running at {self.pipe_dir})"
        if self.mode == "start":
            return f"yes (vidpipe starts {self.control} for its processes)"
        if self.mode == "absent":
            return f"no ({CONTROL} is not on PATH and none runs: the processes time-slice the GPU)"
        return "no (not needed: one process, or not a GPU backend)"


def plan_mps(gpu: bool, processes: int, env: Mapping[str, str] | None = None) -> MpsPlan:
    """What to do about MPS for ``processes`` processes of a GPU (or not) config."""
    env = os.environ if env is None else env
    if not gpu or processes < 2:
        return MpsPlan("not needed")
    found = running_pipe_dir(env)
    if found is not None:
        return MpsPlan("running", pipe_dir=found)
    control = shutil.which(CONTROL, path=env.get("PATH"))
    if control is not None:
        return MpsPlan("start", control=control)
    return MpsPlan("absent")


class MpsDaemon:
    """Brings the plan about: ``start()`` returns the children's extra environment,
    ``stop()`` quits a control daemon that ``start()`` started (and only that one)."""

    def __init__(self, plan: MpsPlan, run_dir: Path) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self._started: dict[str, str] | None = None

    def start(self) -> dict[str, str]:
        """Start the control daemon if the plan says so; the children's environment."""
        if self.plan.mode == "running":
            assert self.plan.pipe_dir is not None
            log.info("CUDA MPS: %s", self.plan.describe())
            return {PIPE_ENV: str(self.plan.pipe_dir)}
        if self.plan.mode == "absent":
            log.warning("CUDA MPS: %s", self.plan.describe())
            return {}
        if self.plan.mode != "start":
            return {}
        assert self.plan.control is not None
        env = {PIPE_ENV: str(self.run_dir / "mps-pipe"), LOG_ENV: str(self.run_dir / "mps-log")}
        for folder in env.values():
            os.makedirs(folder, exist_ok=True)
        try:
            subprocess.run(
                [self.plan.control, "-d"], env={**os.environ, **env}, check=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("CUDA MPS: %s -d failed (%s): running without", self.plan.control, exc)
            return {}
        log.info("CUDA MPS: started %s, pipe directory %s", self.plan.control, env[PIPE_ENV])
        self._started = env
        return dict(env)

    def stop(self) -> None:
        """Quit the control daemon ``start()`` started, after the children have exited."""
        if self._started is None or self.plan.control is None:
            return
        env, self._started = self._started, None
        try:
            subprocess.run(
                [self.plan.control],
                input="quit\n",
                text=True,
                env={**os.environ, **env},
                timeout=30,
                check=False,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            log.warning("CUDA MPS: could not quit the control daemon: %s", exc)
