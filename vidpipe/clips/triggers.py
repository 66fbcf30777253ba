"""What in a result triggers a clip, as the records its sidecar lists."""

from __future__ import annotations

from typing import Any

import numpy as np

from vidpipe.config import ClipTriggers
from vidpipe.sinks.record import event_record
from vidpipe.types import FrameResult, TrackEvent


def trigger_hits(
    result: FrameResult, triggers: ClipTriggers, class_ids: frozenset[int]
) -> list[dict[str, Any]]:
    """The zone and line events of ``result`` that ``triggers`` names (their records), then
    its detections of ``class_ids`` scoring at least ``triggers.min_score``."""
    hits: list[dict[str, Any]] = []
    for event in result.events:
        if isinstance(event, TrackEvent) and (
            event.kind in triggers.zones or event.kind in triggers.lines
        ):
            hits.append(event_record(event))
    if not class_ids:
        return hits
    det = result.detections
    mask = det.score >= triggers.min_score
    if mask.any():
        mask &= np.isin(det.class_id, list(class_ids))
        tids = det.tracker_id
        for i in np.flatnonzero(mask).tolist():
            cid = int(det.class_id[i])
            hits.append(
                {
                    "event": "detection",
                    "frame": result.seq,
                    "class_id": cid,
                    "label": result.labels.name(cid),
                    "score": round(float(det.score[i]), 5),
                    "tracker_id": None if tids is None or tids[i] < 0 else int(tids[i]),
                }
            )
    return hits
