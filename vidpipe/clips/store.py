"""Clips on disk: ``<dir>/<camera>/<id>.mp4``, its crops ``<id>.t<track>.jpg`` and ``<id>.json``.

Every file is written under a temporary name (``.tmp-...``, ``vidpipe.fileio``) and renamed
when complete; the sidecar comes last, and only clips with a sidecar are listed or served, so a
clip cut short by a crash is never seen. ``clean_temp`` removes such leftovers at start-up;
``enforce`` applies the retention limits, the oldest clip first. A sidecar is the clip's v1
record plus its files' details (``vidpipe.clips.writer.write_clip``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidpipe.fileio import is_temporary

CLIP_ID = re.compile(r"\d{8}-\d{6}-\d{3}(?:-\d{1,4})?")
#: A file a clip consists of: its MP4, its sidecar, its crops (``<id>.t<track>.jpg``).
CLIP_FILE = re.compile(
    r"(?P<id>\d{8}-\d{6}-\d{3}(?:-\d{1,4})?)(?P<part>\.mp4|\.json|\.t\d{1,12}\.jpg)"
)


def clip_id(wall_time: float, taken: set[str] | None = None) -> str:
    """An id from the clip's start time, ``20261130-192512-123`` (UTC), unique in ``taken``."""
    base = (
        time.strftime("%Y%m%d-%H%M%S", time.gmtime(wall_time)) + f"-{int(wall_time % 1 * 1000):03d}"
    )
    cid, n = base, 1
    while taken is not None and cid in taken:
        n += 1
        cid = f"{base}-{n}"
    return cid


def clean_temp(camera_dir: Path) -> int:
    """Remove what a crash during a write left: temporary files, and the files of a clip whose
    sidecar was never written. How many files were removed."""
    n = 0
    with contextlib.suppress(FileNotFoundError):
        names = [p.name for p in camera_dir.iterdir()]
        complete = {
            m["id"] for name in names if (m := CLIP_FILE.fullmatch(name)) and m["part"] == ".json"
        }
        for name in names:
            m = CLIP_FILE.fullmatch(name)
            if is_temporary(name) or (m is not None and m["id"] not in complete):
                with contextlib.suppress(FileNotFoundError):
                    (camera_dir / name).unlink()
                    n += 1
    return n


@dataclass(frozen=True, slots=True)
class StoredClip:
    clip_id: str
    nbytes: int  # the clip's files together
    mtime: float


def stored_clips(camera_dir: Path) -> list[StoredClip]:
    """The complete clips of a directory (those with a sidecar), oldest first."""
    sizes: dict[str, int] = {}
    times: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(camera_dir):
            m = CLIP_FILE.fullmatch(entry.name)
            if m is None:
                continue
            with contextlib.suppress(FileNotFoundError):
                st = entry.stat()
                cid = m["id"]
                sizes[cid] = sizes.get(cid, 0) + st.st_size
                if m["part"] == ".json":
                    times[cid] = st.st_mtime
    clips = [StoredClip(cid, sizes[cid], times[cid]) for cid in times]
    return sorted(clips, key=lambda c: (c.mtime, c.clip_id))


def delete_clip(camera_dir: Path, cid: str) -> None:
    """Remove a clip's sidecar first (it is no longer listed), then its other files."""
    with contextlib.suppress(FileNotFoundError):
        (camera_dir / f"{cid}.json").unlink()
    for p in list(camera_dir.glob(f"{cid}.*")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()


def enforce(
    camera_dir: Path, max_bytes: float, max_age_s: float, now: float | None = None
) -> tuple[list[tuple[str, str]], int]:
    """Delete clips older than ``max_age_s``, then the oldest until they fit ``max_bytes``.

    Returns:
        The deleted ``(clip_id, reason)`` (``age`` or ``size``) and the bytes left.
    """
    now = time.time() if now is None else now
    clips = stored_clips(camera_dir)
    deleted: list[tuple[str, str]] = []
    total = sum(c.nbytes for c in clips)
    for c in clips:
        reason = "age" if now - c.mtime > max_age_s else "size" if total > max_bytes else None
        if reason is None:
            continue
        delete_clip(camera_dir, c.clip_id)
        total -= c.nbytes
        deleted.append((c.clip_id, reason))
    return deleted, total


def read_sidecar(camera_dir: Path, cid: str) -> dict[str, Any] | None:
    try:
        data = json.loads((camera_dir / f"{cid}.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def recent(camera_dir: Path, limit: int) -> list[dict[str, Any]]:
    """The sidecars of the newest ``limit`` clips, newest first."""
    out = []
    for c in reversed(stored_clips(camera_dir)):
        side = read_sidecar(camera_dir, c.clip_id)
        if side is not None:
            out.append(side)
        if len(out) >= limit:
            break
    return out


def clip_file(camera_dir: Path, name: str) -> Path | None:
    """The file ``name`` of a complete clip in ``camera_dir``, or None (unknown, or not a clip's
    file name: no path can leave the directory)."""
    m = CLIP_FILE.fullmatch(name)
    if m is None or not (camera_dir / f"{m['id']}.json").is_file():
        return None
    path = camera_dir / name
    return path if path.is_file() else None
