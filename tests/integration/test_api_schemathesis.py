"""The control API against its own OpenAPI document, by Schemathesis: requests generated from
``/api/v1/openapi.json`` (valid ones, and ones the document says are invalid) sent to a real
daemon with the admin token; no answer may be a 500, and every answer must be one the document
declares, with its declared content type, headers and schema.

Schemathesis 4 reads OpenAPI 3.1 (JSON Schema 2020-12) as it is: no experimental switch.
Each operation gets a bounded number of examples per mode (about a minute in all on 2 cores),
derandomized so that a run is repeatable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, wait_for
from tests.integration.test_control_api import ADMIN, READER, base_config, file_camera, scrape

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

EXAMPLES = 100  # per operation and mode: 8 operations x 2 modes, each PUT a reload


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


def run_operation(operation: Any, mode: Any, base_url: str, found: list[str]) -> None:
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
        case.call_and_validate(base_url=base_url, headers=headers, checks=checks(), timeout=120)

    try:
        test()
    except Unsatisfiable:
        assert mode.value == "negative", operation.label  # nothing to make invalid: no body
    except (Exception, BaseExceptionGroup) as exc:  # the checks' FailureGroup, or the request's
        found.append(f"{operation.label} ({mode.value}):\n{exc}")


def test_the_api_answers_as_its_openapi_document_says(
    assets_dir: Path, tmp_path: Path, run_daemon: Any
) -> None:
    import schemathesis
    from schemathesis import GenerationMode

    port, out = free_port(), tmp_path / "results.jsonl"
    # one camera of the main file: the document's 409 answers are reachable
    main = file_camera(assets_dir, "main", realtime=True, detect_fps=1)
    daemon = run_daemon({**base_config(assets_dir, port, out), "cameras": [main]})
    wait_for(lambda: scrape(port), 120, "the daemon to serve")
    base_url = f"http://127.0.0.1:{port}/api/v1"
    schema = schemathesis.openapi.from_url(
        f"{base_url}/openapi.json",
        config=schemathesis.Config(),  # not a schemathesis.toml found on the way
        headers={"Authorization": f"Bearer {READER}"},
    )
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 8, [op.label for op in operations]  # the cameras and config
    found: list[str] = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            run_operation(operation, mode, base_url, found)
            assert daemon.proc.poll() is None, daemon.log()[-3000:]
    assert not found, "\n\n".join(found)
    assert "Traceback" not in daemon.log(), daemon.log()[-5000:]
    assert daemon.terminate(60) == 0, daemon.log()[-3000:]
