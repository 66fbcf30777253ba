"""Which NVDEC cameras a config may have, and what start-up and ``vidpipe check`` say when one
cannot start (no PyNvVideoCodec here: faked where a test needs it present)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vidpipe.capture.nvdec_source import check_nvdec
from vidpipe.config import Config

MODEL = {"path": "m.onnx"}
TORCH = {"type": "torch", "devices": [1, 2]}


def _config(**over: Any) -> Config:
    return Config.model_validate({"model": MODEL, **over})


def test_nvdec_needs_the_torch_backend_naming_camera_and_path() -> None:
    cams = [{"name": "a", "url": "a.mp4"}, {"name": "door", "url": "b.mp4", "decoder": "nvdec"}]
    with pytest.raises(
        ValueError,
        match=r"cameras\[1\]\.decoder: camera 'door' decodes with "
        r"nvdec.*inference type 'openvino' cannot take them",
    ):
        _config(cameras=cams)
    with pytest.raises(ValueError, match=r"capture\.decoder: camera 'a' .*'tensorrt'"):
        _config(
            capture={"decoder": "nvdec"},
            inference={"type": "tensorrt"},
            cameras=cams[:1],
        )


def test_nvdec_gpu_must_be_an_inference_device() -> None:
    cam = {"name": "door", "url": "b.mp4", "decoder": "nvdec"}
    with pytest.raises(
        ValueError,
        match=r"capture|cameras\[0\]\.decoder: camera 'door' would "
        r"decode on GPU 0, which is not in inference\.devices \[1, 2\]",
    ):
        _config(inference=TORCH, cameras=[cam])
    with pytest.raises(ValueError, match=r"cameras\[0\]\.gpu: .*GPU 3"):
        _config(inference=TORCH, cameras=[{**cam, "gpu": 3}])
    ok = _config(inference=TORCH, cameras=[{**cam, "gpu": 2}])
    assert ok.decoder_of(ok.cameras[0]) == "nvdec"
    with pytest.raises(ValueError, match=r"cameras\[0\]\.gpu: camera 'a': gpu applies to nvdec"):
        _config(inference=TORCH, cameras=[{"name": "a", "url": "a.mp4", "gpu": 1}])


def test_start_up_refuses_nvdec_without_pynvvideocodec_fake_gpu(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import vidpipe.capture.nvdec_source as mod

    cfg = _config(
        inference={"type": "torch"},
        cameras=[
            {"name": "a", "url": "a.mp4"},
            {"name": "door", "url": "b.mp4", "decoder": "nvdec"},
        ],
    )
    monkeypatch.setattr(mod, "_nvdec_missing", lambda: "PyNvVideoCodec is not installed")
    assert check_nvdec(cfg) == [
        "cameras[1].decoder: camera 'door' decodes with nvdec, but PyNvVideoCodec is not installed"
    ]
    assert check_nvdec(_config(cameras=[{"name": "a", "url": "a.mp4"}])) == []
    monkeypatch.setattr(mod, "_nvdec_missing", lambda: None)
    assert check_nvdec(cfg) == []


def test_without_the_library_the_reason_is_clear() -> None:
    import importlib.util

    from vidpipe.capture.nvdec_source import _nvdec_missing

    if importlib.util.find_spec("PyNvVideoCodec") is not None:
        pytest.skip("PyNvVideoCodec is installed here")
    reason = _nvdec_missing()
    assert reason is not None and "pip install pynvvideocodec" in reason


def test_nvdec_refuses_the_motion_gate_naming_the_camera() -> None:
    cam = {"name": "door", "url": "b.mp4", "decoder": "nvdec"}
    with pytest.raises(ValueError, match=r"cameras\[0\]\.decoder: camera 'door' .*motion gate"):
        _config(inference={"type": "torch"}, cameras=[{**cam, "motion": {"enabled": True}}])
    with pytest.raises(ValueError, match=r"capture\.decoder: camera 'a' .*motion gate"):
        _config(
            inference={"type": "torch"},
            capture={"decoder": "nvdec", "motion": {"enabled": True}},
            cameras=[{"name": "a", "url": "a.mp4"}],
        )
    ok = _config(
        inference={"type": "torch"},
        capture={"motion": {"enabled": True}},
        cameras=[{**cam, "motion": {"enabled": False}}, {"name": "cpu", "url": "a.mp4"}],
    )
    assert [ok.decoder_of(c) for c in ok.cameras] == ["nvdec", "pyav"]


def test_vidpipe_check_reports_nvdec_cameras_that_cannot_start(
    assets_dir: Path, tmp_path: Path
) -> None:
    """``vidpipe check``'s assembly (no fakes): here PyNvVideoCodec is absent, so the nvdec
    camera is reported with its path and the reason, before any model is compiled."""
    import importlib.util

    from vidpipe.plan import check

    if importlib.util.find_spec("PyNvVideoCodec") is not None:
        pytest.skip("PyNvVideoCodec is installed here")
    clip = assets_dir / "videos" / "car-detection.mp4"
    cfg = _config(
        model={"path": str(tmp_path / "missing.onnx")},
        inference={"type": "torch"},
        cameras=[
            {"name": "yard", "url": str(clip)},
            {"name": "gate", "url": str(clip), "decoder": "nvdec"},
        ],
    )
    problems = check(cfg)
    assert len(problems) == 1, problems
    assert problems[0].startswith("cameras[1].decoder: camera 'gate' decodes with nvdec, but ")
    assert "pip install pynvvideocodec" in problems[0]
