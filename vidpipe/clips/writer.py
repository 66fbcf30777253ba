"""Writing one clip: the MP4 by stream copy, the best-shot crops and the sidecar, atomically.

Runs on the recorder's writer thread, never on a camera's or the pipeline's threads.
"""

from __future__ import annotations

import contextlib
import errno
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av
import cv2

from vidpipe.capture.remux import write_mp4
from vidpipe.clips.ring import Segment
from vidpipe.clips.shots import Crop, Shot, record_crops
from vidpipe.fileio import replacing, write_atomic
from vidpipe.sinks.record import clip_record
from vidpipe.types import ClipEvent


@dataclass(slots=True)
class ClipJob:
    """Everything needed to write one clip (the recorder fills it when the clip closes).

    ``segment`` times are monotonic; ``wall_offset`` turns them into ``time.time()``.
    """

    camera: str
    camera_dir: Path
    clip_id: str
    segment: Segment
    wall_offset: float
    triggers: list[dict[str, Any]]
    trigger_times: list[float]  # each trigger's frame's t_capture (monotonic)
    triggers_total: int
    classes: list[str]
    tracker_ids: list[int]
    seq: int
    closed_by: str
    crops: list[Crop] = field(default_factory=list)
    # clips.crop.source: record: the best shots, cut from the clip's own packets when written
    shots: list[Shot] = field(default_factory=list)
    padding: float = 0.1
    jpeg_quality: int = 90
    t_queued: float = 0.0
    # which input the packets came from, where not the detect input ({"input": "record", ...})
    source: dict[str, Any] = field(default_factory=dict)


class ClipWriteError(Exception):
    """Writing failed; ``reason`` is the ``vidpipe_clips_failed`` label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def failure_reason(exc: BaseException) -> str:
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT):
        return "disk_full"
    if code in (errno.ENOENT, errno.ENOTDIR):
        return "dir_missing"
    return "write_error"


def write_clip(job: ClipJob) -> ClipEvent:
    """Write the clip's MP4, crops and sidecar; the sidecar (what lists the clip) comes last.

    The sidecar is the clip's v1 record (``vidpipe.sinks.record.clip_record``, what the sinks
    announce) plus what only the files tell: ``file`` (the MP4's name), ``packets``,
    ``closed_by``, ``triggers`` (each with its ``offset_s``: where its frame is in the file,
    from the stream's timestamps), ``triggers_total``
    and ``crops``; a camera's record input adds ``input``, ``aligned_by`` (``rtcp``: moved
    by ``record_offset_s``, the measured offset between the inputs; ``arrival``: not measured)
    and ``record_offset_s``.

    Returns:
        The clip's event, as the sidecar records it.

    Raises:
        ClipWriteError: nothing of the clip is left on disk.
    """
    d = job.camera_dir
    mp4 = d / f"{job.clip_id}.mp4"
    written: list[Path] = []
    try:
        d.mkdir(parents=True, exist_ok=True)
        with replacing(mp4) as tmp:
            if write_mp4(tmp, job.segment.params, job.segment.packets) == 0:
                raise ClipWriteError("no_keyframe", "no keyframe among the clip's packets")
        written.append(mp4)
        crops = _write_crops(job, written)
        event = _clip_event(job, mp4.stat().st_size, crops)
        sidecar = {
            **clip_record(event),
            "file": mp4.name,
            "packets": len(job.segment.packets),
            "closed_by": job.closed_by,
            **job.source,
            # where in the file each trigger's frame is (the file starts at its first keyframe)
            "triggers": [
                {**hit, "offset_s": offset}
                for hit, offset in zip(
                    job.triggers, job.segment.media_offsets(job.trigger_times), strict=True
                )
            ],
            "triggers_total": job.triggers_total,
            "crops": crops,
        }
        write_atomic(d / f"{job.clip_id}.json", json.dumps(sidecar, indent=1).encode())
        return event
    except BaseException as exc:
        for p in written:
            with contextlib.suppress(OSError):
                p.unlink()
        if isinstance(exc, ClipWriteError):
            raise
        if isinstance(exc, (OSError, av.FFmpegError)):
            raise ClipWriteError(failure_reason(exc), f"{type(exc).__name__}: {exc}") from exc
        raise


def _write_crops(job: ClipJob, written: list[Path]) -> list[dict[str, Any]]:
    out = []
    for crop in job.crops or record_crops(job.segment, job.shots, job.padding):
        ok, jpeg = cv2.imencode(".jpg", crop.image, [cv2.IMWRITE_JPEG_QUALITY, job.jpeg_quality])
        if not ok:
            continue
        name = f"{job.clip_id}.t{crop.tracker_id}.jpg"
        path = job.camera_dir / name
        write_atomic(path, jpeg.tobytes())
        written.append(path)
        out.append(
            {
                "tracker_id": crop.tracker_id,
                "label": crop.label,
                "score": round(crop.score, 5),
                "file": name,
                "width": int(crop.image.shape[1]),
                "height": int(crop.image.shape[0]),
            }
        )
    return out


def _clip_event(job: ClipJob, size: int, crops: list[dict[str, Any]]) -> ClipEvent:
    """The clip's event. It ends when its last packet arrived and starts ``duration`` before:
    the stream's timestamps say how long the file plays, where arrival times jitter (the
    first packets of a stream can come in a burst), and the end is never after the write."""
    seg = job.segment
    end = seg.t_end + job.wall_offset
    base = f"/clips/{job.camera}/"
    return ClipEvent(
        camera=job.camera,
        seq=job.seq,
        wall_time=time.time(),
        clip_id=job.clip_id,
        start=end - seg.duration,
        end=end,
        url=f"{base}{job.clip_id}.mp4",
        label=job.classes[0] if job.classes else "",
        classes=tuple(job.classes),
        tracker_ids=tuple(job.tracker_ids),
        size=size,
        crop_url=base + crops[0]["file"] if crops else None,
        crop_file=str(job.camera_dir / crops[0]["file"]) if crops else None,
    )
