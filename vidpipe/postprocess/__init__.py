"""Postprocess stage: pure functions from raw model outputs to drawn detections.

``decode`` registers the model types and turns raw outputs into boxes in model-input pixels
(NanoDet's decoder is in ``nanodet``), ``nms`` suppresses duplicates, ``pipeline.postprocess``
chains them and maps boxes back to frame pixels, ``draw`` annotates a copy of a frame.

The class-agnostic ``nms`` function is not re-exported here: ``vidpipe.postprocess.nms`` stays
the module (import the function from it).
"""

from vidpipe.postprocess.decode import (
    DECODERS,
    DecodeParams,
    Decoder,
    check_output_shapes,
    decode_nanodet,
    decode_ssd,
    decode_yolov8,
    decode_yolox,
)
from vidpipe.postprocess.draw import draw_detections
from vidpipe.postprocess.nms import box_iou, nms_class_aware
from vidpipe.postprocess.pipeline import postprocess

__all__ = [
    "DECODERS",
    "DecodeParams",
    "Decoder",
    "box_iou",
    "check_output_shapes",
    "decode_nanodet",
    "decode_ssd",
    "decode_yolov8",
    "decode_yolox",
    "draw_detections",
    "nms_class_aware",
    "postprocess",
]
