"""What a benchmark point measures of its own process and of the machine: CPU time (the
process's, each thread's, the whole machine's), resident memory, and the machine itself."""

from __future__ import annotations

import os
import platform
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

NATIVE = "native (OpenVINO, FFmpeg, ...)"


def rss_bytes() -> int:
    """Resident set size of this process (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_s() -> float:
    """User + system CPU time of this process, all threads."""
    t = os.times()
    return t.user + t.system


def machine_busy_s() -> float:
    """CPU seconds every process on the machine has spent busy (``/proc/stat``, all cores).

    Busy = user + nice + system + irq + softirq + steal. Minus this process's own CPU time over
    a window, it shows how much the rest of the machine competed with the point.
    """
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Snapshot:
    """Counters at one instant of a run."""

    t_mono: float
    t_wall: float
    cpu_s: float
    machine_busy_s: float
    frames: int
    rss: int

    @classmethod
    def take(cls, frames: int) -> Snapshot:
        return cls(time.monotonic(), time.time(), cpu_s(), machine_busy_s(), frames, rss_bytes())


def thread_cpu_s() -> dict[int, float]:
    """CPU seconds of every thread of this process, by native thread id."""
    tck = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended
        out[int(tid)] = (int(fields[11]) + int(fields[12])) / tck
    return out


def thread_groups() -> dict[int, str]:
    """Native thread id -> Python thread name with digits folded (``capture-camN``)."""
    return {
        t.native_id: re.sub(r"\d+", "N", t.name)
        for t in threading.enumerate()
        if t.native_id is not None
    }


def group_deltas(before: dict[int, float], after: dict[int, float]) -> dict[str, float]:
    """How much a per-thread count grew between two samples, summed per Python thread group
    (``thread_groups``); every thread Python did not start is native. Largest first."""
    names = thread_groups()
    out: dict[str, float] = {}
    for tid, value in after.items():
        group = names.get(tid, NATIVE)
        out[group] = out.get(group, 0.0) + value - before.get(tid, 0.0)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def thread_cpu_percent(
    before: dict[int, float], after: dict[int, float], window_s: float
) -> dict[str, float]:
    """CPU % of one core per Python thread group over a window; other threads are native."""
    return {k: 100.0 * v / window_s for k, v in group_deltas(before, after).items()}


def machine_info() -> dict[str, Any]:
    """CPU model, core count and library versions, for the record."""
    model = "unknown"
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_model": model,
        "cores": cores(),
        "cores_available": len(os.sched_getaffinity(0)),
        "isa": sorted(f for f in flags if f.startswith(("avx", "amx")) or "vnni" in f),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    for mod in ("openvino", "cv2", "numpy"):
        try:
            info[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            info[mod] = None
    try:
        from importlib.metadata import version

        info["openvino_model_api"] = version("openvino-model-api")
    except Exception:  # absent or broken metadata: recorded as not installed
        info["openvino_model_api"] = None
    return info


def cores() -> int:
    return os.cpu_count() or 1


def loadavg_1m() -> float:
    return os.getloadavg()[0]
