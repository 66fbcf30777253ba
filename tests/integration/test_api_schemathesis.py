"""The control API against its own OpenAPI document, by Schemathesis: requests generated from
``/api/v1/openapi.json`` (valid ones, and ones the document says are invalid) sent to a real
daemon with the admin token; no answer may be a 500, and every answer must be one the document
declares, with its declared content type, headers and schema.

``GET /events`` reads an event store that holds rows of every kind, written before the daemon
starts through the store's own sink API (``EventStore.handle``), so that its 200 answers carry
events to check against ``EventRow``, and its cursors can page.

Schemathesis 4 reads OpenAPI 3.1 (JSON Schema 2020-12) as it is: no experimental switch.
Each operation gets a bounded number of examples per mode (about a minute in all on 2 cores),
derandomized so that a run is repeatable.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.component.test_event_store import clip_event, result, track_event
from tests.integration.conftest import free_port, wait_for
from tests.integration.test_control_api import ADMIN, READER, base_config, file_camera, scrape
from vidpipe.events import EventStore
from vidpipe.metrics import Metrics

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

EXAMPLES = 100  # per operation and mode: 11 operations x 2 modes, each PUT a reload


def event_store(where: Path) -> Path:
    """An event store of 60 rows, each kind, two cameras, a clip that links its tracks'
    events; the newest ten minutes old (inside the default retention)."""
    path, metrics = where / "events.db", Metrics()
    store = EventStore(path, metrics, max_age_days=30, queue_size=1000)
    t0 = time.time() - 3600.0
    for i in range(57):
        kind = ("enter", "leave", "cross")[i % 3]
        event = track_event(kind, t0 + i * 50, i % 5, camera=("walkway", "door")[i % 2])
        store.handle(result(event, camera=event.camera))
    clip = clip_event(where / "clips" / "walkway", "20261130-041820-100", t0, t0 + 60, (0, 2))
    store.handle(result(clip))
    store.handle(result(track_event("enter", t0 + 3000, 7, label="car")))
    store.handle(result(track_event("cross", t0 + 3000, 8, label="car")))  # same ts: id orders
    store.close()
    count = metrics.events_stored
    assert sum(count.labels(kind=k)._value.get() for k in ("enter", "leave", "cross", "clip")) == 60
    return path


def checks() -> list[Any]:
    """What each answer is held to. Two checks are left out:

    * ``positive_data_acceptance``: the document carries the models' JSON Schema, not their
      cross-field rules (``realtime`` on an RTSP camera, a zone's class the model lacks), so
      a schema-valid camera may rightly get 422.
    * ``negative_data_rejection``: the config models coerce as YAML readers expect (pydantic's
      lax mode: ``true`` is 1 for an integer), so a body the schema calls invalid may be
      accepted. Invalid requests are still sent, and held to every check here.
    """
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    return [
        not_a_server_error,
        status_code_conformance,
        content_type_conformance,
        response_headers_conformance,
        response_schema_conformance,
    ]


def same_name(case: Any) -> Any:
    """A PUT body that gives a name gives its URL's: the one rule across path and body that
    the document cannot state (a body that differs is a 422, tested in test_control_api).
    Without it nearly every valid camera generated would be refused for that alone."""
    if isinstance(case.body, dict) and "name" in (case.path_parameters or {}):
        case.body["name"] = case.path_parameters["name"]
    return case


def run_operation(
    operation: Any, mode: Any, base_url: str, found: list[str], answers: Counter[str]
) -> None:
    """``EXAMPLES`` generated requests of one operation and mode; a failure is recorded in
    ``found`` (the smallest example Hypothesis shrank it to), not raised, so that every
    operation runs and the report lists them all."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis.errors import Unsatisfiable

    headers = {"Authorization": f"Bearer {ADMIN}"}
    strategy = operation.as_strategy(generation_mode=mode)
    if mode.value == "positive":  # a negative body stays as generated: invalid
        strategy = strategy.map(same_name)

    @settings(
        max_examples=EXAMPLES,
        deadline=None,  # a PUT waits for a reload: seconds on a loaded machine
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def test(case: Any) -> None:
        response = case.call_and_validate(
            base_url=base_url, headers=headers, checks=checks(), timeout=120
        )
        answers[f"{operation.label} ({mode.value}) {response.status_code}"] += 1
        if operation.label == "GET /events" and response.status_code == 200:
            answers[f"GET /events ({mode.value}) 200 with rows"] += bool(response.json()["events"])

    try:
        test()
    except Unsatisfiable:
        assert mode.value == "negative", operation.label  # nothing to make invalid: no body
    except (Exception, BaseExceptionGroup) as exc:  # the checks' FailureGroup, or the request's
        found.append(f"{operation.label} ({mode.value}):\n{exc}")


def pages_cover_the_store(base_url: str) -> None:
    """The daemon serves the store's 60 rows: two pages of 50 and 10, newest first."""
    seen: list[tuple[str, int]] = []
    cursor = ""
    for _ in range(2):
        req = urllib.request.Request(f"{base_url}/events?limit=50{cursor}")
        req.add_header("Authorization", f"Bearer {READER}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            page = json.loads(resp.read())
        seen += [(e["ts"], e["id"]) for e in page["events"]]
        cursor = f"&cursor={page['next_cursor']}" if page["next_cursor"] else ""
    assert not cursor and seen == sorted(seen, reverse=True), seen  # by time, then id
    assert sorted(i for _, i in seen) == list(range(1, 61)), seen


def test_the_api_answers_as_its_openapi_document_says(
    assets_dir: Path, tmp_path: Path, run_daemon: Any
) -> None:
    import schemathesis
    from schemathesis import GenerationMode

    port, out = free_port(), tmp_path / "results.jsonl"
    # one camera of the main file: the document's 409 answers are reachable
    main = file_camera(assets_dir, "main", realtime=True, detect_fps=1)
    events = {"enabled": True, "path": str(event_store(tmp_path))}
    cfg = {**base_config(assets_dir, port, out), "cameras": [main], "events": events}
    daemon = run_daemon(cfg)
    wait_for(lambda: scrape(port), 120, "the daemon to serve")
    base_url = f"http://127.0.0.1:{port}/api/v1"
    pages_cover_the_store(base_url)
    schema = schemathesis.openapi.from_url(
        f"{base_url}/openapi.json",
        config=schemathesis.Config(),  # not a schemathesis.toml found on the way
        headers={"Authorization": f"Bearer {READER}"},
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    # the cameras, config, events and search (GET and POST)
    assert len(operations) == 11, [op.label for op in operations]
    found: list[str] = []
    answers: Counter[str] = Counter()
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run_operation(operation, mode, base_url, found, answers)
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
    print("\n" + "\n".join(f"{n:4d}  {what}" for what, n in sorted(answers.items())))
    assert not found, "\n\n".join(found)
    # the events were read: pages of rows, and refused parameters
    assert answers["GET /events (positive) 200"] >= EXAMPLES // 2, answers
    assert answers["GET /events (positive) 200 with rows"] > 0, answers
    assert answers["GET /events (negative) 400"] > 0, answers
    assert "Traceback" not in daemon.log(), daemon.log()[-5000:]
    assert daemon.terminate(60) == 0, daemon.log()[-3000:]
