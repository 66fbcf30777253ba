"""The status page at 200 cameras, in real headless Chromium: a page of snapshot tiles, no
MJPEG stream until a tile is opened, state / events / name filters and paging in the URL hash.

Two cores cannot run a daemon with 200 real cameras, so the cameras are fake: the real web
server and the real ``LiveRoutes`` over a real ``LiveView`` sink holding one small frame per
camera, with capture states from a fixed table (streaming, paused, backoff, stopped) and a
stand-in ``/api/v1/events`` listing events of two cameras. A middleware counts every request
by path, so "no MJPEG before a tile is opened" is counted where it would happen.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from aiohttp.typedefs import Handler

from tests.integration.conftest import wait_for
from tests.integration.test_web_browser import browser
from vidpipe.config import LiveViewConfig
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks.live import LiveView
from vidpipe.types import Detections, FrameResult
from vidpipe.web import WebServer, build_app
from vidpipe.web.live import LiveRoutes
from vidpipe.web.stats import registry_stats

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
__all__ = ["browser"]  # fixture

N_CAMERAS = 200
PAGE_SIZE = 24  # app.js
NAMES = [f"cam-{i:03d}" for i in range(N_CAMERAS)]
STATES = ["streaming", "paused", "backoff", "stopped"]  # camera i is in STATES[i % 4]
WITH_EVENTS = {"cam-005", "cam-150"}


class Page:
    """The fake-camera server: its port, its request counts by path and its metrics."""

    def __init__(self, port: int, requests: Counter[str], metrics: Metrics, live: LiveView) -> None:
        self.port = port
        self.requests = requests
        self.metrics = metrics
        self.live = live
        self.seq = 1

    def new_frame(self, i: int) -> None:
        """A newer result of camera ``i`` (Chromium shows an MJPEG part once the next one
        begins: a stream needs frames to keep coming, as a real camera's do)."""
        self.seq += 1
        self.live.handle(result(i, self.seq))

    def count(self, suffix: str) -> dict[str, int]:
        return {p: n for p, n in self.requests.items() if p.endswith(suffix)}

    def viewers(self, camera: str) -> float:
        cams = registry_stats(self.metrics.registry)["cameras"]
        return float(cams.get(camera, {}).get("live_viewers", 0.0))


def result(i: int, seq: int = 1) -> FrameResult:
    image = np.full((36, 64, 3), (i * 37 % 256, i % 256, 200), np.uint8)
    now = time.monotonic()
    return FrameResult(
        camera=NAMES[i], seq=seq, t_capture=now, t_done=now, wall_time=time.time(),
        width=64, height=36, detections=Detections.empty(), image=image,
    )  # fmt: skip


async def fake_events(_request: web.Request) -> web.Response:
    now = time.time()
    events = [
        {"id": n, "ts": now - 30, "camera": cam, "kind": "enter", "zone": "door",
         "label": "person", "tracker_id": n, "crop_url": None, "clip_url": None}
        for n, cam in enumerate(sorted(WITH_EVENTS))
    ]  # fmt: skip
    return web.json_response({"events": events, "next_cursor": None})


@pytest.fixture
def page() -> Iterator[Page]:
    metrics = Metrics()
    live = LiveView(draw_detections, metrics)
    for i in range(N_CAMERAS):
        live.handle(result(i))
    capture = {n: {"state": STATES[i % 4], "fps_in": 5.0} for i, n in enumerate(NAMES)}
    routes = LiveRoutes(live, lambda: NAMES, lambda: capture, metrics, LiveViewConfig())
    requests: Counter[str] = Counter()

    @web.middleware
    async def count(request: web.Request, handler: Handler) -> web.StreamResponse:
        requests[request.path] += 1
        return await handler(request)

    def events(app: web.Application) -> None:
        app.router.add_get("/api/v1/events", fake_events)

    app = build_app(metrics, Health(), installers=[routes.install, events])
    app.middlewares.append(count)
    server = WebServer(app, "127.0.0.1", 0)
    server.start()
    try:
        yield Page(server.port, requests, metrics, live)
    finally:
        server.stop()


def shown(driver: Any) -> list[dict[str, Any]]:
    """The tiles in the document: camera, state, snapshot src and whether it has pixels."""
    return list(
        driver.execute_script(
            "return [...document.querySelectorAll('#tiles .tile')].map(t => {"
            " const img = t.querySelector('img.stream');"
            " return {camera: t.dataset.camera, state: t.dataset.state,"
            "  paused: t.classList.contains('paused'),"
            "  src: img.getAttribute('src') || '', width: img.naturalWidth}; })"
        )
    )


def names(driver: Any) -> list[str]:
    return [t["camera"] for t in shown(driver)]


def test_200_fake_cameras_page_filter_and_open_a_tile(
    page: Page, browser: Any, repo_root: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    artifacts = repo_root / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    browser.get(f"http://127.0.0.1:{page.port}/")
    wait_for(lambda: names(browser) == NAMES[:PAGE_SIZE], 20, "the first page of tiles")
    main = browser.find_element(By.ID, "tiles")
    assert main.get_attribute("data-pages") == str(-(-N_CAMERAS // PAGE_SIZE))
    # the tiles on screen load snapshots, with pixels
    wait_for(lambda: any(t["width"] > 0 for t in shown(browser)), 20, "a snapshot to load")
    tiles = shown(browser)
    assert len(tiles) <= PAGE_SIZE
    assert all("/snapshot.jpg" in t["src"] for t in tiles if t["src"]), tiles
    assert [t["paused"] for t in tiles] == [STATES[i % 4] == "paused" for i in range(PAGE_SIZE)]
    time.sleep(4)  # a refresh round or more: still only cameras of this page are asked for
    snapped = {p.split("/")[2] for p in page.count("/snapshot.jpg")}
    assert snapped and snapped <= set(NAMES[:PAGE_SIZE]), snapped
    assert page.count(".mjpeg") == {}, page.count(".mjpeg")
    assert len(browser.find_elements(By.CSS_SELECTOR, ".tile")) <= PAGE_SIZE
    browser.save_screenshot(str(artifacts / "status-page-200-cameras.png"))

    form = browser.find_element(By.ID, "camera-filter")
    # state filter: only paused cameras, 50 of them, in the hash
    Select(form.find_element(By.NAME, "state")).select_by_value("paused")
    wait_for(lambda: "state=paused" in browser.current_url, 10, "the state in the hash")
    wait_for(lambda: {t["state"] for t in shown(browser)} == {"paused"}, 10, "paused tiles")
    assert names(browser) == [n for i, n in enumerate(NAMES) if i % 4 == 1][:PAGE_SIZE]
    assert "50 of 200" in browser.find_element(By.ID, "page-info").text
    Select(form.find_element(By.NAME, "state")).select_by_value("down")
    wait_for(lambda: {t["state"] for t in shown(browser)} == {"backoff"}, 10, "down tiles")
    Select(form.find_element(By.NAME, "state")).select_by_value("")

    # cameras with recent events (from /api/v1/events)
    form.find_element(By.NAME, "events").click()
    wait_for(lambda: names(browser) == sorted(WITH_EVENTS), 15, "the cameras with events")
    form.find_element(By.NAME, "events").click()

    # name search
    form.find_element(By.NAME, "q").send_keys("cam-19")
    wait_for(lambda: names(browser) == NAMES[190:], 10, "the search result")
    form.find_element(By.NAME, "q").clear()
    browser.execute_script("arguments[0].dispatchEvent(new Event('input', {bubbles: true}))",
                           form.find_element(By.NAME, "q"))  # fmt: skip
    wait_for(lambda: names(browser) == NAMES[:PAGE_SIZE], 10, "all cameras again")

    # paging: next until the last page, which holds camera 199
    nxt = browser.find_element(By.ID, "page-next")
    while nxt.is_enabled():
        nxt.click()
    wait_for(lambda: "cam-199" in names(browser), 10, "the last page")
    assert names(browser) == NAMES[(N_CAMERAS // PAGE_SIZE) * PAGE_SIZE :]
    assert "page=9" in browser.current_url
    browser.refresh()  # the page is in the hash: a reload shows the same page
    wait_for(lambda: "cam-199" in names(browser), 20, "the last page after a reload")
    assert page.count(".mjpeg") == {}

    # opening a tile opens its MJPEG stream, closing the panel ends it
    browser.find_element(By.CSS_SELECTOR, '.tile[data-camera="cam-199"] .view').click()
    live = browser.find_element(By.CSS_SELECTOR, "#live img.live-stream")
    wait_for(lambda: page.count(".mjpeg") == {"/cameras/cam-199/stream.mjpeg": 1}, 10, "MJPEG")
    assert browser.find_element(By.ID, "live").get_attribute("open") is not None

    def live_frame() -> bool:
        page.new_frame(199)
        return bool(browser.execute_script("return arguments[0].naturalWidth", live) > 0)

    wait_for(live_frame, 10, "the live stream's first frame")
    wait_for(lambda: page.viewers("cam-199") == 1, 10, "one viewer of cam-199")
    browser.save_screenshot(str(artifacts / "status-page-200-cameras-open.png"))
    browser.find_element(By.CSS_SELECTOR, "#live button.close").click()
    assert live.get_attribute("src") is None
    assert browser.find_element(By.ID, "live").get_attribute("open") is None
    wait_for(lambda: page.viewers("cam-199") == 0, 10, "the stream to end on the server")
    assert page.count(".mjpeg") == {"/cameras/cam-199/stream.mjpeg": 1}
