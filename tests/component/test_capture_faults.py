"""Camera faults injected for real: a GStreamer RTSP server with auth, closed ports, names that
do not resolve, and broken files made with ffmpeg. Each failure must name its reason, back off,
log one line per backoff step, and never crash or hang the worker.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.component.capture_rig import CAR, FAST, PERSON, Rig, S, free_port, wait_until
from tests.rtsp import RtspServer
from vidpipe.capture.source import REASONS

USER, PASSWORD = "viewer", "pa:ss@w0rd"


@pytest.fixture(scope="module")
def auth_server(videos: Path, rtsp_ok: None):
    with RtspServer(videos, user=USER, password=PASSWORD) as server:
        yield server


def _urls(server: RtspServer) -> dict[str, tuple[str, str]]:
    """camera name -> (url, expected reason)."""
    return {
        "wrong-pass": (server.url(PERSON, USER, "not-the-password"), "unauthorized"),
        "no-creds": (server.url(PERSON), "unauthorized"),
        "wrong-path": (server.url("no-such-stream", USER, PASSWORD), "not_found"),
        "wrong-port": (f"rtsp://{USER}:secret99@127.0.0.1:{free_port()}/x", "connection_refused"),
        "wrong-host": ("rtsp://camera-7.invalid:554/stream1", "host_not_found"),
    }


@pytest.mark.timeout(60)
def test_each_misconfiguration_names_its_reason_once_per_backoff_step(
    rig: Rig,
    auth_server: RtspServer,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.INFO, logger="vidpipe")
    urls = _urls(auth_server)
    workers = {name: rig.worker(name, url, "newest")[0] for name, (url, _) in urls.items()}
    for w in workers.values():
        w.start()
    for name, w in workers.items():
        wait_until(lambda w=w: w.stats()["backoff_attempt"] >= 4, 20, f"4 backoff steps of {name}")
    for w in workers.values():
        w.stop()
        assert w.join(10)

    ffmpeg_noise = [line for line in capfd.readouterr().err.splitlines() if "@ 0x" in line]
    assert ffmpeg_noise == [], "FFmpeg's unattributed lines must stay quiet"
    for name, (_url, reason) in urls.items():
        assert reason in REASONS
        steps = workers[name].stats()["backoff_attempt"]
        errors = rig.errors(name, reason)
        assert errors == steps, (name, reason, errors, steps)  # every failure, this reason only
        lines = [
            r.getMessage()
            for r in caplog.records
            if r.getMessage().startswith(f"camera {name}:") and r.levelno >= logging.WARNING
        ]
        # exactly one line per backoff step: no flood, nothing hidden
        assert len(lines) == steps, (name, lines)
        assert all(f"{reason} (" in m and "reconnecting in" in m for m in lines), lines
        attempts = [int(m) for m in re.findall(r"attempt (\d+)", " ".join(lines))]
        assert attempts == list(range(1, steps + 1))
        assert workers[name].stats()["last_error"].startswith(reason)
    text = caplog.text
    assert "not-the-password" not in text and "secret99" not in text and PASSWORD not in text


@pytest.fixture(scope="module")
def broken_clips(videos: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real broken inputs, made from a real clip."""
    if shutil.which("ffmpeg") is None:
        pytest.fail("ffmpeg is required (scripts/setup-system.sh installs it)")
    d = tmp_path_factory.mktemp("broken")
    raw = d / "car.h264"
    src = str(videos / f"{CAR}.mp4")
    annexb = ["-c", "copy", "-bsf:v", "h264_mp4toannexb", "-f", "h264"]
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", src, *annexb, str(raw)], check=True)
    data = raw.read_bytes()
    truncated = d / "truncated.h264"
    truncated.write_bytes(data[: len(data) // 8])  # cut mid-NAL, well inside the stream
    clip = (videos / f"{CAR}.mp4").read_bytes()
    flipped = bytearray(clip)
    for i in range(len(clip) // 10, len(clip), 997):  # leave the header, flip every 997th byte
        flipped[i] ^= 0xFF
    corrupt = d / "flipped.mp4"
    corrupt.write_bytes(bytes(flipped))
    return {"truncated": truncated, "flipped": corrupt}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["truncated", "flipped"])
def test_damaged_file_yields_what_it_can_then_ends_without_hanging(
    rig: Rig, broken_clips: dict[str, Path], kind: str
) -> None:
    worker, states = rig.worker(kind, str(broken_clips[kind]), "block")
    worker.start()
    states.wait_for(S.STREAMING, 10)
    states.wait_for(S.STOPPED, 40)  # end of file reached: no hang on the damage
    frames = rig.collector.of(kind)
    assert 0 < len(frames) <= 377
    if kind == "truncated":
        assert len(frames) < 377 // 4  # only what precedes the cut
    seqs = [f.seq for f in frames]
    assert seqs == sorted(set(seqs))
    assert all(f.image.shape == (432, 768, 3) for f in frames)
    assert worker.failure is None
    states.assert_legal()


@pytest.mark.timeout(60)
def test_damaged_file_in_a_loop_keeps_going(rig: Rig, broken_clips: dict[str, Path]) -> None:
    """A looping camera on a truncated stream rewinds at the damage and keeps delivering."""
    worker, _ = rig.worker("again", str(broken_clips["truncated"]), "block", loop=True)
    worker.start()
    wait_until(lambda: len(rig.collector.of("again")) > 0, 10, "a first frame")
    wait_until(lambda: worker.stats()["frames"] > 3 * 40, 40, "three passes over the damage")
    first_pass = len(rig.collector.of("again"))
    assert first_pass > 100
    assert worker.state is S.STREAMING


@pytest.mark.timeout(60)
def test_camera_that_never_yields_a_frame_is_failed(rig: Rig, tmp_path: Path) -> None:
    """An ``.h264`` of zero bytes opens (width 0): it must count as failed, not as streaming."""
    empty = tmp_path / "empty.h264"
    empty.write_bytes(b"")
    worker, states = rig.worker("void", str(empty), "block", capture=FAST)
    worker.start()
    wait_until(lambda: worker.stats()["backoff_attempt"] >= 3, 15, "three backoff steps")
    assert S.STREAMING not in states.states()
    assert rig.errors("void", "no_frames") >= 3
    assert rig.value("vidpipe_camera_up", camera="void") == 0


@pytest.mark.timeout(60)
def test_digest_challenge_tells_wrong_credentials_from_right_ones(
    rig: Rig, videos: Path, rtsp_ok: None, caplog: pytest.LogCaptureFixture
) -> None:
    """Most cameras ask for Digest: FFmpeg answers it; a wrong password is ``unauthorized``."""
    caplog.set_level(logging.DEBUG, logger="vidpipe")
    with RtspServer(videos, user=USER, password=PASSWORD, digest=True) as server:
        right, states = rig.worker("digest", server.url(PERSON, USER, PASSWORD), "newest")
        wrong, _ = rig.worker("digest-bad", server.url(PERSON, USER, "nope-nope"), "newest")
        right.start()
        wrong.start()
        states.wait_for(S.STREAMING, 15)
        rig.collector.wait_count("digest", 5, 15)
        wait_until(lambda: rig.errors("digest-bad", "unauthorized") >= 2, 15, "two 401s")
        # read both while the server still runs: once it stops, "digest" counts its end as an
        # error and "digest-bad"'s next retry ends as connection_refused instead of a 401
        assert right.stats()["errors"] == 0 and right.state is S.STREAMING
        assert "wrong credentials" in wrong.stats()["last_error"]
    assert PASSWORD not in caplog.text and "nope-nope" not in caplog.text
