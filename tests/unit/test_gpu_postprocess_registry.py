"""The device postprocessors' registry (vidpipe.postprocess.gpu), without torch."""

from __future__ import annotations

import pytest

from vidpipe.config.inference import GPU_MODEL_TYPES
from vidpipe.postprocess import gpu as gpu_post
from vidpipe.postprocess.decode import DECODERS, check_output_shapes, num_anchors

W = H = 416
A = num_anchors(W, H)
FRAME_SHAPES = {"yolox": (A, 85), "yolov8": (84, A), "ssd": (1, 200, 7)}


def test_every_gpu_model_type_has_a_device_postprocessor_with_its_class_count() -> None:
    """One registration per model type the GPU backends take (config refuses the others
    there); the class count read from a frame's output shape is the one the load-time shape
    check reads (SSD: the output does not say, 0)."""
    assert set(gpu_post.GPU_POSTPROCESSORS) == set(GPU_MODEL_TYPES) == set(FRAME_SHAPES)
    assert set(DECODERS) >= GPU_MODEL_TYPES
    for model, frame in FRAME_SHAPES.items():
        classes, problems = check_output_shapes(model, [(1, *frame)], W, H, None)
        assert not problems, problems
        kind = gpu_post.GPU_POSTPROCESSORS[model]
        assert kind.model_type == model
        assert kind.classes_in(frame) == classes, model


def test_a_model_type_without_a_cpu_decoder_is_refused() -> None:
    class Nothing(gpu_post.GpuPostprocess):
        model_type = "nothing"

    with pytest.raises(ValueError, match="no CPU decoder for model type 'nothing'"):
        gpu_post.register_gpu_postprocess(Nothing)
    assert "nothing" not in gpu_post.GPU_POSTPROCESSORS
