"""Event clips end to end: real RTSP server, real model, the demo's walkway zone, real files.

The walkway clip (10 fps, a keyframe every second) is served by the GStreamer RTSP server; the
daemon runs the demo's ``table`` zone on it with clips on. People walk into the zone in every
pass of the clip (six enters per pass, the same at f32 and bf16, see
tests/integration/test_demo_zone_e2e.py); the tests depend only on "some enter happens", never
on which frame or how many.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.conftest import free_port, metric, scrape, wait_for
from tests.integration.test_web_browser import browser  # noqa: F401 (a fixture)
from tests.rtsp import RtspServer, gst_rtsp_available

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PERSON = "one-by-one-person-detection"
TOKEN = "clips-token-0123456789"
PRE_S, POST_S = 2.0, 2.0


@pytest.fixture(scope="module")
def rtsp_ok() -> None:
    why = gst_rtsp_available()
    if why is not None:
        pytest.fail(f"the RTSP test server cannot run: {why}")


def walkway_config(
    repo_root: Path, assets_dir: Path, url: str, clips_dir: Path, **clips: Any
) -> dict[str, Any]:
    """The demo's walkway camera (its zone and line) on ``url``, with clips on."""
    text = (repo_root / "configs" / "demo.yaml").read_text()
    demo = yaml.safe_load(text.replace("${VIDPIPE_ASSETS}", str(assets_dir)))
    (walkway,) = [c for c in demo["cameras"] if c["name"] == "walkway"]
    camera = {
        "name": "walkway",
        "url": url,
        "classes": walkway["classes"],
        "zones": walkway["zones"],
        "lines": walkway["lines"],
        "clips": {"triggers": {"zones": ["enter"], "lines": []}},
    }
    return {
        "model": demo["model"],
        "inference": demo["inference"],
        "clips": {
            "enabled": True,
            "pre_s": PRE_S,
            "post_s": POST_S,
            "max_s": 60,
            "dir": str(clips_dir),
            **clips,
        },
        "capture": {"read_timeout_ms": 2000, "open_timeout_ms": 2000, "stall_timeout_s": 4},
        "cameras": [camera],
    }


def sidecars(camera_dir: Path) -> list[dict[str, Any]]:
    out = []
    for p in sorted(camera_dir.glob("*.json")):
        with contextlib.suppress(ValueError):
            out.append(json.loads(p.read_text()))
    return out


def records(path: Path) -> list[dict[str, Any]]:
    """The whole lines of a JSONL file: a line still being written has no newline yet."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().split("\n")[:-1] if line.strip()]


def ffprobe(path: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        ["ffprobe", "-v", "error", "-of", "json", *args, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return dict(json.loads(proc.stdout))


def decodes_cleanly(path: Path) -> int:
    """Decode every frame with the ffmpeg CLI; the number of frames (fails on any error)."""
    probe = ffprobe(
        path, "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames"
    )
    proc = subprocess.run(
        ["ffmpeg", "-v", "error", "-xerror", "-i", str(path), "-f", "null", "-"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr[-2000:]
    return int(probe["streams"][0]["nb_read_frames"])


def http(
    port: int, path: str, token: str | None = TOKEN, **headers: str
) -> tuple[int, bytes, dict]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    for k, v in headers.items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_zone_enter_gives_a_clip_that_starts_on_a_keyframe_and_holds_the_event(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, rtsp_ok: None
) -> None:
    clips_dir = tmp_path / "clips"
    camera_dir = clips_dir / "walkway"
    camera_dir.mkdir(parents=True)
    leftover = camera_dir / ".tmp-20260101-000000-000.mp4"  # as a kill -9 mid-write leaves it
    leftover.write_bytes(b"\x00" * 1000)
    out = tmp_path / "events.jsonl"
    port = free_port()
    with RtspServer(assets_dir / "videos", loop=True) as server:
        config = walkway_config(repo_root, assets_dir, server.url(PERSON), clips_dir)
        config["http"] = {"port": port, "token": TOKEN}
        config["sinks"] = [
            {"type": "jsonl", "path": str(out), "only_with_detections": True},
            {
                "type": "snapshot",
                "dir": str(tmp_path / "snaps"),
                "min_interval_s": 60,
                "crop": True,
            },
        ]
        daemon = run_daemon(config)

        def clip_announced() -> bool:
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            return any(r.get("event") == "clip" for r in records(out))

        wait_for(clip_announced, 200, "a clip event in the JSONL sink")
        assert not leftover.exists()  # cleaned at start-up
        rows = records(out)
        clip_rec = next(r for r in rows if r.get("event") == "clip")
        (side,) = [s for s in sidecars(camera_dir) if s["id"] == clip_rec["id"]]
        # the sidecar is the clip's record, as the sinks announced it, plus its files' details
        assert {k: side[k] for k in clip_rec} == clip_rec
        mp4 = camera_dir / side["file"]

        # what triggered it: a zone enter, whose track the sidecar names
        enters = [r for r in rows if r.get("event") == "enter" and r.get("zone") == "table"]
        trig = side["triggers"][0]
        assert trig["event"] == "enter" and trig["zone"] == "table"
        event = next(e for e in enters if e["frame"] == trig["frame"])
        assert event["tracker_id"] in side["tracker_ids"]
        assert clip_rec["tracker_ids"] == side["tracker_ids"]
        assert clip_rec["url"] == f"/clips/walkway/{side['id']}.mp4"
        assert side["classes"] == ["person"]

        # the file: starts on a keyframe, lasts pre_s + post_s at least, holds the event
        first = ffprobe(
            mp4,
            "-select_streams",
            "v:0",
            "-show_frames",
            "-read_intervals",
            "%+#1",
            "-show_entries",
            "frame=key_frame,pict_type",
        )["frames"][0]
        assert first["key_frame"] == 1 and first["pict_type"] == "I", first
        duration = float(ffprobe(mp4, "-show_entries", "format=duration")["format"]["duration"])
        assert duration >= PRE_S + POST_S, side
        # the file starts at the keyframe (one a second) at or before trigger - pre_s - 0.5
        # (the recorder's margin for jitter in arrival times); offsets are in its timestamps
        assert PRE_S <= trig["offset_s"] <= min(duration, PRE_S + 0.5 + 1.1), side
        # the sidecar's duration from the packets' timestamps: ffprobe's within a few frames
        # (how the muxer ends the last frame)
        assert abs(side["duration_s"] - duration) < 0.25, side
        assert side["start"] <= event["ts"] <= side["end"]
        frames = decodes_cleanly(mp4)
        assert frames == side["packets"]
        assert mp4.stat().st_size == side["size"] == clip_rec["size"]

        # the crop: the best shot of the triggering track, a real JPEG
        crop = next(c for c in side["crops"] if c["tracker_id"] == event["tracker_id"])
        crop_bytes = (camera_dir / crop["file"]).read_bytes()
        assert crop_bytes[:3] == b"\xff\xd8\xff"
        # the snapshot sink (crop: true) has a copy of the clip's best crop
        snap = tmp_path / "snaps" / "walkway" / f"walkway-clip-{side['id']}.jpg"
        wait_for(snap.exists, 10, "the crop in the snapshot sink")
        best = camera_dir / side["crops"][0]["file"]
        assert snap.read_bytes() == best.read_bytes()

        # served with byte ranges, behind the token; unknown ids and path tricks are 404
        status, body, _ = http(port, clip_rec["url"])
        assert status == 200 and body == mp4.read_bytes()
        status, body, headers = http(port, clip_rec["url"], Range="bytes=100-199")
        assert status == 206 and body == mp4.read_bytes()[100:200], headers
        status, body, headers = http(port, clip_rec["crop_url"])
        assert status == 200 and headers["Content-Type"] == "image/jpeg"
        for path in (clip_rec["url"], clip_rec["crop_url"], "/api/clips"):
            assert http(port, path, token=None)[0] == 401, path
            assert http(port, path, token="wrong-token-0123456789")[0] == 401, path
        for path in (
            "/clips/walkway/20990101-000000-000.mp4",
            f"/clips/walkway/{side['id']}.t999999.jpg",
            "/clips/walkway/..%2F..%2Fconfig.yaml",
            "/clips/walkway/%2E%2E%2Fconfig.yaml",
            "/clips/..%2Fclips/walkway",
            f"/clips/walkway/{side['id']}.mp4%00.jpg",
            f"/clips/nope/{side['id']}.mp4",
            f"/clips/walkway/.tmp-{side['id']}.mp4",
            "/clips/walkway/config.yaml",
        ):
            assert http(port, path)[0] == 404, path
        listing = json.loads(http(port, "/api/clips")[1])
        (cam,) = listing["cameras"]
        assert side in cam["clips"]  # the sidecars as they are: they hold their URLs

        text = scrape_with_token(port)
        assert metric(text, "vidpipe_clips_written_total", camera="walkway") >= 1
        assert metric(text, "vidpipe_clip_ring_bytes", camera="walkway") > 0
        assert metric(text, "vidpipe_clips_disk_bytes", camera="walkway") >= side["size"]
        assert metric(text, "vidpipe_clip_write_seconds_count") >= 1
        assert metric(text, "vidpipe_clips_failed_total", camera="walkway") == 0
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def scrape_with_token(port: int) -> str:
    status, body, _ = http(port, "/metrics")
    assert status == 200
    return body.decode()


def test_camera_lost_mid_clip_closes_the_clip_cleanly(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, rtsp_ok: None
) -> None:
    clips_dir = tmp_path / "clips"
    out = tmp_path / "events.jsonl"
    port = free_port()
    with RtspServer(assets_dir / "videos", loop=True) as server:
        # post_s long enough that the clip is still open when the server dies
        config = walkway_config(repo_root, assets_dir, server.url(PERSON), clips_dir, post_s=30.0)
        config["http"] = {"port": port}
        config["sinks"] = [{"type": "jsonl", "path": str(out), "only_with_detections": True}]
        daemon = run_daemon(config)

        def entered() -> bool:
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            return any(r.get("event") == "enter" for r in records(out))

        wait_for(entered, 200, "a zone enter (a clip opens)")
        time.sleep(1.0)
        server.kill()
        t_killed = time.time()
        camera_dir = clips_dir / "walkway"
        wait_for(lambda: sidecars(camera_dir), 60, "the open clip to be written")
        (side,) = sidecars(camera_dir)
        mp4 = camera_dir / side["file"]
        end = datetime.fromisoformat(side["end"]).timestamp()
        assert end <= t_killed + 0.5  # nothing after the camera was lost
        assert decodes_cleanly(mp4) == side["packets"] >= 10
        assert not list(camera_dir.glob(".tmp-*"))
        text = scrape(port)
        assert metric(text, "vidpipe_clips_written_total", camera="walkway") == 1
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def test_status_page_plays_the_clip_and_shows_its_crop_in_chromium(
    repo_root: Path,
    assets_dir: Path,
    tmp_path: Path,
    run_daemon,
    rtsp_ok: None,
    browser,  # noqa: F811 (the fixture imported above)
) -> None:
    from selenium.webdriver.common.by import By

    clips_dir = tmp_path / "clips"
    port = free_port()
    with RtspServer(assets_dir / "videos", loop=True) as server:
        config = walkway_config(repo_root, assets_dir, server.url(PERSON), clips_dir)
        config["http"] = {"port": port, "token": TOKEN}
        daemon = run_daemon(config)

        def written() -> bool:
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            return bool(sidecars(clips_dir / "walkway"))

        wait_for(written, 200, "a clip")
        browser.get(f"http://127.0.0.1:{port}/")
        wait_for(lambda: browser.current_url.endswith("/login"), 10, "the login form")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: browser.current_url.endswith(f":{port}/"), 10, "the status page")
        wait_for(
            lambda: browser.find_elements(
                By.CSS_SELECTOR, '#clips .clip-camera[data-camera="walkway"] figure.clip'
            ),
            20,
            "the walkway's clip on the status page",
        )
        fig = browser.find_element(By.CSS_SELECTOR, "#clips figure.clip")
        video = fig.find_element(By.TAG_NAME, "video")
        crop = fig.find_element(By.CSS_SELECTOR, "img.crop")
        browser.execute_script("arguments[0].play()", video)
        wait_for(
            lambda: browser.execute_script("return arguments[0].readyState", video) >= 2,
            20,
            "the clip's first frames (readyState >= 2)",
        )
        t0 = browser.execute_script("return arguments[0].currentTime", video)
        wait_for(
            lambda: browser.execute_script("return arguments[0].currentTime", video) > t0 + 0.5,
            20,
            "the clip to play (currentTime advances)",
        )
        assert browser.execute_script("return arguments[0].error", video) is None
        assert browser.execute_script("return arguments[0].videoWidth", video) == 768
        wait_for(
            lambda: browser.execute_script("return arguments[0].naturalWidth", crop) > 0,
            20,
            "the crop image",
        )
        # seek to the trigger (a range request) so that the screenshot shows the event
        (side,) = sidecars(clips_dir / "walkway")[:1]
        offset = side["triggers"][0]["offset_s"]
        browser.execute_script(
            "arguments[0].pause(); arguments[0].currentTime = arguments[1]", video, offset
        )
        wait_for(
            lambda: browser.execute_script(
                "const v = arguments[0]; return !v.seeking && v.readyState >= 2"
                " && Math.abs(v.currentTime - arguments[1]) < 0.2",
                video,
                offset,
            ),
            20,
            "the seek to the trigger",
        )
        browser.execute_script("document.getElementById('clips').scrollIntoView()")
        # beside the other pages' screenshots; docs/clips-status-page.png is one of these,
        # copied by hand when the page changes (a test run never edits the checkout)
        artifacts = repo_root / "test-artifacts"
        artifacts.mkdir(exist_ok=True)
        browser.save_screenshot(str(artifacts / "clips-status-page.png"))
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]


def test_kill_9_leaves_no_half_written_clip_listed_and_restart_cleans_up(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, rtsp_ok: None
) -> None:
    clips_dir = tmp_path / "clips"
    camera_dir = clips_dir / "walkway"
    port = free_port()
    with RtspServer(assets_dir / "videos", loop=True) as server:
        # every person detection triggers: a clip is cut every 3 s, written while others open
        config = walkway_config(
            repo_root, assets_dir, server.url(PERSON), clips_dir, pre_s=1, post_s=1, max_s=3
        )
        config["cameras"][0]["clips"]["triggers"]["classes"] = ["person"]
        config["http"] = {"port": port}
        daemon = run_daemon(config)
        wait_for(lambda: len(sidecars(camera_dir)) >= 2, 200, "two clips")
        daemon.proc.kill()  # SIGKILL: no clean-up at all
        daemon.proc.wait(10)
        camera_dir.joinpath(".tmp-20260101-000000-000.mp4").write_bytes(b"\x00" * 4096)
        # a clip whose sidecar never came (killed between the MP4's rename and the sidecar's)
        orphan = camera_dir / "20260101-000000-001.mp4"
        orphan.write_bytes(b"\x00" * 4096)

        restarted = run_daemon(config)
        wait_for(
            lambda: (
                (not list(camera_dir.glob(".tmp-*")) and not orphan.exists())
                or restarted.proc.poll() is not None
            ),
            60,
            "the unfinished files to be removed at start-up",
        )
        wait_for(lambda: http(port, "/api/clips", token=None)[0] == 200, 60, "the HTTP server")
        listing = json.loads(http(port, "/api/clips", token=None)[1])
        listed = [c for cam in listing["cameras"] for c in cam["clips"]]
        assert listed, listing
        for clip in listed:  # every listed clip is whole: its size, and it decodes
            mp4 = camera_dir / clip["file"]
            assert mp4.stat().st_size == clip["size"]
            assert decodes_cleanly(mp4) == clip["packets"]
        assert orphan.name not in [c["file"] for c in listed] and not orphan.exists()
        assert http(port, f"/clips/walkway/{orphan.name}", token=None)[0] == 404
        assert restarted.terminate(30) == 0, restarted.log()[-3000:]
