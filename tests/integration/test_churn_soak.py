"""Soak: camera churn through the control API. Eight cameras are added, paused, resumed and
removed over and over, a phase every few seconds, while two steady cameras (one RTSP, one
looping file) run beside them. The churn must leave nothing behind and touch nothing else:

* after warm-up (the first half of the run, at least 45 s), threads and open descriptors
  come back to the same count at the end of every round (when no churn camera exists), and
  RSS stays within 5 %;
* the steady cameras never reconnect, and every frame they decode is inferred or counted as
  dropped with a reason (what is neither is only what is in flight);
* at shutdown the ``accounting:`` line balances: every frame that entered inference finished
  and was written, none failed or dropped.

``make soak`` runs it for 10 minutes; ``VIDPIPE_CHURN_S`` sets the duration (90 s is the
least that leaves rounds to compare after warm-up). Figures go to
``var/soak/churn-<seconds>s.json``.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, metric, wait_for
from tests.integration.test_control_api import call
from tests.integration.test_control_api import scrape as control_scrape
from tests.integration.test_pipeline_faults import ACCOUNTING
from tests.integration.test_soak import Sample, settled
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.soak]

ADMIN = "Churn-Admin-Token-0123456789"
CHURN = [f"churn-{i}" for i in range(8)]
STEADY = ("steady-rtsp", "steady-file")
PHASE_S = 3.0  # between two phases of a round: each phase is one call per churn camera
CLIP = "one-by-one-person-detection"


@dataclass
class Round:
    """The daemon at the end of one round, every churn camera removed."""

    index: int
    t_s: float
    sample: Sample
    in_flight: dict[str, float]  # per steady camera: decoded - inferred - dropped


def churn_camera(assets_dir: Path, name: str) -> dict[str, Any]:
    clip = assets_dir / "videos" / "bottle-detection.mp4"
    return {"url": str(clip), "loop": True, "realtime": True, "detect_fps": 2, "name": name}


def config(assets_dir: Path, port: int, rtsp_url: str, out: Path) -> dict[str, Any]:
    models = assets_dir / "models"
    person = assets_dir / "videos" / f"{CLIP}.mp4"
    return {
        "model": {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")},
        "http": {"port": port, "admin_token": ADMIN},
        "scheduler": {"max_frame_age_ms": 60000},  # a loaded 2-core box: no too_old drops
        "sinks": [{"type": "jsonl", "path": str(out), "queue_size": 100000}],
        "cameras": [
            {"name": STEADY[0], "url": rtsp_url, "detect_fps": 5},
            {
                "name": STEADY[1],
                "url": str(person),
                "loop": True,
                "realtime": True,
                "detect_fps": 5,
            },
        ],
    }


def scrape(port: int) -> str:
    """``/metrics`` with the admin token (a slow answer is no failure under churn)."""
    return control_scrape(port, ADMIN, timeout_s=30.0)


def api(port: int, method: str, path: str, body: Any = None) -> dict[str, Any] | None:
    status, _, answer = call(port, method, path, body, token=ADMIN)
    assert status in (200, 201, 204), (method, path, status, answer)
    return answer


def churn_round(assets_dir: Path, port: int) -> None:
    """Add, pause, resume and remove every churn camera, a phase every ``PHASE_S``; the eight
    calls of a phase are sent at once, by eight clients.

    Sent at once, they also fill the daemon's executor in the first round: asyncio's default
    pool starts a thread only when all it has are busy (here, waiting for the reload lock),
    up to min(32, cores + 4), and keeps it. After that its thread count is fixed, so any
    thread more is a leak.
    """
    phases = [
        lambda n: api(port, "PUT", f"/cameras/{n}", churn_camera(assets_dir, n)),
        lambda n: api(port, "POST", f"/cameras/{n}/pause"),
        lambda n: api(port, "POST", f"/cameras/{n}/resume"),
        lambda n: api(port, "DELETE", f"/cameras/{n}"),
    ]
    with ThreadPoolExecutor(len(CHURN)) as clients:
        for phase in phases:
            list(clients.map(phase, CHURN))  # re-raises a client's failed assertion
            time.sleep(PHASE_S)


def steady_in_flight(text: str) -> dict[str, float]:
    """Per steady camera, frames decoded and neither inferred nor dropped (yet)."""
    out = {}
    for cam in STEADY:
        captured = metric(text, "vidpipe_frames_captured_total", camera=cam)
        inferred = metric(text, "vidpipe_frames_inferred_total", camera=cam)
        dropped = metric(text, "vidpipe_frames_dropped_total", camera=cam)  # every reason
        assert captured > 0, cam
        out[cam] = captured - inferred - dropped
    return out


def run_churn(assets_dir: Path, tmp_path: Path, run_daemon, duration_s: float) -> list[Round]:
    port, out = free_port(), tmp_path / "results.jsonl"
    with RtspServer(assets_dir / "videos", loop=True) as server:
        daemon = run_daemon(config(assets_dir, port, server.url(CLIP), out))
        up = lambda: metric(scrape(port), "vidpipe_camera_up") == 2  # noqa: E731
        wait_for(up, 120, "both steady cameras streaming")
        pid, t0 = daemon.proc.pid, time.monotonic()
        rounds: list[Round] = []
        while not rounds or time.monotonic() - t0 < duration_s:
            churn_round(assets_dir, port)
            text = scrape(port)
            sample = settled(pid, t0)
            rounds.append(Round(len(rounds), sample.t_s, sample, steady_in_flight(text)))
            assert metric(text, "vidpipe_camera_reconnects_total") == 0, "a steady camera"
            assert metric(text, "vidpipe_camera_up") == 2
        code = daemon.terminate(60)
    log = daemon.log()
    assert code == 0, log[-3000:]
    for cam in STEADY:  # the churn never reopened them
        assert log.count(f"camera {cam}: streaming") == 1, (cam, log[-3000:])
    assert log.count("control API: ") == 4 * len(CHURN) * len(rounds)
    assert "Traceback" not in log, log[-3000:]
    found = ACCOUNTING.search(log)
    assert found, log[-3000:]
    submitted, finished, handed, written, failed, dropped = map(int, found.groups())
    assert submitted == finished == handed == written > 0, found.group(0)
    assert failed == dropped == 0, found.group(0)
    return rounds


def check_and_report(rounds: list[Round], duration_s: float) -> None:
    # Warm-up, the first half of the run and at least 45 s: round 0 fills the API's
    # executor and imports what a reload needs; RSS then climbs in steps to a plateau
    # (allocator arenas: 293, 296, 325, 334, 334, 334 MB at the ends of a 90 s run's rounds).
    # How soon it gets there depends on the load beside it: a 600 s run on a 2-core box
    # shared with other tests stepped 292 -> 315 -> 326 -> 334 MB between 215 and 293 s, then
    # 334 -> 337.7 MB over its last 300 s (threads 19 and fds 10 throughout), so a quarter
    # (150 s) was too early to call it warm. A leak still shows: 5 % of the plateau over the
    # second half's rounds is ~100 KB per camera added and removed.
    warm = next((r for r in rounds if r.t_s >= max(45.0, duration_s / 2)), rounds[-1])
    assert warm.index >= 1 and len(rounds) - warm.index >= 2, "too short to compare"
    report = {
        "duration_s": duration_s,
        "churn_cameras": len(CHURN),
        "rounds": [asdict(r) for r in rounds],
        "rss_start_kb": rounds[0].sample.rss_kb,
        "rss_after_warmup_kb": warm.sample.rss_kb,
        "rss_end_kb": rounds[-1].sample.rss_kb,
        "rss_growth": rounds[-1].sample.rss_kb / warm.sample.rss_kb - 1.0,
    }
    where = Path("var/soak")
    where.mkdir(parents=True, exist_ok=True)
    (where / f"churn-{int(duration_s)}s.json").write_text(json.dumps(report, indent=1))
    print(
        f"\nchurn {duration_s:.0f} s, {len(rounds)} rounds of {len(CHURN)} cameras: "
        + "; ".join(
            f"#{r.index} {r.t_s:.0f} s: threads {r.sample.threads}, fds {r.sample.fds}, "
            f"RSS {r.sample.rss_kb / 1024:.1f} MB, in flight {r.in_flight}"
            for r in rounds
        )
        + f"; RSS growth after warm-up (#{warm.index}) {report['rss_growth']:+.1%}"
    )
    for r in rounds[warm.index :]:
        assert (r.sample.threads, r.sample.fds) == (warm.sample.threads, warm.sample.fds), r
        # a frame lost without a count would add up round after round; in flight is at most
        # the camera's mailbox and the inference requests
        assert all(0 <= n <= 8 for n in r.in_flight.values()), r
    assert report["rss_growth"] < 0.05, report["rss_growth"]


@pytest.mark.timeout(1200)
def test_camera_churn_through_the_api(assets_dir: Path, tmp_path: Path, run_daemon) -> None:
    """``make soak``: 10 minutes (``VIDPIPE_CHURN_S`` overrides)."""
    duration_s = float(os.environ.get("VIDPIPE_CHURN_S", 600))
    rounds = run_churn(assets_dir, tmp_path, run_daemon, duration_s)
    check_and_report(rounds, duration_s)
