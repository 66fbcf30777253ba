"""``vidpipe cameras``: list, show, add, change, pause, resume and remove cameras of a running
daemon, as a thin client of its control API (``/api/v1``, docs/api.md).

Writes need ``http.admin_token``, read from ``--token-file`` or ``$VIDPIPE_TOKEN``, never from
the command line. Values given with ``--set key=value`` are read as YAML (``detect_fps=5``
is a number, ``loop=true`` a boolean); a dotted key sets a nested one (``motion.enabled=true``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from vidpipe.apiclient import ApiError, add_client_arguments, client_from


def add_parser(sub: Any) -> None:
    """Register ``cameras`` and its verbs on the CLI's subparsers."""
    p = sub.add_parser("cameras", help="list and change the cameras of a running daemon")
    verbs = p.add_subparsers(dest="verb", required=True)
    add_client_arguments(verbs.add_parser("list", help="every camera and its state"))
    for verb, what in (
        ("show", "one camera's config and state"),
        ("rm", "remove a camera added through the API"),
        ("pause", "stop a camera's capture and inference, keep it"),
        ("resume", "start a paused camera again"),
    ):
        v = verbs.add_parser(verb, help=what)
        v.add_argument("name")
        add_client_arguments(v)
    v = verbs.add_parser("add", help="add (or replace) a camera")
    v.add_argument("name")
    src = v.add_mutually_exclusive_group(required=True)
    # --url is the daemon's address (shared by every client command): the camera's is this
    src.add_argument("--camera-url", help="rtsp://, rtsps:// or a file; ${VAR} stays a reference")
    src.add_argument("--file", type=Path, help="a YAML file holding one camera")
    v.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    add_client_arguments(v)
    v = verbs.add_parser("set", help="change keys of a camera (a merge patch)")
    v.add_argument("name")
    v.add_argument("pairs", nargs="+", metavar="KEY=VALUE")
    add_client_arguments(v)
    p.set_defaults(func=cmd_cameras)


def assignments(pairs: list[str]) -> dict[str, Any]:
    """``["a.b=1", "c=x"]`` as ``{"a": {"b": 1}, "c": "x"}`` (values read as YAML)."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ApiError(400, f"{pair!r}: expected KEY=VALUE")
        *parents, last = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = yaml.safe_load(value) if value else None
    return out


def _body(args: argparse.Namespace) -> dict[str, Any]:
    if args.file is not None:
        try:
            body = yaml.safe_load(args.file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise ApiError(400, f"--file {args.file}: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, f"--file {args.file}: expected one camera (a mapping)")
    else:
        body = {"url": args.camera_url}
    return {**body, **assignments(args.set)}


def cmd_cameras(args: argparse.Namespace) -> int:
    try:
        client = client_from(args)
        path = "/api/v1/cameras" + (f"/{args.name}" if args.verb != "list" else "")
        if args.verb == "list":
            for cam in client.request("GET", path).body["cameras"]:
                print(
                    f"{cam['name']:<24} {cam['state']:<12} {cam['fps']:>6.1f} fps  {cam['source']}"
                )
            return 0
        request = {
            "show": ("GET", path, None),
            "add": ("PUT", path, _body(args) if args.verb == "add" else None),
            "set": ("PATCH", path, assignments(args.pairs) if args.verb == "set" else None),
            "rm": ("DELETE", path, None),
            "pause": ("POST", f"{path}/pause", None),
            "resume": ("POST", f"{path}/resume", None),
        }[args.verb]
        body = client.request(*request).body
    except ApiError as exc:
        print(f"vidpipe cameras: {exc}", file=sys.stderr)
        return 2 if exc.status in (400, 404, 409, 412, 422) else 1
    if body is not None:
        print(json.dumps(body, indent=2))
    return 0
