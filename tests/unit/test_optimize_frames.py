"""``vidpipe optimize`` makes its calibration and agreement frames as the model type wants its
input: the registry's ``ModelInput`` (placement, pad value, mean and std), the normalisation
in the tensor because optimize runs the model file without the daemon's in-graph one."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import openvino as ov
import pytest

from vidpipe.infer.openvino import _normalise_in_graph
from vidpipe.optimize.frames import collect, to_sample
from vidpipe.postprocess.decode import model_type
from vidpipe.preprocess.letterbox import letterbox


def _frame(width: int = 320, height: int = 180) -> np.ndarray:
    rng = np.random.default_rng(7)
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def test_nanodet_frames_are_centred_padded_with_0_and_normalised() -> None:
    mi = model_type("nanodet").input
    assert (mi.placement, mi.pad_value, mi.normalised) == ("centre", 0, True)
    image = _frame()
    sample = to_sample(image, 416, 416, "f.jpg", mi)
    # 320x180 into 416x416: scale 1.3, 416x234, centred: 91 rows of pad above, 91 below
    lb = sample.letterbox
    assert (lb.pad_x, lb.pad_y, lb.scale) == (0, 91, 1.3)
    assert sample.tensor.shape == (1, 3, 416, 416) and sample.tensor.dtype == np.float32
    mean = np.array(mi.mean, np.float32)
    std = np.array(mi.std, np.float32)
    # the pad: 0 before normalisation, in every channel (B, G, R order, as the mean)
    for rows in (slice(0, 91), slice(91 + 234, 416)):
        pad = sample.tensor[0, :, rows, :]
        want_pad = np.broadcast_to((-mean / std)[:, None, None], pad.shape)
        np.testing.assert_allclose(pad, want_pad, rtol=1e-6)
    # the picture: bilinear resize, then (x - mean) / std
    resized = cv2.resize(image, (416, 234), interpolation=cv2.INTER_LINEAR).astype(np.float32)
    want = ((resized - mean) / std).transpose(2, 0, 1)
    np.testing.assert_allclose(sample.tensor[0, :, 91:325, :], want, rtol=1e-5, atol=1e-5)


def test_yolox_frames_are_unchanged_top_left_pad_114_raw_pixels() -> None:
    image = _frame()
    sample = to_sample(image, 416, 416, "f.jpg", model_type("yolox").input)
    default = to_sample(image, 416, 416, "f.jpg")
    np.testing.assert_array_equal(sample.tensor, default.tensor)
    assert (sample.letterbox.pad_x, sample.letterbox.pad_y) == (0, 0)
    assert sample.tensor[0, :, 300:, :].min() == sample.tensor[0, :, 300:, :].max() == 114.0
    assert sample.tensor.max() > 200  # 0-255, not normalised


def test_collect_passes_the_model_input_on(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    cv2.imwrite(str(path), _frame())
    mi = model_type("nanodet").input
    (sample,) = collect([str(path)], 4, 416, 416, lambda _: None, mi)
    np.testing.assert_array_equal(sample.tensor, to_sample(_frame(), 416, 416, "a.png", mi).tensor)


@pytest.mark.integration
def test_nanodet_sample_fed_to_the_model_file_is_what_the_daemons_graph_computes(
    assets_dir: Path,
) -> None:
    """The tensor optimize feeds the raw NanoDet file gives the outputs the daemon's graph
    (normalisation added at load) gives for the 0-255 letterbox it is fed."""
    path = assets_dir / "models" / "nanodet_m_416.onnx"
    mi = model_type("nanodet").input
    core = ov.Core()
    config = {"INFERENCE_PRECISION_HINT": "f32"}
    raw = core.compile_model(core.read_model(str(path)), "CPU", config)
    daemon = core.compile_model(_normalise_in_graph(core.read_model(str(path)), mi), "CPU", config)
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "one-by-one-person-detection.mp4"))
    for _ in range(250):
        ok, image = cap.read()
        assert ok
    cap.release()
    sample = to_sample(image, 416, 416, "walkway#250", mi)
    boxed, _ = letterbox(image, 416, 416, mi)
    pixels = np.ascontiguousarray(boxed.transpose(2, 0, 1)[None], dtype=np.float32)
    got, want = raw({0: sample.tensor}), daemon({0: pixels})
    assert len(raw.outputs) == 6
    for i in range(len(raw.outputs)):
        np.testing.assert_allclose(np.asarray(got[i]), np.asarray(want[i]), atol=2e-4)
    # and a person is seen in it, so the comparison is not of empty heads
    cls = [np.asarray(got[i]) for i in range(6) if np.asarray(got[i]).shape[-1] == 80]
    assert max(float(c[0, :, 0].max()) for c in cls) > 0.5
