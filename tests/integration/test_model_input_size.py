"""``model.input_size``: a detector run at a 16:9 size finds what it finds at its own square
size, in the daemon as offline, and a model whose graph fixes its size is refused by name.

The reference is the same model offline (``vidpipe detect``) at its own 416x416 on the same
frames, compared by the precision-free rule of tests/golden.py: the test holds at f32 and bf16.
A wrong mapping of the wide input back to the picture (its scale, its pad) would move every
box and fail it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.golden import agree
from tests.integration.conftest import SHORT_CLIP_FRAMES, detect_offline, free_port, wait_for
from tests.integration.test_cli import vidpipe

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WIDE = [416, 256]


def test_a_camera_at_a_16_9_input_finds_what_the_square_input_finds(
    assets_dir: Path, tmp_path: Path, short_clip: Path, run_daemon
) -> None:
    models = assets_dir / "models"
    out = tmp_path / "records.jsonl"
    model = {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")}
    daemon = run_daemon(
        {
            "model": {**model, "score_threshold": 0.25, "input_size": WIDE},
            "http": {"port": free_port()},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [{"name": "walkway", "url": str(short_clip)}],
        }
    )

    def records() -> list[dict]:
        if not out.exists():
            return []
        return [json.loads(line) for line in out.read_text().splitlines() if line.endswith("}")]

    wait_for(lambda: len(records()) >= SHORT_CLIP_FRAMES, 180, "every frame of the clip")
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]
    assert "input f32 NCHW [1, 3, 256, 416]" in daemon.log(), daemon.log()[-3000:]

    square = detect_offline(assets_dir, [short_clip], tmp_path)
    got = {r["frame"]: r for r in records()}
    assert sorted(got) == [r["frame"] for r in square]
    found = sum(len(r["detections"]) for r in got.values())
    assert found >= SHORT_CLIP_FRAMES // 2, "the wide input found almost nothing"
    problems = [p for r in square for p in agree(r, got[r["frame"]])]
    assert not problems, f"416x256 differs from 416x416: {problems[:5]}"


def test_offline_detect_runs_the_wide_input_too(
    assets_dir: Path, tmp_path: Path, short_clip: Path
) -> None:
    wide = detect_offline(assets_dir, [short_clip], tmp_path, model_settings={"input_size": WIDE})
    square = detect_offline(assets_dir, [short_clip], tmp_path)
    assert len(wide) == len(square) == SHORT_CLIP_FRAMES
    problems = [p for a, b in zip(square, wide, strict=True) for p in agree(a, b)]
    assert not problems, problems[:5]


def test_check_refuses_a_model_whose_graph_fixes_its_size(assets_dir: Path, tmp_path: Path) -> None:
    models = assets_dir / "models"
    config = tmp_path / "yolox.yaml"
    config.write_text(
        yaml.safe_dump({"model": {"path": str(models / "yolox_nano.onnx"), "input_size": WIDE}})
    )
    proc = vidpipe("check", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    assert "model yolox_nano.onnx at 416x256" in proc.stdout
    config = tmp_path / "nanodet.yaml"
    nanodet = {"path": str(models / "nanodet_m_416.onnx"), "type": "nanodet"}
    config.write_text(yaml.safe_dump({"model": {**nanodet, "input_size": WIDE}}))
    proc = vidpipe("check", "--config", str(config))
    assert proc.returncode != 0
    assert "cannot run at input_size 416x256: its graph fixes its input size" in proc.stderr
    assert "remove model.input_size" in proc.stderr
    config.write_text(yaml.safe_dump({"model": nanodet}))  # the same model at its own size
    assert vidpipe("check", "--config", str(config)).returncode == 0
