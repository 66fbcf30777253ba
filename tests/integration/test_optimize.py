"""``vidpipe optimize`` through the real CLI: NNCF, OpenVINO and the real model, on a tiny
calibration set (a few frames) so that it runs in seconds.

The figures themselves depend on the CPU (bf16 or f32 beside the INT8 layers): the tests check
what the command does with them (write or refuse, and the report's contents), and compare the
written model with the f32 one by the same agreement rule the command uses.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import openvino as ov
import pytest
import yaml

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def optimize(tmp_path: Path, assets_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    models = assets_dir / "models"
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {
                    "path": str(models / "yolox_nano.onnx"),
                    "labels": str(models / "coco80.txt"),
                },
                "cameras": [
                    {"name": "belt", "url": str(assets_dir / "videos" / "bottle-detection.mp4")}
                ],
            }
        )
    )
    images = sorted((assets_dir / "images").glob("*.jpg"))[:4]
    clips = [str(assets_dir / "videos" / "bottle-detection.mp4"), *map(str, images)]
    cmd = [sys.executable, "-m", "vidpipe.cli", "optimize", "-c", str(config)]
    cmd += ["--method", "plain", "--frames", "12", "--speed-seconds", "0.3", "--clips", *clips]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=280, check=False)


def test_a_passing_gate_writes_the_int8_ir_and_its_report(tmp_path: Path, assets_dir: Path) -> None:
    out = tmp_path / "models" / "int8.xml"
    proc = optimize(tmp_path, assets_dir, "-o", str(out), "--gate", "0.3")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.is_file() and out.with_suffix(".bin").is_file()
    report = json.loads(out.with_suffix(".json").read_text())
    int8 = report["agreement_with_f32"]["int8"]
    assert report["frames"] == {
        "calibration": 6,
        "validation": 0,
        "test": 6,
        "sources": report["frames"]["sources"],
    }
    assert int8["frames"] == 6 and int8["reference_detections"] > 0
    assert int8["recall"] >= 0.3 and int8["precision"] >= 0.3
    assert set(report["speed"]) >= {"f32", "int8"}
    assert all(v["fps"] > 0 and v["cpu_ms_per_frame"] > 0 for v in report["speed"].values())
    agreement, cost = report["agreement_with_f32"], report["speed"]
    passing = [
        k
        for k in cost
        if k == "f32" or min(agreement[k]["recall"], agreement[k]["precision"]) >= 0.3
    ]
    cheapest = min(
        passing, key=lambda k: cost[k]["cpu_ms_per_frame"] / (0.95 if k == "int8" else 1.0)
    )
    assert report["recommendation"]["precision"] == cheapest
    assert report["versions"]["nncf"].startswith("3.")
    assert "written" in report and report["written"] is True
    assert "[" in proc.stderr and "agreement with f32" in proc.stderr  # progress was shown
    # quantized after the daemon's load-time rewrites: the Focus slices are gone from the IR
    kinds = {op.get_type_name() for op in ov.Core().read_model(str(out)).get_ops()}
    assert "Slice" not in kinds and "FakeQuantize" in kinds

    # the daemon's backend loads it, as int8
    from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
    from vidpipe.infer.openvino import OpenVINOBackend

    backend = OpenVINOBackend(out, OpenVINOConfig(advanced=OpenVINOAdvanced(num_requests=1)))
    try:
        assert backend.info.precision == "int8"
    finally:
        backend.close()


def test_a_failing_gate_refuses_and_writes_nothing(tmp_path: Path, assets_dir: Path) -> None:
    """Calibrated on one uniform grey picture, the INT8 ranges cannot fit a real photo: its
    agreement on that photo falls far below the default gate (recall 0.5 here)."""
    import cv2
    import numpy as np

    grey = tmp_path / "grey.png"
    cv2.imwrite(str(grey), np.full((480, 640, 3), 114, np.uint8))
    photo = assets_dir / "images" / "000000000139.jpg"  # a room: people, a TV, chairs ...
    out = tmp_path / "models" / "int8.xml"
    proc = optimize(tmp_path, assets_dir, "-o", str(out), "--clips", str(grey), str(photo))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "INT8 model refused: agreement recall" in proc.stderr
    assert "on 1 frames is below the gate 0.95; nothing written" in proc.stderr
    assert not out.parent.exists() or not any(out.parent.iterdir())


def test_a_quantized_model_is_not_quantized_again(tmp_path: Path, assets_dir: Path) -> None:
    out = tmp_path / "int8.xml"
    config = tmp_path / "c.yaml"
    import numpy as np
    from openvino import opset13 as ops

    image = ops.parameter([1, 3, 32, 32], ov.Type.f32, name="images")
    lo, hi = ops.constant(np.float32(0)), ops.constant(np.float32(255))
    ov.save_model(ov.Model([ops.fake_quantize(image, lo, hi, lo, hi, 256)], [image]), str(out))
    config.write_text(yaml.safe_dump({"model": {"path": str(out)}, "cameras": []}))
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "optimize", "-c", str(config), "-o", "x.xml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert proc.returncode == 1 and "is quantized already" in proc.stderr


def test_a_nanodet_model_is_calibrated_on_its_own_input(tmp_path: Path, assets_dir: Path) -> None:
    """model.type nanodet: frames centred, padded with 0 and normalised (its registered input),
    so the INT8 copy still sees the people the f32 model sees; the daemon's backend loads it
    with the type's input (normalisation in its graph) and finds them."""
    import cv2
    import numpy as np

    from vidpipe.config import OpenVINOAdvanced, OpenVINOConfig
    from vidpipe.infer.openvino import OpenVINOBackend, _normalise_in_graph
    from vidpipe.postprocess.decode import model_type
    from vidpipe.postprocess.nanodet import decode_nanodet
    from vidpipe.postprocess.params import DecodeParams
    from vidpipe.postprocess.pipeline import postprocess
    from vidpipe.preprocess.letterbox import letterbox

    models = assets_dir / "models"
    config = tmp_path / "c.yaml"
    model = {
        "type": "nanodet",
        "path": str(models / "nanodet_m_416.onnx"),
        "labels": str(models / "coco80.txt"),
    }
    config.write_text(yaml.safe_dump({"model": model, "cameras": []}))
    clip = tmp_path / "walkway.mp4"
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "one-by-one-person-detection.mp4"))
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), 10, (768, 432))
    frames = []
    for index in range(400):
        ok, frame = cap.read()
        assert ok
        if index >= 200 and index % 20 == 0:  # people in most of these
            writer.write(frame)
            frames.append(frame)
    writer.release()
    cap.release()
    out = tmp_path / "nanodet-int8.xml"
    cmd = [sys.executable, "-m", "vidpipe.cli", "optimize", "-c", str(config), "-o", str(out)]
    cmd += ["--frames", "10", "--speed-seconds", "0.3", "--force", "--clips", str(clip)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "model.type 'nanodet'" in proc.stderr and "letterbox centre, pad 0, normalised" in (
        proc.stderr
    )
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["model_type"] == "nanodet" and report["input"].startswith("letterbox centre")
    int8 = report["agreement_with_f32"]["int8"]
    assert int8["frames"] == 5 and int8["reference_detections"] >= 3, int8
    # calibrated on 0-255 pixels instead, the INT8 ranges are off by ~60x: nothing agrees
    assert int8["recall"] >= 0.6 and int8["precision"] >= 0.6, int8

    mi = model_type("nanodet").input
    backend = OpenVINOBackend(
        out, OpenVINOConfig(advanced=OpenVINOAdvanced(num_requests=1)), model_input=mi
    )
    try:
        assert backend.info.precision == "int8"
    finally:
        backend.close()
    # the daemon's graph of it: the type's normalisation added in front, fed 0-255 pixels
    core = ov.Core()
    compiled = core.compile_model(_normalise_in_graph(core.read_model(str(out)), mi), "CPU")
    boxed, lb = letterbox(frames[5], 416, 416, mi)
    pixels = np.ascontiguousarray(boxed.transpose(2, 0, 1)[None], dtype=np.float32)
    got = compiled({0: pixels})
    outputs = [np.asarray(got[i])[0] for i in range(len(compiled.outputs))]
    dets = postprocess(outputs, lb, decode_nanodet, DecodeParams(416, 416, 0.4), 0.6)
    assert 0 in dets.class_id.tolist(), dets  # a person
