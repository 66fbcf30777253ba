"""Throughput of a model on this machine, the way the daemon runs it (throughput hint,
2 x the optimal number of requests kept busy)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import openvino as ov


def compile_model(core: ov.Core, model: ov.Model, precision: str | None) -> ov.CompiledModel:
    """Compiled for the CPU with the throughput hint; ``precision`` None: the device's own."""
    config: dict[str, str] = {"PERFORMANCE_HINT": "THROUGHPUT"}
    if precision is not None:
        config["INFERENCE_PRECISION_HINT"] = precision
    return core.compile_model(model, "CPU", config)


def device_precision(compiled: ov.CompiledModel) -> str:
    """The float precision the device runs a compiled model at (``f32``, ``bf16`` ...)."""
    hint = compiled.get_property("INFERENCE_PRECISION_HINT")
    return hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)


@dataclass(frozen=True, slots=True)
class Speed:
    """How fast a model ran: wall-clock rate, and this process's CPU time per inference.

    The CPU time per inference hardly changes when other programs share the machine (the
    rate does), so the recommendation is based on it; ``2000 / cpu_ms_per_frame`` is the
    rate on two idle cores.
    """

    fps: float
    cpu_ms_per_frame: float


def throughput(compiled: ov.CompiledModel, seconds: float) -> Speed:
    """Inference rate with the request pool kept full for ``seconds`` (after one warm-up
    round), and the process's CPU time per inference over the same window."""
    requests = 2 * int(compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
    port = compiled.input(0)
    shape = [int(d) for d in port.get_shape()]
    data = np.random.default_rng(0).uniform(0, 255, shape).astype(np.float32)
    queue = ov.AsyncInferQueue(compiled, requests)
    for _ in range(requests):
        queue.start_async({0: data})
    queue.wait_all()
    done = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        queue.start_async({0: data})  # blocks until a request is free
        done += 1
    queue.wait_all()
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - cpu0
    return Speed(done / wall_s, 1000.0 * cpu_s / max(1, done))
