"""``inference.advanced.cpu_pinning``: whether OpenVINO pins each stream thread to one core.

Real OpenVINO and the real model. Unset leaves OpenVINO's default; false reaches the
compiled model, and no thread of the process is then held to fewer cores than it was given
while requests run.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import numpy as np
import openvino as ov
import pytest

from tests.precision import openvino_kwargs
from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
from vidpipe.infer.openvino import OpenVINOBackend

pytestmark = pytest.mark.timeout(120)


def backend(assets_dir: Path, pinning: bool | None) -> OpenVINOBackend:
    cfg = OpenVINOConfig(
        **openvino_kwargs(), hint="throughput", advanced=OpenVINOAdvanced(cpu_pinning=pinning)
    )
    return OpenVINOBackend(assets_dir / "models" / "yolox_nano.onnx", cfg)


def narrowest_affinity_while_inferring(compiled: ov.CompiledModel) -> int:
    """The fewest cores any thread of this process may run on, sampled while requests run
    (1 with OpenVINO's pinning on a machine of 2 cores or more)."""
    queue = ov.AsyncInferQueue(compiled, 4)
    image = np.zeros(tuple(compiled.input(0).shape), np.float32)
    stop = threading.Event()

    def keep_busy() -> None:
        while not stop.is_set():
            queue.start_async({0: image})

    feeder = threading.Thread(target=keep_busy)
    feeder.start()
    try:
        narrowest = len(os.sched_getaffinity(0))
        for _ in range(20):
            # OpenVINO pins a stream thread while it runs requests and unpins it when idle:
            # sample while the feeder keeps every request busy
            time.sleep(0.02)
            for tid in os.listdir(f"/proc/{os.getpid()}/task"):
                # a thread may end between the listing and the call
                with contextlib.suppress(OSError):
                    narrowest = min(narrowest, len(os.sched_getaffinity(int(tid))))
        return narrowest
    finally:
        stop.set()
        feeder.join()
        queue.wait_all()


def test_unset_pinning_is_openvinos_default(assets_dir: Path) -> None:
    b = backend(assets_dir, None)
    try:
        plain = ov.Core().compile_model(
            str(assets_dir / "models" / "yolox_nano.onnx"),
            "CPU",
            {"PERFORMANCE_HINT": "THROUGHPUT"},
        )
        assert b._compiled.get_property("ENABLE_CPU_PINNING") == plain.get_property(
            "ENABLE_CPU_PINNING"
        )
    finally:
        b.close()


@pytest.mark.parametrize("pinning", [True, False])
def test_pinning_reaches_the_compiled_model(assets_dir: Path, pinning: bool) -> None:
    b = backend(assets_dir, pinning)
    try:
        assert b._compiled.get_property("ENABLE_CPU_PINNING") is pinning
    finally:
        b.close()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing to pin to")
def test_unpinned_stream_threads_may_run_on_every_core(assets_dir: Path) -> None:
    b = backend(assets_dir, False)
    try:
        cores = len(os.sched_getaffinity(0))
        assert narrowest_affinity_while_inferring(b._compiled) == cores
    finally:
        b.close()
