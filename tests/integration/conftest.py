"""Helpers for tests that run the real daemon as a process."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from tests.golden import PARTNER_SCORE
from tests.precision import with_precision


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(
    predicate: Callable[[], object], timeout_s: float, what: str, poll_s: float = 0.2
) -> object:
    """Poll ``predicate`` until it returns something truthy; fail with ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(poll_s)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


class DaemonProcess:
    """``vidpipe run`` in a subprocess with its stderr captured to a file.

    The config is written with the suite's forced precision, if any (tests/precision.py).
    """

    def __init__(self, config: dict, workdir: Path) -> None:
        self.config_path = workdir / "config.yaml"
        self.config_path.write_text(yaml.safe_dump(with_precision(config)))
        self.log_path = workdir / "daemon.log"
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vidpipe.cli", "run", "--config", str(self.config_path)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout_s: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(5)
            self._log.close()


@pytest.fixture
def run_daemon(tmp_path: Path) -> Iterator[Callable[[dict], DaemonProcess]]:
    started: list[DaemonProcess] = []

    def start(config: dict) -> DaemonProcess:
        d = DaemonProcess(config, tmp_path)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc.poll() is None:
            d.terminate(10)


def metric(text: str, name: str, **labels: str) -> float:
    """Sum of the samples ``name`` whose labels include ``labels`` (0 when there are none)."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def histogram_buckets(text: str, name: str, **labels: str) -> dict[float, float]:
    """Cumulative bucket counts of a histogram, keyed by upper bound (``le``)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[float, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == f"{name}_bucket" and all(s.labels.get(k) == v for k, v in labels.items()):
                le = float(s.labels["le"])
                out[le] = out.get(le, 0.0) + s.value
    return out


def scrape_soon(port: int) -> str:
    """``scrape``, but "" while the daemon is still starting (connection refused)."""
    try:
        return scrape(port)
    except OSError:
        return ""


def detect_offline(
    assets_dir: Path,
    inputs: list[Path],
    workdir: Path,
    score_threshold: float = PARTNER_SCORE,
    model_settings: dict | None = None,
) -> list[dict]:
    """``vidpipe detect`` on ``inputs`` at the suite's precision: the reference that the
    daemon's output is compared with (same model, same precision, same frames).

    Returns one record per frame, in input then frame order, as ``detect`` prints them: the
    v1 frame record (``vidpipe.sinks.record``), the input's file name as its ``camera``. The
    default threshold, 0.25, is the partner score of the precision-free rule (tests/golden.py),
    below the daemon's 0.3. ``model_settings`` adds to the model's section (``input_size``).
    """
    models = assets_dir / "models"
    config = workdir / "offline.yaml"
    model = {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")}
    model.update(model_settings or {})
    config.write_text(yaml.safe_dump(with_precision({"model": model})))
    args = ["detect", "--config", str(config), "--score-threshold", str(score_threshold)]
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", *args, *map(str, inputs)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


SHORT_CLIP_FRAMES = 60


@pytest.fixture(scope="session")
def short_clip(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 s of the walkway clip (768x432), from 40 s in where people walk, re-encoded so that
    the cut starts on a keyframe: ``SHORT_CLIP_FRAMES`` frames."""
    out = tmp_path_factory.mktemp("clip") / "walkway-6s.mp4"
    src = assets_dir / "videos" / "one-by-one-person-detection.mp4"
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-ss", "40", "-i", str(src), "-frames:v",
         str(SHORT_CLIP_FRAMES), "-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "30", "-an",
         str(out)],
        check=True,
    )  # fmt: skip
    return out


@pytest.fixture(scope="session")
def offline_clip(
    assets_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], list[dict]]:
    """``offline_clip(stem)``: :func:`detect_offline` of ``videos/<stem>.mp4``, every frame,
    computed once per session (a whole clip takes 5-15 s of CPU)."""
    cache: dict[str, list[dict]] = {}

    def get(stem: str) -> list[dict]:
        if stem not in cache:
            clip = assets_dir / "videos" / f"{stem}.mp4"
            cache[stem] = detect_offline(assets_dir, [clip], tmp_path_factory.mktemp("offline"))
            assert cache[stem], f"vidpipe detect found no frame in {clip}"
        return cache[stem]

    return get


def wait_files_played(
    port: int, cameras: Sequence[str], timeout_s: float, daemon: DaemonProcess | None = None
) -> str:
    """Wait until every file camera of ``cameras`` stopped at its end (its state gauge says
    ``stopped``); fail at once if ``daemon`` exits meanwhile. The last scrape."""

    def ended() -> str | None:
        if daemon is not None and daemon.proc.poll() is not None:
            pytest.fail(f"the daemon exited: {daemon.log()[-3000:]}")
        try:
            text = scrape(port)
        except OSError:
            return None
        done = all(
            metric(text, "vidpipe_camera_state", camera=c, state="stopped") == 1 for c in cameras
        )
        return text if done else None

    return str(wait_for(ended, timeout_s, f"{', '.join(cameras)} at the end of their files"))
