"""Model types as one registration: the input each wants (placement, pad, normalisation),
NanoDet's GFL decoder on tensors built from known boxes, and the config's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vidpipe.config import ConfigError, GpuConfig
from vidpipe.config.load import parse_config
from vidpipe.infer.backends import build_backend
from vidpipe.infer.base import BackendError
from vidpipe.postprocess.decode import DecodeParams, model_type
from vidpipe.postprocess.nanodet import NANODET_INPUT, REG_MAX, decode_nanodet
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.buffers import input_buffer
from vidpipe.preprocess.letterbox import DEFAULT_INPUT, letterbox
from vidpipe.types import Letterbox, TensorSpec

W = H = 64  # heads of 8x8, 4x4 and 2x2 anchors
C = 3


def test_each_type_names_its_input() -> None:
    assert model_type("yolox").input == DEFAULT_INPUT
    assert model_type("yolov8").input == DEFAULT_INPUT and model_type("ssd").input == DEFAULT_INPUT
    nano = model_type("nanodet").input
    assert (nano.placement, nano.pad_value, nano.normalised) == ("centre", 0, True)
    assert nano.mean == (103.53, 116.28, 123.675) and nano.std == (57.375, 57.12, 58.395)


def test_centred_letterbox_pads_around_with_zero() -> None:
    img = np.full((432, 768, 3), 7, np.uint8)  # 416 x 233 in the input: 183 rows of pad
    out, lb = letterbox(img, 416, 416, NANODET_INPUT)
    assert (lb.pad_x, lb.pad_y) == (0, 91)
    assert (out[:91] == 0).all() and (out[91 : 91 + 233] == 7).all() and (out[324:] == 0).all()
    tall, lb = letterbox(np.full((768, 432, 3), 7, np.uint8), 416, 416, NANODET_INPUT)
    assert (lb.pad_x, lb.pad_y) == (91, 0)
    assert (tall[:, :91] == 0).all() and (tall[:, 91:324] == 7).all() and (tall[:, 324:] == 0).all()


def test_top_left_letterbox_is_yolox_s() -> None:
    img = np.random.default_rng(1).integers(0, 255, (432, 768, 3), dtype=np.uint8)
    out, lb = letterbox(img, 416, 416)
    assert (lb.pad_x, lb.pad_y) == (0, 0)
    assert (out[233:] == 114).all()


def test_centred_buffer_rewrites_its_pad_when_the_picture_changes_size() -> None:
    buf = input_buffer(TensorSpec("x", (1, 3, 64, 64), "f32", "NCHW"), 0, None, NANODET_INPUT)
    buf.fill(np.full((64, 64, 3), 9, np.uint8))
    lb = buf.fill(np.full((32, 64, 3), 5, np.uint8))  # 64 x 32, centred: rows 16-47
    assert (lb.pad_x, lb.pad_y) == (0, 16)
    assert (buf.hwc[16:48] == 5).all()
    assert (buf.hwc[:16] == 0).all() and (buf.hwc[48:] == 0).all()
    np.testing.assert_array_equal(buf.tensor[0], buf.hwc.transpose(2, 0, 1).astype(np.float32))


def test_boxes_come_back_through_the_centred_letterbox() -> None:
    lb = Letterbox(scale=0.5, src_w=128, src_h=64, pad_x=0, pad_y=16)
    dist = _outputs({(8, 3, 3): (0, (2, 2, 3, 1))})  # one box of class 0
    det = postprocess(dist, lb, decode_nanodet, DecodeParams(W, H, 0.3), 0.45)
    # input box: centre (27.5, 27.5), l=16 t=16 r=24 b=8 -> (11.5, 11.5, 51.5, 35.5); less
    # the pad (0, 16), over the scale 0.5, clipped to the frame
    np.testing.assert_allclose(det.xyxy, [[23.0, 0.0, 103.0, 39.0]], atol=1e-3)


def _outputs(boxes: dict[tuple[int, int, int], tuple[int, tuple[int, int, int, int]]]) -> list:
    """NanoDet's six outputs (classes first) where anchor ``(stride, gx, gy)`` scores 0.9 for
    ``class`` with side distances of ``(l, t, r, b)`` whole strides (a near one-hot
    distribution), every other anchor 0.01."""
    cls, dis = [], []
    for s in (8, 16, 32):
        n = (W // s) * (H // s)
        c = np.full((1, n, C), 0.01, np.float32)
        d = np.zeros((1, n, 4 * (REG_MAX + 1)), np.float32)
        for (stride, gx, gy), (klass, sides) in boxes.items():
            if stride == s:
                row = gy * (W // s) + gx
                c[0, row, klass] = 0.9
                for side, k in enumerate(sides):
                    d[0, row, side * (REG_MAX + 1) + k] = 30.0  # softmax ~ one-hot
        cls.append(c)
        dis.append(d)
    return cls + dis


def test_nanodet_decodes_known_boxes_in_any_output_order() -> None:
    outs = _outputs({(8, 3, 3): (0, (2, 2, 3, 1)), (16, 1, 2): (2, (1, 0, 2, 1))})
    params = DecodeParams(W, H, 0.3)
    det = decode_nanodet(outs, params)
    order = np.argsort(det.class_id)
    # stride 8 anchor (3, 3): centre 24 + 3.5 = 27.5; stride 16 anchor (1, 2): (23.5, 39.5)
    np.testing.assert_allclose(
        det.xyxy[order], [[11.5, 11.5, 51.5, 35.5], [7.5, 39.5, 55.5, 55.5]], atol=1e-3
    )
    np.testing.assert_allclose(det.score[order], [0.9, 0.9])
    np.testing.assert_array_equal(det.class_id[order], [0, 2])
    interleaved = [outs[i] for i in (0, 3, 1, 4, 2, 5)]
    again = decode_nanodet(interleaved, params)
    np.testing.assert_array_equal(again.xyxy, det.xyxy)
    assert len(decode_nanodet(outs, DecodeParams(W, H, 0.95))) == 0


def test_nanodet_refuses_outputs_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="do not look like NanoDet"):
        decode_nanodet([np.zeros((1, 84, 85), np.float32)], DecodeParams(W, H, 0.3))


BASE = "model:\n  path: m.onnx\n  type: nanodet\n"


@pytest.mark.parametrize("backend", ["torch", "tensorrt"])
def test_config_refuses_nanodet_on_the_gpu_backends(backend: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE + f"inference: {{type: {backend}}}\n")
    text = str(err.value)
    assert "model.type" in text and "'nanodet' runs on inference type openvino only" in text
    assert parse_config(BASE + "inference: {type: openvino}\n").model.type == "nanodet"
    assert parse_config(BASE).model.type == "nanodet"
    assert parse_config("model:\n  path: m.onnx\n").model.type == "yolox"


def test_gpu_backend_factory_refuses_another_input() -> None:
    """No GPU needed: the refusal comes before anything GPU-related is imported."""
    with pytest.raises(BackendError, match="letterboxes top-left with pad 114"):
        build_backend(Path("m.onnx"), GpuConfig(type="torch"), NANODET_INPUT)
