"""The benchmark's derived clips: ``STEM-<H>p.mp4``, ``STEM-<H>p<F>.mp4`` and ``STEM-<H>p-g<N>.mp4``
made with ffmpeg."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vidpipe.bench.common import clip_geometry, resolve_clip

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")


def _source(videos: Path) -> None:
    """A 3 s, 10 fps, 320x240 test pattern as ``src.mp4``."""
    videos.mkdir()
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=10:duration=3",
         "-c:v", "libx264", "-pix_fmt", "yuv420p", str(videos / "src.mp4")],
        check=True,
    )  # fmt: skip


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    """``videos`` with ``src.mp4`` in it, and an empty cache."""
    videos, cache = tmp_path / "videos", tmp_path / "cache"
    _source(videos)
    cache.mkdir()
    return videos, cache


def test_a_derived_clip_has_the_named_height_and_rate_and_the_sources_duration(
    dirs: tuple[Path, Path],
) -> None:
    videos, cache = dirs
    same_rate = resolve_clip("src-144p.mp4", videos, cache)
    sub = resolve_clip("src-144p5.mp4", videos, cache)
    assert same_rate.parent == cache and sub.parent == cache
    w, h, fps, frames = clip_geometry(same_rate)
    assert (w, h, round(fps), frames) == (256, 144, 10, 30)
    w, h, fps, frames = clip_geometry(sub)
    assert (w, h, round(fps), frames) == (256, 144, 5, 15)  # every other frame, same 3 s
    assert resolve_clip("src-144p5.mp4", videos, cache) == sub  # made once, then reused


def test_a_camera_like_clip_has_a_keyframe_every_n_frames_and_no_b_frames(
    dirs: tuple[Path, Path],
) -> None:
    clip = resolve_clip("src-144p-g10.mp4", *dirs)
    probe = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v", "-show_entries", "frame=pict_type",
         "-of", "csv=p=0", str(clip)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    types = "".join(line.strip()[:1] for line in probe.stdout.splitlines() if line.strip())
    assert types == ("I" + "P" * 9) * 3


def test_a_name_with_nothing_to_derive_it_from_is_refused(tmp_path: Path) -> None:
    videos = tmp_path / "videos"
    _source(videos)
    with pytest.raises(FileNotFoundError, match=r"other-144p5\.mp4"):
        resolve_clip("other-144p5.mp4", videos, tmp_path)
