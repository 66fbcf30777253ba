"""The pieces of the GIL hand-over model that ``benchmarks.gil_handover`` and
``benchmarks.gil_worker`` share: the native call that releases the GIL, Python work that
holds it, the batcher, the parameters and the report's quantile."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from dataclasses import dataclass

from vidpipe.quantiles import quantile_of

_BUF = bytes(4096)  # sha256 releases the GIL for buffers of 2 KiB and more


def native_call(hasher: hashlib._Hash) -> None:
    """A short C call that releases the GIL (about 3.6 us on a 2-core EPYC)."""
    hasher.update(_BUF)


def python_work(us: float) -> None:
    """Hold the GIL for ``us`` microseconds of Python bytecode."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


@dataclass
class Params:
    cameras: int = 120  # the GPU camera count the design aims at (benchmarks/README.md)
    fps: float = 25.0
    calls: int = 5  # native calls per frame: demux, decode, copy, GPU wait, mailbox
    # Python per frame (GIL held), spread between the calls. On the H200 camera threads held
    # the GIL for about 55 % of the time at 72-88 cameras (the GIL profiles in
    # benchmarks/README.md): 250-300 us a frame. 250 us at 120 cameras is 75 % of one GIL;
    # at 100 us nothing waits long.
    py_us: float = 250.0
    gpu_wait_us: float = 500.0
    batch_calls: int = 45
    seconds: float = 2.0
    # worker:G only: Python per frame that the fake source leaves out (PyTorch's stream
    # context, from_dlpack, the frame pool). A guess that brings the worker's CPU per frame
    # near 250-280 us here, as py_us; not a measurement of those calls.
    worker_py_us: float = 100.0


def _batcher(stop: threading.Event, p: Params, out: list[float]) -> None:
    hasher, rng = hashlib.sha256(), random.Random(0)
    while not stop.wait(rng.uniform(0.020, 0.040)):
        t0 = time.perf_counter()
        for _ in range(p.batch_calls):
            native_call(hasher)
            python_work(2.0)  # the Python between two PyTorch calls
        out.append((time.perf_counter() - t0) * 1000.0)


def quantile_ms(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` rounded for the report; NaN when there are none."""
    value = quantile_of(values, q)
    return float("nan") if value is None else round(value, 2)
