"""Frames are converted to BGR only when used, and the motion gate reads the luma plane.

Clips are made here with PyAV's own encoders (``mpeg4``: video-range ``yuv420p``; ``mjpeg``:
full-range ``yuvj420p``), decoded by the real ``PyAVSource`` in a real capture worker; the
conversions are counted by the source itself (``PyAVSource.conversions``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from tests.component.capture_rig import Rig
from vidpipe.capture.motion import camera_phase, changed_fraction, grey_copy, grey_copy_of_luma
from vidpipe.capture.pyav_source import PyAVPicture, PyAVSource
from vidpipe.capture.source import ReadyPicture, as_picture
from vidpipe.config import CameraConfig, CaptureConfig, MotionConfig
from vidpipe.types import CameraState

FPS = 10
STILL_FRAMES = 30  # the first 3 s: one picture repeated
MOVING_FRAMES = 30  # then 3 s of a white square crossing it
# (codec, container suffix, pixel format): video range and full range (JPEG) luma
CODECS = [("mpeg4", "mp4", "yuv420p"), ("mjpeg", "mkv", "yuvj420p")]


def write_clip(path: Path, codec: str, pix_fmt: str, width: int = 320, height: int = 240) -> Path:
    """A clip at 10 fps: ``STILL_FRAMES`` of one noisy picture, then a square moving on it."""
    rng = np.random.default_rng(3)
    background = rng.integers(40, 140, (height, width, 3), dtype=np.uint8)
    with av.open(str(path), "w") as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        stream.time_base = Fraction(1, FPS)
        stream.codec_context.qmax = 4  # near-lossless: the still part stays still
        for i in range(STILL_FRAMES + MOVING_FRAMES):
            image = background.copy()
            if i >= STILL_FRAMES:
                x = ((i - STILL_FRAMES) * 8) % (width - 60)
                image[90:150, x : x + 60] = 255
            frame = av.VideoFrame.from_ndarray(image, format="bgr24")
            frame.pts = i
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("codec", "suffix", "pix_fmt"), CODECS)
def test_decimated_and_still_frames_are_never_converted(
    rig: Rig, sources: list[PyAVSource], tmp_path: Path, codec: str, suffix: str, pix_fmt: str
) -> None:
    clip = write_clip(tmp_path / f"clip.{suffix}", codec, pix_fmt)
    # no frame forced by max_skip_s within the clip (the first comes early by the phase)
    motion = {"enabled": True, "max_skip_s": 3600}
    assert (1 - camera_phase("cam")) * 3600 > 6
    worker, states = rig.worker("cam", str(clip), "block", detect_fps=5, motion=motion)
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    value = {
        r: rig.value("vidpipe_frames_dropped_total", camera="cam", reason=r)
        for r in ("decimated", "no_motion", "overwritten")
    }
    captured = rig.value("vidpipe_frames_captured_total", camera="cam")
    forwarded = rig.collector.wait_count("cam", int(captured - sum(value.values())), 5)

    assert captured == STILL_FRAMES + MOVING_FRAMES
    assert len(rig.collector.of("cam")) + sum(value.values()) == captured  # counters add up
    assert value["decimated"] == captured / 2  # detect_fps 5 of a 10 fps clip
    # the still part: its first due frame is inferred, the other 14 are not
    assert value["no_motion"] == STILL_FRAMES / 2 - 1
    assert len(sources) == 1
    assert sources[0].conversions == len(forwarded), "only the forwarded frames are converted"
    assert all(f.image.shape == (240, 320, 3) for f in forwarded)
    # the moving part is inferred at every due frame
    assert sum(f.seq >= STILL_FRAMES for f in forwarded) == MOVING_FRAMES / 2


@pytest.mark.timeout(30)
def test_without_gate_or_decimation_every_frame_is_converted(
    rig: Rig, sources: list[PyAVSource], tmp_path: Path
) -> None:
    clip = write_clip(tmp_path / "clip.mp4", "mpeg4", "yuv420p")
    worker, states = rig.worker("cam", str(clip), "block")
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    forwarded = rig.collector.wait_count("cam", STILL_FRAMES + MOVING_FRAMES, 5)
    assert sources[0].conversions == len(forwarded) == STILL_FRAMES + MOVING_FRAMES


def _pictures(path: Path, limit: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(gate copy from the luma plane, gate copy from the BGR image) of each decoded frame."""
    source = PyAVSource(CameraConfig(name="clip", url=str(path)), CaptureConfig())
    source.open()
    try:
        for _ in range(limit):
            picture = source.read()
            if picture is None:
                return
            luma = picture.luma()
            assert luma is not None
            yield grey_copy_of_luma(luma), grey_copy(picture.image())
    finally:
        source.close()


def _agreement(path: Path, limit: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-pixel differences of the two grey copies, and the changed fraction of each due
    frame (every other one) against the one before it, from luma and from BGR, at the
    default threshold."""
    pairs = list(_pictures(path, limit))
    assert len(pairs) >= 2
    diff = np.abs(np.stack([a.astype(int) - b.astype(int) for a, b in pairs]))
    due = pairs[::2]
    steps = list(itertools.pairwise(due))
    from_luma = np.array([changed_fraction(now[0], before[0], 25) for before, now in steps])
    from_bgr = np.array([changed_fraction(now[1], before[1], 25) for before, now in steps])
    return diff, from_luma, from_bgr


@pytest.mark.timeout(60)
def test_luma_gate_agrees_with_the_bgr_gate_on_the_walkway_clip(videos: Path) -> None:
    """The luma copy is what BGR-to-grey gives back, up to swscale's rounding (about one grey
    level, the same in every frame, which differencing cancels): on 600 frames of the walkway
    clip the changed fraction differs by at most 0.3 % of the picture, and the gate's
    decision (``min_area`` 0.2 %) agrees on at least 99 % of due frames."""
    diff, from_luma, from_bgr = _agreement(videos / "one-by-one-person-detection.mp4", 600)
    assert np.percentile(diff, 99.9) <= 4
    assert from_bgr.max() > 0.01, "people walk in this clip: some frames must move"
    assert np.abs(from_luma - from_bgr).max() <= 0.003
    min_area = MotionConfig().min_area
    assert np.mean((from_luma >= min_area) == (from_bgr >= min_area)) >= 0.99


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("codec", "suffix", "pix_fmt"), CODECS)
def test_luma_gate_agrees_with_the_bgr_gate_at_either_range(
    tmp_path: Path, codec: str, suffix: str, pix_fmt: str
) -> None:
    """Full-range luma is used as it is and video-range luma stretched: were either wrong,
    the moving square (white on grey) would change a different share of the picture."""
    clip = write_clip(tmp_path / f"clip.{suffix}", codec, pix_fmt, width=300, height=200)
    diff, from_luma, from_bgr = _agreement(clip, 60)
    assert np.percentile(diff, 99.9) <= 4
    assert from_bgr.max() > 0.01
    assert np.abs(from_luma - from_bgr).max() <= 0.003


@pytest.mark.parametrize(("width", "height"), [(320, 240), (300, 200), (178, 100)])
def test_luma_is_the_y_plane_without_its_row_padding(
    tmp_path: Path, width: int, height: int
) -> None:
    clip = write_clip(tmp_path / "clip.mp4", "mpeg4", "yuv420p", width, height)
    with av.open(str(clip)) as container:
        frame = next(container.decode(video=0))
    if width == 178:
        assert frame.planes[0].line_size > width, "this size must have padded rows"
    source = PyAVSource(CameraConfig(name="c", url=str(clip)), CaptureConfig())
    luma = PyAVPicture(frame, source).luma()
    assert luma is not None and not luma.full_range
    assert luma.pixels.shape == (height, width)
    # PyAV's own yuv420p array is the Y rows, then U and V: the first ``height`` rows are Y
    assert np.array_equal(luma.pixels, frame.to_ndarray()[:height])
    assert source.conversions == 0


def test_a_ready_image_is_its_own_picture() -> None:
    image = np.zeros((4, 6, 3), np.uint8)
    picture = as_picture(image)
    assert isinstance(picture, ReadyPicture)
    assert (picture.width, picture.height) == (6, 4)
    assert picture.luma() is None and picture.image() is image
    assert as_picture(picture) is picture
