"""Capture workers with real threads, real clips, a real RTSP server and real metrics.

Nothing is mocked: files are decoded by libav (PyAV), streams come from ``tests/rtsp_server.py``
(GStreamer), failures are real (SIGKILL, SIGSTOP, a closed port, broken files). Timeouts are
small so that the whole file runs in well under a minute and a half.
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.component.capture_rig import (
    CAR,
    CAR_FRAMES,
    FAST,
    PERSON,
    Rig,
    S,
    free_port,
    wait_until,
)
from tests.rtsp import RtspServer
from vidpipe.capture import (
    Backoff,
    Decimator,
    IllegalTransitionError,
    check_transition,
)
from vidpipe.capture.pyav_source import container_options
from vidpipe.capture.source import source_for
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.types import CameraState

# -- pure parts ------------------------------------------------------------------------------


@pytest.mark.timeout(5)
@pytest.mark.parametrize(
    ("old", "new", "legal"),
    [
        (S.CONNECTING, S.STREAMING, True),
        (S.CONNECTING, S.BACKOFF, True),
        (S.STREAMING, S.BACKOFF, True),
        (S.BACKOFF, S.CONNECTING, True),
        (S.BACKOFF, S.STOPPED, True),
        (S.BACKOFF, S.STREAMING, False),
        (S.STOPPED, S.CONNECTING, False),
        (S.STOPPED, S.STREAMING, False),
    ],
)
def test_transition_table(old: CameraState, new: CameraState, legal: bool) -> None:
    if legal:
        check_transition(old, new)
    else:
        with pytest.raises(IllegalTransitionError, match=f"{old.name} -> {new.name}"):
            check_transition(old, new)


@pytest.mark.timeout(5)
def test_backoff_doubles_is_capped_and_resets() -> None:
    import random

    backoff = Backoff(0.2, 1.0, random.Random(7))
    steps = [backoff.next() for _ in range(6)]
    assert [s.ceiling_s for s in steps] == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0, 1.0])
    assert all(0 <= s.delay_s <= s.ceiling_s for s in steps)
    backoff.reset()
    assert backoff.next().ceiling_s == pytest.approx(0.2)
    assert Backoff(0.5, 30).ceiling(10_000) == 30  # no overflow after a long outage


@pytest.mark.timeout(5)
@pytest.mark.parametrize(
    ("fps", "max_fps", "kept"),
    [(12.5, 5, 0.4), (10, 5, 0.5), (29.97, 10, 10 / 29.97), (25, 30, 1.0), (25, None, 1.0)],
)
def test_decimator_keeps_max_fps_of_media_time(fps: float, max_fps: float, kept: float) -> None:
    dec = Decimator(max_fps)
    n = 1000
    assert sum(dec.due(i / fps) for i in range(n)) / n == pytest.approx(kept, abs=0.002)


@pytest.mark.timeout(5)
def test_ffmpeg_options_are_per_camera_and_leave_the_environment_alone() -> None:
    cam = CameraConfig(name="door", url="rtsp://u:p@cam/x")
    fast = CaptureConfig(open_timeout_ms=2000, read_timeout_ms=3000, analyze_duration_ms=250)
    assert container_options(cam, fast) == {
        "rtsp_transport": "tcp",
        "timeout": "3000000",  # microseconds: the longer of the open and read timeouts
        "analyzeduration": "250000",
    }
    assert "analyzeduration" not in container_options(
        cam, CaptureConfig(analyze_duration_ms=0)
    )  # 0 keeps FFmpeg's default
    assert container_options(CameraConfig(name="f", url="/data/x.mp4"), fast) == {}
    assert not any(k.startswith("OPENCV_FFMPEG") for k in os.environ)


@pytest.mark.timeout(5)
def test_file_urls_become_paths() -> None:
    assert source_for("file:///data/a%20b.mp4") == "/data/a b.mp4"
    assert source_for("file://localhost/data/x.mp4") == "/data/x.mp4"
    assert source_for("/data/x.mp4") == "/data/x.mp4"
    assert source_for("rtsp://u:p@h/x") == "rtsp://u:p@h/x"


# -- files -----------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_file_camera_delivers_every_frame_in_order(rig: Rig, videos: Path) -> None:
    url = (videos / f"{CAR}.mp4").as_uri()  # file:// URL: exercises the path conversion
    worker, states = rig.worker("street", url, "block")
    t0 = time.monotonic()
    worker.start()
    states.wait_for(S.STOPPED, 20)
    frames = rig.collector.wait_count("street", CAR_FRAMES, 5)
    t1 = time.monotonic()

    assert [f.seq for f in frames] == list(range(CAR_FRAMES))
    stamps = [f.t_capture for f in frames]
    assert stamps == sorted(stamps) and t0 <= stamps[0] and stamps[-1] <= t1
    assert {(f.image.shape, f.image.dtype) for f in frames} == {((432, 768, 3), np.dtype(np.uint8))}
    assert frames[0].image is not frames[1].image
    assert states.states() == [S.CONNECTING, S.STREAMING, S.STOPPED]
    assert rig.value("vidpipe_frames_captured_total", camera="street") == CAR_FRAMES
    assert rig.value("vidpipe_camera_up", camera="street") == 0
    assert rig.value("vidpipe_camera_state", camera="street", state="stopped") == 1
    assert worker.stats()["errors"] == 0
    assert worker.join(5)


@pytest.mark.timeout(30)
def test_looping_file_continues_past_its_end(rig: Rig, videos: Path) -> None:
    worker, states = rig.worker("street", str(videos / f"{CAR}.mp4"), "block", loop=True)
    worker.start()
    frames = rig.collector.wait_count("street", CAR_FRAMES * 2 + 10, 20)
    worker.stop()
    assert worker.join(5)

    seqs = [f.seq for f in frames]
    assert seqs[: CAR_FRAMES * 2 + 10] == list(range(CAR_FRAMES * 2 + 10))  # never reset
    # the second pass decodes the same pictures as the first
    assert np.array_equal(frames[CAR_FRAMES].image, frames[0].image)
    # each pass is a new stream epoch (trackers reset), the seq does not restart
    first, second = frames[0].epoch, frames[CAR_FRAMES].epoch
    assert second > first
    epochs = [f.epoch for f in frames[: CAR_FRAMES * 2]]
    assert epochs == [first] * CAR_FRAMES + [second] * CAR_FRAMES
    assert states.states() == [S.CONNECTING, S.STREAMING, S.STOPPED]
    assert worker.stats()["errors"] == 0 and worker.stats()["reconnects"] == 0


@pytest.mark.timeout(30)
def test_realtime_file_plays_at_its_own_rate(rig: Rig, videos: Path) -> None:
    """``realtime: true`` paces a file like the camera it stands for (12.5 fps clip)."""
    worker, _ = rig.worker("paced", str(videos / f"{CAR}.mp4"), "newest", realtime=True)
    worker.start()
    rig.collector.wait_count("paced", 1, 10)
    time.sleep(2.0)
    worker.stop()
    assert worker.join(5)
    decoded = rig.value("vidpipe_frames_captured_total", camera="paced")
    # unpaced, this clip decodes its 377 frames in well under 2 s on this machine
    assert 5 <= decoded <= 12.5 * 2 + 1 + 6, decoded
    frames = rig.collector.of("paced")
    gaps = [b.t_capture - a.t_capture for a, b in itertools.pairwise(frames)]
    assert sorted(gaps)[len(gaps) // 2] > 0.06  # paced: frames typically 80 ms apart


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("clip", "detect_fps", "decoded", "forwarded"),
    [
        (CAR, 5, CAR_FRAMES, 151),  # 12.5 fps -> 2 of every 5 frames
        ("bottle-detection", 10, 1189, 399),  # 29.83 fps -> about 1 in 3
    ],
)
def test_detect_fps_decimates_an_unpaced_file_by_media_time(
    rig: Rig, videos: Path, clip: str, detect_fps: float, decoded: int, forwarded: int
) -> None:
    worker, states = rig.worker("cam", str(videos / f"{clip}.mp4"), "block", detect_fps=detect_fps)
    worker.start()
    states.wait_for(S.STOPPED, 20)
    frames = rig.collector.wait_count("cam", forwarded, 5)
    time.sleep(0.1)
    frames = rig.collector.of("cam")

    assert len(frames) == forwarded
    decimated = rig.value("vidpipe_frames_dropped_total", camera="cam", reason="decimated")
    assert decimated == decoded - forwarded
    assert rig.value("vidpipe_frames_captured_total", camera="cam") == decoded
    gaps = {b.seq - a.seq for a, b in itertools.pairwise(frames)}
    assert gaps <= {2, 3, 4}  # evenly spread, not bursts


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.h264", b"", "no_frames"),  # opens, isOpened() True, width 0
        ("empty.mp4", b"", "open_failed"),  # the mp4 demuxer finds no moov atom
        ("noise.mp4", np.random.default_rng(1).bytes(200_000), "open_failed"),
        ("noise.h264", np.random.default_rng(2).bytes(200_000), "open_failed"),
    ],
)
def test_broken_file_backs_off_with_a_reason(
    rig: Rig, tmp_path: Path, name: str, content: bytes, reason: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    worker, states = rig.worker("broken", str(path), "block", loop=True)
    worker.start()
    states.wait_for(S.BACKOFF, 5)
    states.wait_for(S.BACKOFF, 5, after=states.states().index(S.BACKOFF) + 1)  # and again
    assert rig.errors("broken", reason) >= 2
    assert rig.value("vidpipe_camera_reconnects_total", camera="broken") >= 1
    assert S.STREAMING not in states.states()
    assert worker.stats()["last_error"].startswith(reason)
    states.assert_legal()


# -- RTSP ------------------------------------------------------------------------------------


@pytest.mark.timeout(40)
def test_rtsp_camera_streams_and_wrong_password_backs_off(
    rig: Rig,
    videos: Path,
    rtsp_ok: None,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO, logger="vidpipe")
    secret = "pa:ss@w0rd"
    with RtspServer(videos, user="viewer", password=secret) as server:
        good, _ = rig.worker("walkway", server.url(PERSON, "viewer", secret), "newest")
        bad, bad_states = rig.worker("intruder", server.url(PERSON, "viewer", "nope1234"), "newest")
        good.start()
        bad.start()
        # 40 frames: well past the burst of frames FFmpeg buffered while probing the stream
        frames = rig.collector.wait_count("walkway", 40, 15)
        bad_states.wait_for(S.BACKOFF, 10)
        stats = good.stats()
        assert good.state is S.STREAMING
        assert rig.value("vidpipe_camera_up", camera="walkway") == 1
        assert 7 <= stats["fps_in"] <= 14  # the server paces the clip at 10 fps
        seqs = [f.seq for f in frames]
        assert seqs == sorted(set(seqs))
        assert frames[0].image.shape == (432, 768, 3)
        assert rig.errors("intruder", "unauthorized") >= 1
        assert rig.value("vidpipe_camera_up", camera="intruder") == 0
    # No credential anywhere: logs, stats, or what FFmpeg printed on fd 2.
    text = caplog.text + capfd.readouterr().err + repr(good.stats()) + repr(bad.stats())
    for leaked in (secret, "pa%3Ass%40w0rd", "nope1234"):
        assert leaked not in text


@pytest.mark.timeout(60)
def test_server_killed_then_restarted_reconnects(rig: Rig, videos: Path, rtsp_ok: None) -> None:
    with RtspServer(videos) as server:
        worker, states = rig.worker("walkway", server.url(PERSON), "newest")
        # Another camera (a file, paced by its consumer) must not notice the outage.
        other, _ = rig.worker("street", str(videos / f"{CAR}.mp4"), "block", loop=True)
        rig.collector.take_interval_s = 0.02  # about 50 fps for the file
        worker.start()
        other.start()
        rig.collector.wait_count("walkway", 5, 15)

        n_before = len(states.states())
        t_kill = time.monotonic()
        server.kill()
        t_backoff = states.wait_for(S.BACKOFF, 5, after=n_before)
        assert rig.value("vidpipe_camera_up", camera="walkway") == 0
        assert rig.errors("walkway", "read_failed") == 1
        wait_until(lambda: rig.errors("walkway", "connection_refused") >= 2, 5, "refused reopens")
        other_before = len(rig.collector.of("street"))
        last_seq = rig.collector.of("walkway")[-1].seq

        n_before = len(states.states())
        t_restart = time.monotonic()
        server.restart()
        t_streaming = states.wait_for(S.STREAMING, 10, after=n_before)
        after = rig.collector.wait_count("walkway", len(rig.collector.of("walkway")) + 5, 10)

    assert after[-1].seq > last_seq  # seq keeps counting over the reconnect
    assert after[-1].epoch > rig.collector.of("walkway")[0].epoch  # a new stream epoch
    assert rig.value("vidpipe_camera_reconnects_total", camera="walkway") >= 3
    assert len(rig.collector.of("street")) > other_before + 20
    assert other.state is S.STREAMING and other.stats()["errors"] == 0
    states.assert_legal()
    print(
        f"\nkill -> BACKOFF {t_backoff - t_kill:.2f} s; "
        f"restart -> STREAMING {t_streaming - t_restart:.2f} s"
    )


@pytest.mark.timeout(60)
def test_frozen_server_is_detected_as_stall_and_reopened(
    rig: Rig, videos: Path, rtsp_ok: None
) -> None:
    with RtspServer(videos) as server:
        worker, states = rig.worker("walkway", server.url(PERSON), "newest")
        worker.start()
        rig.collector.wait_count("walkway", 5, 15)
        states.wait_for(S.STREAMING, 1)

        n_before = len(states.states())
        t_freeze = time.monotonic()
        server.freeze()
        t_backoff = states.wait_for(S.BACKOFF, FAST.stall_timeout_s + 2.5, after=n_before)
        assert rig.errors("walkway", "stalled") == 1
        assert rig.value("vidpipe_camera_up", camera="walkway") == 0
        time.sleep(2.0)  # reopen attempts against the frozen server fail and back off
        assert worker.state is not S.STREAMING

        n_before = len(states.states())
        t_thaw = time.monotonic()
        server.thaw()
        t_streaming = states.wait_for(S.STREAMING, 10, after=n_before)
        rig.collector.wait_count("walkway", len(rig.collector.of("walkway")) + 5, 10)
        assert worker.stats()["last_frame_age_s"] < 1.0

    states.assert_legal()
    print(
        f"\nfreeze -> BACKOFF {t_backoff - t_freeze:.2f} s (stall_timeout_s "
        f"{FAST.stall_timeout_s}); thaw -> STREAMING {t_streaming - t_thaw:.2f} s"
    )


@pytest.mark.timeout(30)
def test_wrong_port_backoff_grows_exponentially_and_is_capped(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="vidpipe.capture")
    url = f"rtsp://admin:hunter22@127.0.0.1:{free_port()}/nothing"
    worker, states = rig.worker("ghost", url, "newest")
    worker.start()
    wait_until(lambda: worker.stats()["backoff_attempt"] >= 7, 15, "seven backoff steps")
    worker.stop()
    assert worker.join(5)

    lines = [r.getMessage() for r in caplog.records if "reconnecting in" in r.getMessage()]
    steps = [re.search(r"in ([\d.]+) s \(attempt (\d+), ceiling ([\d.]+) s\)", m) for m in lines]
    parsed = [(int(m[2]), float(m[1]), float(m[3])) for m in steps if m]
    assert [a for a, _, _ in parsed[:7]] == list(range(1, 8))
    assert [c for _, _, c in parsed[:7]] == pytest.approx([0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0])
    assert all(0 <= d <= c for _, d, c in parsed)
    assert all("connection_refused" in m and "ghost" in m for m in lines)
    assert all("hunter22" not in m and "admin:***@" in m for m in lines)

    # The measured BACKOFF periods follow the delays (full jitter: 0 .. ceiling).
    changes = states.changes
    waits = [
        b[0] - a[0]
        for a, b in itertools.pairwise(changes)
        if a[1] is S.BACKOFF and b[1] is S.CONNECTING
    ]
    assert len(waits) >= 6
    for (_, delay, _), waited in zip(parsed, waits, strict=False):
        assert waited == pytest.approx(delay, abs=0.15)
    assert rig.errors("ghost", "connection_refused") == len(parsed)
    assert rig.value("vidpipe_camera_reconnects_total", camera="ghost") == len(waits)
    states.assert_legal()


@pytest.mark.timeout(40)
def test_rtsp_server_loop_mode_never_ends(
    rig: Rig, videos: Path, tmp_path: Path, rtsp_ok: None
) -> None:
    """The test server's --loop mode (used for long tests) streams past the clip's end."""
    clip_dir = tmp_path / "clips"
    clip_dir.mkdir()
    subprocess.run(
        [
            "ffmpeg",
            "-v",
            "error",
            "-i",
            str(videos / f"{PERSON}.mp4"),
            "-t",
            "2",
            "-c",
            "copy",
            "-an",
            str(clip_dir / "short.mp4"),
        ],
        check=True,
        timeout=30,
    )  # 2 s = 20 frames at 10 fps
    with RtspServer(clip_dir, loop=True) as server:
        worker, states = rig.worker("short", server.url("short"), "newest")
        worker.start()
        frames = rig.collector.wait_count("short", 45, 15)  # over two passes of the clip
        assert worker.stats()["errors"] == 0
        assert states.states() == [S.CONNECTING, S.STREAMING]
    seqs = [f.seq for f in frames]
    assert seqs == sorted(set(seqs))
