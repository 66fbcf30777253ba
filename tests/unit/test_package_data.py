"""The web page's static files ship in the wheel (no CDN, nothing fetched at run time)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(300)

STATIC = ("index.html", "app.js", "app.css")


def test_wheel_contains_the_web_page(repo_root: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    # a copy without build outputs, so the wheel reflects pyproject.toml alone
    shutil.copytree(
        repo_root,
        src,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", "test-artifacts", "var"
        ),
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(src),
        ],
        check=True,
        capture_output=True,
        timeout=240,
    )
    (wheel,) = (tmp_path / "dist").glob("vidpipe-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in STATIC:
        assert f"vidpipe/web/static/{name}" in names, sorted(n for n in names if "web" in n)
    assert "vidpipe/web/live.py" in names
