"""Pipeline faults injected for real into a running daemon: a sink whose reader stops (a FIFO
whose reader gets SIGSTOP), a file-size limit set on the daemon with prlimit(2), a snapshot
directory replaced by a file, failing completion callbacks, SIGTERM accounting, and bad models.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import re
import resource
import signal
import subprocess
import sys
import threading
import time
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
from tests.precision import with_precision
from vidpipe.config import parse_config
from vidpipe.daemon import Daemon
from vidpipe.infer.openvino import OpenVINOBackend
from vidpipe.quantiles import bucket_quantile

pytestmark = pytest.mark.integration

PERSON, CAR = "one-by-one-person-detection", "car-detection"


def base_config(assets_dir: Path, port: int, **extra: Any) -> dict[str, Any]:
    videos = assets_dir / "videos"
    live = {"loop": True, "realtime": True}  # files played like cameras
    config: dict[str, Any] = {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
        },
        "http": {"port": port},
        "cameras": [
            {"name": "walkway", "url": str(videos / f"{PERSON}.mp4"), **live},
            {"name": "street", "url": str(videos / f"{CAR}.mp4"), **live},
        ],
    }
    config.update(extra)
    return config


def small_fifo(path: Path) -> int:
    """Make a FIFO with a 4 KiB pipe buffer; returns a descriptor that keeps the pipe (and
    its size) alive. It never reads, so a stopped reader stalls the writer within seconds."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
    return fd


F_SETPIPE_SZ = 1031  # Linux fcntl: set a pipe's buffer size


def jsonl_lines(path: Path) -> list[dict[str, Any]]:
    """Every line must be a whole JSON object: a torn line fails here."""
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "the file ends in a torn line"
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.timeout(150)
def test_stalled_sink_costs_only_its_own_items(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    port = free_port()
    fifo = tmp_path / "stalled.jsonl"
    keep = small_fifo(fifo)
    received = tmp_path / "received.jsonl"
    normal = tmp_path / "normal.jsonl"
    with received.open("wb") as out:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=out)
    try:
        config = base_config(
            assets_dir,
            port,
            sinks=[
                {"type": "jsonl", "path": str(fifo), "queue_size": 32},
                {"type": "jsonl", "path": str(normal)},
            ],
        )
        daemon = run_daemon(config)
        stalled, other = "jsonl:0", "jsonl:1"
        wait_for(
            lambda: metric(scrape_soon(port), "vidpipe_sink_written_total", sink=stalled) > 20,
            60,
            "both sinks writing",
        )
        t0, m0 = time.monotonic(), scrape(port)
        time.sleep(10)  # the rates before the stall, same run
        t1, m1 = time.monotonic(), scrape(port)

        reader.send_signal(signal.SIGSTOP)  # the pipe fills up, then write(2) blocks
        time.sleep(30)
        t2, m2 = time.monotonic(), scrape(port)
        reader.send_signal(signal.SIGCONT)

        def rate(name: str, a: str, b: str, dt: float, **labels: str) -> float:
            return (metric(b, name, **labels) - metric(a, name, **labels)) / dt

        inferred_before = rate("vidpipe_frames_inferred_total", m0, m1, t1 - t0)
        inferred_during = rate("vidpipe_frames_inferred_total", m1, m2, t2 - t1)
        other_before = rate("vidpipe_sink_written_total", m0, m1, t1 - t0, sink=other)
        other_during = rate("vidpipe_sink_written_total", m1, m2, t2 - t1, sink=other)
        p95_other = bucket_quantile(
            histogram_buckets(m1, "vidpipe_sink_delay_seconds", sink=other),
            histogram_buckets(m2, "vidpipe_sink_delay_seconds", sink=other),
            0.95,
        )
        print(
            f"\ninferred {inferred_before:.1f} -> {inferred_during:.1f} fps; other sink "
            f"{other_before:.1f} -> {other_during:.1f} /s, p95 delay <= {p95_other} s"
        )
        # inference and the other sink carry on as before the stall
        assert inferred_during >= 0.8 * inferred_before
        assert other_during >= 0.8 * other_before
        assert p95_other is not None and p95_other <= 0.5
        assert metric(m2, "vidpipe_sink_dropped_total", sink=other) == 0
        # the stalled sink dropped, counted, with the reason
        dropped = metric(m2, "vidpipe_sink_dropped_total", sink=stalled, reason="queue_full")
        assert dropped > 0
        assert metric(m2, "vidpipe_sink_queue_depth", sink=stalled) == 32
        # and it resumes once its reader does
        written_at_thaw = metric(m2, "vidpipe_sink_written_total", sink=stalled)
        wait_for(
            lambda: (
                metric(scrape_soon(port), "vidpipe_sink_written_total", sink=stalled)
                > written_at_thaw + 20
            ),
            30,
            "the stalled sink writing again",
        )
        assert daemon.terminate(60) == 0
    finally:
        reader.send_signal(signal.SIGCONT)
        reader.terminate()
        reader.wait(10)
        os.close(keep)
    jsonl_lines(received)  # whole lines only, before and after the stall


@pytest.mark.timeout(150)
def test_sink_write_errors_are_counted_and_recover(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    port = free_port()
    events = tmp_path / "events.jsonl"
    snapshots = tmp_path / "snapshots"
    config = base_config(
        assets_dir,
        port,
        sinks=[
            {"type": "jsonl", "path": str(events)},
            {"type": "snapshot", "dir": str(snapshots), "min_interval_s": 0},
        ],
    )
    daemon = run_daemon(config)
    wait_for(
        lambda: metric(scrape_soon(port), "vidpipe_sink_written_total", sink="snapshot") > 5,
        60,
        "both sinks writing",
    )
    pid = daemon.proc.pid
    # "disk full": a file-size limit on the running daemon, just above what it has written
    limit = events.stat().st_size + 3000
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    # "not writable": the snapshot directory is replaced by a plain file
    snapshots.rename(tmp_path / "snapshots.old")
    snapshots.write_text("in the way")
    t_fault = time.monotonic()

    def errors(text: str, sink: str) -> float:
        return metric(text, "vidpipe_sink_errors_total", sink=sink)

    wait_for(
        lambda: (
            (m := scrape_soon(port)) and errors(m, "jsonl") >= 20 and errors(m, "snapshot") >= 20
        ),
        60,
        "write errors counted on both sinks",
    )
    m_fault = scrape(port)
    assert daemon.proc.poll() is None
    fault_s = time.monotonic() - t_fault
    log = daemon.log()
    for sink in ("jsonl", "snapshot"):
        lines = re.findall(rf"sink {sink}: handle\(\) failed", log)
        # rate-limited: one line per 10 s per sink, not one per failure
        assert 1 <= len(lines) <= fault_s / 10 + 1, (sink, len(lines), fault_s)
    assert "File too large" in log or "EFBIG" in log or "Errno 27" in log
    inferred = metric(m_fault, "vidpipe_frames_inferred_total")

    # the causes go away: both sinks recover by themselves
    t_fix = time.monotonic()
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    snapshots.unlink()
    written = {
        s: metric(m_fault, "vidpipe_sink_written_total", sink=s) for s in ("jsonl", "snapshot")
    }

    def recovered() -> bool:
        m = scrape(port)
        return all(
            metric(m, "vidpipe_sink_written_total", sink=s) > n + 5 for s, n in written.items()
        )

    wait_for(recovered, 30, "both sinks writing again")
    print(f"\nrecovery after the cause went away: {time.monotonic() - t_fix:.1f} s")
    assert metric(scrape_soon(port), "vidpipe_frames_inferred_total") > inferred  # never stopped
    assert daemon.log().count("recovered after") >= 2
    assert any(snapshots.iterdir())
    assert daemon.terminate(60) == 0
    rows = jsonl_lines(events)  # no torn line although writes failed mid-line
    assert len(rows) > 0


ACCOUNTING = re.compile(
    r"accounting: (\d+) frame\(s\) entered inference, (\d+) finished, (\d+) result\(s\) handed "
    r"to sinks \(jsonl: (\d+) written, (\d+) failed, (\d+) dropped(?:\)|, )"
)  # the live view's sink ("live: ...") may follow the configured ones


@pytest.mark.timeout(120)
def test_sigterm_writes_every_frame_that_entered_inference(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    port = free_port()
    out = tmp_path / "all.jsonl"
    videos = assets_dir / "videos"
    config = base_config(
        assets_dir,
        port,
        shutdown_timeout_s=30,
        sinks=[{"type": "jsonl", "path": str(out)}],
        # files without realtime: read as fast as inference takes them, the pool always full
        cameras=[
            {"name": f"c{i}", "url": str(videos / f"{clip}.mp4"), "loop": True}
            for i, clip in enumerate((PERSON, CAR, "bottle-detection"))
        ],
    )
    daemon = run_daemon(config)
    wait_for(lambda: out.exists() and len(out.read_bytes().splitlines()) > 60, 60, "60 results")
    # Requests are in flight now. One scrape can fall between a completion and the next submit
    # (0 for an instant), so a few scrapes are allowed to find the pool busy.
    wait_for(
        lambda: metric(scrape_soon(port), "vidpipe_inflight_requests") > 0, 10, "requests in flight"
    )
    assert daemon.terminate(60) == 0
    m = ACCOUNTING.search(daemon.log())
    assert m, daemon.log()[-3000:]
    submitted, finished, handed, written, failed, dropped = map(int, m.groups())
    rows = jsonl_lines(out)
    assert submitted == finished == handed == written == len(rows), m.group(0)
    assert failed == dropped == 0
    # every camera's sequence numbers are unique: nothing written twice
    for cam in ("c0", "c1", "c2"):
        seqs = [r["frame"] for r in rows if r["camera"] == cam]
        assert len(seqs) == len(set(seqs)) > 0


@pytest.mark.timeout(90)
def test_second_sigterm_exits_at_once(assets_dir: Path, tmp_path: Path, run_daemon) -> None:
    port = free_port()
    fifo = tmp_path / "stuck.jsonl"
    keep = small_fifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.DEVNULL)
    try:
        config = base_config(
            assets_dir,
            port,
            shutdown_timeout_s=120,
            sinks=[{"type": "jsonl", "path": str(fifo), "queue_size": 16}],
        )
        daemon = run_daemon(config)
        wait_for(
            lambda: metric(scrape_soon(port), "vidpipe_sink_written_total") > 10, 60, "sink writing"
        )
        reader.send_signal(signal.SIGSTOP)  # the sink will block in write(2): a slow drain
        wait_for(
            lambda: metric(scrape_soon(port), "vidpipe_sink_dropped_total") > 0, 60, "sink stuck"
        )
        daemon.proc.send_signal(signal.SIGTERM)
        time.sleep(3)
        assert daemon.proc.poll() is None  # still draining into the stuck sink
        t = time.monotonic()
        daemon.proc.send_signal(signal.SIGTERM)
        code = daemon.proc.wait(20)
        print(f"\nsecond SIGTERM -> exit in {time.monotonic() - t:.2f} s")
        assert code == 1
        # logging writes stderr directly (no fd-2 filter thread since capture moved to libav),
        # so the line is on disk before os._exit
        assert "second SIGTERM: exiting now" in daemon.log()
    finally:
        reader.send_signal(signal.SIGCONT)
        reader.terminate()
        reader.wait(10)
        os.close(keep)


@pytest.mark.timeout(120)
def test_failing_callbacks_are_counted_and_every_slot_comes_back(
    assets_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every third completion callback fails on purpose (its output tensor cannot be read).

    The daemon runs in this process so that the real OpenVINO callback can be made to fail.
    """
    real = OpenVINOBackend._on_complete
    calls = itertools.count()
    injected = 0
    lock = threading.Lock()

    class UnreadableRequest:
        def get_output_tensor(self, _index: int) -> Any:
            raise RuntimeError("injected: output tensor unreadable")

    def flaky(self: OpenVINOBackend, request: Any, sub_id: Any) -> None:
        nonlocal injected
        if next(calls) % 3 == 0:
            with lock:
                injected += 1
            return real(self, UnreadableRequest(), sub_id)
        return real(self, request, sub_id)

    monkeypatch.setattr(OpenVINOBackend, "_on_complete", flaky)
    videos = assets_dir / "videos"
    cfg = parse_config(
        json.dumps(
            with_precision(
                {
                    "model": {
                        "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                        "labels": str(assets_dir / "models" / "coco80.txt"),
                    },
                    "http": {"enabled": False},
                    "cameras": [{"name": "street", "url": str(videos / f"{CAR}.mp4")}],
                }
            )
        )
    )
    daemon = Daemon(cfg)
    daemon.start()
    try:
        assert daemon.scheduler is not None
        backend = daemon.scheduler.backend
        worker = daemon.workers["street"]
        wait_for(lambda: worker.state.value == "stopped", 90, "the clip played to its end")
        wait_for(lambda: backend.in_flight() == 0, 10, "every slot idle again")
        reg = daemon.metrics.registry
        model = {"model": daemon.scheduler.model.name}
        errors = reg.get_sample_value("vidpipe_inference_errors_total", model)
        dropped = reg.get_sample_value(
            "vidpipe_frames_dropped_total", {"camera": "street", "reason": "inference_error"}
        )
        inferred = reg.get_sample_value("vidpipe_frames_inferred_total", {"camera": "street"})
        assert injected >= 50
        assert errors == dropped == injected
        assert inferred == daemon.scheduler.submitted - injected
        assert getattr(backend, "callback_errors", None) == injected
        # the pool still works at full size afterwards
        assert backend.lend(1.0) is not None
    finally:
        assert daemon.shutdown()


BAD_MODELS = {
    "missing": lambda d: d / "no-such-model.onnx",
    # Non-UTF-8 first bytes on purpose: a parser that quotes them on stderr breaks the
    # text decode below (OpenVINO's TensorFlow frontend did, through absl).
    "not-a-model": lambda d: (
        d / "junk.onnx",
        (d / "junk.onnx").write_bytes(b"\x90\xfa" + os.urandom(4094)),
    )[0],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("case", "decoder", "expected"),
    [
        ("missing", "yolox", "no-such-model.onnx"),
        ("not-a-model", "yolox", "junk.onnx"),
        ("real", "ssd", "ssd"),  # the real model's outputs do not fit the ssd decoder
    ],
)
def test_bad_model_is_refused_before_anything_starts(
    assets_dir: Path, tmp_path: Path, case: str, decoder: str, expected: str
) -> None:
    port = free_port()
    model = (
        assets_dir / "models" / "yolox_nano.onnx" if case == "real" else BAD_MODELS[case](tmp_path)
    )
    out = tmp_path / "out" / "events.jsonl"
    shots = tmp_path / "shots"
    config = base_config(
        assets_dir,
        port,
        sinks=[{"type": "jsonl", "path": str(out)}, {"type": "snapshot", "dir": str(shots)}],
    )
    config["model"] = {**config["model"], "path": str(model), "type": decoder}
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    # nothing half-started: no sink output, no capture, no HTTP server left behind
    assert not out.parent.exists() and not shots.exists()
    assert "started" not in proc.stderr and "HTTP on" not in proc.stderr
