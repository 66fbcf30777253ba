"""``model.input_size``: sizes a detector cannot tile, a backend that cannot reshape and an
embedder given one are refused with the YAML path and line; a good one is kept."""

from __future__ import annotations

import pytest

from vidpipe.config import ConfigError, parse_config

CAMERA = "cameras:\n  - {name: gate, url: gate.mp4}\n"
TORCH = "inference: {type: torch}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    return err.value.problems


def test_a_16_9_input_size_is_kept() -> None:
    cfg = parse_config("model: {path: y.onnx, input_size: [416, 256]}\n" + CAMERA)
    assert cfg.model.input_size == (416, 256)
    assert parse_config("model: {path: y.onnx}\n" + CAMERA).model.input_size is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "model: {path: y.onnx, input_size: [416, 250]}\n" + CAMERA,
            "model.input_size (line 1): input_size height 250 must be a multiple of 32",
        ),
        (
            "model: {path: y.onnx, input_size: [0, 256]}\n" + CAMERA,
            "model.input_size (line 1): input_size width 0 must be a multiple of 32",
        ),
        (
            "model: {path: y.onnx, input_size: [416]}\n" + CAMERA,
            "model.input_size",
        ),
        (
            "model: {path: y.onnx, input_size: [416, 256]}\n" + TORCH + CAMERA,
            "model.input_size (line 1): inference type 'torch' runs the model at the size it "
            "was exported with",
        ),
        (
            "models:\n  wide: {path: y.onnx, input_size: [416, 256]}\n" + TORCH + CAMERA,
            "models.wide.input_size (line 2): inference type 'torch'",
        ),
        (
            "model: {path: y.onnx}\nmodels:\n  reid: {path: r.onnx, type: reid, "
            "input_size: [128, 256]}\n" + CAMERA,
            "input_size: a reid model takes its crops at its own size",
        ),
    ],
)
def test_bad_input_sizes_are_refused(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in p for p in found), found
