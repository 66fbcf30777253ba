"""``GET /api/v1/events`` over a real socket: filters, the cursor, bad parameters, the token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.component.test_event_store import T0, result, track_event
from tests.integration.conftest import wait_for
from vidpipe.events import EventStore
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.web import WebServer, build_app
from vidpipe.web.events import EventRoutes

pytestmark = pytest.mark.timeout(60)
TOKEN = "events-token-0123456789"


def get(port: int, params: dict[str, str], token: str | None = TOKEN) -> tuple[int, dict]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/v1/events?{urlencode(params)}")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    metrics = Metrics()
    store = EventStore(tmp_path / "events.db", metrics, max_age_days=1, queue_size=100)
    for i in range(7):
        store.handle(result(track_event("enter" if i % 2 else "leave", T0 + i, i)))
    routes = EventRoutes(store.path)
    srv = WebServer(build_app(metrics, Health(5.0), TOKEN, [routes.install]), "127.0.0.1", 0)
    srv.start()
    try:
        stored = metrics.events_stored
        wait_for(lambda: sum(stored.labels(kind=k)._value.get() for k in ("enter", "leave")) == 7,
                 10, "7 events stored")  # fmt: skip
        yield srv.port
    finally:
        srv.stop()
        store.close()


def test_pages_of_the_api_cover_every_event_once(port: int) -> None:
    seen, params = [], {"camera": "walkway", "limit": "3"}
    while True:
        status, page = get(port, params)
        assert status == 200, page
        seen += [e["tracker_id"] for e in page["events"]]
        if not page["next_cursor"]:
            break
        params = {**params, "cursor": page["next_cursor"]}
    assert seen == [6, 5, 4, 3, 2, 1, 0]
    status, page = get(port, {"kind": "enter", "after": "1970-01-01T00:00:00Z"})
    assert [e["tracker_id"] for e in page["events"]] == [5, 3, 1]
    assert get(port, {"camera": "nowhere"}) == (200, {"events": [], "next_cursor": None})


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"kind": "exit"}, "kind: 'exit' is not one of enter, leave, cross, clip"),
        ({"limit": "0"}, "limit: 0 is not between 1 and 1000"),
        ({"limit": "ten"}, "limit: 'ten' is not an integer"),
        ({"after": "yesterday"}, "after: 'yesterday' is neither"),
        ({"after": "20", "before": "10"}, "after must be earlier than before"),
        ({"cursor": "bm9wZQ"}, "cursor: not a cursor this server returned"),
        ({"camrea": "walkway"}, "unknown parameter(s) ['camrea']"),
    ],
)
def test_bad_parameters_are_a_400_that_says_what_is_wrong(port: int, params, says: str) -> None:
    status, body = get(port, params)
    assert status == 400
    assert says in body["error"]


def test_the_route_needs_the_token(port: int) -> None:
    status, body = get(port, {}, token=None)
    assert status == 401
    assert TOKEN not in json.dumps(body)
