"""A native crash leaves every thread's Python stack on stderr (``vidpipe run`` turns on
``faulthandler``): a real daemon, real OpenVINO, a real file camera, and a real SIGABRT, as
a C++ ``std::terminate`` in a decoder or an inference library would raise."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.conftest import DaemonProcess, free_port, metric, scrape, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _inferred(port: int) -> float:
    try:
        return metric(scrape(port), "vidpipe_frames_inferred_total")
    except OSError:
        return 0.0


def test_sigabrt_dumps_every_threads_stack_to_stderr(
    assets_dir: Path, run_daemon: Callable[[dict], DaemonProcess]
) -> None:
    port = free_port()
    daemon = run_daemon(
        {
            "model": {
                "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                "labels": str(assets_dir / "models" / "coco80.txt"),
            },
            "http": {"enabled": True, "host": "127.0.0.1", "port": port},
            "cameras": [
                {
                    "name": "street",
                    "url": str(assets_dir / "videos" / "car-detection.mp4"),
                    "loop": True,
                    "realtime": True,
                }
            ],
        }
    )
    wait_for(lambda: _inferred(port) > 0, 60, "the daemon's first inferred frame")
    os.kill(daemon.proc.pid, signal.SIGABRT)
    assert daemon.proc.wait(30) == -signal.SIGABRT
    log = daemon.log()
    assert "Fatal Python error: Aborted" in log
    assert "Current thread" in log
    # every thread, not only the one the signal landed on: the scheduler's and the camera's
    assert log.count("Thread 0x") >= 3, log[-2000:]
    assert "vidpipe/schedule/" in log, log[-2000:]
