"""Camera names and file paths: the two lines of defence together.

The config refuses unsafe camera names (tests/unit/test_config_bad.py); if one got through
anyway (a sink fed by other code), ``safe_name``/``safe_join`` keep every snapshot inside its
directory. What tests/unit/test_sink_paths.py covers is not repeated: here the real
SnapshotSink writes with hostile names, a planted symlink is refused, and every name the config
accepts is used unchanged in file names.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vidpipe.config import CameraConfig
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks.paths import safe_name
from vidpipe.sinks.snapshot import SnapshotSink
from vidpipe.types import Detections, FrameResult

HOSTILE = [
    "../../escape",
    "../",
    "..",
    ".",
    "/abs/path",
    "/",
    "a\x00b",
    "\x00",
    "cam/../../x",
    "..\\..\\x",
    "./.hidden",
    "x" * 300 + "/..",
    "ca\u0301m\u00e9ra/../\u202e",  # combining accent, right-to-left override
]


def result(camera: str, seq: int = 1) -> FrameResult:
    """A real 48x64 frame with one detection, attributed to ``camera``."""
    return FrameResult(
        camera=camera,
        seq=seq,
        t_capture=100.0 + seq,
        t_done=100.1 + seq,
        wall_time=1_700_000_000.0 + seq,
        width=64,
        height=48,
        detections=Detections(
            np.array([[2, 3, 30, 40]], np.float32),
            np.array([0.9], np.float32),
            np.array([0], np.int32),
        ),
        labels=("person",),
        image=np.full((48, 64, 3), 7, np.uint8),
    )


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


@pytest.mark.parametrize("camera", HOSTILE)
def test_snapshot_sink_stays_inside_its_directory(tmp_path: Path, camera: str) -> None:
    snaps = tmp_path / "a" / "snaps"
    sink = SnapshotSink("snapshot", snaps, draw=draw_detections, min_interval_s=0)
    sink.handle(result(camera))
    written = files_under(tmp_path)
    assert len(written) == 2  # the numbered file and latest.jpg
    for path in written:
        assert path.resolve().is_relative_to(snaps.resolve()), path
        assert path.parent.parent == snaps  # snaps/<one safe component>/<file>
        assert "\x00" not in str(path)
        assert path.parent.name not in {".", ".."}


@pytest.mark.parametrize("camera", ["../x", "/x", "x/..", "x\x00"])
def test_hostile_names_never_collide_with_the_plain_one(tmp_path: Path, camera: str) -> None:
    """``../x`` must not overwrite the files of a camera really called ``x``."""
    sink = SnapshotSink("snapshot", tmp_path, draw=draw_detections, min_interval_s=0)
    sink.handle(result("x", seq=1))
    sink.handle(result(camera, seq=2))
    dirs = sorted(p.name for p in tmp_path.iterdir())
    assert len(dirs) == 2 and "x" in dirs
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == ["latest.jpg", "x-1.jpg"]


def test_planted_symlink_is_refused(tmp_path: Path) -> None:
    """A camera directory replaced by a link to elsewhere is not written through."""
    outside = tmp_path / "outside"
    outside.mkdir()
    snaps = tmp_path / "snaps"
    snaps.mkdir()
    os.symlink(outside, snaps / "front")
    sink = SnapshotSink("snapshot", snaps, draw=draw_detections, min_interval_s=0)
    with pytest.raises(ValueError, match="escapes its base directory"):
        sink.handle(result("front"))
    assert list(outside.iterdir()) == []


_CONFIG_NAME = CameraConfig.model_fields["name"]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}", fullmatch=True))
def test_names_the_config_accepts_are_used_unchanged(name: str) -> None:
    """What the config accepts is already a safe file name: snapshots are named as the camera."""
    cam = CameraConfig(name=name, url="/x.mp4")  # raises if the config refused it
    assert safe_name(cam.name) == name


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=80))
def test_config_and_safe_name_agree_on_what_is_safe(name: str) -> None:
    """A name the config accepts is never changed by safe_name: the rules do not drift apart."""
    try:
        CameraConfig(name=name, url="/x.mp4")
    except ValueError:
        return  # refused by the config: safe_name is the second line of defence
    assert safe_name(name) == name
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name)
