"""A new user's first change: one ``vidpipe cameras add`` of a reachable RTSP camera, and the
camera streams on the status page, in real headless Chromium, against the real GStreamer
RTSP server and the real model. How long it took is printed (from the command's return to
the tile saying ``streaming``): a figure for the docs, not an assertion."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.integration.test_control_api import file_camera
from tests.integration.test_web_browser import browser, tile_states
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["browser"]  # fixture

READER = "First-Reader-Token-0123456789"
ADMIN = "First-Admin-Token-0123456789"


def test_one_cameras_add_streams_on_the_page(
    assets_dir: Path, tmp_path: Path, run_daemon: Any, browser: Any
) -> None:
    from selenium.webdriver.common.by import By

    port = free_port()
    models = assets_dir / "models"
    config = {
        "model": {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")},
        "http": {"port": port, "token": READER, "admin_token": ADMIN},
        "cameras": [file_camera(assets_dir, "main", realtime=True, detect_fps=2)],
    }
    with RtspServer(assets_dir / "videos") as server:
        daemon = run_daemon(config)
        wait_for(lambda: _answers(port), 120, "the daemon to serve")
        browser.get(f"http://127.0.0.1:{port}/login")
        browser.find_element(By.ID, "token").send_keys(READER)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: tile_states(browser).get("main") == "streaming", 60, "main streaming")

        env = {**os.environ, "VIDPIPE_TOKEN": ADMIN}
        add = [sys.executable, "-m", "vidpipe.cli", "cameras", "add", "door"]
        add += ["--camera-url", server.url("one-by-one-person-detection")]
        done = subprocess.run(
            [*add, "--url", f"http://127.0.0.1:{port}"], env=env, capture_output=True, text=True
        )
        added = time.monotonic()
        assert done.returncode == 0, done.stderr
        wait_for(lambda: tile_states(browser).get("door") == "streaming", 60, "door streaming")
        print(f"\ndoor streaming on the page {time.monotonic() - added:.2f} s after the add")
        assert tile_states(browser)["main"] == "streaming"
        assert daemon.terminate(60) == 0


def _answers(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/login", timeout=2):
            return True
    except OSError:
        return False
