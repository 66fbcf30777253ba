"""Gates on the systemd units: `systemd-analyze verify` clean and `systemd-analyze security`
exposure at most 2.0. Both run offline, without systemd running (Debian package `systemd`)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vidpipe.config import Config

UNITS = ["vidpipe.service", "vidpipe@.service"]
MAX_EXPOSURE = 2.0
INSTALLED_BINARY = "/opt/vidpipe/bin/vidpipe"


@pytest.fixture(scope="module")
def analyze() -> str:
    path = shutil.which("systemd-analyze")
    if path is None:
        pytest.fail("systemd-analyze is missing: run scripts/setup-system.sh (package systemd)")
    return path


def installed_copy(repo_root: Path, unit: str, dest: Path) -> Path:
    """The unit as it would be installed, with the binary path pointing at this venv's
    vidpipe (verify checks that ExecStart= names an executable). Templates get an instance."""
    text = (repo_root / "systemd" / unit).read_text()
    text = text.replace(INSTALLED_BINARY, str(Path(sys.executable).with_name("vidpipe")))
    out = dest / unit.replace("@.", "@0.")
    out.write_text(text)
    return out


def verify(analyze: str, unit: Path) -> str:
    """Everything `systemd-analyze verify` had to say; "" means clean."""
    res = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # it warns about unknown keys and bad values but still exits 0: any output fails the gate
    return (res.stdout + res.stderr).strip() + (
        "" if res.returncode == 0 else f" (rc {res.returncode})"
    )


def exposure(analyze: str, unit: Path) -> float:
    res = subprocess.run(
        [analyze, "security", "--offline=true", f"--threshold={int(MAX_EXPOSURE * 10)}", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    m = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", res.stdout)
    assert m, res.stdout[-2000:] + res.stderr
    score = float(m.group(1))
    assert (res.returncode == 0) == (score <= MAX_EXPOSURE), (res.returncode, score)
    return score


@pytest.mark.parametrize("unit", UNITS)
def test_unit_verifies_clean(analyze: str, repo_root: Path, tmp_path: Path, unit: str) -> None:
    assert verify(analyze, installed_copy(repo_root, unit, tmp_path)) == ""


@pytest.mark.parametrize("unit", UNITS)
def test_unit_exposure_at_most_2(analyze: str, repo_root: Path, tmp_path: Path, unit: str) -> None:
    score = exposure(analyze, installed_copy(repo_root, unit, tmp_path))
    print(f"{unit}: exposure {score}")
    assert score <= MAX_EXPOSURE


def test_the_gates_can_fail(analyze: str, repo_root: Path, tmp_path: Path) -> None:
    unit = installed_copy(repo_root, "vidpipe.service", tmp_path)
    text = unit.read_text()
    typo = tmp_path / "typo.service"
    typo.write_text(text.replace("Restart=on-failure", "Restartt=on-failure"))
    assert "Unknown key" in verify(analyze, typo)
    loose = tmp_path / "loose.service"
    loose.write_text(
        text[: text.index("# ---- Hardening")] + "\n[Install]\nWantedBy=multi-user.target\n"
    )
    assert exposure(analyze, loose) > MAX_EXPOSURE


def directives(repo_root: Path, unit: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for line in (repo_root / "systemd" / unit).read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.parametrize("unit", UNITS)
def test_unit_promises(repo_root: Path, unit: str) -> None:
    d = directives(repo_root, unit)
    assert d["Type"] == ["notify"]
    assert d["KillMode"] == ["mixed"]
    assert d["Restart"] == ["on-failure"] and "StartLimitBurst" in d
    assert d["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert d["ExecStartPre"][0].startswith(f"{INSTALLED_BINARY} check --config /etc/vidpipe/")
    assert float(d["WatchdogSec"][0]) > 0
    drain_s = Config.model_fields["shutdown_timeout_s"].default
    assert float(d["TimeoutStopSec"][0]) > drain_s
    assert d["CapabilityBoundingSet"] == [""] and d["NoNewPrivileges"] == ["yes"]
    assert d["ProtectSystem"] == ["strict"] and d["DevicePolicy"] == ["closed"]
    assert "MemoryDenyWriteExecute" not in d  # OpenVINO's CPU plugin JIT-compiles
    assert any(a.startswith("/dev/dri") for a in d["DeviceAllow"])
    assert any("nvidia" in a for a in d["DeviceAllow"])
    lines = (repo_root / "systemd" / unit).read_text().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("DeviceAllow="):
            assert lines[i - 1].startswith("#"), f"{unit}: {line} has no comment above it"


def test_template_runs_one_shard_per_instance(repo_root: Path) -> None:
    d = directives(repo_root, "vidpipe@.service")
    assert "--shard %i/${VIDPIPE_SHARD_COUNT}" in d["ExecStart"][0]
    assert "--http-port ${VIDPIPE_HTTP_PORT}" in d["ExecStart"][0]
    assert d["StateDirectory"] == ["vidpipe/shard-%i"]
