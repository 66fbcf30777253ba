"""`vidpipe run` with `inference.processes: 2`: one service, two daemons, one HTTP port.

Real OpenVINO, the real model, looping file cameras, real scrapes of the supervisor's port.
No timing is asserted: the tests wait for states and compare counters.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import free_port, scrape, wait_for
from tests.integration.test_daemon_e2e import sample
from tests.integration.test_shard_run import pick_cameras
from tests.precision import with_precision
from vidpipe.shard import owner
from vidpipe.supervisor.child import HANG_HOOK_ENV

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


def camera(name: str, assets_dir: Path) -> dict[str, Any]:
    clip = str(assets_dir / "videos" / "bottle-detection.mp4")
    return {"name": name, "url": clip, "loop": True, "realtime": True, "detect_fps": 2}


class Box:
    """``vidpipe run`` on a config of ``inference.processes: 2``; its log in a file."""

    def __init__(
        self,
        tmp: Path,
        assets_dir: Path,
        names: list[str],
        env: dict[str, str],
        start_timeout_s: float = 120,
    ) -> None:
        self.port = free_port()
        self.config_path = tmp / "config.yaml"
        self.doc = with_precision(
            {
                "model": {
                    "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                    "labels": str(assets_dir / "models" / "coco80.txt"),
                },
                "inference": {
                    "type": "openvino",
                    "processes": 2,
                    "start_timeout_s": start_timeout_s,
                },
                "http": {"port": self.port},
                "cameras": [camera(n, assets_dir) for n in names],
            }
        )
        self.write()
        self.log_path = tmp / "box.log"
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "vidpipe.cli", "run", "-c", str(self.config_path)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            )

    def write(self) -> None:
        self.config_path.write_text(yaml.safe_dump(self.doc))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def metrics(self) -> str:
        try:
            return scrape(self.port)
        except OSError:
            return ""

    def value(self, name: str, **labels: str) -> float:
        return sample(self.metrics(), name, **labels) or 0.0

    def child_pid(self, shard: int) -> int | None:
        """The pid of the running child of ``shard`` (from /proc: its command line)."""
        want = f"--shard\0{shard}/2\0".encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            mine = b"vidpipe.supervisor.child" in cmdline and want in cmdline + b"\0"
            if mine and str(self.config_path).encode() in cmdline:
                return int(entry.name)
        return None

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(90)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def streaming(box: Box, names: list[str]) -> bool:
    text = box.metrics()
    return all(sample(text, "vidpipe_camera_up", camera=n) == 1.0 for n in names)


def processes_up(box: Box) -> float:
    text = box.metrics()
    return sum(sample(text, "vidpipe_process_up", shard=str(i)) or 0.0 for i in (0, 1))


def test_one_service_two_processes(assets_dir: Path, tmp_path: Path) -> None:
    cameras = pick_cameras()  # two per shard of 2, by the real hash
    shard0 = [c for c, s in cameras.items() if s == 0]
    shard1 = [c for c, s in cameras.items() if s == 1]
    box = Box(tmp_path, assets_dir, list(cameras), {})
    try:
        # the cameras stream while the models load: readiness comes after
        wait_for(lambda: streaming(box, list(cameras)), 180, "every camera streaming")
        wait_for(lambda: processes_up(box) == 2, 120, "both processes ready")
        _one_port_every_camera_once(box, cameras)
        _sigkill_restarts_one_child_only(box, shard0, shard1)
        _sighup_starts_a_new_camera_in_its_shard(box, assets_dir)
        _put_reaches_the_right_child(box, assets_dir)
    finally:
        code = box.stop()
    log = box.log()
    assert code == 0, log[-3000:]
    for shard in (0, 1):
        # the last accounting line of each child: every frame that entered was written
        lines = [ln for ln in log.splitlines() if f"shard{shard}:vidpipe.daemon" in ln]
        accounting = [ln for ln in lines if "accounting:" in ln]
        assert accounting, f"no accounting line from shard {shard}"
        assert "stopped" in lines[-1]
    assert "shard 0/2: stopped (exit code 0)" in log
    assert "shard 1/2: stopped (exit code 0)" in log


def _one_port_every_camera_once(box: Box, cameras: dict[str, int]) -> None:
    text = box.metrics()
    lines = [ln for ln in text.splitlines() if ln.startswith("vidpipe_frames_captured_total{")]
    assert len(lines) == len(cameras), lines
    for name, shard in cameras.items():
        assert sample(text, "vidpipe_frames_captured_total", camera=name, shard=str(shard))
    # every family once: the merge keeps one HELP/TYPE per name
    types = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE")]
    assert len(types) == len(set(types))
    assert sample(text, "vidpipe_process_up", shard="0") == 1.0
    # the page's tiles: every camera, from both processes
    with urllib.request.urlopen(f"http://127.0.0.1:{box.port}/api/cameras", timeout=10) as r:
        tiles = json.load(r)["cameras"]
    assert sorted(t["name"] for t in tiles) == sorted(cameras)


def _sigkill_restarts_one_child_only(box: Box, shard0: list[str], shard1: list[str]) -> None:
    pid = box.child_pid(0)
    other = box.child_pid(1)
    assert pid and other
    before = {n: box.value("vidpipe_frames_captured_total", camera=n) for n in shard1}
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: box.value("vidpipe_process_restarts_total", shard="0") == 1.0, 60, "restart")
    seen = [before]
    # while shard 0 comes back, shard 1's counters only grow: it never stopped or reconnected
    while not streaming(box, shard0):
        seen.append({n: box.value("vidpipe_frames_captured_total", camera=n) for n in shard1})
        assert len(seen) < 1500, "shard 0's cameras never streamed again"
        time.sleep(0.2)
    seen.append({n: box.value("vidpipe_frames_captured_total", camera=n) for n in shard1})
    for n in shard1:
        counts = [s[n] for s in seen]
        assert counts == sorted(counts) and counts[-1] > counts[0], (n, counts)
        assert box.value("vidpipe_camera_reconnects_total", camera=n) == 0.0
    assert box.child_pid(1) == other
    assert box.child_pid(0) not in (None, pid)
    assert "shard 0/2: exited (killed by SIGKILL); restarting it" in box.log()
    assert box.value("vidpipe_process_restarts_total", shard="1") == 0.0


def _new_name(prefix: str, taken: set[str]) -> tuple[str, int]:
    name = next(f"{prefix}-{i}" for i in range(100) if f"{prefix}-{i}" not in taken)
    return name, owner(name, 2)


def _sighup_starts_a_new_camera_in_its_shard(box: Box, assets_dir: Path) -> None:
    name, shard = _new_name("added", {c["name"] for c in box.doc["cameras"]})
    box.doc["cameras"].append(camera(name, assets_dir))
    box.write()
    box.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: streaming(box, [name]), 120, f"{name} streaming after SIGHUP")
    text = box.metrics()
    assert sample(text, "vidpipe_frames_captured_total", camera=name, shard=str(shard))
    assert sample(text, "vidpipe_frames_captured_total", camera=name, shard=str(1 - shard)) is None
    # each process applies the forwarded SIGHUP on its own: the shard without the new camera
    # may log its (empty) reload after the new camera already streams in the other one
    applied = [f"shard{i}:vidpipe.daemon [MainThread] reload applied" for i in (0, 1)]
    wait_for(lambda: all(line in box.log() for line in applied), 60, "both shards reloaded")


def _put_reaches_the_right_child(box: Box, assets_dir: Path) -> None:
    name, shard = _new_name("api", {c["name"] for c in box.doc["cameras"]})
    body = json.dumps({k: v for k, v in camera(name, assets_dir).items() if k != "name"})
    req = urllib.request.Request(
        f"http://127.0.0.1:{box.port}/api/v1/cameras/{name}",
        data=body.encode(),
        method="PUT",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 201
    wait_for(lambda: streaming(box, [name]), 120, f"{name} streaming after the PUT")
    text = box.metrics()
    assert sample(text, "vidpipe_frames_captured_total", camera=name, shard=str(shard))
    assert sample(text, "vidpipe_frames_captured_total", camera=name, shard=str(1 - shard)) is None
    url = f"http://127.0.0.1:{box.port}/api/v1/cameras/{name}"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert json.load(resp)["state"] == "streaming"


def test_a_child_that_hangs_at_start_is_dumped_killed_and_restarted(
    assets_dir: Path, tmp_path: Path
) -> None:
    """The test hook makes the first child to start hang before it loads the config."""
    cameras = pick_cameras()
    hook = {HANG_HOOK_ENV: str(tmp_path / "hung")}
    box = Box(tmp_path, assets_dir, list(cameras), hook, start_timeout_s=30)
    try:
        wait_for(lambda: streaming(box, list(cameras)), 240, "every camera streaming")
        log = box.log()
    finally:
        assert box.stop() == 0
    assert "not ready after" in log and "dumping its threads, then killing it" in log
    assert "_hang_for_tests" in log  # the faulthandler dump names the hanging frame
    assert "exited (killed by SIGKILL); restarting it" in log
