"""The status page's event list in real headless Chromium: the walkway's zone events and clips
from the event store, filtered by kind, each entry with its crop and a link to its clip."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.integration.test_clips_e2e import PERSON, TOKEN, http, rtsp_ok, walkway_config
from tests.integration.test_web_browser import browser
from tests.rtsp import RtspServer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
__all__ = ["browser", "rtsp_ok"]  # fixtures


def api_events(port: int, **params: str) -> list[dict]:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    status, body, _ = http(port, f"/api/v1/events?{query}")
    assert status == 200, body
    return list(json.loads(body)["events"])


def shown(driver) -> list[dict]:
    return driver.execute_script(
        "return [...document.querySelectorAll('#event-list li.event')].map(li => ({"
        " kind: li.dataset.kind, camera: li.dataset.camera,"
        " clip: li.querySelector('a.clip-link') ? li.querySelector('a.clip-link').href : null,"
        " crop: li.querySelector('img.crop') ? li.querySelector('img.crop').naturalWidth : 0}))"
    )


def test_the_event_list_shows_filtered_events_with_crops_and_clip_links(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon, rtsp_ok: None, browser
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    port = free_port()
    with RtspServer(assets_dir / "videos", loop=True) as server:
        config = walkway_config(repo_root, assets_dir, server.url(PERSON), tmp_path / "clips")
        config["http"] = {"port": port, "token": TOKEN}
        daemon = run_daemon(config)

        def linked_enter() -> bool:
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
            try:
                return any(e["clip_url"] for e in api_events(port, kind="enter"))
            except OSError:
                return False  # still starting

        wait_for(linked_enter, 240, "a zone entry linked to its clip")
        browser.get(f"http://127.0.0.1:{port}/")
        wait_for(lambda: browser.current_url.endswith("/login"), 10, "the login form")
        browser.find_element(By.ID, "token").send_keys(TOKEN)
        browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "#event-list li"), 20, "events")
        assert browser.find_element(By.ID, "events").is_displayed()

        form = browser.find_element(By.ID, "event-filter")
        Select(form.find_element(By.NAME, "kind")).select_by_value("enter")
        wait_for(lambda: browser.find_element(By.ID, "event-list").get_attribute("data-filter")
                 == "limit=20&kind=enter", 10, "the enter filter applied")  # fmt: skip
        wait_for(lambda: any(e["crop"] for e in shown(browser)), 20, "a crop loaded")
        items = shown(browser)
        assert items and {e["kind"] for e in items} == {"enter"}
        link = next(e["clip"] for e in items if e["clip"])
        req = urllib.request.Request(link, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as resp:  # the link leads to the MP4
            assert resp.headers["Content-Type"] == "video/mp4"
            assert resp.read(8)[4:8] == b"ftyp"

        Select(form.find_element(By.NAME, "camera")).select_by_value("walkway")
        Select(form.find_element(By.NAME, "kind")).select_by_value("clip")
        wait_for(lambda: browser.find_element(By.ID, "event-list").get_attribute("data-filter")
                 == "limit=20&camera=walkway&kind=clip", 10, "the clip filter applied")  # fmt: skip
        items = shown(browser)
        assert items and {(e["kind"], e["camera"]) for e in items} == {("clip", "walkway")}
        assert all(e["clip"] for e in items)
        browser.save_screenshot(str(repo_root / "test-artifacts" / "events-list.png"))
        assert daemon.terminate(30) == 0, daemon.log()[-3000:]
