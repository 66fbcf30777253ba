"""The one atomic write (vidpipe/fileio.py): whole files or none, and no temporary left."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from vidpipe.fileio import is_temporary, replacing, temporary_name, write_atomic


def test_write_atomic_replaces_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b"old")
    write_atomic(path, b"new")
    assert path.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]


def test_write_atomic_mode_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "readable", b"x")
        write_atomic(tmp_path / "private", b"x", mode=0o600)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "readable").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "private").stat().st_mode) == 0o600


def test_replacing_removes_the_temporary_on_error_and_keeps_the_old_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "clip.mp4"
    path.write_bytes(b"old")
    with pytest.raises(RuntimeError), replacing(path) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("disk full")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["clip.mp4"]


def test_temporary_names_are_hidden_recognizable_and_keep_the_directory(tmp_path: Path) -> None:
    tmp = temporary_name(tmp_path / "20261130-192512-123.mp4")
    assert tmp.parent == tmp_path  # same file system: os.replace is atomic
    assert tmp.name.startswith(".") and is_temporary(tmp.name)
    assert not is_temporary("20261130-192512-123.mp4")
