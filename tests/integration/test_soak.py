"""Soak: 8 RTSP cameras, the server killed and restarted on a schedule, one sink slower than
the cameras. Watches RSS, threads, open descriptors, p95 latency and throughput per cycle.

``make soak`` runs the 20-minute form (kill every 2 minutes, ``-m soak``); ``make test`` runs
the same test for 2 minutes (kill every 30 s). ``VIDPIPE_SOAK_S`` and ``VIDPIPE_SOAK_KILL_S``
override both. Figures go to ``var/soak/soak-<seconds>s.json``.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import (
    free_port,
    histogram_buckets,
    metric,
    scrape,
    scrape_soon,
    wait_for,
)
from tests.rtsp import RtspServer
from vidpipe.quantiles import bucket_quantile, quantile_of

pytestmark = pytest.mark.integration

CAMERAS = 8
# 139 s long, longer than the restart period: the server plays it from the start after each
# restart and it never ends in between. (The test server's --loop mode serves one client per
# mount; an abandoned open still holding its connection would starve the reopen.)
CLIP = "one-by-one-person-detection"
# A reader that takes about 0.5 KB/s: slower than the sink's lines (about 20 a second).
SLOW_READER = """
import sys, time
with open(sys.argv[1], "rb", buffering=0) as f:  # blocks until the daemon opens its end
    while True:
        f.read(256)  # b"" once the daemon is gone: killed by the test then
        time.sleep(0.5)
"""


@dataclass
class Sample:
    t_s: float
    rss_kb: int
    threads: int
    fds: int
    cycle: int = -1


@dataclass
class Cycle:
    """One period between two server restarts, measured once every camera is back."""

    index: int
    recovered_s: float
    settled: Sample
    inferred_fps: float
    p95_latency_s: float | None  # None: nothing was observed
    drops: dict[str, float] = field(default_factory=dict)


def proc_sample(pid: int, t0: float) -> Sample:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
    threads = len(os.listdir(f"/proc/{pid}/task"))
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    return Sample(time.monotonic() - t0, rss, threads, fds)


def settled(pid: int, t0: float) -> Sample:
    """The quietest of three samples a second apart (a reconnect may still be winding down)."""
    samples = []
    for _ in range(3):
        samples.append(proc_sample(pid, t0))
        time.sleep(1.0)
    return min(samples, key=lambda s: (s.threads, s.fds))


def all_up(port: int) -> bool:
    text = scrape_soon(port)
    return metric(text, "vidpipe_camera_up") == CAMERAS


def run_soak(assets_dir: Path, tmp_path: Path, run_daemon, duration_s: float, kill_s: float):
    clips = tmp_path / "clips"
    clips.mkdir()
    for i in range(CAMERAS):  # one mount per camera
        (clips / f"cam{i}.mp4").symlink_to(assets_dir / "videos" / f"{CLIP}.mp4")
    fifo = tmp_path / "slow.jsonl"
    os.mkfifo(fifo)
    reader = subprocess.Popen([sys.executable, "-c", SLOW_READER, str(fifo)])
    server = RtspServer(clips).start()
    port = free_port()
    config: dict[str, Any] = {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
        },
        "http": {"port": port},
        "capture": {"backoff_initial_s": 0.5, "backoff_max_s": 4.0},
        "sinks": [
            {"type": "jsonl", "path": str(tmp_path / "events.jsonl")},
            {"type": "jsonl", "path": str(fifo), "queue_size": 64},  # the slow one
        ],
        "cameras": [
            {"name": f"cam{i}", "url": server.url(f"cam{i}"), "detect_fps": 3}
            for i in range(CAMERAS)
        ],
    }
    cycles: list[Cycle] = []
    samples: list[Sample] = []
    try:
        daemon = run_daemon(config)
        pid = daemon.proc.pid
        t0 = time.monotonic()
        wait_for(lambda: all_up(port), 90, "all 8 cameras streaming")
        t_up = time.monotonic()  # the soak's duration counts from here
        index = 0
        while True:
            t_cycle = time.monotonic()
            recovered_s = t_cycle - t0 if index == 0 else 0.0
            if index > 0:
                server.restart()
                wait_for(lambda: all_up(port), 90, f"all cameras back in cycle {index}")
                recovered_s = time.monotonic() - t_cycle
            snap = settled(pid, t0)
            m_start, t_start = scrape(port), time.monotonic()
            next_kill = t_cycle + kill_s
            while time.monotonic() < next_kill - 1.0:
                samples.append(proc_sample(pid, t0))
                samples[-1].cycle = index
                time.sleep(min(5.0, max(0.1, next_kill - 1.0 - time.monotonic())))
            m_end, t_end = scrape(port), time.monotonic()

            cycles.append(
                Cycle(
                    index=index,
                    recovered_s=recovered_s,
                    settled=snap,
                    inferred_fps=(
                        metric(m_end, "vidpipe_frames_inferred_total")
                        - metric(m_start, "vidpipe_frames_inferred_total")
                    )
                    / (t_end - t_start),
                    p95_latency_s=bucket_quantile(
                        histogram_buckets(m_start, "vidpipe_end_to_end_latency_seconds"),
                        histogram_buckets(m_end, "vidpipe_end_to_end_latency_seconds"),
                        0.95,
                    ),
                    drops={
                        "frames": metric(m_end, "vidpipe_frames_dropped_total"),
                        "slow_sink": metric(m_end, "vidpipe_sink_dropped_total", sink="jsonl:1"),
                        "fast_sink": metric(m_end, "vidpipe_sink_dropped_total", sink="jsonl:0"),
                    },
                )
            )
            index += 1
            if time.monotonic() - t_up + kill_s > duration_s + 1.0:
                break
            server.kill()
        # Exit 1 ("some results were not written"), always, and for one reason only: the slow
        # sink. Its reader takes about 2 lines a second while 8 cameras at 3 fps queue 24, so
        # its queue (64) is full when SIGTERM comes, and 64 lines need far longer than the
        # 10 s shutdown_timeout_s to drain. The fast sink loses nothing.
        code = daemon.terminate(60)
        log = daemon.log()
        assert code == 1, (code, log[-2000:])
        assert re.search(r"sink jsonl:1: \d+ item\(s\) left unwritten at shutdown", log), log[
            -2000:
        ]
        assert not re.search(r"sink jsonl:0: \d+ item\(s\) left unwritten", log), log[-2000:]
        for other_cause in ("inference did not drain", "Traceback"):
            assert other_cause not in log, (other_cause, log[-2000:])
        summary = re.search(r"jsonl:0: (\d+) written, (\d+) failed, (\d+) dropped", log)
        assert summary and summary.group(2) == summary.group(3) == "0", log[-2000:]
    finally:
        server.stop()
        reader.kill()
        reader.wait(10)
    return cycles, samples


WINDOW_S = 10.0


def latency_windows(events: Path, skip_s: float) -> list[float]:
    """p95 of ``latency_ms`` (capture to result, per frame, from the JSONL sink) in consecutive
    ``WINDOW_S`` windows of wall time, after the first ``skip_s`` seconds."""
    rows = [json.loads(line) for line in events.read_text().splitlines()]
    stamps = [datetime.fromisoformat(r["ts"].replace("Z", "+00:00")).timestamp() for r in rows]
    t0 = stamps[0] + skip_s
    windows: dict[int, list[float]] = {}
    for t, r in zip(stamps, rows, strict=True):
        if t >= t0:
            windows.setdefault(int((t - t0) // WINDOW_S), []).append(r["latency_ms"] / 1000.0)
    p95s = [quantile_of(v, 0.95) for _, v in sorted(windows.items()) if len(v) >= 20]
    return [p for p in p95s if p is not None]  # none is: each window has 20 values or more


def check_and_report(
    cycles: list[Cycle], samples: list[Sample], duration_s: float, p95_windows: list[float]
) -> None:
    assert len(cycles) >= 3
    # What the daemon held just before the first restart, the quietest of cycle 0's last three
    # samples: when cycle 0 settles, right after start-up, descriptors opened on first use may
    # not exist yet (one run settled at 15 and then held 17 for the rest of the cycle and
    # after every restart).
    warm = min([s for s in samples if s.cycle == 0][-3:], key=lambda s: (s.threads, s.fds))
    # warm-up is the first cycle: compare the cycle after it with the last one
    rss_start = statistics.median(s.rss_kb for s in samples if s.cycle == 1)
    rss_end = statistics.median(s.rss_kb for s in samples if s.cycle == cycles[-1].index)
    report = {
        "duration_s": duration_s,
        "cameras": CAMERAS,
        "cycles": [asdict(c) for c in cycles],
        "rss_after_warmup_kb": rss_start,
        "rss_end_kb": rss_end,
        "rss_growth": rss_end / rss_start - 1.0,
        "p95_latency_windows_s": p95_windows,
        "samples": [asdict(s) for s in samples],
    }
    out = Path("var/soak")
    out.mkdir(parents=True, exist_ok=True)
    (out / f"soak-{int(duration_s)}s.json").write_text(json.dumps(report, indent=1))
    print(
        f"\nsoak {duration_s:.0f} s, {len(cycles)} cycles: RSS {rss_start / 1024:.1f} -> "
        f"{rss_end / 1024:.1f} MB ({report['rss_growth']:+.1%}); per cycle "
        + "; ".join(
            f"#{c.index}: back {c.recovered_s:.1f} s, threads {c.settled.threads}, fds "
            f"{c.settled.fds}, {c.inferred_fps:.1f} fps, p95 {c.p95_latency_s} s"
            for c in cycles
        )
        + f"; p95 per {WINDOW_S:.0f} s window: "
        + " ".join(f"{w * 1000:.0f}" for w in p95_windows)
        + " ms"
    )
    assert report["rss_growth"] < 0.05
    for c in cycles[1:]:
        # threads and descriptors come back to what they were before the first restart
        assert c.settled.threads == warm.threads, (c.index, c.settled, warm)
        assert c.settled.fds == warm.fds, (c.index, c.settled, warm)
        # the pipeline keeps up as before, and latency does not creep
        assert c.inferred_fps >= 0.8 * cycles[0].inferred_fps, (c.index, c.inferred_fps)
    # p95 latency does not trend upward: the median of the last third of the 10 s windows
    # against the first third (a median, so that a passing spike is not taken for a trend)
    third = max(1, len(p95_windows) // 3)
    early = statistics.median(p95_windows[:third])
    late = statistics.median(p95_windows[-third:])
    assert late <= 1.5 * early + 0.05, p95_windows
    assert cycles[-1].drops["slow_sink"] > cycles[0].drops["slow_sink"] > 0  # it keeps dropping
    assert cycles[-1].drops["fast_sink"] == 0


def _soak(assets_dir: Path, tmp_path: Path, run_daemon, duration_s: float, kill_s: float):
    duration_s = float(os.environ.get("VIDPIPE_SOAK_S", duration_s))
    kill_s = float(os.environ.get("VIDPIPE_SOAK_KILL_S", kill_s))
    cycles, samples = run_soak(assets_dir, tmp_path, run_daemon, duration_s, kill_s)
    windows = latency_windows(tmp_path / "events.jsonl", skip_s=kill_s)  # after the first cycle
    check_and_report(cycles, samples, duration_s, windows)


@pytest.mark.timeout(400)
def test_soak_two_minutes(assets_dir: Path, tmp_path: Path, run_daemon) -> None:
    """The CI form: 2 minutes, the server killed every 30 s."""
    _soak(assets_dir, tmp_path, run_daemon, 120, 30)


@pytest.mark.soak
@pytest.mark.timeout(1800)
def test_soak_twenty_minutes(assets_dir: Path, tmp_path: Path, run_daemon) -> None:
    """``make soak``: 20 minutes, the server killed every 2 minutes."""
    _soak(assets_dir, tmp_path, run_daemon, 1200, 120)
