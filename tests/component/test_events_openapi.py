"""``GET /api/v1/events`` as the OpenAPI document describes it: every parameter ``parse_query``
reads is documented with the bounds it enforces, and what ``run_query`` answers is an
``EventPage`` (the model the document's response schema is generated from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.component.test_event_store import T0, clip_event, result, track_event
from vidpipe.api.openapi import openapi_document
from vidpipe.events import EventStore
from vidpipe.events.query import (
    DEFAULT_LIMIT,
    KINDS,
    MAX_LIMIT,
    PARAMS,
    EventPage,
    EventQuery,
    QueryError,
    decode_cursor,
    encode_cursor,
    parse_query,
    run_query,
)
from vidpipe.metrics import Metrics

pytestmark = pytest.mark.timeout(60)


def test_the_document_lists_every_parameter_with_its_bounds() -> None:
    doc = openapi_document()
    op = doc["paths"]["/events"]["get"]
    params = {p["name"]: p for p in op["parameters"]}
    assert set(params) == set(PARAMS)
    assert all(p["in"] == "query" and not p["required"] for p in params.values())
    limit = params["limit"]["schema"]
    assert (limit["type"], limit["minimum"], limit["maximum"]) == ("integer", 1, MAX_LIMIT)
    assert limit["default"] == DEFAULT_LIMIT
    assert tuple(params["kind"]["schema"]["enum"]) == KINDS
    assert params["after"]["schema"]["anyOf"] == [
        {"type": "string", "format": "date-time"},
        {"type": "number"},
    ]
    ok = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/EventPage"}
    row = doc["components"]["schemas"]["EventRow"]
    assert row["additionalProperties"] is False and "record" in row["required"]
    for code in ("400", "401", "503"):
        problem = op["responses"][code]["content"]["application/json"]["schema"]
        assert problem == {"$ref": "#/components/schemas/Problem"}


def test_every_row_the_query_answers_is_an_event_row(tmp_path: Path) -> None:
    metrics = Metrics()
    store = EventStore(tmp_path / "events.db", metrics, max_age_days=1, queue_size=100)
    for i, kind in enumerate(("enter", "leave", "cross")):
        store.handle(result(track_event(kind, T0 + i, i)))
    store.handle(result(clip_event(tmp_path / "walkway", "c1", T0 - 1, T0 + 5, (0, 1))))
    store.close()
    page = run_query(store.path, EventQuery(limit=3))
    assert EventPage.model_validate(page).model_dump(mode="json")["events"][0]["kind"] == "clip"
    assert {e["kind"] for e in page["events"]} == {"clip", "cross", "leave"}
    assert page["next_cursor"] and decode_cursor(page["next_cursor"])
    rest = run_query(store.path, EventQuery(cursor=decode_cursor(page["next_cursor"])))
    assert [e.kind for e in EventPage.model_validate(rest).events] == ["enter"]


@pytest.mark.parametrize(
    "cursor",
    [
        encode_cursor(1.0, 2**63),  # past SQLite's INTEGER: was an OverflowError, a 500
        encode_cursor(1.0, True),  # type: ignore[arg-type]
        encode_cursor(float("inf"), 1),
        encode_cursor(float("nan"), 1),
        "W1s",  # "[[" : not JSON
        "!!!",
        "WzFd",  # [1]
    ],
)
def test_a_cursor_this_server_did_not_return_is_a_query_error(cursor: str) -> None:
    with pytest.raises(QueryError, match="cursor: not a cursor this server returned"):
        parse_query({"cursor": cursor})
