"""Sinks with real threads, real files and a real metrics registry."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np
import pytest

from vidpipe.config import JsonlSinkConfig, SnapshotSinkConfig
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks import JsonlSink, SinkPool, SnapshotSink, build_sinks
from vidpipe.sinks import jsonl as jsonl_module
from vidpipe.sinks.paths import safe_name
from vidpipe.sinks.record import detection_dicts
from vidpipe.types import Detections, FrameResult

pytestmark = pytest.mark.timeout(30)

LABELS = ("person", "car", "dog")
_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def make_result(
    seq: int,
    *,
    camera: str = "cam",
    n_det: int = 1,
    t_capture: float = 100.0,
    with_image: bool = False,
) -> FrameResult:
    """A real FrameResult of a 48x64 frame with ``n_det`` boxes."""
    xyxy = np.array([[2 + i % 20, 3, 30 + i % 20, 40] for i in range(n_det)], np.float32)
    image = np.full((48, 64, 3), seq % 256, np.uint8) if with_image else None
    return FrameResult(
        camera=camera,
        seq=seq,
        t_capture=t_capture,
        t_done=t_capture + 0.01234,
        wall_time=1_700_000_000.5 + seq,
        width=64,
        height=48,
        detections=Detections(
            xyxy.reshape(-1, 4),
            np.full(n_det, 0.9, np.float32),
            (np.arange(n_det) % 3).astype(np.int32),
        ),
        labels=LABELS,
        image=image,
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    """A metric sample by full name (``..._total`` for counters); 0 when absent."""
    return metrics.registry.get_sample_value(name, labels) or 0.0


def read_lines(path: Path) -> list[dict[str, object]]:
    text = path.read_text(encoding="utf-8")
    assert text == "" or text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


class StalledSink:
    """A sink whose handle() blocks until released (an NFS mount gone away, say)."""

    wants_images = False

    def __init__(self, name: str = "stalled", queue_size: int = 8) -> None:
        self.name = name
        self.queue_size = queue_size
        self.entered = threading.Event()
        self.release = threading.Event()
        self.handled: list[int] = []
        self.closed = False

    def handle(self, result: FrameResult) -> None:
        self.entered.set()
        self.release.wait(timeout=20)
        self.handled.append(result.seq)

    def close(self) -> None:
        self.closed = True


def test_jsonl_writes_one_line_per_result(tmp_path: Path) -> None:
    metrics = Metrics()
    path = tmp_path / "deep" / "dir" / "events.jsonl"
    pool = SinkPool([JsonlSink("jsonl", path)], metrics)
    pool.start()
    for seq in range(50):
        pool.submit(make_result(seq, n_det=seq % 3))
    assert pool.flush(timeout_s=10)

    lines = read_lines(path)
    assert [line["frame"] for line in lines] == list(range(50))
    first = lines[1]
    assert set(first) == {
        "v",
        "camera",
        "frame",
        "ts",
        "width",
        "height",
        "latency_ms",
        "model",
        "detections",
    }
    assert first["v"] == 1
    assert first["camera"] == "cam"
    assert first["ts"] == "2023-11-14T22:13:21.500Z"
    assert all(_TS.fullmatch(str(line["ts"])) for line in lines)
    assert (first["width"], first["height"]) == (64, 48)
    assert first["latency_ms"] == 12.3
    assert first["detections"] == detection_dicts(make_result(1, n_det=1))
    assert sample(metrics, "vidpipe_sink_written_total", sink="jsonl") == 50
    assert sample(metrics, "vidpipe_sink_errors_total", sink="jsonl") == 0
    assert pool.close(timeout_s=5) == {"jsonl": 0}


def test_jsonl_only_with_detections(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    pool = SinkPool([JsonlSink("jsonl", path, only_with_detections=True)], Metrics())
    pool.start()
    for seq in range(10):
        pool.submit(make_result(seq, n_det=seq % 2))
    assert pool.close(timeout_s=5) == {"jsonl": 0}
    assert [line["frame"] for line in read_lines(path)] == [1, 3, 5, 7, 9]


def test_concurrent_writers_never_tear_lines(tmp_path: Path) -> None:
    """Four submitting threads, two pools appending to one file; lines are ~8 KB (> PIPE_BUF)."""
    path = tmp_path / "shared.jsonl"
    metrics = Metrics()
    pools = [SinkPool([JsonlSink("jsonl", path, queue_size=1000)], metrics) for _ in range(2)]
    for pool in pools:
        pool.start()
    per_thread = 150

    def produce(worker: int) -> None:
        for seq in range(per_thread):
            pools[worker % 2].submit(make_result(seq, camera=f"cam{worker}", n_det=120))

    threads = [threading.Thread(target=produce, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive()
    for pool in pools:
        assert pool.close(timeout_s=10) == {"jsonl": 0}

    lines = read_lines(path)  # json.loads fails on any torn or interleaved line
    assert len(lines) == 4 * per_thread
    assert len(json.dumps(lines[0])) > 4096
    assert {(line["camera"], line["frame"]) for line in lines} == {
        (f"cam{w}", s) for w in range(4) for s in range(per_thread)
    }


def test_stalled_sink_neither_blocks_submit_nor_other_sinks(tmp_path: Path) -> None:
    metrics = Metrics()
    stalled = StalledSink(queue_size=8)
    path = tmp_path / "events.jsonl"
    pool = SinkPool([stalled, JsonlSink("jsonl", path, queue_size=2000)], metrics)
    pool.start()
    try:
        pool.submit(make_result(0))
        assert stalled.entered.wait(timeout=5)  # the stalled sink now holds item 0

        started = time.monotonic()
        for seq in range(1, 1000):
            pool.submit(make_result(seq))
        submit_s = time.monotonic() - started

        # the fast sink got everything while the stalled one was still stuck
        assert pool.flush(timeout_s=0.2) is False
        deadline = time.monotonic() + 10
        while sample(metrics, "vidpipe_sink_written_total", sink="jsonl") < 1000:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert len(read_lines(path)) == 1000
        assert submit_s < 2.0  # generous; a blocking submit would hang until the timeout
        assert sample(metrics, "vidpipe_sink_queue_depth", sink="stalled") == 8
        assert sample(
            metrics, "vidpipe_sink_dropped_total", sink="stalled", reason="queue_full"
        ) == (999 - 8)
        assert sample(metrics, "vidpipe_sink_dropped_total", sink="jsonl", reason="queue_full") == 0
    finally:
        stalled.release.set()
    assert pool.flush(timeout_s=10)
    # drop-oldest: the item in flight, then the newest eight
    assert stalled.handled == [0, *range(992, 1000)]
    assert sample(metrics, "vidpipe_sink_queue_depth", sink="stalled") == 0
    assert pool.close(timeout_s=5) == {"stalled": 0, "jsonl": 0}
    assert stalled.closed


def _block_with_directory(path: Path) -> None:
    path.mkdir()  # open(path) fails with IsADirectoryError, also for root


def _block_with_file_parent(path: Path) -> None:
    path.parent.write_text("not a directory")  # mkdir(parent) fails, also for root


@pytest.mark.parametrize("block", [_block_with_directory, _block_with_file_parent])
def test_failing_jsonl_counts_errors_and_recovers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, block: Callable[[Path], None]
) -> None:
    metrics = Metrics()
    path = tmp_path / "sub" / "events.jsonl"
    if block is _block_with_directory:
        path.parent.mkdir()
    block(path)
    pool = SinkPool([JsonlSink("jsonl", path)], metrics)
    pool.start()
    with caplog.at_level(logging.INFO, logger="vidpipe.sinks.base"):
        for seq in range(5):
            pool.submit(make_result(seq))
        assert pool.flush(timeout_s=5)
        assert sample(metrics, "vidpipe_sink_errors_total", sink="jsonl") == 5
        assert sample(metrics, "vidpipe_sink_written_total", sink="jsonl") == 0
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1  # rate-limited: one line per sink per interval
        assert "sink jsonl" in errors[0].getMessage()

        if path.is_dir():
            path.rmdir()
        else:
            path.parent.unlink()
        for seq in range(5, 8):
            pool.submit(make_result(seq))
        assert pool.flush(timeout_s=5)
    assert [line["frame"] for line in read_lines(path)] == [5, 6, 7]
    assert sample(metrics, "vidpipe_sink_errors_total", sink="jsonl") == 5
    assert sample(metrics, "vidpipe_sink_written_total", sink="jsonl") == 3
    assert any("recovered after 5 failure(s)" in r.getMessage() for r in caplog.records)
    pool.close(timeout_s=5)


def test_error_log_reports_suppressed_count(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "events.jsonl"
    path.mkdir()
    pool = SinkPool([JsonlSink("jsonl", path)], Metrics(), error_log_interval_s=1.0)
    pool.start()
    with caplog.at_level(logging.ERROR, logger="vidpipe.sinks.base"):
        for seq in range(3):
            pool.submit(make_result(seq))
        assert pool.flush(timeout_s=5)
        time.sleep(1.1)  # the interval has passed: the next failure is logged
        pool.submit(make_result(3))
        assert pool.flush(timeout_s=5)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    assert "2 similar error(s) suppressed" in messages[1]
    pool.close(timeout_s=5)


def test_jsonl_reopens_after_rotation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_module, "_REOPEN_CHECK_S", 0.0)
    path = tmp_path / "events.jsonl"
    sink = JsonlSink("jsonl", path)
    sink.handle(make_result(0))
    path.rename(tmp_path / "events.jsonl.1")
    sink.handle(make_result(1))
    sink.close()
    sink.close()  # idempotent
    assert [line["frame"] for line in read_lines(tmp_path / "events.jsonl.1")] == [0]
    assert [line["frame"] for line in read_lines(path)] == [1]


class CountingDraw:
    """The real draw_detections, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, image: np.ndarray, det: Detections, labels: Labels) -> np.ndarray:
        self.calls += 1
        return draw_detections(image, det, labels)


def test_snapshot_rate_limits_keeps_last_and_uses_safe_names(tmp_path: Path) -> None:
    metrics = Metrics()
    draw = CountingDraw()
    root = tmp_path / "snaps"
    sink = SnapshotSink(
        "snapshot", root, draw=draw, min_interval_s=1.0, keep_last=3, queue_size=100
    )
    pool = SinkPool([sink], metrics)
    assert pool.wants_images
    pool.start()
    camera = "../front door/.."
    # (seq, t_capture, detections): written when >= 1 s after the last written frame
    plan = [
        (0, 0.0, 1),
        (1, 0.5, 1),
        (2, 0.99, 2),
        (3, 1.0, 0),
        (4, 1.2, 1),
        (5, 1.5, 1),
        (6, 2.3, 1),
        (7, 3.4, 1),
        (8, 4.5, 3),
    ]
    for seq, t, n in plan:
        pool.submit(make_result(seq, camera=camera, n_det=n, t_capture=t, with_image=True))
    pool.submit(make_result(0, camera="yard", t_capture=0.7, with_image=True))
    assert pool.flush(timeout_s=10)

    written = [0, 4, 6, 7, 8]  # seq 1-2 too soon, 3 has no detections, 5 too soon
    assert draw.calls == len(written) + 1  # drawing only for frames actually written
    safe = safe_name(camera)
    assert re.fullmatch(r"_front_door_\.\.-[0-9a-f]{8}", safe)
    cam_dir = root / safe
    assert sorted(p.name for p in root.iterdir()) == sorted([safe, "yard"])
    kept = sorted(p.name for p in cam_dir.iterdir())
    assert kept == sorted([f"{safe}-{s}.jpg" for s in written[-3:]] + ["latest.jpg"])
    for name in kept:
        image = cv2.imread(str(cam_dir / name))
        assert image is not None and image.shape == (48, 64, 3)
    latest = cv2.imread(str(cam_dir / "latest.jpg"))
    newest = cv2.imread(str(cam_dir / f"{safe}-8.jpg"))
    assert latest is not None and newest is not None
    assert np.array_equal(latest, newest)
    assert sorted(p.name for p in (root / "yard").iterdir()) == ["latest.jpg", "yard-0.jpg"]
    assert not list(tmp_path.rglob("*.tmp"))
    assert sample(metrics, "vidpipe_sink_written_total", sink="snapshot") == len(plan) + 1
    assert pool.close(timeout_s=5) == {"snapshot": 0}


def test_snapshot_prunes_files_of_a_previous_run(tmp_path: Path) -> None:
    cam_dir = tmp_path / "cam"
    cam_dir.mkdir()
    for seq in range(5):
        (cam_dir / f"cam-{seq}.jpg").write_bytes(b"old")
        os.utime(cam_dir / f"cam-{seq}.jpg", (1000 + seq, 1000 + seq))
    (cam_dir / "notes.txt").write_text("not ours")
    sink = SnapshotSink("snapshot", tmp_path, draw=draw_detections, min_interval_s=0, keep_last=3)
    sink.handle(make_result(100, with_image=True))
    assert sorted(p.name for p in cam_dir.iterdir()) == [
        "cam-100.jpg",
        "cam-3.jpg",
        "cam-4.jpg",
        "latest.jpg",
        "notes.txt",
    ]


def test_snapshot_without_image_is_counted_as_error(tmp_path: Path) -> None:
    metrics = Metrics()
    sink = SnapshotSink("snapshot", tmp_path, draw=draw_detections, min_interval_s=0)
    pool = SinkPool([sink], metrics)
    pool.start()
    pool.submit(make_result(0, with_image=False))
    pool.submit(make_result(1, with_image=True))  # the sink keeps going
    assert pool.flush(timeout_s=5)
    assert sample(metrics, "vidpipe_sink_errors_total", sink="snapshot") == 1
    assert [p.name for p in (tmp_path / "cam").glob("cam-*.jpg")] == ["cam-1.jpg"]
    pool.close(timeout_s=5)


def test_close_returns_and_counts_leftovers(tmp_path: Path) -> None:
    metrics = Metrics()
    stalled = StalledSink(queue_size=8)
    jsonl = JsonlSink("jsonl", tmp_path / "events.jsonl")
    pool = SinkPool([stalled, jsonl], metrics)
    pool.start()
    try:
        pool.submit(make_result(0))
        assert stalled.entered.wait(timeout=5)
        for seq in range(1, 6):
            pool.submit(make_result(seq))

        started = time.monotonic()
        leftovers = pool.close(timeout_s=0.5)
        assert time.monotonic() - started < 3  # bounded even though a handle() never returns
        assert leftovers == {"stalled": 5, "jsonl": 0}
        assert sample(metrics, "vidpipe_sink_dropped_total", sink="stalled", reason="shutdown") == 5
        assert sample(metrics, "vidpipe_sink_queue_depth", sink="stalled") == 0
        assert not stalled.closed  # never closed under a running handle()
        assert jsonl._fd is None  # the healthy sink was closed

        pool.submit(make_result(6))  # after close: counted, not queued
        assert sample(metrics, "vidpipe_sink_dropped_total", sink="jsonl", reason="shutdown") == 1
        assert pool.close(timeout_s=1) == {"stalled": 0, "jsonl": 0}  # idempotent
    finally:
        stalled.release.set()
    assert len(read_lines(tmp_path / "events.jsonl")) == 6


def test_close_flushes_a_slow_sink_first(tmp_path: Path) -> None:
    stalled = StalledSink(queue_size=100)
    stalled.release.set()  # handle() returns at once
    metrics = Metrics()
    pool = SinkPool([stalled], metrics)
    pool.start()
    for seq in range(20):
        pool.submit(make_result(seq))
    assert pool.close(timeout_s=10) == {"stalled": 0}
    assert stalled.handled == list(range(20))
    assert stalled.closed
    assert sample(metrics, "vidpipe_sink_dropped_total", sink="stalled", reason="shutdown") == 0


def test_build_sinks_names_and_pool_checks(tmp_path: Path) -> None:
    configs: list[JsonlSinkConfig | SnapshotSinkConfig] = [
        JsonlSinkConfig.model_validate({"path": tmp_path / "a.jsonl"}),
        SnapshotSinkConfig.model_validate({"dir": tmp_path / "snaps", "queue_size": 4}),
        JsonlSinkConfig.model_validate(
            {"path": tmp_path / "b.jsonl", "only_with_detections": True}
        ),
    ]
    sinks = build_sinks(configs, draw=draw_detections)
    assert [s.name for s in sinks] == ["jsonl:0", "snapshot", "jsonl:2"]
    assert [s.queue_size for s in sinks] == [1024, 4, 1024]
    assert [s.wants_images for s in sinks] == [False, True, False]
    # the JSON lines sink's default window: one wake-up of its thread per 100 ms, not per frame
    assert [getattr(s, "batch_window_s", None) for s in sinks] == [0.1, None, 0.1]
    assert not SinkPool([sinks[0], sinks[2]], Metrics()).wants_images
    with pytest.raises(ValueError, match="unique"):
        SinkPool([sinks[0], sinks[0]], Metrics())
