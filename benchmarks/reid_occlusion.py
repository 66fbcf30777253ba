"""Identity through an occlusion: a person's track broken in two, with and without
re-association by appearance (``reid.reassociate_s``).

``python -m benchmarks.reid_occlusion [--json FILE]``

An excerpt of the walkway clip (20 s to 45 s: one person's long walk) with the whole picture
black for 3.5 s in the middle, made with ffmpeg, plays in real time through the daemon
(tracking, the secondary reid stage at its defaults). The tracker matches by boxes alone, so
the occlusion ends the person's track and a new one starts after it: per run, the person
tracks, and the global ids they were given (one is right).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

START_S, LENGTH_S = 20.0, 25.0
BLACK_S = (10.0, 13.5)  # of the excerpt


def excerpt(src: Path, dst: Path) -> Path:
    black = f"between(t,{BLACK_S[0]},{BLACK_S[1]})"
    box = f"drawbox=x=0:y=0:w=iw:h=ih:color=black:t=fill:enable='{black}'"
    subprocess.run(
        ["ffmpeg", "-loglevel", "error", "-y", "-ss", str(START_S), "-t", str(LENGTH_S),
         "-i", str(src), "-vf", box, "-c:v", "libx264", "-pix_fmt", "yuv420p", "-an", str(dst)],
        check=True,
    )  # fmt: skip
    return dst


def run(assets: Path, clip: Path, reassociate_s: float, out: Path) -> dict[str, Any]:
    from vidpipe.config import Config
    from vidpipe.daemon import Daemon

    models = assets / "models"
    labels = models / "coco80.txt"
    cfg = Config.model_validate(
        {
            "model": {"path": str(models / "yolox_nano.onnx"), "labels": str(labels)},
            "models": {
                "reid": {"path": str(models / "person-reidentification-retail-0288.onnx"),
                         "type": "reid"}
            },
            "secondary": [{"model": "reid", "on": ["person"]}],
            "reid": {"reassociate_s": reassociate_s},
            "http": {"enabled": False},
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [{"name": "walkway", "url": str(clip), "realtime": True,
                         "tracking": {"enabled": True}}],
        }
    )  # fmt: skip
    daemon = Daemon(cfg)
    daemon.start()
    try:
        while daemon.workers["walkway"].state.value != "stopped":
            time.sleep(0.5)
        time.sleep(2.0)
    finally:
        daemon.shutdown()
    tracks: dict[int, int | None] = {}
    for line in out.read_text().splitlines():
        r = json.loads(line)
        for d in r.get("detections", ()):
            if d["label"] == "person" and d.get("tracker_id") is not None:
                tracks[d["tracker_id"]] = d.get("global_id") or tracks.get(d["tracker_id"])
    return {
        "reassociate_s": reassociate_s,
        "person_tracks": len(tracks),
        "global_ids": len({g for g in tracks.values() if g is not None}),
        "tracks": {str(k): v for k, v in sorted(tracks.items())},
    }


def main() -> int:
    from vidpipe.assets import default_assets_dir

    p = argparse.ArgumentParser(prog="python -m benchmarks.reid_occlusion", description=__doc__)
    p.add_argument("--json", type=Path, help="write the runs here")
    args = p.parse_args()
    assets = default_assets_dir()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vidpipe-occlusion-") as tmp:
        clip = excerpt(assets / "videos" / "one-by-one-person-detection.mp4", Path(tmp) / "o.mp4")
        for reassociate_s in (0.0, 5.0):
            row = run(assets, clip, reassociate_s, Path(tmp) / f"r{reassociate_s}.jsonl")
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
