"""The live view over real sockets: lazy JPEG encoding, MJPEG rate cap, 404s, JSON figures."""

from __future__ import annotations

import http.client
import json
import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.integration.conftest import wait_for
from vidpipe.config import LiveViewConfig
from vidpipe.health import Health
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks.live import LiveView
from vidpipe.web import WebServer, build_app
from vidpipe.web.live import BOUNDARY, LiveRoutes

CAMERAS = ("front", "back")
LABELS = Labels(("person", "bicycle", "car"))


def make_result(camera: str, seq: int, image: np.ndarray, boxes: int = 1) -> Any:
    from vidpipe.types import Detections, FrameResult

    now = time.monotonic()
    xyxy = np.array([[40, 30, 200, 150]] * boxes, np.float32).reshape(-1, 4)
    det = Detections(xyxy, np.full(boxes, 0.9, np.float32), np.full(boxes, 2, np.int32))
    return FrameResult(
        camera=camera,
        seq=seq,
        t_capture=now - 0.04,
        t_done=now,
        wall_time=time.time(),
        width=image.shape[1],
        height=image.shape[0],
        detections=det,
        labels=LABELS,
        image=image,
    )


class Served:
    def __init__(
        self, live: LiveView, metrics: Metrics, port: int, capture: dict, names: list[str]
    ) -> None:
        self.names = names
        self.live = live
        self.metrics = metrics
        self.port = port
        self.capture = capture

    def get(self, path: str) -> tuple[int, bytes, dict[str, str]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request("GET", path)  # raw path: no client-side normalisation of tricks
            resp = conn.getresponse()
            return resp.status, resp.read(), dict(resp.getheaders())
        finally:
            conn.close()

    def encoded(self, camera: str) -> float:
        return float(self.metrics.live_jpeg_encoded.labels(camera=camera)._value.get())

    def viewers(self, camera: str) -> float:
        return float(self.metrics.live_viewers.labels(camera=camera)._value.get())


@pytest.fixture
def image(assets_dir: Path) -> np.ndarray:
    img = cv2.imread(str(assets_dir / "images" / "000000000139.jpg"))
    assert img is not None
    return img


@pytest.fixture
def served(image: np.ndarray) -> Iterator[Served]:
    metrics = Metrics()
    live = LiveView(draw_detections, metrics, jpeg_quality=90)
    capture: dict[str, dict[str, Any]] = {
        "front": {"state": "streaming", "fps_in": 25.0, "last_frame_age_s": 0.01},
        "back": {"state": "backoff", "fps_in": 0.0, "last_frame_age_s": 12.0},
    }
    cfg = LiveViewConfig(max_fps=4.0, stalled_after_s=2.0)
    names = list(CAMERAS)  # the running cameras; a reload may change them
    routes = LiveRoutes(live, lambda: names, lambda: capture, metrics, cfg)
    srv = WebServer(build_app(metrics, Health(), installers=[routes.install]), "127.0.0.1", 0)
    srv.start()
    try:
        yield Served(live, metrics, srv.port, capture, names)
    finally:
        srv.stop()


def read_mjpeg_frames(port: int, camera: str, n: int) -> tuple[list[bytes], float]:
    """Read ``n`` JPEG parts of a camera's MJPEG stream; returns them and the seconds it took."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", f"/cameras/{camera}/stream.mjpeg")
        resp = conn.getresponse()
        assert resp.status == 200
        assert resp.getheader("Content-Type") == f"multipart/x-mixed-replace; boundary={BOUNDARY}"
        frames = []
        t0 = time.monotonic()
        while len(frames) < n:
            line = resp.readline()
            if not line.strip():
                continue
            assert line.strip() == f"--{BOUNDARY}".encode(), line
            headers = {}
            while (h := resp.readline().strip()) != b"":
                key, _, value = h.decode().partition(":")
                headers[key.lower()] = value.strip()
            assert headers["content-type"] == "image/jpeg"
            frames.append(resp.read(int(headers["content-length"])))
        return frames, time.monotonic() - t0
    finally:
        conn.close()


def feed(live: LiveView, camera: str, image: np.ndarray, stop: threading.Event) -> None:
    """Produce results as fast as possible until ``stop``; each frame differs (a moving bar)."""
    seq = 0
    while not stop.is_set():
        img = image.copy()
        img[:, (seq * 7) % img.shape[1]] = 255
        live.handle(make_result(camera, seq, img))
        seq += 1
        time.sleep(0.002)


def test_no_viewer_no_encoding_then_one_encode_per_frame(served: Served, image) -> None:
    for seq in range(200):
        served.live.handle(make_result("front", seq, image))
    assert served.encoded("front") == 0  # nobody watched: not one JPEG
    status, body, headers = served.get("/cameras/front/latest.jpg")
    assert status == 200 and headers["Content-Type"] == "image/jpeg"
    assert headers["X-Frame-Seq"] == "199"
    assert served.encoded("front") == 1
    assert served.get("/cameras/front/latest.jpg")[0] == 200
    assert served.encoded("front") == 1  # same frame again: the cached bytes
    decoded = cv2.imdecode(np.frombuffer(body, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == image.shape
    # annotated: around the box edges the JPEG is far closer to the drawn frame than to the raw
    drawn = draw_detections(image, make_result("front", 0, image).detections, LABELS)
    changed = np.any(drawn != image, axis=2)  # the box lines and the caption
    assert changed.sum() > 500
    to_drawn = np.abs(decoded[changed].astype(int) - drawn[changed]).mean()
    to_raw = np.abs(decoded[changed].astype(int) - image[changed]).mean()
    assert to_drawn < 0.7 * to_raw, (to_drawn, to_raw)


def test_mjpeg_frames_change_are_capped_per_viewer_and_stop_encoding_after(
    served: Served, image
) -> None:
    stop = threading.Event()
    producer = threading.Thread(target=feed, args=(served.live, "front", image, stop))
    producer.start()
    try:
        frames, took_s = read_mjpeg_frames(served.port, "front", 6)
        produced = served.live.version("front")
    finally:
        stop.set()
        producer.join(10)
    assert len(set(frames)) == 6  # every part is a newer frame
    # max_fps=4: the first part goes out at once, then one per 0.25 s at most
    assert len(frames) <= 1 + math.floor(took_s * 4.0) + 1
    assert produced > 6 * 3  # the producer was much faster than the cap ...
    assert served.encoded("front") <= len(frames) + 1  # ... but only sent frames were encoded
    wait_for(lambda: served.viewers("front") == 0, 10, "the viewer gauge to return to 0")
    before = served.encoded("front")
    for seq in range(50):
        served.live.handle(make_result("front", 10_000 + seq, image))
    assert served.encoded("front") == before


def test_unknown_cameras_and_path_tricks_are_404(served: Served, image) -> None:
    served.live.handle(make_result("front", 1, image))
    tricks = [
        "/cameras/nope/latest.jpg",
        "/cameras/nope/stream.mjpeg",
        "/cameras/FRONT/latest.jpg",
        "/cameras/..%2Ffront/latest.jpg",
        "/cameras/front%2F..%2Fback/latest.jpg",
        "/cameras/%2e%2e/latest.jpg",
        "/cameras/..%2F..%2Fetc%2Fpasswd/latest.jpg",
        "/cameras/front%00/latest.jpg",
        "/cameras/front/../../metrics/latest.jpg",
        "/cameras/front/latest.png",
        "/static/..%2F..%2Fconfig.py",
        "/static/..%2Fserver.py",
        "/static/%2e%2e/live.py",
        "/static/live.py",
        "/static/",
    ]
    for path in tricks:
        status, body, _ = served.get(path)
        assert status == 404, (path, status, body[:200])
        assert not body.startswith(b"\xff\xd8"), path  # never a JPEG
    assert served.get("/cameras/front/latest.jpg")[0] == 200
    assert served.get("/cameras/back/latest.jpg")[0] == 503  # known, no frame yet
    served.names.remove("front")  # a reload stopped it: gone from the view
    assert served.get("/cameras/front/latest.jpg")[0] == 404
    cams = json.loads(served.get("/api/cameras")[1])["cameras"]
    assert [c["name"] for c in cams] == ["back"]


def test_page_and_its_files_are_served_without_external_assets(served: Served) -> None:
    status, body, headers = served.get("/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    page = body.decode()
    assert 'name="viewport"' in page and "/static/app.js" in page
    for name, kind in (("app.js", "text/javascript"), ("app.css", "text/css")):
        status, body, headers = served.get(f"/static/{name}")
        assert status == 200 and headers["Content-Type"].startswith(kind)
        assert b"http://" not in body and b"https://" not in body  # no CDN, no remote fonts
    assert "http://" not in page and "https://" not in page


def test_api_cameras_reports_state_rates_and_last_detections(served: Served, image) -> None:
    for seq in range(10):
        served.live.handle(make_result("front", seq, image, boxes=2))
        time.sleep(0.01)
    served.metrics.camera("front").drop("too_old", 3)
    served.metrics.camera("front").drop("overwritten", 2)
    status, body, _ = served.get("/api/cameras")
    assert status == 200
    cams = {c["name"]: c for c in json.loads(body)["cameras"]}
    assert list(cams) == list(CAMERAS)
    front, back = cams["front"], cams["back"]
    assert front["state"] == "streaming" and front["streaming"] is True
    assert back["state"] == "backoff" and back["streaming"] is False
    assert front["fps_in"] == 25.0 and front["fps_out"] > 0
    assert 30 <= front["latency_p95_ms"] <= 60  # t_done - t_capture = 40 ms in make_result
    assert front["drops"] == 5 and front["drops_by_reason"]["too_old"] == 3
    assert [d["label"] for d in front["last_detections"]] == ["car", "car"]
    assert front["frame"] == 9 and back["frame"] is None
    # streaming, but no frame for longer than stalled_after_s: shown as stalled
    served.capture["front"] = {"state": "streaming", "fps_in": 0.0, "last_frame_age_s": 3.5}
    front = json.loads(served.get("/api/cameras")[1])["cameras"][0]
    assert front["state"] == "stalled" and front["capture_state"] == "streaming"


def test_api_stats_has_the_same_figures_as_metrics(served: Served) -> None:
    cm = served.metrics.camera("front")
    cm.captured.inc(42)
    cm.inferred.inc(40)
    cm.drop("decimated", 2)
    cm.detections("person", 7)
    cm.e2e_latency.observe(0.05)
    served.metrics.sink_dropped.labels(sink="jsonl", reason="queue_full").inc(4)
    served.metrics.model("m").inflight.set(3)
    stats = json.loads(served.get("/api/stats")[1])
    metrics_text = served.get("/metrics")[1].decode()
    front = stats["cameras"]["front"]
    expected = {
        'vidpipe_frames_captured_total{camera="front"}': front["frames_captured_total"],
        'vidpipe_frames_inferred_total{camera="front"}': front["frames_inferred_total"],
        'vidpipe_frames_dropped_total{camera="front",reason="decimated"}': front[
            "frames_dropped_total"
        ]["decimated"],
        'vidpipe_detections_total{camera="front",class="person"}': front["detections_total"][
            "person"
        ],
        'vidpipe_end_to_end_latency_seconds_count{camera="front"}': front[
            "end_to_end_latency_seconds_count"
        ],
        'vidpipe_sink_dropped_total{reason="queue_full",sink="jsonl"}': stats["sinks"]["jsonl"][
            "sink_dropped_total"
        ]["queue_full"],
        'vidpipe_inflight_requests{model="m"}': stats["pipeline"]["inflight_requests"]["m"],
    }
    for series, value in expected.items():
        assert f"{series} {value!r}" in metrics_text, series
    assert front["frames_captured_total"] == 42.0


def test_token_login_sets_a_cookie_that_opens_the_view(image) -> None:
    token = "view-token-0123456789"
    metrics = Metrics()
    live = LiveView(draw_detections, metrics)
    routes = LiveRoutes(live, lambda: CAMERAS, dict, metrics, LiveViewConfig(), token)
    srv = WebServer(
        build_app(metrics, Health(), token=token, installers=[routes.install]), "127.0.0.1", 0
    )
    srv.start()
    live.handle(make_result("front", 1, image))

    def request(method: str, path: str, body: str = "", cookie: str = "") -> Any:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if cookie:
            headers["Cookie"] = cookie
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        resp.body = resp.read()
        conn.close()
        return resp

    try:
        first = request("GET", "/")
        assert first.status == 303 and first.getheader("Location") == "/login"
        form = request("GET", "/login")
        assert form.status == 200 and b'name="token"' in form.body and b"<style>" in form.body
        assert request("GET", "/api/cameras").status == 401
        assert request("GET", "/cameras/front/latest.jpg").status == 401
        wrong = request("POST", "/login", "token=not-the-token-at-all")
        assert wrong.status == 401 and b"not right" in wrong.body
        assert "Set-Cookie" not in dict(wrong.getheaders())
        ok = request("POST", "/login", f"token={token}")
        assert ok.status == 303 and ok.getheader("Location") == "/"
        cookie = ok.getheader("Set-Cookie")
        assert cookie.startswith(f"vidpipe_token={token};")
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        jar = cookie.split(";", 1)[0]
        assert request("GET", "/", cookie=jar).status == 200
        assert request("GET", "/api/cameras", cookie=jar).status == 200
        assert request("GET", "/cameras/front/latest.jpg", cookie=jar).status == 200
        assert request("GET", "/metrics", cookie="vidpipe_token=wrong-token-012345").status == 401
    finally:
        srv.stop()


class _Recorder:
    queue_size = 8

    def __init__(self, name: str, wants_images: bool) -> None:
        self.name = name
        self.wants_images = wants_images
        self.images: list[object] = []

    def handle(self, result: Any) -> None:
        self.images.append(result.image)

    def close(self) -> None:
        pass


def test_only_sinks_that_want_images_hold_frames(image) -> None:
    from vidpipe.sinks import SinkPool

    metrics = Metrics()
    live = LiveView(draw_detections, metrics)
    text, pictures = _Recorder("text", False), _Recorder("pictures", True)
    pool = SinkPool([live, text, pictures], metrics)
    assert pool.wants_images
    pool.start()
    try:
        pool.submit(make_result("front", 1, image))
        assert pool.flush(10)
    finally:
        pool.close(10)
    assert text.images == [None]  # a JSON-only sink's queue keeps no frame alive
    assert pictures.images[0] is image
    assert live.version("front") == 1
