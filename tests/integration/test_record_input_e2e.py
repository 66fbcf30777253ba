"""Dual-stream cameras end to end: detect on the sub-stream, record clips from the main stream.

Two real GStreamer RTSP servers serve the walkway clip: the sub-stream as it is (768x432) and
a 1280x720 copy made here with ffmpeg as the main stream. The daemon runs the demo's ``table``
zone on the sub-stream (``roles: [detect]``) and cuts its clips from the main stream
(``roles: [record]``), which it only demuxes. The tests depend only on "some enter happens"
(tests/integration/test_clips_e2e.py says why that holds), never on which frame.

A camera with ``url:`` alone is covered, unchanged, by tests/integration/test_clips_e2e.py.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.delay_proxy import delayed
from tests.golden import iou
from tests.integration.conftest import detect_offline, free_port, metric, scrape_soon, wait_for
from tests.integration.test_clips_e2e import (
    PERSON,
    decodes_cleanly,
    ffprobe,
    records,
    sidecars,
    walkway_config,
)
from tests.integration.test_web_browser import browser, tile_states  # noqa: F401 (a fixture)
from tests.rtsp import RtspServer, gst_rtsp_available

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

MAIN_W, MAIN_H = 1280, 720
DELAY_S = 1.0  # the main stream's extra path delay in the proxy test
SUB_W, SUB_H = 768, 432


@pytest.fixture(scope="module")
def streams(assets_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two directories, each serving ``PERSON``: the sub-stream and its 1280x720 main stream
    (H.264, a keyframe every second as in the original, no B-frames as most cameras)."""
    why = gst_rtsp_available()
    if why is not None:
        pytest.fail(f"the RTSP test server cannot run: {why}")
    root = tmp_path_factory.mktemp("streams")
    sub, main = root / "sub", root / "main"
    sub.mkdir()
    main.mkdir()
    clip = assets_dir / "videos" / f"{PERSON}.mp4"
    shutil.copy(clip, sub / clip.name)
    subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-y", "-i", str(clip), "-vf", f"scale={MAIN_W}:{MAIN_H}"),
            *("-c:v", "libx264", "-preset", "veryfast", "-g", "10", "-keyint_min", "10"),
            *("-sc_threshold", "0", "-bf", "0", "-an", str(main / clip.name)),
        ],
        check=True,
        timeout=120,
    )
    return sub, main


@contextlib.contextmanager
def dual_servers(streams: tuple[Path, Path]) -> Iterator[tuple[RtspServer, RtspServer]]:
    """The sub-stream's and the main stream's RTSP servers, each looping ``PERSON``."""
    sub_dir, main_dir = streams
    with RtspServer(sub_dir, loop=True) as sub, RtspServer(main_dir, loop=True) as main:
        yield sub, main


def dual_config(
    repo_root: Path,
    assets_dir: Path,
    servers: tuple[RtspServer, RtspServer],
    clips_dir: Path,
    port: int,
) -> dict[str, Any]:
    """The walkway camera detecting on the first server's stream, recording the second's."""
    sub_url, main_url = (server.url(PERSON) for server in servers)
    config = walkway_config(repo_root, assets_dir, sub_url, clips_dir)
    camera = config["cameras"][0]
    del camera["url"]
    camera["inputs"] = [
        {"url": sub_url, "roles": ["detect"]},
        {"url": main_url, "roles": ["record"]},
    ]
    config["http"] = {"port": port}
    return config


def frame_at(mp4: Path, offset_s: float, out: Path) -> Path:
    """The frame a player shows at ``offset_s`` of ``mp4``, as a PNG."""
    subprocess.run(
        [
            *("ffmpeg", "-v", "error", "-y", "-i", str(mp4)),
            *("-ss", f"{offset_s:.3f}", "-frames:v", "1", str(out)),
        ],
        check=True,
        timeout=60,
    )
    return out


def api_cameras(port: int) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/cameras", timeout=5) as resp:
        return list(json.loads(resp.read())["cameras"])


def first_clip(daemon: Any, out: Path, clips_dir: Path, aligned_by: str) -> dict[str, Any]:
    """The sidecar of the first clip announced in the JSONL sink that was placed ``aligned_by``."""

    def announced() -> dict[str, Any] | None:
        assert daemon.proc.poll() is None, daemon.log()[-3000:]
        ids = {r["id"] for r in records(out) if r.get("event") == "clip"}
        found = [s for s in sidecars(clips_dir / "walkway") if s["id"] in ids]
        return next((s for s in found if s.get("aligned_by") == aligned_by), None)

    side = wait_for(announced, 200, f"a clip aligned by {aligned_by} in the JSONL sink")
    assert isinstance(side, dict)
    return side


def check_person_at_trigger(
    assets_dir: Path, tmp_path: Path, out: Path, side: dict[str, Any], mp4: Path
) -> None:
    """The clip's first trigger is a zone enter detected on the sub-stream, and the detector
    finds a person in the main stream's frame at the trigger's offset near where the
    sub-stream saw one (loosely: the two streams are placed in time, not matched by frame, so
    no box or score is compared)."""
    trig = side["triggers"][0]
    assert trig["event"] == "enter" and trig["zone"] == "table"
    detected = next(
        r
        for r in records(out)
        if r.get("frame") == trig["frame"] and r.get("detections") is not None
    )
    assert (detected["width"], detected["height"]) == (SUB_W, SUB_H)
    png = frame_at(mp4, trig["offset_s"], tmp_path / "at-offset.png")
    (reading,) = detect_offline(assets_dir, [png], tmp_path)
    assert (reading["width"], reading["height"]) == (MAIN_W, MAIN_H)
    scale = MAIN_W / SUB_W
    on_sub = [
        [v * scale for v in d["box"]] for d in detected["detections"] if d["label"] == "person"
    ]
    on_main = [d["box"] for d in reading["detections"] if d["label"] == "person"]
    assert on_sub and on_main, (detected, reading)
    best = max(iou(a, b) for a in on_sub for b in on_main)
    assert best >= 0.3, (best, detected, reading)


def test_zone_enter_on_the_sub_stream_gives_a_clip_cut_from_the_main_stream(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, streams: tuple[Path, Path]
) -> None:
    clips_dir = tmp_path / "clips"
    out = tmp_path / "events.jsonl"
    port = free_port()
    with dual_servers(streams) as servers:
        config = dual_config(repo_root, assets_dir, servers, clips_dir, port)
        config["sinks"] = [{"type": "jsonl", "path": str(out), "only_with_detections": True}]
        daemon = run_daemon(config)
        # both test servers send RTCP sender reports
        side = first_clip(daemon, out, clips_dir, "rtcp")
        assert side["input"] == "record", side
        mp4 = clips_dir / "walkway" / side["file"]

        # the main stream's pictures, whole: its size, every packet decodes
        (stream,) = ffprobe(mp4, "-select_streams", "v:0", "-show_entries", "stream=width,height")[
            "streams"
        ]
        assert (stream["width"], stream["height"]) == (MAIN_W, MAIN_H)
        assert decodes_cleanly(mp4) == side["packets"]
        check_person_at_trigger(assets_dir, tmp_path, out, side, mp4)
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def test_a_main_stream_a_second_late_is_placed_by_the_cameras_sender_reports(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, streams: tuple[Path, Path]
) -> None:
    """The main stream reaches the daemon through a proxy that holds it 1 s: placed by arrival,
    a trigger would land a second early in the clip; the sender reports measure the delay."""
    clips_dir = tmp_path / "clips"
    out = tmp_path / "events.jsonl"
    with dual_servers(streams) as servers, delayed(servers[1].port, DELAY_S) as proxy:
        config = dual_config(repo_root, assets_dir, servers, clips_dir, free_port())
        record = config["cameras"][0]["inputs"][1]
        record["url"] = proxy.url(record["url"])
        config["sinks"] = [{"type": "jsonl", "path": str(out), "only_with_detections": True}]
        daemon = run_daemon(config)
        side = first_clip(daemon, out, clips_dir, "rtcp")
        # the 1 s path, less the detect picture's own wait in its decoder (B-frames, <= 0.45 s)
        assert DELAY_S - 0.45 <= side["record_offset_s"] <= DELAY_S + 0.15, side
        check_person_at_trigger(
            assets_dir, tmp_path, out, side, clips_dir / "walkway" / side["file"]
        )
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def test_losing_the_record_input_leaves_detection_running_and_the_metrics_say_which(
    repo_root: Path,
    assets_dir: Path,
    tmp_path: Path,
    run_daemon,
    streams: tuple[Path, Path],
    browser,  # noqa: F811 (the fixture imported above)
) -> None:
    port = free_port()
    with dual_servers(streams) as servers:
        main_server = servers[1]
        config = dual_config(repo_root, assets_dir, servers, tmp_path / "clips", port)
        daemon = run_daemon(config)

        def up(role: str) -> float:
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            return metric(
                scrape_soon(port), "vidpipe_camera_input_up", camera="walkway", input=role
            )

        wait_for(lambda: up("detect") == 1 and up("record") == 1, 120, "both inputs up")
        cams = api_cameras(port)
        assert [i["role"] for i in cams[0]["inputs"]] == ["detect", "record"], cams
        assert {i["state"] for i in cams[0]["inputs"]} == {"streaming"}, cams

        main_server.kill()
        wait_for(lambda: up("record") == 0, 60, "the record input reported down")
        text = scrape_soon(port)
        captured = metric(text, "vidpipe_frames_captured_total", camera="walkway")

        def reconnecting() -> bool:
            text = scrape_soon(port)
            return (
                metric(text, "vidpipe_camera_input_reconnects_total", input="record") >= 1
                and metric(text, "vidpipe_frames_captured_total", camera="walkway") > captured + 20
            )

        wait_for(reconnecting, 60, "record reconnects while frames keep coming")
        text = scrape_soon(port)
        assert metric(text, "vidpipe_camera_input_up", camera="walkway", input="detect") == 1
        assert metric(text, "vidpipe_camera_up", camera="walkway") == 1
        assert metric(text, "vidpipe_camera_reconnects_total", camera="walkway") == 0
        assert metric(text, "vidpipe_camera_input_reconnects_total", input="detect") == 0
        (cam,) = api_cameras(port)
        assert cam["state"] == "streaming", cam
        record = next(i for i in cam["inputs"] if i["role"] == "record")
        assert record["state"] in ("backoff", "connecting"), cam
        assert record["last_error"], cam
        # the status page's tile says the record input is not streaming
        browser.get(f"http://127.0.0.1:{port}/")
        wait_for(
            lambda: "record" in tile_states(browser).get("walkway", ""),
            20,
            "the tile to show the record input's state",
        )

        main_server.restart()
        wait_for(lambda: up("record") == 1, 90, "the record input back")
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def test_crop_source_record_cuts_the_best_shot_from_the_main_stream_at_its_scale(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, streams: tuple[Path, Path]
) -> None:
    clips_dir = tmp_path / "clips"
    out = tmp_path / "events.jsonl"
    with dual_servers(streams) as servers:
        config = dual_config(repo_root, assets_dir, servers, clips_dir, free_port())
        config["cameras"][0]["clips"]["crop"] = {"source": "record"}
        config["sinks"] = [{"type": "jsonl", "path": str(out), "only_with_detections": True}]
        daemon = run_daemon(config)

        def clip_with_crop() -> bool:
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            return any(s["crops"] for s in sidecars(clips_dir / "walkway"))

        wait_for(clip_with_crop, 200, "a clip with a best-shot crop")
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]
    # every clip written reaches the sink, those written as the daemon stopped too
    announced = {r["id"] for r in records(out) if r.get("event") == "clip"}
    assert {s["id"] for s in sidecars(clips_dir / "walkway")} <= announced
    side = next(s for s in sidecars(clips_dir / "walkway") if s["crops"])
    crop = side["crops"][0]
    # the best shot: the track's detection on the sub-stream with the crop's score
    (box,) = {
        tuple(d["box"])
        for r in records(out)
        for d in r.get("detections") or ()
        if d.get("tracker_id") == crop["tracker_id"] and d["score"] == crop["score"]
    }
    # its box at the main stream's scale, padded by the default 0.1, clipped to the picture
    scale = MAIN_W / SUB_W
    x1, y1, x2, y2 = (v * scale for v in box)
    px, py = 0.1 * (x2 - x1), 0.1 * (y2 - y1)
    width = min(MAIN_W, x2 + px) - max(0.0, x1 - px)
    height = min(MAIN_H, y2 + py) - max(0.0, y1 - py)
    assert crop["width"] == pytest.approx(width, abs=2), (crop, box)
    assert crop["height"] == pytest.approx(height, abs=2), (crop, box)
    assert crop["width"] > (box[2] - box[0]) * 1.5  # not the sub-stream's pixels
    # what the detector reads in the crop: a person (the record picture is the one that
    # arrived nearest the detected frame, so no box or score is compared)
    (reading,) = detect_offline(assets_dir, [clips_dir / "walkway" / crop["file"]], tmp_path)
    assert any(d["label"] == "person" for d in reading["detections"]), reading
