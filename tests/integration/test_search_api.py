"""``/api/v1/search`` over a real socket: a store of real reid embeddings of the walkway
clip's visitors (``test_track_vectors``), searched by a stored track and by a JPEG crop
embedded by the real model; bad parameters, bodies and tokens."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import cv2
import pytest

from tests.component.test_event_store import result
from tests.component.test_track_vectors import (
    MIRROR_ID,
    VISITS,
    WINDOW,
    reid_embed,
    stored_tracks,
    visit_tracks,
)
from tests.integration.conftest import wait_for
from vidpipe.events import EventStore
from vidpipe.events.query import SearchAnswer
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.web import WebServer, build_app
from vidpipe.web.search import SearchRoutes

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
TOKEN = "search-token-0123456789"
ADMIN = "search-admin-0123456789"


def call(
    port: int,
    params: dict[str, str],
    body: bytes | None = None,
    content_type: str = "image/jpeg",
    token: str | None = TOKEN,
) -> tuple[int, dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/search?{urlencode(params)}"
    req = urllib.request.Request(url, data=body, method="GET" if body is None else "POST")
    if body is not None:
        req.add_header("Content-Type", content_type)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


def serve(path: Path, routes: SearchRoutes, metrics: Metrics) -> WebServer:
    app = build_app(metrics, Health(5.0), TOKEN, [routes.install], admin_token=ADMIN)
    srv = WebServer(app, "127.0.0.1", 0)
    srv.start()
    return srv


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory, assets_dir: Path) -> Path:
    metrics = Metrics()
    path = tmp_path_factory.mktemp("search") / "events.db"
    store = EventStore(path, metrics, max_age_days=30, queue_size=100)
    tracks = visit_tracks(assets_dir, reid_embed(assets_dir))
    for s in tracks:
        store.handle(result(s, camera=s.camera))
    wait_for(lambda: stored_tracks(metrics) == len(tracks), 10, "every track stored")
    store.close()
    return path


@pytest.fixture(scope="module")
def port(store_path: Path, assets_dir: Path) -> Iterator[int]:
    metrics = Metrics()
    routes = SearchRoutes(store_path, reid_embed(assets_dir), model="reid")
    srv = serve(store_path, routes, metrics)
    try:
        yield srv.port
    finally:
        srv.stop()


def test_a_stored_track_answers_the_same_person_first(port: int) -> None:
    status, answer = call(port, {"camera": "mirror", "track": str(MIRROR_ID + 3), "limit": "2"})
    assert status == 200, answer
    SearchAnswer.model_validate(answer)
    assert answer["query"]["camera"] == "mirror"
    first = answer["tracks"][0]
    assert (first["camera"], first["track_id"]) == ("walkway", 3)
    assert len(answer["tracks"]) == 2


def test_a_jpeg_of_a_person_answers_that_persons_tracks_first(port: int, assets_dir: Path) -> None:
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "one-by-one-person-detection.mp4"))
    a, b = VISITS[2]
    cap.set(cv2.CAP_PROP_POS_FRAMES, (a + b) // 2 + 2)  # a frame neither track averaged
    ok, frame = cap.read()
    cap.release()
    assert ok
    x1, y1, x2, y2 = WINDOW
    jpeg = cv2.imencode(".jpg", frame[y1:y2, x1:x2])[1].tobytes()
    status, answer = call(port, {"limit": "3"}, jpeg)  # a read: the read token will do
    assert status == 200, answer
    SearchAnswer.model_validate(answer)
    assert answer["query"] is None
    found = {(t["camera"], t["track_id"]) for t in answer["tracks"][:2]}
    assert found == {("walkway", 3), ("mirror", MIRROR_ID + 3)}, answer


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"camera": "walkway"}, "camera and track are required"),
        ({"camera": "walkway", "track": "x"}, "track: 'x' is not an integer"),
        ({"camera": "walkway", "track": "-1"}, "track: -1 is not a tracker id"),
        ({"camera": "walkway", "track": "1", "limit": "101"}, "limit: 101 is not between 1"),
        ({"camera": "walkway", "track": "1", "since": "soon"}, "since: 'soon' is neither"),
        ({"camera": "walkway", "track": "1", "tarck": "1"}, "unknown parameter(s) ['tarck']"),
    ],
)
def test_bad_parameters_are_a_400_that_says_what_is_wrong(port: int, params, says: str) -> None:
    status, body = call(port, params)
    assert status == 400
    assert says in body["error"]


def test_an_unknown_track_is_a_404_that_names_it(port: int) -> None:
    assert call(port, {"camera": "walkway", "track": "42"}) == (
        404,
        {"error": "no stored track 42 on camera 'walkway'"},
    )


@pytest.mark.parametrize(
    ("body", "content_type", "status", "says"),
    [
        (b"not an image", "image/jpeg", 400, "not a JPEG image"),
        (b"{}", "application/json", 415, "send image/jpeg"),
        (b"\xff" * (4 * 1024 * 1024 + 1), "image/jpeg", 413, "larger than 4194304 bytes"),
    ],
)
def test_bad_bodies_are_refused_with_their_reason(
    port: int, body: bytes, content_type: str, status: int, says: str
) -> None:
    got, answer = call(port, {}, body, content_type, token=ADMIN)
    assert got == status
    assert says in answer["error"]


def test_without_an_embedder_a_post_is_a_409_and_get_still_works(store_path: Path) -> None:
    srv = serve(store_path, SearchRoutes(store_path), Metrics())
    try:
        status, answer = call(srv.port, {}, b"\xff\xd8", token=ADMIN)
        assert status == 409 and "no re-identification model" in answer["error"]
        assert call(srv.port, {"camera": "walkway", "track": "1"})[0] == 200
    finally:
        srv.stop()


def test_the_routes_need_the_token_and_a_missing_store_is_a_503(port: int, tmp_path: Path) -> None:
    status, body = call(port, {"camera": "walkway", "track": "1"}, token=None)
    assert status == 401 and TOKEN not in json.dumps(body)
    srv = serve(tmp_path / "none.db", SearchRoutes(tmp_path / "none.db"), Metrics())
    try:
        status, body = call(srv.port, {"camera": "walkway", "track": "1"})
        assert status == 503 and "event store unavailable" in body["error"]
    finally:
        srv.stop()
