"""Re-identification across cameras, in the daemon: the two-camera walkway scene
(tests/reid_scene.py: camera B is the clip 30 s later, mirrored, cropped to 80 % and
colour-shifted, made here with ffmpeg) through `vidpipe run` with the secondary reid stage.

For each of the 6 people on B, the global id the daemon gave (frame records' detections) must
be that of the same person on A (the clip's people come one at a time: matched by time order),
at least 5 of 6, and no two people may share one. Then search by example: the track of a
person on B finds that person's track on A first.

Both cameras play in real time (``realtime: true``, as live cameras: B's people come 30 s
after A's), so the run takes the clip's length, 170 s. The detector runs at 5 fps
(``detect_fps``), light for the AVX2-only CI machine at f32; the offline scene test measured
the threshold's band at 5 and 10 fps, f32 and bf16.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, metric, wait_files_played
from tests.reid_scene import CLIP, PEOPLE, REID_MODEL, SceneTrack, make_camera_b, people_by_time
from tests.reid_scene import score_scene as score

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]

FPS = 10.0  # the walkway clip's


def _tracks(records: list[dict], camera: str) -> tuple[list[SceneTrack], dict[str, int]]:
    """The camera's person tracks from its frame records, and each one's global id (the last
    one its detections carried)."""
    tracks: dict[int, SceneTrack] = {}
    gid: dict[str, int] = {}
    for r in records:
        if r.get("camera") != camera or "detections" not in r:
            continue
        t = r["frame"] / FPS
        for d in r["detections"]:
            tid = d.get("tracker_id")
            if d["label"] != "person" or tid is None:
                continue
            track = tracks.setdefault(tid, SceneTrack(camera, tid, t, t))
            track.t_last_s = t
            if d.get("global_id") is not None:
                gid[track.name] = d["global_id"]
    return [t for t in tracks.values() if t.name in gid], gid


def test_people_on_b_get_the_global_id_of_the_same_people_on_a(
    assets_dir: Path, tmp_path: Path, run_daemon
) -> None:
    clip_a = assets_dir / "videos" / CLIP
    clip_b = make_camera_b(clip_a, tmp_path / "camera-b.mp4")
    models = assets_dir / "models"
    port = free_port()
    out = tmp_path / "records.jsonl"
    # paced like live cameras: a crop at most once a second of the clip, as the offline scene
    camera = {"detect_fps": 5, "realtime": True, "tracking": {"enabled": True}}
    daemon = run_daemon(
        {
            "model": {
                "path": str(models / "yolox_nano.onnx"),
                "labels": str(models / "coco80.txt"),
            },
            "models": {"reid": {"path": str(models / REID_MODEL), "type": "reid"}},
            "secondary": [{"model": "reid", "on": ["person"]}],
            "events": {"enabled": True, "path": str(tmp_path / "events.db")},
            "http": {"port": port},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [
                {"name": "hall", "url": str(clip_a), **camera},
                {"name": "door", "url": str(clip_b), **camera},
            ],
        }
    )

    text = wait_files_played(port, ("hall", "door"), 300)  # 170 s of clip
    assert metric(text, "vidpipe_secondary_crops_embedded_total", model="reid") > 0, text
    assert metric(text, "vidpipe_reid_matches_total") >= 5
    records = [json.loads(line) for line in out.read_text().splitlines()]
    tracks_a, gid_a = _tracks(records, "hall")
    tracks_b, gid_b = _tracks(records, "door")
    people_a, people_b = people_by_time(tracks_a), people_by_time(tracks_b)
    assert len(people_a) == len(people_b) == PEOPLE, (people_a, people_b)
    got = score(people_a, people_b, {**gid_a, **gid_b})
    print(f"right: {got.right}, merged: {got.merged}")
    assert got.n_right >= 5 and not got.merged, got

    reid_events = [r for r in records if r.get("event") == "reid"]
    assert {(e["camera"], e["matched_camera"]) for e in reid_events} <= {
        ("door", "hall"),
        ("hall", "door"),
    }
    # search by example: person 1 on B finds person 1 on A first
    first_b = people_b[0][0]
    url = f"http://127.0.0.1:{port}/api/v1/search?camera=door&track={first_b.track_id}&limit=3"
    with urllib.request.urlopen(url, timeout=30) as answer:
        hits = json.loads(answer.read())["tracks"]
    assert hits, "no stored track to search"
    assert (hits[0]["camera"], hits[0]["track_id"]) in {
        ("hall", t.track_id) for t in people_a[0]
    }, hits[:2]
    assert daemon.terminate(30) == 0, daemon.log()[-3000:]
