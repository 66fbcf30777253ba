"""The status page in real headless Chromium (Debian's ``chromium`` + ``chromium-driver``).

Two real RTSP servers (one per camera, so that one can be killed alone) feed the real daemon;
Selenium drives the system browser, nothing is downloaded. The test saves screenshots of the
page (desktop and phone sized) under ``test-artifacts/`` in the project root.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
STALL_TIMEOUT_S = 5.0  # the capture watchdog of this test's daemon
TOKEN = "browser-token-0123456789"


def clip_dir(videos: Path, stem: str, where: Path) -> Path:
    """A directory serving only ``stem`` (one RTSP server per camera)."""
    where.mkdir()
    (where / f"{stem}.mp4").symlink_to(videos / f"{stem}.mp4")
    return where


@pytest.fixture
def browser() -> Iterator[object]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).is_file():
            pytest.fail(f"{path} missing: run scripts/setup-system.sh (Debian chromium packages)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        opts.add_argument(arg)
    opts.add_argument("--window-size=1280,800")
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def tile_states(driver) -> dict[str, str]:
    return driver.execute_script(
        "const out = {}; for (const t of document.querySelectorAll('.tile'))"
        " out[t.dataset.camera] = t.querySelector('.state').textContent; return out;"
    )


def get_json(port: int, path: str) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}")
    req.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return dict(json.load(resp))


def api_cameras(port: int) -> dict[str, dict]:
    return {c["name"]: c for c in get_json(port, "/api/cameras")["cameras"]}


def test_status_page_in_chromium(
    assets_dir: Path, tmp_path: Path, repo_root: Path, run_daemon, browser
) -> None:
    from selenium.webdriver.common.by import By

    videos = assets_dir / "videos"
    artifacts = repo_root / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    port = free_port()
    walk_dir = clip_dir(videos, "one-by-one-person-detection", tmp_path / "walk")
    belt_dir = clip_dir(videos, "bottle-detection", tmp_path / "belt")
    with RtspServer(walk_dir, loop=True) as walk, RtspServer(belt_dir, loop=True) as belt:
        config = {
            "model": {
                "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                "labels": str(assets_dir / "models" / "coco80.txt"),
            },
            "http": {"port": port, "token": TOKEN, "live": {"max_fps": 5}},
            "capture": {
                "stall_timeout_s": STALL_TIMEOUT_S,
                "read_timeout_ms": 2000,
                "open_timeout_ms": 2000,
            },
            "cameras": [
                {"name": "walkway", "url": walk.url("one-by-one-person-detection")},
                {"name": "belt", "url": belt.url("bottle-detection")},
            ],
        }
        daemon = run_daemon(config)

        def both_streaming() -> bool:
            try:
                cams = api_cameras(port)
            except OSError:
                assert daemon.proc.poll() is None, daemon.log()
                return False
            if set(cams) != {"walkway", "belt"}:
                return False  # all() of nothing is True: wait until both are listed
            return all(c["streaming"] and c["frame"] is not None for c in cams.values())

        wait_for(both_streaming, 90, "both cameras streaming with results")
        # nobody has watched yet: results flow, but not one JPEG was encoded
        stats = get_json(port, "/api/stats")["cameras"]
        for name in ("walkway", "belt"):
            assert stats[name]["frames_inferred_total"] > 0
            assert stats[name].get("live_jpeg_encoded_total", 0) == 0, stats[name]
        # with a token configured the page asks for it once, then a cookie carries it
        browser.get(f"http://127.0.0.1:{port}/")
        wait_for(lambda: browser.current_url.endswith("/login"), 10, "the login form")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: browser.current_url.endswith(f":{port}/"), 10, "the status page")

        # both tiles render, each with a snapshot that actually has pixels
        wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".tile")) == 2, 20, "2 tiles")
        wait_for(
            lambda: tile_states(browser) == {"walkway": "streaming", "belt": "streaming"},
            20,
            "both tiles to show streaming",
        )
        images = {
            t.get_attribute("data-camera"): t.find_element(By.CSS_SELECTOR, "img.stream")
            for t in browser.find_elements(By.CSS_SELECTOR, ".tile")
        }
        for name, img in images.items():
            wait_for(
                lambda img=img: browser.execute_script("return arguments[0].naturalWidth", img) > 0,
                20,
                f"{name}'s snapshot to load",
            )

        # the snapshots are refreshed (each camera's pixels, as the browser shows them)
        for name, img in images.items():
            first = img.screenshot_as_png
            wait_for(
                lambda img=img, first=first: img.screenshot_as_png != first, 20, f"{name} to change"
            )
        wait_for(
            lambda: (
                "last:"
                in browser.find_element(
                    By.CSS_SELECTOR, '.tile[data-camera="walkway"] .detections'
                ).text
            ),
            30,
            "the walkway tile to list detections",
        )
        browser.save_screenshot(str(artifacts / "status-page.png"))
        stats = get_json(port, "/api/stats")["cameras"]
        assert all(stats[n]["live_jpeg_encoded_total"] > 0 for n in ("walkway", "belt"))
        # tiles show snapshots: no MJPEG stream until a tile is opened, and none once closed
        assert all(stats[n].get("live_viewers", 0) == 0 for n in ("walkway", "belt")), stats
        browser.find_element(By.CSS_SELECTOR, '.tile[data-camera="walkway"] .view').click()
        live = browser.find_element(By.CSS_SELECTOR, "#live img.live-stream")
        wait_for(
            lambda: browser.execute_script("return arguments[0].naturalWidth", live) > 0,
            20,
            "the walkway's MJPEG stream in the live panel",
        )
        assert get_json(port, "/api/stats")["cameras"]["walkway"]["live_viewers"] == 1
        browser.save_screenshot(str(artifacts / "status-page-live.png"))
        browser.find_element(By.CSS_SELECTOR, "#live button.close").click()
        wait_for(
            lambda: get_json(port, "/api/stats")["cameras"]["walkway"]["live_viewers"] == 0,
            20,
            "the stream to end once the panel is closed",
        )

        # a camera whose server is killed is shown as not streaming within the watchdog time
        belt.kill()
        t_killed = time.monotonic()
        wait_for(
            lambda: tile_states(browser).get("belt") not in (None, "streaming"),
            STALL_TIMEOUT_S + 5,  # the watchdog, plus the page's 1 s refresh and slack
            "the belt tile to leave 'streaming'",
        )
        shown_s = time.monotonic() - t_killed
        assert tile_states(browser)["walkway"] == "streaming"
        browser.save_screenshot(str(artifacts / "status-page-camera-down.png"))

        # phone-sized: no horizontal scrolling, tiles fit the width
        browser.set_window_size(390, 844)
        wait_for(lambda: browser.execute_script("return window.innerWidth") <= 400, 10, "resize")
        overflow = browser.execute_script(
            "return document.documentElement.scrollWidth - window.innerWidth"
        )
        assert overflow <= 0, f"page is {overflow} px wider than a phone screen"
        widths = browser.execute_script(
            "return [...document.querySelectorAll('.tile')]"
            ".map(t => t.getBoundingClientRect().right)"
        )
        assert max(widths) <= browser.execute_script("return window.innerWidth")
        browser.save_screenshot(str(artifacts / "status-page-phone.png"))
        assert daemon.terminate() == 0, daemon.log()[-3000:]
    print(f"belt shown as down {shown_s:.1f} s after its server was killed")
