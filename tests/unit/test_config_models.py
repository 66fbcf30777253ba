"""``models:``, ``detector:``, ``secondary:`` and ``reid:``: each bad reference is refused
with its YAML path, its line and the camera; one model and no ``detector:`` works as ever."""

from __future__ import annotations

import pytest

from vidpipe.config import ConfigError, parse_config

CAMERA = "cameras:\n  - {name: gate, url: gate.mp4%s}\n"
NANO = "  fast: {path: n.onnx, type: nanodet}\n"
REID = "  reid: {path: r.onnx, type: reid}\n"
TORCH = "inference: {type: torch}\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    return err.value.problems


def test_one_model_and_no_detector_runs_it() -> None:
    cfg = parse_config("model: {path: y.onnx}\n" + CAMERA % "")
    assert cfg.detector_of(cfg.cameras[0]) == "default"
    assert cfg.default_detector().path.name == "y.onnx"


def test_the_one_detector_of_models_needs_no_model() -> None:
    cfg = parse_config("models:\n" + NANO + REID + CAMERA % "")
    assert cfg.detector_of(cfg.cameras[0]) == "fast"
    assert list(cfg.detectors()) == ["fast"]  # an embedder is no detector


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "model: {path: y.onnx}\nmodels:\n" + NANO + CAMERA % ", detector: fsat",
            "cameras[0].detector (line 5): camera 'gate': no model named 'fsat' in models: "
            "(detectors: fast)",
        ),
        (
            "model: {path: y.onnx}\nmodels:\n" + REID + CAMERA % ", detector: reid",
            "cameras[0].detector (line 5): camera 'gate': 'reid' is a reid model, not a detector",
        ),
        (
            "models:\n" + NANO + "  big: {path: y.onnx}\n" + CAMERA % "",
            "cameras[0].detector (line 5): camera 'gate' names no detector",
        ),
        (
            "model: {path: y.onnx}\nmodels:\n"
            + NANO
            + "secondary: [{model: fast}]\n"
            + CAMERA % "",
            "secondary[0].model (line 4): 'fast' is a nanodet detector",
        ),
        (
            "model: {path: y.onnx}\nsecondary: [{model: reid}]\n" + CAMERA % "",
            "secondary[0].model (line 2): no model named 'reid' in models:",
        ),
        (
            "model: {path: y.onnx}\nmodels:\n" + REID + CAMERA % ", secondary: [{model: rid}]",
            "cameras[0].secondary[0].model (line 5): no model named 'rid'",
        ),
        (
            "model: {path: y.onnx}\nreid: {links: [{from: gate, to: door}]}\n" + CAMERA % "",
            "reid.links[0].to (line 2): no camera named 'door'",
        ),
        (
            "model: {path: y.onnx}\nmodels:\n  default: {path: n.onnx, type: nanodet}\n"
            + CAMERA % "",
            "models.default (line 3): the name 'default' is model:'s",
        ),
        ("models:\n" + REID + CAMERA % "", "model (line 1): missing: give model:, or a detector"),
    ],
    ids=[
        "detector-unknown",
        "detector-is-embedder",
        "no-default",
        "secondary-is-detector",
        "secondary-unknown",
        "camera-secondary-unknown",
        "link-unknown-camera",
        "default-name-taken",
        "no-detector",
    ],
)
def test_bad_references_name_their_place(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in p for p in found), found


def test_a_models_name_must_be_a_name() -> None:
    found = problems("models:\n  'a b': {path: n.onnx, type: nanodet}\n" + CAMERA % "")
    assert any("model name 'a b' may use only letters" in p for p in found), found


# ``model.input_size``: sizes a detector cannot tile, a backend that cannot reshape and an
# embedder given one are refused with the YAML path and line; a good one is kept.


def test_a_16_9_input_size_is_kept() -> None:
    cfg = parse_config("model: {path: y.onnx, input_size: [416, 256]}\n" + CAMERA % "")
    assert cfg.model.input_size == (416, 256)
    assert parse_config("model: {path: y.onnx}\n" + CAMERA % "").model.input_size is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "model: {path: y.onnx, input_size: [416, 250]}\n" + CAMERA % "",
            "model.input_size (line 1): input_size height 250 must be a multiple of 32",
        ),
        (
            "model: {path: y.onnx, input_size: [0, 256]}\n" + CAMERA % "",
            "model.input_size (line 1): input_size width 0 must be a multiple of 32",
        ),
        (
            "model: {path: y.onnx, input_size: [416]}\n" + CAMERA % "",
            "model.input_size",
        ),
        (
            "model: {path: y.onnx, input_size: [416, 256]}\n" + TORCH + CAMERA % "",
            "model.input_size (line 1): inference type 'torch' runs the model at the size it "
            "was exported with",
        ),
        (
            "models:\n  wide: {path: y.onnx, input_size: [416, 256]}\n" + TORCH + CAMERA % "",
            "models.wide.input_size (line 2): inference type 'torch'",
        ),
        (
            "model: {path: y.onnx}\nmodels:\n  reid: {path: r.onnx, type: reid, "
            "input_size: [128, 256]}\n" + CAMERA % "",
            "input_size: a reid model takes its crops at its own size",
        ),
    ],
)
def test_bad_input_sizes_are_refused(text: str, expected: str) -> None:
    found = problems(text)
    assert any(expected in p for p in found), found
