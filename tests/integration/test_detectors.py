"""Several detectors in one daemon: each camera runs the detector it names (``detector:``), on
a request pool of that detector's own, and its records and metrics say which.

What each camera reports is compared with what the same model says offline (``vidpipe
detect``) on the same frames, by the precision-free rule of tests/golden.py, so the test holds
at f32 and at bf16. The two models disagree on some frames: the comparison can tell them apart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.golden import agree
from tests.integration.conftest import SHORT_CLIP_FRAMES, free_port, metric, scrape, wait_for
from tests.integration.test_cli import vidpipe

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

FRAMES = SHORT_CLIP_FRAMES  # people in most frames


def _models(assets_dir: Path) -> dict:
    models = assets_dir / "models"
    labels = str(models / "coco80.txt")
    return {
        "fast": {"path": str(models / "nanodet_m_416.onnx"), "type": "nanodet", "labels": labels,
                 "score_threshold": 0.25},
        "people": {"path": str(models / "yolox_nano.onnx"), "labels": labels,
                   "score_threshold": 0.25},
    }  # fmt: skip


def _offline(assets_dir: Path, tmp_path: Path, name: str, clip: Path) -> dict[int, dict]:
    """``vidpipe detect`` with one model alone, frame records by frame number."""
    model = _models(assets_dir)[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"model": model}))
    proc = vidpipe("detect", "--config", str(path), str(clip))
    assert proc.returncode == 0, proc.stderr
    return {r["frame"]: r for r in map(json.loads, proc.stdout.splitlines())}


def test_two_cameras_on_two_detectors(
    assets_dir: Path, tmp_path: Path, short_clip: Path, run_daemon
) -> None:
    port = free_port()
    out = tmp_path / "records.jsonl"
    daemon = run_daemon(
        {
            "models": _models(assets_dir),
            "http": {"port": port},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [
                {"name": "gate", "url": str(short_clip), "detector": "fast"},
                {"name": "door", "url": str(short_clip), "detector": "people"},
            ],
        }
    )

    def records() -> list[dict]:
        if not out.exists():
            return []
        return [json.loads(line) for line in out.read_text().splitlines() if line.endswith("}")]

    wait_for(lambda: len(records()) >= 2 * FRAMES, 180, "every frame of both cameras")
    text = scrape(port)
    for name in ("fast", "people"):
        assert metric(text, "vidpipe_pool_size", model=name) >= 1, text
        assert metric(text, "vidpipe_inference_info", model=name) == 1
        assert metric(text, "vidpipe_inference_latency_seconds_count", model=name) >= FRAMES
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]

    by_camera: dict[str, dict[int, dict]] = {"gate": {}, "door": {}}
    for r in records():
        by_camera[r["camera"]][r["frame"]] = r
    assert {r["model"]["name"] for r in by_camera["gate"].values()} == {"fast"}
    assert {r["model"]["type"] for r in by_camera["gate"].values()} == {"nanodet"}
    assert {r["model"]["name"] for r in by_camera["door"].values()} == {"people"}
    assert {r["model"]["type"] for r in by_camera["door"].values()} == {"yolox"}

    offline = {n: _offline(assets_dir, tmp_path, n, short_clip) for n in ("fast", "people")}
    for camera, own, other in (("gate", "fast", "people"), ("door", "people", "fast")):
        got = by_camera[camera]
        assert sorted(got) == sorted(offline[own]), f"{camera}: frames differ"
        problems = [p for seq, r in got.items() for p in agree(offline[own][seq], r)]
        assert not problems, f"{camera} is not what {own} says offline: {problems[:5]}"
        # the other model reads these frames otherwise: the check above could fail
        differ = [seq for seq, r in got.items() if agree(offline[other][seq], r)]
        assert differ, f"{camera}: {own} and {other} agree on every frame; nothing was shown"


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ({"path": "/nonexistent/fast.onnx", "type": "nanodet"}, "models.fast: "),
        ({"path": "{models}/yolox_nano.onnx", "type": "nanodet"}, "does not fit model.type"),
    ],
    ids=["missing-file", "wrong-type"],
)
def test_check_names_the_bad_model(
    assets_dir: Path, tmp_path: Path, entry: dict, expected: str
) -> None:
    """``vidpipe check`` opens every model, used by a camera or not, and names the bad one."""
    models = _models(assets_dir)
    models["fast"] = {k: str(v).format(models=assets_dir / "models") for k, v in entry.items()}
    path = tmp_path / "check.yaml"
    clip = assets_dir / "videos" / "car-detection.mp4"
    path.write_text(
        yaml.safe_dump(
            {"models": models, "cameras": [{"name": "a", "url": str(clip), "detector": "people"}]}
        )
    )
    proc = vidpipe("check", "--config", str(path))
    assert proc.returncode != 0
    assert "models.fast: " in proc.stderr and expected in proc.stderr, proc.stderr


def test_a_busy_detector_does_not_starve_another(
    assets_dir: Path, tmp_path: Path, short_clip: Path, run_daemon
) -> None:
    """Three unpaced file cameras keep one detector busy (they take every frame it can
    infer); a real-time camera on the other detector still has its frames inferred: each
    detector has its own requests, so the busy one cannot hold them all.

    Counters only: the calm camera's inferred share of what it captured, not a rate."""
    port = free_port()
    clip = str(assets_dir / "videos" / "one-by-one-person-detection.mp4")
    yolox = _models(assets_dir)["people"]
    busy = [{"name": f"busy{i}", "url": clip, "loop": True, "detector": "busy"} for i in range(3)]
    calm = {"name": "calm", "url": clip, "loop": True, "realtime": True, "detector": "calm"}
    run_daemon(
        {
            "models": {"busy": yolox, "calm": yolox},
            "http": {"port": port},
            "cameras": [*busy, calm],
        }
    )

    def calm_captured() -> float:
        try:
            return metric(scrape(port), "vidpipe_frames_captured_total", camera="calm")
        except OSError:
            return 0.0

    wait_for(lambda: calm_captured() >= 30, 120, "the calm camera running")
    text0 = scrape(port)
    start = metric(text0, "vidpipe_frames_captured_total", camera="calm")
    wait_for(lambda: calm_captured() >= start + 100, 120, "100 more frames")
    text1 = scrape(port)

    def delta(name: str, **labels: str) -> float:
        return metric(text1, name, **labels) - metric(text0, name, **labels)

    captured = delta("vidpipe_frames_captured_total", camera="calm")
    inferred = delta("vidpipe_frames_inferred_total", camera="calm")
    busy_inferred = sum(delta("vidpipe_frames_inferred_total", camera=c["name"]) for c in busy)
    print(f"calm: {inferred:.0f} of {captured:.0f} inferred; busy cameras: {busy_inferred:.0f}")
    assert busy_inferred > inferred, "the busy detector was not busy: nothing was shown"
    assert inferred >= 0.5 * captured, f"calm camera starved: {inferred} of {captured} inferred"
