"""The control API's OpenAPI 3.1 document, generated from the config models.

OpenAPI 3.1 takes JSON Schema 2020-12 as its schema dialect, which is what pydantic's
``model_json_schema`` writes: the request bodies are the very models the YAML is validated
with, so the document cannot drift from the loader; ``/events`` and ``/search`` are
described by the event store's models (``vidpipe.events.query``: their parameters, a page of
rows, the tracks found). Nothing here is
written by hand but the list of paths and their answers.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import models_json_schema

from vidpipe.config import CameraConfig, Config
from vidpipe.events.query import EventPage, EventParams, SearchAnswer, SearchParams
from vidpipe.redact import MASK

_REF = "#/components/schemas/{model}"
NAME_SCHEMA = {
    "type": "string",
    "minLength": 1,
    "maxLength": 64,
    "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$",
}


class CameraView(BaseModel):
    """A camera as the API shows it: its config (secrets masked) and its live state."""

    model_config = ConfigDict(extra="forbid")
    name: str
    etag: str = Field(description="send it back in If-Match to change this version only")
    source: Literal["main", "api"] = Field(
        description="main: the main config file (read-only here); api: a cameras.d/ drop-in"
    )
    file: str = Field(description="the file that defines the camera")
    state: str = Field(
        description="connecting, streaming, backoff, stopped, paused, disabled, other shard"
    )
    paused: bool
    fps: float = Field(description="frames per second decoded, recently")
    config: CameraConfig


class CameraList(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cameras: list[CameraView]


class Problem(BaseModel):
    """Every error: a message and, for an invalid config, one line per problem with its
    path (``cameras[name=door].zones[0].points: ...``), as ``vidpipe check`` prints them."""

    error: str
    problems: list[str] = Field(default_factory=list)


_ERRORS = {
    "401": "no token, or a wrong one",
    "403": "the token may only read, or writes are off (set http.admin_token)",
    "404": "no such camera",
    "409": "the camera is defined in the main config file, which the API never rewrites",
    "412": "If-Match does not match the camera's current ETag",
    "422": "the body is not a valid camera (nothing changed)",
}
_EVENT_ERRORS = {
    "400": "an unknown parameter, an unknown kind, a bad time, limit or cursor",
    "401": _ERRORS["401"],
    "503": "the event store cannot be read (not created yet, or a version this vidpipe lacks)",
}


def _json(ref: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{ref}"}}}


def _op(summary: str, ok: tuple[str, str, str | None], errors: str, **extra: Any) -> Any:
    status, what, model = ok
    responses: dict[str, Any] = {status: {"description": what}}
    if model:
        responses[status]["content"] = _json(model)
        if model == "CameraView":
            responses[status]["headers"] = {"ETag": {"schema": {"type": "string"}}}
    for code in errors.split():
        responses[code] = {"description": _ERRORS[code], "content": _json("Problem")}
    return {"summary": summary, "responses": responses, **extra}


def _masks_allowed(schemas: dict[str, Any]) -> dict[str, Any]:
    """``schemas`` with the mask ("***") allowed wherever a secret field is a string: the API
    never shows a secret (``control.masked``), and "***" is shorter than a token may be.

    Every secret field is one of sections that only answers show (``http``, the sinks): no
    request body is loosened by this.
    """
    for schema in schemas.values():
        for name, prop in schema.get("properties", {}).items():
            if prop.get("secret") is not True:
                continue
            plain = {k: prop[k] for k in ("type", "minLength", "maxLength") if k in prop}
            alternatives = prop.get("anyOf") or [plain]
            if not any(a.get("type") == "string" for a in alternatives):
                continue  # a mapping of secrets (webhook headers): its values stay strings
            rest = {k: v for k, v in prop.items() if k != "anyOf" and k not in plain}
            schema["properties"][name] = {"anyOf": [*alternatives, {"const": MASK}], **rest}
    return schemas


def _schemas() -> dict[str, Any]:
    """The components' schemas: the models', with what the API adds to them.

    * A camera's name follows one rule (CameraConfig's validator), which JSON Schema can say
      as a pattern.
    * ``CameraBody``, what PUT takes: a camera whose ``name`` may be left out (the URL's is
      taken; a different one is a 422).
    * Masked secrets (``_masks_allowed``).
    """
    _, schemas = models_json_schema(
        [
            (CameraConfig, "validation"),
            (CameraView, "serialization"),
            (CameraList, "serialization"),
            (Problem, "serialization"),
            (Config, "serialization"),
            (EventPage, "serialization"),
            (SearchAnswer, "serialization"),
        ],
        ref_template=_REF,
    )
    defs: dict[str, Any] = schemas["$defs"]
    defs["CameraConfig"]["properties"]["name"].update(NAME_SCHEMA)
    body = copy.deepcopy(defs["CameraConfig"])
    body["required"] = [r for r in body.get("required", []) if r != "name"]
    body["title"] = "CameraBody"
    body["properties"]["name"]["description"] = "the URL's camera name, if given"
    defs["CameraBody"] = body
    return _masks_allowed(defs)


def _event_parameters() -> list[dict[str, Any]]:
    """``GET /events``'s query parameters, each the schema of its ``EventParams`` field (all
    optional; the limit's default is the model's)."""
    out = []
    for name, prop in EventParams.model_json_schema()["properties"].items():
        schema = {k: v for k, v in prop.items() if k not in ("title", "description")}
        where = {"name": name, "in": "query", "required": False, "schema": schema}
        out.append({**where, "description": prop["description"]})
    return out


def _events_operation() -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "a page", "content": _json("EventPage")}}
    for code, what in _EVENT_ERRORS.items():
        responses[code] = {"description": what, "content": _json("Problem")}
    responses["404"] = {"description": "the event store is off (events.enabled)"}
    return {
        "summary": "stored zone, line and clip events, newest first (docs/events.md)",
        "parameters": _event_parameters(),
        "responses": responses,
    }


_SEARCH_ERRORS = {
    "400": "an unknown or missing parameter, a bad track id, limit or time; POST: not a JPEG",
    "401": _ERRORS["401"],
    "503": "the event store cannot be read, or the re-identification model failed",
}
_SEARCH_POST_ERRORS = {
    "413": "the image is larger than 4 MiB",
    "415": "the body is not sent as image/jpeg",
    "409": "no re-identification model is configured",
}


def _search_parameters(names: tuple[str, ...]) -> list[dict[str, Any]]:
    """``/search``'s query parameters ``names``, each the schema of its ``SearchParams`` field;
    ``camera`` and ``track`` are required where they are taken."""
    out = []
    for name, prop in SearchParams.model_json_schema()["properties"].items():
        if name not in names:
            continue
        schema = {k: v for k, v in prop.items() if k not in ("title", "description")}
        required = name in ("camera", "track")
        where = {"name": name, "in": "query", "required": required, "schema": schema}
        out.append({**where, "description": prop["description"]})
    return out


def _search_operations() -> dict[str, Any]:
    """``GET /search`` (by a stored track) and ``POST /search`` (by a JPEG)."""
    ops: dict[str, Any] = {}
    for method, errors in (("get", _SEARCH_ERRORS), ("post", _SEARCH_ERRORS | _SEARCH_POST_ERRORS)):
        responses: dict[str, Any] = {
            "200": {
                "description": "the nearest tracks, best first",
                "content": _json("SearchAnswer"),
            }
        }
        for code, what in sorted(errors.items()):
            responses[code] = {"description": what, "content": _json("Problem")}
        # no content: the route is absent while the store is off (the server's own 404)
        responses["404"] = {"description": "no such track, or the event store is off"}
        ops[method] = {"responses": responses}
    ops["get"]["summary"] = "the stored tracks most like a stored track (docs/search.md)"
    ops["get"]["parameters"] = _search_parameters(("camera", "track", "limit", "since"))
    ops["post"]["summary"] = "the stored tracks most like a JPEG crop (docs/search.md)"
    ops["post"]["parameters"] = _search_parameters(("limit", "since"))
    ops["post"]["requestBody"] = {
        "required": True,
        "content": {"image/jpeg": {"schema": {"type": "string", "format": "binary"}}},
    }
    return ops


def _camera_paths() -> dict[str, Any]:
    """The config and camera operations: read, create, change, remove, pause, resume."""
    name = {"name": "name", "in": "path", "required": True, "schema": NAME_SCHEMA}
    if_match = {"name": "If-Match", "in": "header", "required": False}
    if_match["schema"] = {"type": "string"}
    view = ("200", "the camera", "CameraView")
    write = {"parameters": [name, if_match]}
    camera_body = {"required": True, "content": _json("CameraBody")}
    patch_body = {
        "required": True,
        "content": {"application/merge-patch+json": {"schema": {"type": "object"}}},
    }
    paths: dict[str, Any] = {
        "/config": {
            "get": _op("the running config, secrets masked", ("200", "config", "Config"), "401")
        },
        "/cameras": {"get": _op("every camera", ("200", "cameras", "CameraList"), "401")},
        "/cameras/{name}": {
            "get": _op("one camera", view, "401 404", parameters=[name]),
            "put": _op(
                "create or replace a camera",
                ("200", "replaced (201: created)", "CameraView"),
                "401 403 409 412 422",
                requestBody=camera_body,
                **write,
            ),
            "patch": _op(
                "merge a change (RFC 7396)",
                view,
                "401 403 404 409 412 422",
                requestBody=patch_body,
                **write,
            ),
            "delete": _op(
                "remove a camera and its drop-in",
                ("204", "removed", None),
                "401 403 404 409 412 422",
                **write,
            ),
        },
        "/cameras/{name}/pause": {
            "post": _op("stop capture and inference", view, "401 403 404 409 412 422", **write)
        },
        "/cameras/{name}/resume": {
            "post": _op("start again", view, "401 403 404 409 412 422", **write)
        },
    }
    paths["/cameras/{name}"]["put"]["responses"]["201"] = {
        "description": "created",
        "content": _json("CameraView"),
    }
    return paths


def openapi_document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document of ``/api/v1``."""
    paths = {
        **_camera_paths(),
        "/events": {"get": _events_operation()},
        "/search": _search_operations(),
    }
    return {
        "openapi": "3.1.0",
        "info": {"title": "vidpipe control API", "version": "1"},
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}, {}],
        "paths": paths,
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
