"""The secondary reid stage in a GPU daemon: an NVDEC camera's crops are cut on the device and
embedded there (onnx2torch), a pyav camera's are cut on the host; both cameras play the
walkway clip in real time, so each person must get one global id on both (the same picture
twice)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.conftest import DaemonProcess, free_port, metric, wait_files_played
from tests.integration.test_reid_scene_daemon import _tracks
from tests.reid_scene import CLIP, PEOPLE, REID_MODEL, people_by_time, score_scene

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]


def test_nvdec_and_pyav_cameras_of_one_clip_share_global_ids_gpu(
    assets_dir: Path, tmp_path: Path
) -> None:
    models = assets_dir / "models"
    clip = str(assets_dir / "videos" / CLIP)
    port = free_port()
    out = tmp_path / "records.jsonl"
    # paced as live cameras: a crop at most once a second, as on the CPU scene
    paced = {"tracking": {"enabled": True}, "realtime": True, "detect_fps": 5}
    config = {
        "model": {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")},
        "models": {"reid": {"path": str(models / REID_MODEL), "type": "reid"}},
        "secondary": [{"model": "reid", "on": ["person"]}],
        "inference": {"type": "torch", "precision": "f16"},
        "http": {"port": port},
        "sinks": [{"type": "jsonl", "path": str(out)}],
        "cameras": [
            {"name": "device", "url": clip, "decoder": "nvdec", **paced},
            {"name": "host", "url": clip, **paced},
        ],
    }
    daemon = DaemonProcess(config, tmp_path)
    try:
        text = wait_files_played(port, ("device", "host"), 300, daemon)  # 139 s of clip
    finally:
        assert daemon.terminate(60) == 0, daemon.log()[-3000:]
    log = daemon.log()
    assert "secondary stage failed" not in log, log[-3000:]
    embedded = metric(text, "vidpipe_secondary_crops_embedded_total", model="reid")
    print("crops embedded", embedded, "matches", metric(text, "vidpipe_reid_matches_total"))
    assert embedded >= 2 * PEOPLE
    assert metric(text, "vidpipe_secondary_dropped_total", reason="inference_error") == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    tracks_d, gid_d = _tracks(records, "device")
    tracks_h, gid_h = _tracks(records, "host")
    people_d, people_h = people_by_time(tracks_d), people_by_time(tracks_h)
    got = score_scene(people_h, people_d, {**gid_d, **gid_h})
    print(f"right: {got.right}, merged: {got.merged}")
    assert got.n_right >= PEOPLE - 1 and not got.merged, got
