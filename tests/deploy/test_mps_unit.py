"""systemd/nvidia-mps.service verifies clean. The driver's control executable is absent
here: the unit is checked against a fake one (``fake_mps``) at the path the unit names."""

from __future__ import annotations

import stat
from pathlib import Path

from tests.deploy.test_systemd_units import analyze, verify  # noqa: F401 - the fixture

CONTROL = "/usr/bin/nvidia-cuda-mps-control"


def test_mps_unit_verifies_clean_fake_mps(
    analyze: str,  # noqa: F811
    repo_root: Path,
    tmp_path: Path,
) -> None:
    fake = tmp_path / "nvidia-cuda-mps-control"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    text = (repo_root / "systemd" / "nvidia-mps.service").read_text()
    assert CONTROL in text and "CUDA_MPS_PIPE_DIRECTORY=/run/nvidia-mps" in text
    unit = tmp_path / "nvidia-mps.service"
    unit.write_text(text.replace(CONTROL, str(fake)))
    assert verify(analyze, unit) == ""
