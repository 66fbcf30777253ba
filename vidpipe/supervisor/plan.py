"""How many processes ``vidpipe run`` starts for a config, and which cameras each runs.

One Python process is held back by its GIL long before a GPU is: on the H200 one process
drove about 40 NVDEC cameras (32 with CPU decode), and reaching the GPU's density took 4-5
processes (docs/gpu.md). ``inference.processes: auto`` therefore sizes a GPU config at one
process per ``CAMERAS_PER_PROCESS`` enabled cameras, below that measured limit so that a
process keeps headroom for reconnect bursts, and never more processes than host cores: each
process needs about a core of Python of its own. An OpenVINO config stays in one process:
OpenVINO's own threads already use every core, and two pinned OpenVINO processes on one box
each ran at half speed.

On a box of several GPUs (``inference.devices``), each process runs on one GPU: its batches
and its NVDEC cameras' decoding stay there, so no frame crosses from one GPU to another and
each GPU's decoders serve its own processes. Process ``i`` runs on ``devices[i % K]`` of ``K``
GPUs; ``auto`` plans at least one process a GPU and a multiple of ``K``, so that the GPUs
carry the same number of processes. A camera's own ``gpu:`` cannot hold there (its process,
chosen by its name, decides its GPU): ``placement_problems`` refuses it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from vidpipe.config import Config, GpuConfig
from vidpipe.reload import active_cameras
from vidpipe.shard import Shard

#: Enabled cameras per process that ``processes: auto`` plans for on a GPU backend.
CAMERAS_PER_PROCESS = 32
#: Cameras one GPU-backend process held on the H200 (NVDEC, 1080p25); past it a process sheds.
PROCESS_HOLDS = 40


def host_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def is_gpu(cfg: Config) -> bool:
    """Whether the config infers on an NVIDIA GPU (a torch or TensorRT backend)."""
    return isinstance(cfg.inference, GpuConfig)


def process_count(cfg: Config, cores: int | None = None) -> int:
    """``inference.processes`` resolved: a number as given; ``auto`` as the module says."""
    wanted = cfg.inference.processes
    if wanted != "auto":
        return int(wanted)
    return auto_count(cfg, cores)


def auto_count(cfg: Config, cores: int | None = None) -> int:
    """What ``processes: auto`` plans for ``cfg``, whatever its ``processes`` says."""
    if not is_gpu(cfg):
        return 1
    enabled = sum(1 for c in cfg.cameras if c.enabled)
    cap = host_cores() if cores is None else cores
    n = max(1, min(math.ceil(enabled / CAMERAS_PER_PROCESS), cap))
    gpus = len(cfg.inference.devices) if isinstance(cfg.inference, GpuConfig) else 1
    if gpus > 1 and cap >= gpus:  # whole processes on every GPU alike
        n = min(max(gpus, math.ceil(n / gpus) * gpus), cap // gpus * gpus)
    return n


def placed_gpus(cfg: Config, processes: int) -> tuple[int, ...]:
    """The GPU of each of ``processes`` processes on a box of several GPUs; empty where the
    processes are not placed (one process, one GPU, or no GPU: the config's devices hold)."""
    if not isinstance(cfg.inference, GpuConfig) or processes < 2:
        return ()
    devices = cfg.inference.devices
    if len(devices) < 2:
        return ()
    return tuple(devices[i % len(devices)] for i in range(processes))


@dataclass(frozen=True, slots=True)
class ProcessPlan:
    """The processes of one ``vidpipe run``: each shard's running cameras, in config order."""

    shards: tuple[tuple[str, ...], ...]
    gpu: bool
    gpus: tuple[int, ...] = ()  # each process's GPU (``placed_gpus``); empty: not placed

    @property
    def processes(self) -> int:
        return len(self.shards)

    def owner(self, camera: str) -> int | None:
        """The index of the process that runs ``camera`` (None: no process runs it)."""
        return next((i for i, names in enumerate(self.shards) if camera in names), None)


def plan_processes(cfg: Config, cores: int | None = None) -> ProcessPlan:
    """The plan of ``cfg``: how many processes and which cameras each runs (the daemon's own
    split, ``reload.active_cameras`` with ``sharding.assignment``)."""
    n = process_count(cfg, cores)
    if n == 1:
        return ProcessPlan((tuple(active_cameras(cfg, None)),), is_gpu(cfg))
    shards = tuple(tuple(active_cameras(cfg, Shard(i, n))) for i in range(n))
    return ProcessPlan(shards, is_gpu(cfg), placed_gpus(cfg, n))


def _sheds(cameras: int) -> str:
    return (
        f"{cameras} cameras; one process drives about {PROCESS_HOLDS} NVDEC cameras and past "
        "that sheds frames while the GPU idles"
    )


def crowded(cfg: Config, plan: ProcessPlan, cores: int | None = None) -> str | None:
    """A warning when a process of a GPU plan runs more cameras than one process holds: it
    sheds frames (``vidpipe_overloaded``) while the GPU has room. Where the host cores cap
    ``auto``, it says so; else it names the process count that ``auto`` plans (on ``cores``:
    this host's by default)."""
    busiest = max((len(names) for names in plan.shards), default=0)
    if not plan.gpu or busiest <= PROCESS_HOLDS:
        return None
    if cfg.inference.processes == "auto":
        fix = f"auto is capped by the host's {plan.processes} core(s): use a larger box or shard"
    else:
        fix = f"set inference.processes: auto (here {auto_count(cfg, cores)})"
    return f"inference.processes: a process runs {_sheds(busiest)}: {fix}"


def outgrown(cfg: Config, before: int, now: int) -> str | None:
    """A warning when a reload took one process of a GPU config past the cameras one process
    holds (``before`` and ``now`` cameras run there): cameras added while it runs stay in the
    processes planned at start, so the service must be restarted to spread them."""
    if not is_gpu(cfg) or now <= PROCESS_HOLDS or before > PROCESS_HOLDS:
        return None
    return (
        f"this process now runs {_sheds(now)}: restart the service (inference.processes: "
        f"{cfg.inference.processes} plans {process_count(cfg)} process(es) at start)"
    )


def placement_problems(cfg: Config, gpus: tuple[int, ...]) -> list[str]:
    """What in ``cfg`` cannot run on processes placed on ``gpus``: a camera's own ``gpu``."""
    if not gpus:
        return []
    return [
        f"cameras[{i}].gpu: camera {cam.name!r}: with {len(gpus)} processes over GPUs "
        f"{sorted(set(gpus))} each process decodes and infers on its own GPU, and the "
        "camera's process is chosen by its name: remove gpu, or set inference.processes: 1 "
        "(one process spans the GPUs)"
        for i, cam in enumerate(cfg.cameras)
        if cam.gpu is not None
    ]
