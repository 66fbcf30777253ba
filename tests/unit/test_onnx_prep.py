"""The graph rewrite both GPU executors run, checked with real OpenVINO on the real model."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import openvino as ov
import pytest

from vidpipe.infer import onnx_prep
from vidpipe.infer.base import BackendError
from vidpipe.infer.torch_executor import graph_sizes
from vidpipe.preprocess.letterbox import letterbox


def test_u8_nhwc_dynamic_batch_equals_the_original_per_frame(
    assets_dir: Path, tmp_path: Path
) -> None:
    path = assets_dir / "models" / "yolox_nano.onnx"
    model, io = onnx_prep.prepare(onnx_prep.load_model(path), path)
    assert io.input.shape == (416, 416, 3)
    assert [(o.name, o.shape) for o in io.outputs] == [("output", (3549, 85))]
    prepped = tmp_path / "prepped.onnx"
    prepped.write_bytes(onnx_prep.serialize(model))
    core = ov.Core()
    f32 = {"INFERENCE_PRECISION_HINT": "f32"}
    original = core.compile_model(str(path), "CPU", f32)
    rewritten = core.compile_model(str(prepped), "CPU", f32)
    names = sorted(p.name for p in (assets_dir / "images").glob("*.jpg"))[:3]
    frames = [letterbox(cv2.imread(str(assets_dir / "images" / n)), 416, 416)[0] for n in names]
    batch = rewritten(np.stack(frames))[0]  # three frames in one batch
    assert batch.shape == (3, 3549, 85)
    for i, frame in enumerate(frames):
        single = original(frame.transpose(2, 0, 1)[None].astype(np.float32))[0]
        np.testing.assert_allclose(batch[i], single[0], atol=1e-4)


def test_a_model_without_an_image_input_is_refused(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    path = tmp_path / "flat.onnx"
    onnx.save(helper.make_model(graph), str(path))
    with pytest.raises(BackendError, match=r"flat.onnx: expected an N x 3 x H x W input"):
        onnx_prep.prepare(onnx_prep.load_model(path), path)


def test_non_onnx_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.xml"
    path.write_text("<net/>")
    with pytest.raises(BackendError, match="need an ONNX model"):
        onnx_prep.load_model(path)


@pytest.mark.parametrize(
    ("max_batch", "sizes"),
    [
        (1, [1]),
        (2, [1, 2]),
        (8, [1, 2, 4, 8]),
        (12, [1, 2, 4, 8, 12]),
        (64, [1, 2, 4, 8, 16, 32, 64]),
    ],
)
def test_graph_sizes_cover_every_batch(max_batch: int, sizes: list[int]) -> None:
    assert graph_sizes(max_batch) == sizes
