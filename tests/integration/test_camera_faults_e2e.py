"""Camera faults against the whole daemon: a real GStreamer RTSP server per camera on loopback,
killed, restarted, frozen with SIGSTOP, or restarted with a clip of another size.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.integration.conftest import (
    detect_offline,
    free_port,
    metric,
    scrape,
    scrape_soon,
    wait_for,
)
from tests.rtsp import RtspServer
from vidpipe.postprocess.nms import box_iou

pytestmark = pytest.mark.integration

PERSON, BOTTLE = "one-by-one-person-detection", "bottle-detection"


def model(assets_dir: Path) -> dict[str, str]:
    return {
        "path": str(assets_dir / "models" / "yolox_nano.onnx"),
        "labels": str(assets_dir / "models" / "coco80.txt"),
    }


def clip_dir(tmp_path: Path, name: str, source: Path) -> Path:
    """A directory holding one clip, served as ``/cam`` by its own server."""
    d = tmp_path / name
    d.mkdir()
    shutil.copy(source, d / "cam.mp4")
    return d


def rates(port: int, cams: list[str], window_s: float) -> dict[str, float]:
    """Inferred frames per second of each camera over ``window_s``, from two scrapes."""
    a, t0 = scrape(port), time.monotonic()
    time.sleep(window_s)
    b, t1 = scrape(port), time.monotonic()
    name = "vidpipe_frames_inferred_total"
    return {c: (metric(b, name, camera=c) - metric(a, name, camera=c)) / (t1 - t0) for c in cams}


def up(port: int, cam: str) -> float:
    return metric(scrape_soon(port), "vidpipe_camera_up", camera=cam)


@pytest.mark.timeout(180)
def test_killed_and_frozen_cameras_recover_while_the_others_keep_their_rate(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    videos = assets_dir / "videos"
    port = free_port()
    # The walkway clip is 139 s long, longer than this test: no server needs --loop (whose
    # looped mounts serve one client each; the probe's DESCRIBE before a reopen would be it).
    servers = {
        name: RtspServer(clip_dir(tmp_path, name, videos / f"{PERSON}.mp4"))
        for name in ("victim", "steady1", "steady2")
    }
    for s in servers.values():
        s.start()
    try:
        config: dict[str, Any] = {
            "model": model(assets_dir),
            "http": {"port": port},
            # default capture settings: the stall watchdog must fire within 10 s by default
            "cameras": [
                {"name": n, "url": s.url("cam"), "detect_fps": 4} for n, s in servers.items()
            ],
        }
        daemon = run_daemon(config)
        for n in servers:
            wait_for(lambda n=n: up(port, n) == 1, 60, f"{n} streaming")
        steady = ["steady1", "steady2"]
        before = rates(port, steady, 12)

        # 1. server killed: backoff, camera_up 0, the others unaffected
        t = time.monotonic()
        servers["victim"].kill()
        wait_for(lambda: up(port, "victim") == 0, 10, "victim down after kill", poll_s=0.1)
        down_after_kill_s = time.monotonic() - t
        during = rates(port, steady, 12)
        errors = metric(scrape(port), "vidpipe_camera_errors_total", camera="victim")
        assert errors >= 2  # the stream ended, then reopening was refused
        t = time.monotonic()
        servers["victim"].restart()
        wait_for(lambda: up(port, "victim") == 1, 60, "victim back after restart", poll_s=0.1)
        back_after_restart_s = time.monotonic() - t
        n0 = metric(scrape(port), "vidpipe_frames_inferred_total", camera="victim")
        wait_for(
            lambda: (
                metric(scrape(port), "vidpipe_frames_inferred_total", camera="victim") > n0 + 10
            ),
            30,
            "victim frames flowing again",
        )

        # 2. server frozen: the TCP connection stays open, no frame arrives
        t = time.monotonic()
        servers["victim"].freeze()
        wait_for(lambda: up(port, "victim") == 0, 20, "victim declared stalled", poll_s=0.1)
        stall_detected_s = time.monotonic() - t
        assert metric(scrape(port), "vidpipe_camera_errors_total", reason="stalled") >= 1
        t = time.monotonic()
        servers["victim"].thaw()
        wait_for(lambda: up(port, "victim") == 1, 60, "victim reopened after thaw", poll_s=0.1)
        back_after_thaw_s = time.monotonic() - t
        assert daemon.terminate(60) == 0
    finally:
        for s in servers.values():
            s.stop()
    print(
        f"\nrates before {before}, during outage {during}; kill -> down {down_after_kill_s:.1f} s,"
        f" restart -> up {back_after_restart_s:.1f} s; freeze -> stalled {stall_detected_s:.1f} s,"
        f" thaw -> up {back_after_thaw_s:.1f} s"
    )
    for cam in steady:
        assert before[cam] > 2.0, before  # detect_fps 4 of a 10 fps stream
        assert during[cam] >= 0.9 * before[cam], (cam, before, during)
    assert stall_detected_s <= 10.0 + 1.5  # stall_timeout_s defaults to 10 s


def offline_detections(assets_dir: Path, clip: Path, frames: int, tmp_path: Path) -> list[Any]:
    """``vidpipe detect`` on the first ``frames`` frames of ``clip``: one list per frame."""
    head = tmp_path / "head.mp4"
    cut = ["-frames:v", str(frames), "-c", "copy"]
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(clip), *cut, str(head)], check=True)
    # at the suite's precision and the daemon's threshold, like the daemon under test
    rows = detect_offline(assets_dir, [head], tmp_path, score_threshold=0.3)
    return [r["detections"] for r in rows]


def boxes(dets: list[dict[str, Any]], label: str) -> np.ndarray:
    got = [d["box"] for d in dets if d["label"] == label]
    return np.array(got, np.float32).reshape(-1, 4)


@pytest.mark.timeout(180)
def test_resolution_change_on_reconnect_moves_the_letterbox_mapping(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    videos = assets_dir / "videos"
    port = free_port()
    out = tmp_path / "events.jsonl"
    served = clip_dir(tmp_path, "served", videos / f"{PERSON}.mp4")  # 768x432
    server = RtspServer(served).start()
    try:
        config = {
            "model": model(assets_dir),
            "http": {"port": port},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [{"name": "cam", "url": server.url("cam")}],
        }
        daemon = run_daemon(config)

        def rows() -> list[dict[str, Any]]:
            if not out.exists():
                return []
            return [json.loads(line) for line in out.read_text().splitlines()]

        wait_for(lambda: len(rows()) > 10, 60, "rows at the first size")
        server.kill()
        shutil.copy(videos / f"{BOTTLE}.mp4", served / "cam.mp4")  # 640x360 from now on
        n_before = len(rows())
        server.restart()
        wait_for(lambda: sum(r["width"] == 640 for r in rows()) > 20, 60, "rows at the second size")
        assert daemon.terminate(60) == 0
    finally:
        server.stop()
    all_rows = rows()
    first, second = all_rows[:n_before], [r for r in all_rows[n_before:] if r["width"] == 640]
    assert {(r["width"], r["height"]) for r in first} == {(768, 432)}
    assert {(r["width"], r["height"]) for r in second} == {(640, 360)}
    for r in second:
        for d in r["detections"]:
            x1, y1, x2, y2 = d["box"]
            assert 0 <= x1 < x2 <= 640 and 0 <= y1 < y2 <= 360, d
    # The boxes match what the detector finds offline in the new clip's first seconds: the
    # letterbox mapping followed the new size (the old 768x432 mapping would scale them 1.2x).
    reference = offline_detections(assets_dir, videos / f"{BOTTLE}.mp4", 150, tmp_path)
    checked = 0
    for r in second[:10]:
        got = boxes(r["detections"], "bottle")
        if len(got) == 0:
            continue
        best = max(
            float(np.mean(box_iou(got, ref).max(axis=1))) if len(ref) else 0.0
            for ref in (boxes(d, "bottle") for d in reference)
        )
        assert best >= 0.8, (r["frame"], best)
        checked += 1
    assert checked >= 5
