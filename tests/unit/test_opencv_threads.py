"""``vidpipe run`` and the bench's vidpipe contender run OpenCV without its thread pool
(``cli.tune_process``), unless ``OPENCV_FOR_THREADS_NUM`` sets a pool size. Each case runs in
a fresh interpreter (the pool is process-wide) that first asks OpenCV for a pool of 4, so the
check fails if ``tune_process`` leaves the pool alone on any machine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = (
    "import cv2; cv2.setNumThreads(4); from vidpipe.cli import tune_process; "
    "applied = tune_process(); print(cv2.getNumThreads(), applied['OPENCV_FOR_THREADS_NUM'])"
)


def _threads_after_tuning(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OPENCV_FOR_THREADS_NUM"}
    if env_value is not None:
        env["OPENCV_FOR_THREADS_NUM"] = env_value
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_opencv_runs_on_the_calling_thread_once_the_process_is_tuned() -> None:
    assert _threads_after_tuning(None) == "1 True"


@pytest.mark.parametrize("value", ["3", "1"])
def test_a_pool_size_set_in_the_environment_is_left_alone(value: str) -> None:
    # the probe's own setNumThreads(4) stays: tune_process did not touch the pool
    assert _threads_after_tuning(value) == "4 False"
