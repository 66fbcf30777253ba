"""The load-time graph rewrite of YOLOX's Focus block (``vidpipe/infer/ov_rewrites.py``), on
real OpenVINO: the real model, and small graphs built here for the cases it must leave alone.

Every comparison runs both graphs at an explicit f32 on the same input, so it holds on any CPU
(bf16 machines included): the rewrite only moves data, so the outputs agree to float rounding.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset13 as ops
import pytest

from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
from vidpipe.infer.openvino import OpenVINOBackend
from vidpipe.infer.ov_rewrites import drop_output_transposes, fuse_focus

F32 = {"INFERENCE_PRECISION_HINT": "f32"}
# (row, column) offsets of YOLOX's own Focus order
YOLOX_ORDER = [(0, 0), (1, 0), (0, 1), (1, 1)]


def run(model: ov.Model, image: np.ndarray) -> np.ndarray:
    return np.asarray(ov.Core().compile_model(model, "CPU", F32)({0: image})[0])


def kinds(model: ov.Model) -> set[str]:
    return {op.get_type_name() for op in model.get_ops()}


def focus_model(order: list[tuple[int, int]], *, stop: int = 2**62, second_use: bool = False):
    """A Focus block over a (1, 3, 8, 8) input, in ``order``, into a 3x3 convolution."""
    image = ops.parameter([1, 3, 8, 8], np.float32, name="images")

    def strided(x, axis: int, start: int):
        return ops.slice(x, np.array([start]), np.array([stop]), np.array([2]), np.array([axis]))

    parts = [strided(strided(image, 2, row), 3, col) for row, col in order]
    concat = ops.concat(parts, 1)
    weights = np.random.default_rng(3).normal(size=(5, 12, 3, 3)).astype(np.float32)
    conv = ops.convolution(concat, weights, [1, 1], [1, 1], [1, 1], [1, 1])
    results = [ops.result(conv)] + ([ops.result(ops.relu(concat))] if second_use else [])
    return ov.Model(results, [image], "focus")


@pytest.fixture(scope="module")
def image() -> np.ndarray:
    return np.random.default_rng(0).uniform(0, 255, (1, 3, 416, 416)).astype(np.float32)


def test_the_real_model_is_rewritten_once_and_gives_the_same_outputs(
    assets_dir: Path, image: np.ndarray
) -> None:
    path = str(assets_dir / "models" / "yolox_nano.onnx")
    given, rewritten = ov.Core().read_model(path), ov.Core().read_model(path)
    assert "Slice" in kinds(given)
    assert fuse_focus(rewritten) == 1
    assert "Slice" not in kinds(rewritten)
    assert fuse_focus(rewritten) == 0  # nothing left to rewrite
    np.testing.assert_allclose(run(rewritten, image), run(given, image), atol=1e-3, rtol=1e-4)


def test_an_ir_with_f16_weights_is_rewritten_too(
    assets_dir: Path, image: np.ndarray, tmp_path: Path
) -> None:
    xml = tmp_path / "m.xml"  # save_model stores weights as f16 behind Convert by default
    ov.save_model(ov.Core().read_model(str(assets_dir / "models" / "yolox_nano.onnx")), str(xml))
    given, rewritten = ov.Core().read_model(str(xml)), ov.Core().read_model(str(xml))
    assert fuse_focus(rewritten) == 1
    np.testing.assert_allclose(run(rewritten, image), run(given, image), atol=1e-3, rtol=1e-4)


@pytest.mark.parametrize(
    "order", [YOLOX_ORDER, [(1, 1), (0, 0), (0, 1), (1, 0)]], ids=["yolox", "shuffled"]
)
def test_any_order_of_the_four_parts_is_folded_into_the_weights(order) -> None:
    x = np.random.default_rng(1).normal(size=(1, 3, 8, 8)).astype(np.float32)
    given, rewritten = focus_model(order), focus_model(order)
    assert fuse_focus(rewritten) == 1
    assert "Slice" not in kinds(rewritten)
    np.testing.assert_allclose(run(rewritten, x), run(given, x), atol=1e-4)


def test_a_concat_used_twice_is_left_alone() -> None:
    model = focus_model(YOLOX_ORDER, second_use=True)
    assert fuse_focus(model) == 0
    assert "Slice" in kinds(model)


def test_slices_that_stop_short_are_not_a_focus_block() -> None:
    model = focus_model(YOLOX_ORDER, stop=6)  # rows/columns 0..5 only: not a space-to-depth
    assert fuse_focus(model) == 0
    assert "Slice" in kinds(model)


def test_a_repeated_part_is_not_a_focus_block() -> None:
    model = focus_model([(0, 0), (0, 0), (0, 1), (1, 1)])
    assert fuse_focus(model) == 0


def test_the_backend_always_rewrites_and_says_so(assets_dir: Path) -> None:
    backend = OpenVINOBackend(
        assets_dir / "models" / "yolox_nano.onnx",
        OpenVINOConfig(advanced=OpenVINOAdvanced(num_requests=1)),
    )
    try:
        assert backend.info.runtime.endswith("graph rewrites: focus, output transpose")
        assert backend.output_shapes == [(1, 3549, 85)]  # the model's own, not the rewritten
        runtime = backend._compiled.get_runtime_model().get_ops()
        layers = {op.get_rt_info()["layerType"].astype(str) for op in runtime}
        assert "StridedSlice" not in layers, layers
    finally:
        backend.close()


def test_the_output_transpose_is_left_to_numpy(assets_dir: Path, image: np.ndarray) -> None:
    path = str(assets_dir / "models" / "yolox_nano.onnx")
    given, dropped = ov.Core().read_model(path), ov.Core().read_model(path)
    orders = drop_output_transposes(dropped)
    assert orders == [(0, 2, 1)]
    assert list(dropped.output(0).get_shape()) == [1, 85, 3549]
    viewed = run(dropped, image).transpose(orders[0])
    assert viewed.shape == (1, 3549, 85)
    np.testing.assert_allclose(viewed, run(given, image), atol=1e-5)
    assert drop_output_transposes(dropped) == [None]  # nothing left to drop


def test_a_transpose_that_feeds_more_than_the_output_stays() -> None:
    x = ops.parameter([1, 4, 6], np.float32)
    moved = ops.transpose(x, np.array([0, 2, 1], np.int64))
    model = ov.Model([ops.result(moved), ops.result(ops.relu(moved))], [x], "two-uses")
    assert drop_output_transposes(model) == [None, None]
    assert "Transpose" in kinds(model)
