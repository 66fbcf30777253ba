"""Best-shot crops cut from a camera's record stream (``clips.crop.source: record``).

A dual-stream camera detects on its small sub-stream and records its main stream, which shows
the same scene in more pixels. For such a crop the recorder keeps, per track, only the box of
its best detection and when that frame was captured (a ``Shot``): no picture. When the clip is
written (on the writer thread), ``record_crops`` decodes, of the clip's own packets, only the
record picture whose packet arrived nearest that time: its group of pictures from the keyframe
up to it, once per clip however many tracks share the group. It cuts the box there, scaled from
detect to record pixels.

The two streams are placed in time as the clip's triggers are (``clips/align.py``: by the
camera's sender reports where both streams carry them, else by arrival), so the picture can be
a frame or two away from the detected one; the padding (``clips.crop.padding``) absorbs that
much motion.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import av
import numpy as np
import numpy.typing as npt

from vidpipe.clips.ring import Segment
from vidpipe.types import Detections

log = logging.getLogger(__name__)

Box = tuple[float, float, float, float]


@dataclass(slots=True)
class Crop:
    """The best (highest-scoring) picture of one track so far."""

    tracker_id: int
    label: str
    score: float
    image: npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class Shot:
    """The best detection of one track so far, without its picture.

    Attributes:
        xyxy: the box in the detect frame's pixels.
        width, height: the detect frame's size.
        t_capture: the detect frame's capture time (monotonic, as the ring's packets).
    """

    tracker_id: int
    label: str
    score: float
    xyxy: Box
    width: int
    height: int
    t_capture: float


def padded_box(
    xyxy: Sequence[float], padding: float, width: int, height: int
) -> tuple[int, int, int, int] | None:
    """``xyxy`` grown by ``padding`` x its width and height, in whole pixels of a
    ``width`` x ``height`` picture; None when under 2 pixels remain on a side."""
    x1, y1, x2, y2 = xyxy
    px, py = (x2 - x1) * padding, (y2 - y1) * padding
    left, top = max(0, int(x1 - px)), max(0, int(y1 - py))
    right, bottom = min(width, int(x2 + px + 0.999)), min(height, int(y2 + py + 0.999))
    if right - left < 2 or bottom - top < 2:
        return None
    return left, top, right, bottom


def record_crops(segment: Segment, shots: Sequence[Shot], padding: float) -> list[Crop]:
    """The crop of each shot from the record picture nearest in arrival time, in ``shots``'
    order; a shot whose picture does not decode, or whose box falls outside, has none.

    A decoding error costs the crops, never the clip (logged).
    """
    packets = segment.packets
    if not shots or not packets:
        return []
    arrivals = [p.t_capture for p in packets]
    target = {id(shot): _nearest(arrivals, shot.t_capture) for shot in shots}
    try:
        pictures = _decode(segment, sorted(set(target.values())))
    except (av.FFmpegError, ValueError) as exc:
        log.warning("best-shot crops from the record stream not decoded: %s", exc)
        return []
    out = []
    for shot in shots:
        picture = pictures.get(target[id(shot)])
        if picture is None:
            continue
        h, w = picture.shape[:2]
        sx, sy = w / shot.width, h / shot.height
        x1, y1, x2, y2 = shot.xyxy
        box = padded_box((x1 * sx, y1 * sy, x2 * sx, y2 * sy), padding, w, h)
        if box is None:
            continue
        left, top, right, bottom = box
        image = np.ascontiguousarray(picture[top:bottom, left:right])
        out.append(Crop(shot.tracker_id, shot.label, shot.score, image))
    return out


def _nearest(arrivals: list[float], t: float) -> int:
    """Index of the packet that arrived nearest ``t`` (``arrivals`` ascending)."""
    i = bisect.bisect_left(arrivals, t)
    if i == 0:
        return 0
    if i == len(arrivals):
        return i - 1
    return i if arrivals[i] - t < t - arrivals[i - 1] else i - 1


def _decode(segment: Segment, wanted: list[int]) -> dict[int, npt.NDArray[np.uint8]]:
    """The BGR picture of each packet index in ``wanted`` (ascending): every group of
    pictures holding one is decoded from its keyframe up to the last wanted packet in it."""
    packets = segment.packets
    keyframes = [i for i, p in enumerate(packets) if p.keyframe] or [0]
    groups: dict[int, list[int]] = {}
    for index in wanted:
        start = keyframes[max(0, bisect.bisect_right(keyframes, index) - 1)]
        groups.setdefault(start, []).append(index)
    out: dict[int, npt.NDArray[np.uint8]] = {}
    for start, indices in groups.items():
        by_pts = {packets[i].pts: i for i in indices}
        decoder: Any = av.CodecContext.create(segment.params.codec, "r")  # a video decoder
        decoder.thread_count = 1  # the writer thread's own core, not the cameras'
        if segment.params.extradata:
            decoder.extradata = segment.params.extradata
        frames: list[Any] = []
        for p in packets[start : indices[-1] + 1]:
            packet = av.Packet(p.data)
            packet.pts, packet.dts, packet.time_base = p.pts, p.dts, p.time_base
            frames += decoder.decode(packet)
        frames += decoder.decode(None)  # the pictures the decoder holds back for reordering
        for frame in frames:
            at = by_pts.get(frame.pts)
            if at is not None and at not in out:
                out[at] = _bgr(frame)
        if None in by_pts and frames:  # a stream without timestamps: the last picture
            out.setdefault(by_pts[None], _bgr(frames[-1]))
    return out


def _bgr(frame: Any) -> npt.NDArray[np.uint8]:
    picture: npt.NDArray[np.uint8] = frame.to_ndarray(format="bgr24")
    return picture


def better_tracks(det: Detections, best: Mapping[int, Crop | Shot]) -> list[tuple[int, int]]:
    """``(index, tracker id)`` of the tracked detections that score above their track's best
    so far."""
    if det.tracker_id is None:
        return []
    tracked = [(i, int(det.tracker_id[i])) for i in np.flatnonzero(det.tracker_id >= 0).tolist()]
    return [
        (i, tid)
        for i, tid in tracked
        if (kept := best.get(tid)) is None or float(det.score[i]) > kept.score
    ]
