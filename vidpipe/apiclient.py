"""A thin client of the daemon's HTTP API, for the ``vidpipe cameras`` and ``vidpipe events``
commands.

The token is read from a file (``--token-file``) or the environment (``VIDPIPE_TOKEN``), never
from the command line: argv is visible to every user of the machine (``ps``).
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_URL = "http://127.0.0.1:9108"
TOKEN_ENV = "VIDPIPE_TOKEN"


class ApiError(Exception):
    """The daemon answered with an error, or could not be reached (the message says which)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Response:
    status: int
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class ApiClient:
    """Requests to one daemon at ``url`` (``http://host:port``), with ``token`` if set."""

    url: str = DEFAULT_URL
    token: str | None = field(default=None, repr=False)
    timeout_s: float = 10.0

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """``method path`` with a JSON ``body``; the decoded JSON answer.

        Raises:
            ApiError: an answer of 400 or more (with the daemon's message), or no answer.
        """
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return Response(resp.status, dict(resp.headers.items()), _decode(resp.read()))
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, _error_message(exc)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ApiError(0, f"cannot reach the daemon at {self.url}: {reason}") from None


def _decode(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _error_message(exc: urllib.error.HTTPError) -> str:
    body = _decode(exc.read())
    if isinstance(body, dict):
        problems = body.get("problems")
        if isinstance(problems, list) and problems:
            return "\n".join(str(p) for p in problems)
        if "error" in body:
            return str(body["error"])
    return f"HTTP {exc.code} {exc.reason}"


def add_client_arguments(p: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token-file``, shared by every client command."""
    p.add_argument("--url", default=DEFAULT_URL, help=f"the daemon's HTTP address ({DEFAULT_URL})")
    p.add_argument(
        "--token-file",
        type=Path,
        help=f"a file holding the bearer token (else ${TOKEN_ENV}; never on the command line)",
    )


def client_from(args: argparse.Namespace) -> ApiClient:
    """The client ``--url`` and ``--token-file`` (or ``$VIDPIPE_TOKEN``) describe."""
    token = None
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise ApiError(0, f"--token-file: cannot read {args.token_file}: {exc}") from None
    else:
        token = os.environ.get(TOKEN_ENV) or None
    return ApiClient(args.url, token)
