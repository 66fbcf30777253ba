"""OpenVINO IR (.xml + .bin) models: loaded like ONNX, checked like ONNX, clear errors.

The IR is made here from the ONNX model in the assets (``openvino.save_model``, f32 weights).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import openvino as ov
import pytest
import yaml

from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
from vidpipe.infer.base import BackendError
from vidpipe.infer.openvino import OpenVINOBackend

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CFG = OpenVINOConfig(advanced=OpenVINOAdvanced(num_requests=1))


@pytest.fixture(scope="module")
def onnx_model(assets_dir: Path) -> Path:
    return assets_dir / "models" / "yolox_nano.onnx"


@pytest.fixture(scope="module")
def ir_model(onnx_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    xml = tmp_path_factory.mktemp("ir") / "yolox_nano.xml"
    ov.save_model(ov.Core().read_model(str(onnx_model)), str(xml), compress_to_fp16=False)
    return xml


def copy_ir(ir: Path, target: Path) -> Path:
    target.mkdir(exist_ok=True)
    shutil.copy(ir, target / ir.name)
    shutil.copy(ir.with_suffix(".bin"), target / ir.with_suffix(".bin").name)
    return target / ir.name


def test_ir_loads_and_gives_the_onnx_models_outputs(ir_model: Path, onnx_model: Path) -> None:
    ir, onnx = OpenVINOBackend(ir_model, CFG), OpenVINOBackend(onnx_model, CFG)
    try:
        assert ir.input_spec == onnx.input_spec
        assert ir.output_shapes == onnx.output_shapes
        assert ir.info.precision == onnx.info.precision != "int8"
        image = np.random.default_rng(1).integers(0, 255, ir.input_spec.shape, dtype=np.uint8)
        a = ir._compiled({0: image})[0]  # same graph, same device precision: same numbers
        b = onnx._compiled({0: image})[0]
        np.testing.assert_allclose(a, b, atol=1e-3)
    finally:
        ir.close()
        onnx.close()


def test_missing_bin_is_a_clear_error(ir_model: Path, tmp_path: Path) -> None:
    xml = copy_ir(ir_model, tmp_path / "m")
    xml.with_suffix(".bin").unlink()
    with pytest.raises(BackendError, match=r"weights file yolox_nano\.bin is missing"):
        OpenVINOBackend(xml, CFG)


def test_truncated_bin_is_a_clear_error(ir_model: Path, tmp_path: Path) -> None:
    xml = copy_ir(ir_model, tmp_path / "m")
    weights = xml.with_suffix(".bin")
    weights.write_bytes(weights.read_bytes()[:4096])
    with pytest.raises(BackendError) as err:
        OpenVINOBackend(xml, CFG)
    text = str(err.value)
    assert str(xml) in text and "yolox_nano.bin is truncated" in text
    assert "Incorrect weights in bin file" in text  # OpenVINO's own words, not its source path
    assert "Exception from" not in text


def test_quantized_ir_reports_int8(tmp_path: Path) -> None:
    """A model with FakeQuantize operations (what NNCF writes) runs as int8."""
    from openvino import opset13 as ops

    image = ops.parameter([1, 3, 32, 32], ov.Type.f32, name="images")
    lo, hi = ops.constant(np.float32(0)), ops.constant(np.float32(255))
    fq = ops.fake_quantize(image, lo, hi, lo, hi, 256)
    kernel = ops.constant(np.ones((4, 3, 3, 3), np.float32))
    conv = ops.convolution(fq, kernel, [1, 1], [0, 0], [0, 0], [1, 1])
    xml = tmp_path / "q.xml"
    ov.save_model(ov.Model([conv], [image]), str(xml), compress_to_fp16=False)
    backend = OpenVINOBackend(xml, CFG)
    try:
        assert backend.info.precision == "int8"
        assert backend.info.float_precision in ("f32", "bf16", "f16")
    finally:
        backend.close()


def check(tmp_path: Path, model: Path, labels: Path) -> subprocess.CompletedProcess[str]:
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {"path": str(model), "labels": str(labels)},
                "cameras": [{"name": "front", "url": "rtsp://10.0.0.2/stream"}],
            }
        )
    )
    return subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_check_accepts_the_ir_and_refuses_one_that_does_not_fit(
    ir_model: Path, assets_dir: Path, tmp_path: Path
) -> None:
    labels = assets_dir / "models" / "coco80.txt"
    ok = check(tmp_path, ir_model, labels)
    assert ok.returncode == 0, ok.stderr
    assert "model yolox_nano.xml" in ok.stdout

    from openvino import opset13 as ops

    image = ops.parameter([1, 3, 416, 416], ov.Type.f32, name="images")
    wrong = tmp_path / "wrong.xml"  # a 1x3x416x416 output: no detector's
    ov.save_model(ov.Model([ops.relu(image)], [image]), str(wrong))
    bad = check(tmp_path, wrong, labels)
    assert bad.returncode == 2
    assert "does not fit model.type 'yolox'" in bad.stderr and "wrong.xml" in bad.stderr

    wrong.with_suffix(".bin").unlink()
    missing = check(tmp_path, wrong, labels)
    assert missing.returncode == 2 and "wrong.bin is missing" in missing.stderr
