"""``vidpipe run`` and the bench's vidpipe contender set the GIL's switch interval
(``cli.tune_process``: Python's 5 ms unless ``VIDPIPE_SWITCH_INTERVAL_MS`` says otherwise); a
bad value is refused with the variable's name. Each case runs in a fresh interpreter (the
interval is process-wide), and the test process is checked untouched.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = (
    "import sys; from vidpipe.cli import tune_process; tune_process(); "
    "print(sys.getswitchinterval())"
)


def _run(value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VIDPIPE_SWITCH_INTERVAL_MS"}
    if value is not None:
        env["VIDPIPE_SWITCH_INTERVAL_MS"] = value
    return subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize(("value", "seconds"), [(None, 0.005), ("1", 0.001), ("0.5", 0.0005)])
def test_the_switch_interval_is_set_before_the_daemon_starts(
    value: str | None, seconds: float
) -> None:
    done = _run(value)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) == pytest.approx(seconds)
    assert sys.getswitchinterval() == pytest.approx(0.005)  # this process: Python's default


@pytest.mark.parametrize("value", ["fast", "0", "-1", "5000"])
def test_a_bad_switch_interval_is_refused_with_the_variable_named(value: str) -> None:
    done = _run(value)
    assert done.returncode != 0
    assert f"VIDPIPE_SWITCH_INTERVAL_MS={value!r}" in done.stderr
