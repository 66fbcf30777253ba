"""From raw model outputs of one image to final detections in frame pixels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from vidpipe.postprocess.decode import DecodeParams, Decoder
from vidpipe.postprocess.nms import nms_class_aware
from vidpipe.types import Detections, Letterbox


def postprocess(
    outputs: Sequence[np.ndarray],
    letterbox: Letterbox,
    decoder: Decoder,
    params: DecodeParams,
    iou_threshold: float,
    class_ids: frozenset[int] | None = None,
) -> Detections:
    """Decode, filter, suppress and un-letterbox the outputs of one image.

    Steps: ``decoder`` (score threshold from ``params``) -> keep only ``class_ids`` ->
    class-aware NMS -> take the letterbox's pad offset off the boxes and divide them by
    ``letterbox.scale`` -> clip to ``[0, src_w] x [0, src_h]``.

    Args:
        outputs: the model outputs of one image, batch dimension stripped.
        letterbox: how the frame was placed into the model input.
        decoder: one of :data:`vidpipe.postprocess.decode.DECODERS`.
        params: input size and score threshold (pass a camera's own threshold here).
        iou_threshold: NMS IoU threshold.
        class_ids: classes to keep; None keeps all.

    Returns:
        Detections in frame pixels, sorted by score descending. Boxes lying wholly in the
        padding are clipped to zero size, not dropped.
    """
    det = decoder(outputs, params)
    if class_ids is not None and len(det):
        wanted = np.fromiter(class_ids, dtype=np.int64, count=len(class_ids))
        det = det.select(np.isin(det.class_id, wanted))
    if not len(det):
        return Detections.empty()
    keep = nms_class_aware(det.xyxy, det.score, det.class_id, iou_threshold)
    xyxy = det.xyxy[keep]
    if letterbox.pad_x or letterbox.pad_y:  # a centred picture (NanoDet); YOLOX's is at 0, 0
        xyxy = xyxy - np.array([letterbox.pad_x, letterbox.pad_y] * 2, np.float32)
    xyxy = xyxy / np.float32(letterbox.scale)
    np.clip(xyxy[:, 0::2], 0.0, letterbox.src_w, out=xyxy[:, 0::2])
    np.clip(xyxy[:, 1::2], 0.0, letterbox.src_h, out=xyxy[:, 1::2])
    return Detections(xyxy, det.score[keep], det.class_id[keep])
