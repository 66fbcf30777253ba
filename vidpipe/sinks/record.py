"""The JSON record of a frame, of a zone or line event, of a clip, of a re-identification and
of a track's summary: one format for every sink.

The JSON lines file, MQTT and the webhook all write these dicts, byte for byte the same
(``encode``), and so does ``vidpipe detect`` (frame records); a clip's sidecar file is its clip
record plus the details of its files. docs/record-format.md documents the fields.
``SCHEMA_VERSION`` (``"v"`` in every record) changes when a field changes meaning or goes
away; new fields may be added within a version.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import numpy as np

from vidpipe.types import ClipEvent, Event, FrameResult, ModelTag, ReidEvent, TrackSummary

#: The ``"v"`` of every record.
SCHEMA_VERSION = 1


def model_dict(tag: ModelTag) -> dict[str, str]:
    """A record's ``"model"``: ``{"type": ..., "name": ...}``."""
    return {"type": tag.type, "name": tag.name}


def iso_utc(wall_time: float) -> str:
    """``time.time()`` as RFC 3339 UTC, milliseconds and ``Z``: ``2026-11-30T04:18:25.200Z``."""
    ts = datetime.fromtimestamp(wall_time, UTC).isoformat(timespec="milliseconds")
    return ts.replace("+00:00", "Z")


def detection_dicts(result: FrameResult) -> list[dict[str, Any]]:
    """The detections of ``result``: ``class_id``, ``label``, ``score``, ``box`` each.

    With tracking on, each also has ``tracker_id``: the track's id, or None for a detection
    that is not (yet) part of a confirmed track; and ``global_id`` where re-identification
    gave its track one.
    """
    det = result.detections
    tids = det.tracker_id.tolist() if det.tracker_id is not None else None
    gids = result.global_ids
    out = []
    for i, (box, score, cid) in enumerate(
        zip(det.xyxy.tolist(), det.score.tolist(), det.class_id.tolist(), strict=True)
    ):
        item: dict[str, Any] = {
            "class_id": int(cid),
            "label": result.labels.name(cid),
            "score": round(float(score), 5),
            "box": [round(float(v), 2) for v in box],
        }
        if tids is not None:
            item["tracker_id"] = tids[i] if tids[i] >= 0 else None
            if tids[i] in gids:
                item["global_id"] = gids[tids[i]]
        out.append(item)
    return out


def frame_record(result: FrameResult) -> dict[str, Any]:
    """The record of one processed frame.

    Fields: ``v``, ``camera``, ``frame`` (sequence number), ``ts`` (``iso_utc`` of the
    result's wall time), ``width``, ``height``, ``latency_ms`` (capture to postprocessed, 0.1 ms
    resolution), ``model`` (the detector that produced it: ``{"type": "nanodet", "name":
    "fast"}``, its name in ``models:``, or the file name of the one ``model:``; null only
    where no model was opened) and ``detections``
    (``detection_dicts``).
    """
    return {
        "v": SCHEMA_VERSION,
        "camera": result.camera,
        "frame": result.seq,
        "ts": iso_utc(result.wall_time),
        "width": result.width,
        "height": result.height,
        "latency_ms": round((result.t_done - result.t_capture) * 1000.0, 1),
        "model": None if result.model is None else model_dict(result.model),
        "detections": detection_dicts(result),
    }


def event_record(event: Event) -> dict[str, Any]:
    """The record of one zone or line event (or of a clip: ``clip_record``; a
    re-identification: ``reid_record``; a track's summary: ``track_record``).

    Fields: ``v``, ``event`` (``enter``, ``leave``, ``cross``), ``camera``, ``frame``, ``ts``,
    ``zone`` or ``line``, ``tracker_id``, ``class_id``, ``label``, ``point``; ``direction``
    (``cross``), ``dwell_s`` and ``reason`` (``leave``). A frame record has ``detections``
    instead of ``event``.
    """
    if isinstance(event, ClipEvent):
        return clip_record(event)
    if isinstance(event, ReidEvent):
        return reid_record(event)
    if isinstance(event, TrackSummary):
        return track_record(event)
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "event": event.kind,
        "camera": event.camera,
        "frame": event.seq,
        "ts": iso_utc(event.wall_time),
        ("line" if event.kind == "cross" else "zone"): event.where,
        "tracker_id": event.tracker_id,
        "class_id": event.class_id,
        "label": event.label,
        "point": [round(event.point[0], 1), round(event.point[1], 1)],
    }
    if event.direction is not None:
        out["direction"] = event.direction
    if event.dwell_s is not None:
        out["dwell_s"] = round(event.dwell_s, 3)
    if event.reason is not None:
        out["reason"] = event.reason
    return out


def clip_record(clip: ClipEvent) -> dict[str, Any]:
    """The record of a written event clip.

    Fields: ``v``, ``event`` (``clip``), ``camera``, ``frame`` (of the last trigger), ``ts``
    (when the clip was written), ``id``, ``start`` and ``end`` (``iso_utc`` of its first and last
    packet), ``duration_s``, ``url`` (path on the HTTP server), ``label`` (class of the first
    trigger), ``classes``, ``tracker_ids``, ``size`` (bytes) and ``crop_url`` (or null).
    """
    return {
        "v": SCHEMA_VERSION,
        "event": "clip",
        "camera": clip.camera,
        "frame": clip.seq,
        "ts": iso_utc(clip.wall_time),
        "id": clip.clip_id,
        "start": iso_utc(clip.start),
        "end": iso_utc(clip.end),
        "duration_s": round(clip.end - clip.start, 3),
        "url": clip.url,
        "label": clip.label,
        "classes": list(clip.classes),
        "tracker_ids": list(clip.tracker_ids),
        "size": clip.size,
        "crop_url": clip.crop_url,
    }


def reid_record(event: ReidEvent) -> dict[str, Any]:
    """The record of a track matched to a track of another camera.

    Fields: ``v``, ``event`` (``reid``), ``camera``, ``frame``, ``ts``, ``tracker_id`` (the
    newer track), ``global_id`` (what both carry from now on), ``matched_camera``,
    ``matched_tracker_id`` (the earlier track) and ``similarity`` (cosine, 4 decimals).
    """
    return {
        "v": SCHEMA_VERSION,
        "event": "reid",
        "camera": event.camera,
        "frame": event.seq,
        "ts": iso_utc(event.wall_time),
        "tracker_id": event.track_id,
        "global_id": event.global_id,
        "matched_camera": event.matched_camera,
        "matched_tracker_id": event.matched_track_id,
        "similarity": round(float(event.similarity), 4),
    }


def embedding_text(embedding: np.ndarray) -> str:
    """A vector as base64 of its little-endian float16 values (512 bytes for 256-d)."""
    return base64.b64encode(np.asarray(embedding, "<f2").tobytes()).decode("ascii")


def track_record(summary: TrackSummary) -> dict[str, Any]:
    """The record of a track that ended, as its secondary model saw it.

    Fields: ``v``, ``event`` (``track``), ``camera``, ``frame`` (where it ended), ``ts``,
    ``tracker_id``, ``global_id``, ``class_id``, ``label``, ``first_seen`` and ``last_seen``
    (``iso_utc`` of its first and last embedded crop), ``crops``, ``model`` (the embedder's
    name); ``embedding`` (``embedding_text``) where the stage's ``include_embeddings`` is on.
    """
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "event": "track",
        "camera": summary.camera,
        "frame": summary.seq,
        "ts": iso_utc(summary.wall_time),
        "tracker_id": summary.track_id,
        "global_id": summary.global_id,
        "class_id": summary.class_id,
        "label": summary.label,
        "first_seen": iso_utc(summary.first_seen),
        "last_seen": iso_utc(summary.last_seen),
        "crops": summary.crops,
        "model": summary.model,
    }
    if summary.record_embedding:
        out["embedding"] = embedding_text(summary.embedding)
    return out


def encode(record: dict[str, Any]) -> bytes:
    """A record as compact UTF-8 JSON, without a newline (what MQTT and the webhook send)."""
    return json.dumps(record, separators=(",", ":")).encode("utf-8")
