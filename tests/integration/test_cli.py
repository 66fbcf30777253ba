"""`vidpipe detect` reproduces the golden detections; `vidpipe check` accepts and refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.golden import load_expected, match_golden

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def vidpipe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", *args],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=cwd,
    )


def _precision(model: Path) -> str:
    """The precision OpenVINO's CPU plugin picks by default on this machine."""
    import openvino as ov

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(model)), "CPU")
    return str(compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name())


# expected.jsonl was made on a CPU with AVX-512 BF16, where OpenVINO's CPU default is bf16.
# Inference numerics differ between precisions and between CPU kernels, so two measured
# deviations from the README's rule (score within 0.02, IoU >= 0.9) are allowed here, and
# nothing else:
# * f32 (this CI machine: AMD EPYC, AVX2 only): scores differ by up to 0.039 (median 0.005),
#   and one 20 px tie box reaches IoU 0.88;
# * bf16 on an AMX Xeon (the GPU host's CPU, run with scripts/golden_check.py): 11 of 12
#   images pass the rule exactly; in the 12th, NMS keeps the other of two near-equal teddy
#   bear candidates (IoU 0.87 to the golden box, score within 0.003).
# So IoU >= 0.85 everywhere, and the score margin stays 0.02 at bf16 but is 0.05 at f32.
# Classes, counts and the no-extra part of the rule stay as written.
MARGINS = {
    "bf16": {"score_margin": 0.02, "min_iou": 0.85},
    "f32": {"score_margin": 0.05, "min_iou": 0.85},
}


def test_detect_matches_golden(assets_dir: Path) -> None:
    images = assets_dir / "images"
    expected = load_expected(images / "expected.jsonl")
    assert len(expected) == 12
    names = sorted(expected)
    proc = vidpipe(
        "detect",
        "--model",
        str(assets_dir / "models" / "yolox_nano.onnx"),
        "--labels",
        str(assets_dir / "models" / "coco80.txt"),
        "--score-threshold",
        "0.30",
        "--iou-threshold",
        "0.45",
        *[str(images / n) for n in names],
    )
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [g["source"] for g in got] == names
    assert all(g["frame"] == 0 for g in got)
    precision = _precision(assets_dir / "models" / "yolox_nano.onnx")
    margins = MARGINS.get(precision, MARGINS["f32"])
    problems = [p for g in got for p in match_golden(expected[g["source"]], g, **margins)]
    assert not problems, f"precision {precision}, margins {margins}:\n" + "\n".join(problems)


def test_detect_video_prints_one_object_per_frame(assets_dir: Path, tmp_path: Path) -> None:
    import cv2

    clip = tmp_path / "short.mp4"
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "bottle-detection.mp4"))
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), 30, (640, 360))
    for _ in range(10):
        ok, frame = cap.read()
        assert ok
        writer.write(frame)
    writer.release()
    cap.release()
    proc = vidpipe("detect", str(clip))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["frame"] for r in rows] == list(range(10))
    assert sum(1 for r in rows for d in r["detections"] if d["label"] == "bottle") >= 10


def _config(assets_dir: Path, **model: str) -> dict:
    return {
        "model": {
            "path": str(assets_dir / "models" / "yolox_nano.onnx"),
            "labels": str(assets_dir / "models" / "coco80.txt"),
            **model,
        },
        "cameras": [{"name": "cam", "url": str(assets_dir / "videos" / "car-detection.mp4")}],
    }


def test_check_accepts_good_config(assets_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(yaml.safe_dump(_config(assets_dir)))
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "OK" in proc.stdout


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"type": "yolov8"}, "does not fit model.type 'yolov8'"),
        ({"type": "ssd"}, "does not fit model.type 'ssd'"),
        ({"path": "/nonexistent/model.onnx"}, "model file not found"),
        ({"labels": "/etc/hostname"}, "label"),
    ],
)
def test_check_refuses_mismatched_model(
    assets_dir: Path, tmp_path: Path, change: dict, fragment: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_config(assets_dir, **change)))
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert fragment in proc.stderr


def test_check_refuses_non_model_file(assets_dir: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model at all" * 100)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_config(assets_dir, path=str(junk))))
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode == 2
    assert "cannot read model" in proc.stderr


def test_check_reports_every_problem(assets_dir: Path, tmp_path: Path) -> None:
    cfg = _config(assets_dir)
    cfg["cameras"].append({"name": "gone", "url": "/nonexistent/clip.mp4", "classes": ["unicorn"]})
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode == 2
    assert "cameras[1].url (gone): file not found" in proc.stderr
    assert "unknown class 'unicorn'" in proc.stderr


def test_check_bad_yaml_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("model:\n  path: x\n  path: y\n")
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode == 2
    assert "duplicate key 'path'" in proc.stderr


def test_version() -> None:
    proc = vidpipe("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("vidpipe ")


def test_check_refuses_unknown_zone_and_line_classes(assets_dir: Path, tmp_path: Path) -> None:
    cfg = _config(assets_dir)
    square = [[0, 0], [10, 0], [10, 10]]
    cfg["cameras"][0]["zones"] = [{"name": "z", "points": square, "classes": ["persn"]}]
    cfg["cameras"][0]["lines"] = [{"name": "l", "points": [[0, 0], [9, 9]], "classes": [99]}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cameras[0].zones[0].classes[0] (cam): unknown class 'persn'" in proc.stderr
    assert "did you mean 'person'?" in proc.stderr
    assert "cameras[0].lines[0].classes[0] (cam): class id 99 out of range 0..79" in proc.stderr
