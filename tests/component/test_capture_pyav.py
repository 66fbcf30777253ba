"""libav-specific parts of capture: hardware decode selection, FFmpeg's log, the same pictures.

Everything runs on the real PyAV/FFmpeg. These machines have no VAAPI or QSV device and no
GPU, so the hardware fallback is exercised for real; a machine that has the device skips
that test instead of testing something else.
"""

from __future__ import annotations

import errno
import logging
import threading
from pathlib import Path

import av.logging
import cv2
import numpy as np
import pytest

from tests.component.capture_rig import CAR, FAST, Rig, S, wait_until
from vidpipe import redact
from vidpipe.capture import ffmpeg_log, pyav_source


@pytest.mark.timeout(30)
def test_pictures_equal_opencv_decoding_of_the_same_file(rig: Rig, videos: Path) -> None:
    """The switch of decoder changes no pixel: the model sees what it saw before."""
    path = str(videos / f"{CAR}.mp4")
    worker, states = rig.worker("street", path, "block", capture=FAST.model_copy())
    worker.start()
    states.wait_for(S.STOPPED, 20)
    frames = rig.collector.wait_count("street", 40, 5)
    cap = cv2.VideoCapture(path, cv2.CAP_FFMPEG)
    try:
        for f in frames[:40]:
            ok, ref = cap.read()
            assert ok and np.array_equal(f.image, ref), f.seq
    finally:
        cap.release()
    assert all(f.image.flags.c_contiguous and f.image.dtype == np.uint8 for f in frames)


@pytest.fixture
def fresh_hw_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget which devices this process already tried (the choice is made once per process)."""
    monkeypatch.setattr(pyav_source, "_hw_devices", {})
    monkeypatch.setattr(pyav_source, "_hw_choice", {})


@pytest.mark.timeout(30)
def test_hwaccel_none_decodes_in_software_without_trying_a_device(
    rig: Rig, videos: Path, fresh_hw_choice: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vidpipe.capture")
    worker, states = rig.worker(
        "sw",
        str(videos / f"{CAR}.mp4"),
        "block",
        capture=FAST.model_copy(update={"hwaccel": "none"}),
    )
    worker.start()
    states.wait_for(S.STOPPED, 20)
    assert rig.value("vidpipe_frames_captured_total", camera="sw") == 377
    assert pyav_source._hw_devices == {}  # no device was even tried
    assert "capture.hwaccel" not in caplog.text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("setting", ["vaapi", "qsv", "cuda", "auto"])
def test_hwaccel_without_a_device_falls_back_to_software_with_one_log_line(
    rig: Rig,
    videos: Path,
    fresh_hw_choice: None,
    caplog: pytest.LogCaptureFixture,
    setting: str,
) -> None:
    kinds = ("cuda", "vaapi", "qsv") if setting == "auto" else (setting,)
    if any(pyav_source._device_exists(k) for k in kinds):
        pytest.skip(f"this machine has a {setting} device: nothing falls back")
    caplog.set_level(logging.INFO, logger="vidpipe.capture")
    capture = FAST.model_copy(update={"hwaccel": setting})
    workers = [
        rig.worker(f"hw{i}", str(videos / f"{CAR}.mp4"), "block", capture=capture) for i in range(3)
    ]
    for w, _ in workers:
        w.start()
    for i, (_, states) in enumerate(workers):
        states.wait_for(S.STOPPED, 30)
        assert rig.value("vidpipe_frames_captured_total", camera=f"hw{i}") == 377
        assert states.states() == [S.CONNECTING, S.STREAMING, S.STOPPED]
    lines = [r.getMessage() for r in caplog.records if "capture.hwaccel" in r.getMessage()]
    assert lines == [
        f"capture.hwaccel {setting}: no {' or '.join(kinds)} device here; decoding in software"
    ]


@pytest.mark.timeout(10)
def test_ffmpeg_messages_carry_the_camera_and_no_secret(caplog: pytest.LogCaptureFixture) -> None:
    """A line FFmpeg itself logs (``av_log``) on a reader thread arrives attributed, redacted."""
    ffmpeg_log.install()
    redact.register_secret("Canary-Ffmpeg-7731")
    caplog.set_level(logging.DEBUG, logger="vidpipe.capture.ffmpeg")

    def reader() -> None:
        with ffmpeg_log.attributed_to("gate"):
            av.logging.log(av.logging.ERROR, "rtsp", "rtsp://admin:s3cret-pw@10.0.0.9/x failed\n")
            av.logging.log(av.logging.WARNING, "h264", "key Canary-Ffmpeg-7731 seen\n")
            assert "***" in ffmpeg_log.last_error()

    t = threading.Thread(target=reader, name="capture-gate-reader-1")
    t.start()
    t.join(5)
    got = [r.getMessage() for r in caplog.records if r.name == "vidpipe.capture.ffmpeg"]
    assert got == [
        "camera gate: [rtsp] rtsp://admin:***@10.0.0.9/x failed",
        "camera gate: [h264] key *** seen",
    ]
    assert "s3cret-pw" not in caplog.text and "Canary-Ffmpeg-7731" not in caplog.text


@pytest.mark.timeout(10)
def test_ffmpeg_log_bridge_limits_each_camera_and_counts_what_it_held_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    bridge = ffmpeg_log.FFmpegLogBridge(burst=3, window_s=10.0, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="vidpipe.capture.ffmpeg")

    def emit(camera: str, n: int) -> None:
        with ffmpeg_log.attributed_to(camera):
            for i in range(n):
                rec = logging.LogRecord(
                    "libav.h264", logging.ERROR, "", 0, f"bad MB {i}", None, None
                )
                bridge.emit(rec)

    emit("a", 50)  # a corrupt stream: one line per broken macroblock row
    emit("b", 2)  # another camera keeps its own budget
    now[0] = 10.5
    emit("a", 1)
    lines = [r.getMessage() for r in caplog.records if r.name == "vidpipe.capture.ffmpeg"]
    assert lines == [
        "camera a: [h264] bad MB 0",
        "camera a: [h264] bad MB 1",
        "camera a: [h264] bad MB 2",
        "camera b: [h264] bad MB 0",
        "camera b: [h264] bad MB 1",
        "camera a: 47 FFmpeg message(s) suppressed (rate limit)",
        "camera a: [h264] bad MB 0",
    ]


@pytest.mark.timeout(30)
def test_failed_opens_log_ffmpeg_only_at_debug(
    rig: Rig, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The worker's backoff line carries FFmpeg's reason; FFmpeg's own line stays at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="vidpipe")
    bad = tmp_path / "empty.mp4"
    bad.write_bytes(b"")
    worker, _ = rig.worker("void", str(bad), "block", loop=True)
    worker.start()
    wait_until(lambda: worker.stats()["backoff_attempt"] >= 2, 10, "two backoff steps")
    ffmpeg = [r for r in caplog.records if r.name == "vidpipe.capture.ffmpeg"]
    assert ffmpeg and all(r.levelno == logging.DEBUG for r in ffmpeg)
    assert any("moov atom not found" in r.getMessage() for r in ffmpeg)
    assert all(r.getMessage().startswith("camera void: ") for r in ffmpeg)


def _av_error(cls: type[Exception], code: int) -> Exception:
    # FFmpeg's exceptions name the URL, credentials included: the reason must never show it
    return cls(code, "failed", "rtsp://admin:leaky-pw@10.1.2.3/x")


@pytest.mark.timeout(5)
@pytest.mark.parametrize(
    ("exc", "said", "reason"),
    [
        (_av_error(av.error.HTTPUnauthorizedError, -825242872), "", "unauthorized"),
        (_av_error(av.error.HTTPForbiddenError, -858797304), "", "unauthorized"),
        (_av_error(av.error.HTTPNotFoundError, -875574520), "", "not_found"),
        (_av_error(av.error.HTTPOtherClientError, -1482175736), "", "rtsp_error"),
        (_av_error(av.error.HTTPServerError, -1482175992), "", "rtsp_error"),
        (_av_error(av.error.ConnectionRefusedError, errno.ECONNREFUSED), "", "connection_refused"),
        (_av_error(av.error.TimeoutError, errno.ETIMEDOUT), "", "unreachable"),
        (_av_error(av.error.OSError, errno.ENETUNREACH), "", "unreachable"),
        (_av_error(av.error.ExitError, -1414092869), "", "unreachable"),
        (
            _av_error(av.error.OSError, errno.EIO),
            "Failed to resolve hostname cam.invalid: Name or service not known",
            "host_not_found",
        ),
        (_av_error(av.error.InvalidDataError, -1094995529), "", "open_failed"),
    ],
)
def test_every_ffmpeg_failure_maps_to_a_reason_without_the_url(
    exc: Exception, said: str, reason: str
) -> None:
    got = pyav_source.classify(exc, True, said, has_user=True)
    assert got.reason == reason, got
    assert "leaky-pw" not in got.detail and "10.1.2.3" not in got.detail
