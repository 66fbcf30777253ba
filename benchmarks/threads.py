"""Per-thread meters: CPU time and context switches by thread, read from
``/proc/self/task``, grouped by Python thread name (digits folded: ``capture-camN``; every
thread Python did not start, OpenVINO's, FFmpeg's, CUDA's, is native), or by each thread's own
name (``thread_cores``)."""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from typing import Any

NATIVE = "native (OpenVINO, FFmpeg, ...)"


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


def named_thread_cpu_s(prefix: str) -> float:
    """CPU seconds of this process's threads whose Python name starts with ``prefix``."""
    cpu = thread_cpu_s()
    return sum(
        cpu.get(t.native_id, 0.0)
        for t in threading.enumerate()
        if t.name.startswith(prefix) and t.native_id is not None
    )


@contextlib.contextmanager
def draining(hub: Any) -> Iterator[None]:
    """A thread that takes every frame from ``hub`` while inside, standing in for the
    scheduler of rigs that measure capture alone."""
    stop = threading.Event()

    def take() -> None:
        while not stop.is_set():
            hub.take(0.05)

    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    try:
        yield
    finally:
        stop.set()
        taker.join(5)


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


def thread_switches() -> tuple[dict[int, float], dict[int, float]]:
    """Context switches of every thread of this process, by native thread id: voluntary ones
    (a thread going to sleep: a wait, a lock, the GIL) and involuntary ones (a thread
    preempted, on a busy box by a thread that woke)."""
    voluntary: dict[int, float] = {}
    involuntary: dict[int, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue  # the thread ended
        voluntary[int(tid)] = int(fields["voluntary_ctxt_switches"])
        involuntary[int(tid)] = int(fields["nonvoluntary_ctxt_switches"])
    return voluntary, involuntary


def thread_names() -> dict[int, str]:
    """Native thread id -> name of every thread of this process: a Python thread's own name
    (Python 3.11 does not hand it to the OS: such a thread's ``comm`` is its creator's),
    else the OS name (``/proc/self/task/<tid>/comm``: CUDA, torch and other native threads)."""
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    for tid in os.listdir("/proc/self/task"):
        if int(tid) not in names:
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    names[int(tid)] = f.read().strip()
            except OSError:
                continue  # the thread ended
    return names


def thread_cores(
    before: dict[int, float], after: dict[int, float], window_s: float
) -> dict[str, float]:
    """Cores each thread name kept busy over a window (1.0 = one core), summed over the
    threads of one name, from two ``thread_cpu_s`` samples; busiest first. A thread
    that ended within the window is not counted."""
    names = thread_names()
    out: dict[str, float] = {}
    for tid, cpu in after.items():
        name = names.get(tid, f"thread {tid}")  # ended between the sample and the naming
        out[name] = out.get(name, 0.0) + (cpu - before.get(tid, 0.0)) / window_s
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))
