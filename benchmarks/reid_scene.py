"""The two-camera re-identification scene, measured offline: what ``reid.threshold`` must be.

Camera A is the walkway clip, camera B the same clip 30 s later, mirrored, cropped to 80 % and
colour-shifted (``tests/reid_scene.py`` makes it with ffmpeg and says why each choice). Each
camera's file goes through the real detector (``vidpipe.plan.detector``, YOLOX-Nano) and
tracker (``CameraTracker``, default ``TrackingConfig``); each confirmed person track gets
crops as the secondary stage takes them (one a second of video time at most, at most 8,
boxes of at least 32x64), embedded by the reid model through OpenVINO; a track's vector is
the normalised mean of its crops' normalised embeddings. People are numbered by time order
on each camera (they come one at a time): person k on B is person k on A.

Reported per precision (the detector and the reid model both forced to it) and detector
frame rate: tracks per camera and id switches (a person in several tracks), the B x A
similarity matrix of track means, the same-person and different-people distributions, the
nearest A person of each B person from one crop, from every crop and from the track mean,
and, from the daemon's matching played in the order tracks end (``assign_global_ids``), the
thresholds at which at least 5 of 6 B people get their A person's global id and no two
people share one::

    python -m benchmarks.reid_scene --precisions f32,bf16 --every 1,2 \
        --out benchmarks/results/reid-scene-2cpu
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tests.reid_scene import (
    CLIP,
    PEOPLE,
    SceneTrack,
    assign_global_ids,
    camera_b_filter,
    camera_tracks,
    cross_similarities,
    embed_tracks,
    make_camera_b,
    people_by_time,
    reid_embedder,
    score_scene,
    video_size,
)

from vidpipe.assets import default_assets_dir

THRESHOLDS = np.round(np.arange(0.50, 0.995, 0.005), 3)
People = list[list[SceneTrack]]


def spread(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "min": round(min(values), 4),
        "median": round(statistics.median(values), 4),
        "max": round(max(values), 4),
    }


def nearest_people(people_a: People, people_b: People) -> dict[str, Any]:
    """Nearest A person of each B person: from B's first crop against A's first crops, from
    every B crop against every A crop (share right), and from the track means."""
    first, every, mean = [], [], []
    crops_a = [(k, e) for k, p in enumerate(people_a) for t in p for e in t.embeddings]
    firsts_a = [(k, t.embeddings[0]) for k, p in enumerate(people_a) for t in p]
    means_a = [(k, t.mean) for k, p in enumerate(people_a) for t in p]
    same_crop: list[float] = []
    diff_crop: list[float] = []
    for i, p in enumerate(people_b):
        longest = max(p, key=lambda t: len(t.crops))

        def best(v: np.ndarray, pool: list[tuple[int, np.ndarray]]) -> int:
            return pool[int(np.argmax([float(v @ w) for _, w in pool]))][0]

        first.append(best(longest.embeddings[0], firsts_a) == i)
        hits = [best(e, crops_a) == i for t in p for e in t.embeddings]
        every.append(round(sum(hits) / len(hits), 3))
        mean.append(best(longest.mean, means_a) == i)
        for t in p:
            for e in t.embeddings:
                for k, w in crops_a:
                    (same_crop if k == i else diff_crop).append(float(e @ w))
    return {
        "first_crop_right": first,
        "every_crop_share_right": every,
        "track_mean_right": mean,
        "crop_same": spread(same_crop),
        "crop_diff": spread(diff_crop),
    }


def gallery_ids(tracks: Sequence[SceneTrack], threshold: float) -> dict[str, int]:
    """Global ids from the secondary stage's own ``Gallery`` (mutual best match, live tracks
    as candidates), each track placed at its third crop (the mean so far) and at its end."""
    from vidpipe.secondary.gallery import Gallery

    gallery = Gallery(threshold, window_s=600.0)
    events: list[tuple[float, int, SceneTrack]] = []
    for t in tracks:
        if len(t.crop_s) >= 3:
            events.append((t.crop_s[2], 0, t))
        events.append((t.t_last_s, 1, t))
    for now, ends, t in sorted(events, key=lambda e: (e[0], e[1])):
        emb = t.embeddings if ends else t.embeddings[:3]
        mean = emb.mean(axis=0)
        gallery.place(t.camera, t.track_id, mean / np.linalg.norm(mean), t.t_first_s, now)
        if ends:
            gallery.end(t.camera, t.track_id, now)
    return {t.name: int(gallery.global_id(t.camera, t.track_id) or 0) for t in tracks}


def sweep(people_a: People, people_b: People, assign: Any = assign_global_ids) -> list[dict]:
    tracks = [t for p in (*people_a, *people_b) for t in p]
    rows = []
    for th in THRESHOLDS:
        score = score_scene(people_a, people_b, assign(tracks, float(th)))
        rows.append({"threshold": float(th), "right": score.n_right, "merged": score.merged})
    return rows


def passes(row: dict[str, Any]) -> bool:
    return bool(row["right"] >= PEOPLE - 1 and not row["merged"])


def ranges_of(ok: Sequence[bool]) -> list[tuple[float, float]]:
    """Contiguous ranges of ``THRESHOLDS`` where ``ok`` holds."""
    ranges: list[tuple[float, float]] = []
    start = None
    for i, good in enumerate([*ok, False]):
        if good and start is None:
            start = i
        elif not good and start is not None:
            ranges.append((float(THRESHOLDS[start]), float(THRESHOLDS[i - 1])))
            start = None
    return ranges


def measure(
    assets: Path, cam_b: Path, precision: str, every: int
) -> tuple[dict[str, Any], list[str]]:
    t0 = time.monotonic()
    video_a = assets / "videos" / CLIP
    tracks_a = camera_tracks(video_a, "A", assets, every=every, precision=precision)
    tracks_b = camera_tracks(cam_b, "B", assets, every=every, precision=precision)
    embed = reid_embedder(assets, precision)
    embed_tracks([*tracks_a, *tracks_b], embed)
    people_a, people_b = people_by_time(tracks_a), people_by_time(tracks_b)
    same, diff = cross_similarities(people_a, people_b)
    rows = sweep(people_a, people_b)
    ranges = ranges_of([passes(row) for row in rows])
    rows_gallery = sweep(people_a, people_b, gallery_ids)
    near = nearest_people(people_a, people_b)
    matrix = [[round(float(b.mean @ a.mean), 4) for a in tracks_a] for b in tracks_b]
    result = {
        "precision": precision,
        "detect_every": every,
        "seconds": round(time.monotonic() - t0, 1),
        "tracks": {
            cam: [
                {
                    "id": t.track_id,
                    "first_s": round(t.t_first_s, 1),
                    "last_s": round(t.t_last_s, 1),
                    "crops": len(t.crops),
                }
                for t in tracks
            ]
            for cam, tracks in (("A", tracks_a), ("B", tracks_b))
        },
        "people": {
            cam: [[t.track_id for t in p] for p in people]
            for cam, people in (("A", people_a), ("B", people_b))
        },
        "matrix_b_x_a": matrix,
        "same_person": spread(same),
        "different_people": spread(diff),
        "nearest": near,
        "sweep": rows,
        "passing": ranges,
        "sweep_gallery": rows_gallery,
        "passing_gallery": ranges_of([passes(row) for row in rows_gallery]),
    }
    return result, report_lines(result, tracks_a, tracks_b)


def report_lines(
    r: dict[str, Any], tracks_a: list[SceneTrack], tracks_b: list[SceneTrack]
) -> list[str]:
    fps = 10 / r["detect_every"]
    lines = [f"## precision {r['precision']}, detector at {fps:g} fps ({r['seconds']} s)", ""]
    for cam in ("A", "B"):
        people = r["people"][cam]
        switches = sum(len(p) - 1 for p in people)
        spans = ", ".join(f"{t['id']} {t['first_s']}-{t['last_s']} s ({t['crops']} crops)"
                          for t in r["tracks"][cam])  # fmt: skip
        lines.append(f"{cam}: {len(r['tracks'][cam])} tracks, {len(people)} people, "
                     f"{switches} id switches; tracks: {spans}")  # fmt: skip
    lines += ["", "track-mean cosine, B tracks (rows) x A tracks (columns):", ""]
    lines.append("      " + "".join(f"{t.name:>7}" for t in tracks_a))
    for t, row in zip(tracks_b, r["matrix_b_x_a"], strict=True):
        lines.append(f"{t.name:>6}" + "".join(f"{v:7.3f}" for v in row))
    s, d = r["same_person"], r["different_people"]
    n = r["nearest"]
    lines += [
        "",
        f"same person (track means): min {s['min']} median {s['median']} max {s['max']} "
        f"({s['n']} pairs)",
        f"different people:          min {d['min']} median {d['median']} max {d['max']} "
        f"({d['n']} pairs)",
        f"single crops, same person: min {n['crop_same']['min']} median "
        f"{n['crop_same']['median']} max {n['crop_same']['max']}; different: min "
        f"{n['crop_diff']['min']} median {n['crop_diff']['median']} max {n['crop_diff']['max']}",
        f"nearest A person right: first crop {sum(n['first_crop_right'])}/{len(r['people']['B'])}"
        f", every crop {n['every_crop_share_right']} (share per person), track mean "
        f"{sum(n['track_mean_right'])}/{len(r['people']['B'])}",
        "",
        "daemon order (assign_global_ids): threshold -> B people right, merged pairs",
    ]
    last = None
    for row in r["sweep"]:
        key = (row["right"], tuple(row["merged"]))
        if key != last:
            lines.append(f"  from {row['threshold']:.3f}: {row['right']}/6 right, merged "
                         f"{list(row['merged']) or 'none'}")  # fmt: skip
            last = key
    ranges = ", ".join(f"{a:.3f}-{b:.3f}" for a, b in r["passing"]) or "none"
    lines += [f"passing (>= 5/6, no merge): {ranges}"]
    ranges = ", ".join(f"{a:.3f}-{b:.3f}" for a, b in r["passing_gallery"]) or "none"
    lines += [f"passing through vidpipe.secondary.gallery.Gallery: {ranges}", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--precisions", default="f32,bf16")
    ap.add_argument("--every", default="1,2", help="detect on every n-th frame, n per run")
    ap.add_argument("--camera-b", type=Path, help="camera B's file (made here when absent)")
    ap.add_argument("--out", type=Path, help="write OUT.json and OUT.txt")
    args = ap.parse_args(argv)
    assets = default_assets_dir()
    with tempfile.TemporaryDirectory() as tmp:
        cam_b = args.camera_b or make_camera_b(assets / "videos" / CLIP, Path(tmp) / "b.mp4")
        w, h, _ = video_size(cam_b)
        runs, lines = [], []
        for precision in args.precisions.split(","):
            for every in map(int, args.every.split(",")):
                result, text = measure(assets, cam_b, precision, every)
                runs.append(result)
                lines += text
                print("\n".join(text), flush=True)
    every_run = {}
    for key in ("sweep", "sweep_gallery"):
        ok = [all(passes(run[key][i]) for run in runs) for i in range(len(THRESHOLDS))]
        every_run[key] = ranges_of(ok)
    summary = "\n".join(
        f"thresholds passing every run ({key}): "
        + (", ".join(f"{a:.3f}-{b:.3f}" for a, b in ranges) or "none")
        for key, ranges in every_run.items()
    )
    print(summary)
    if args.out:
        doc = {"machine": platform.processor() or platform.machine(), "camera_b_filter":
               camera_b_filter(w, h), "runs": runs, "passing_every_run": every_run}  # fmt: skip
        args.out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
        head = [f"# reid scene: {CLIP} as A, B = ffmpeg -vf {camera_b_filter(w, h)}", ""]
        args.out.with_suffix(".txt").write_text("\n".join([*head, *lines, summary, ""]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
