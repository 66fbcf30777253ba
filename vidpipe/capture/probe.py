"""Why did an RTSP camera not open? A short diagnosis OpenCV cannot give.

``cv2.VideoCapture`` reports only "not opened". After such a failure the worker asks this
module, which repeats the first steps of the connection itself with a short timeout: name
resolution, the TCP connect, then one RTSP ``DESCRIBE`` (answering a Basic or Digest challenge
with the camera's credentials). The answer becomes the ``reason`` label of
``vidpipe_camera_errors_total`` and the backoff log line, for example ``unauthorized (RTSP 401
Unauthorized)``.

The probe sends credentials only to the camera's own address, as FFmpeg does. It never
returns or logs them.
"""

from __future__ import annotations

import base64
import hashlib
import re
import socket
import urllib.parse
from dataclasses import dataclass

REASONS = (
    "host_not_found",
    "connection_refused",
    "unreachable",
    "unauthorized",
    "not_found",
    "rtsp_error",
    "open_failed",
)
"""Every reason the probe returns (``open_failed``: the server answered, OpenCV still failed)."""

_STATUS = re.compile(rb"^RTSP/1\.\d (\d{3}) ?([^\r\n]*)")
_PARAM = re.compile(r'(\w+)=(?:"([^"]*)"|([^,\s]*))')


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The probe's verdict: a metric-label ``reason`` and a human ``detail`` (no secrets)."""

    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class _Target:
    host: str
    port: int
    url: str  # the request URL: no credentials
    user: str | None
    password: str | None


def _target(url: str) -> _Target:
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (322 if parts.scheme == "rtsps" else 554)
    netloc = host if ":" not in host else f"[{host}]"
    clean = urllib.parse.urlunsplit(
        (parts.scheme, f"{netloc}:{port}", parts.path or "/", parts.query, "")
    )
    user = urllib.parse.unquote(parts.username) if parts.username is not None else None
    pw = urllib.parse.unquote(parts.password) if parts.password is not None else None
    return _Target(host, port, clean, user, pw)


def diagnose(url: str, timeout_s: float = 3.0, *, describe: bool = True) -> Diagnosis:
    """Find out why ``url`` (rtsp:// or rtsps://) does not open. Never raises.

    With ``describe=False`` only name resolution and the TCP connect are tried (a reachable
    server gives ``open_failed``): enough to keep a dead camera off OpenCV's open lock, without
    an RTSP request that could leave a prepared media behind on the server.
    """
    try:
        target = _target(url)
    except ValueError as exc:
        return Diagnosis("open_failed", f"unparsable URL ({exc.__class__.__name__})")
    try:
        socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError:
        return Diagnosis("host_not_found", f"cannot resolve host {target.host!r}")
    try:
        sock = socket.create_connection((target.host, target.port), timeout=timeout_s)
    except ConnectionRefusedError:
        where = f"{target.host}:{target.port}"
        return Diagnosis("connection_refused", f"{where} refused the connection")
    except OSError as exc:
        why = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or "failed")
        return Diagnosis("unreachable", f"connect to {target.host}:{target.port} {why}")
    if not describe:
        sock.close()
        return Diagnosis("open_failed", "the server accepts connections")
    if url.lower().startswith("rtsps://"):
        sock.close()  # TLS cameras: the TCP port answers; say no more than that
        return Diagnosis("open_failed", "the server accepts connections; RTSP over TLS failed")
    with sock:
        try:
            return _describe(sock, target)
        except OSError as exc:
            return Diagnosis("unreachable", f"RTSP exchange failed: {exc.strerror or exc}")


def _describe(sock: socket.socket, target: _Target) -> Diagnosis:
    status, reason, headers = _request(sock, target.url, 1, None)
    if status == 401 and target.user is not None:
        auth = _authorization(headers.get("www-authenticate", ""), target)
        if auth is not None:
            status, reason, headers = _request(sock, target.url, 2, auth)
    detail = f"RTSP {status} {reason}".strip()
    if status == 200:
        return Diagnosis("open_failed", f"the server answers ({detail}); decoding failed")
    if status == 401:
        creds = "wrong credentials" if target.user is not None else "no credentials given"
        return Diagnosis("unauthorized", f"{creds} ({detail})")
    if status == 404:
        return Diagnosis("not_found", f"no stream at this path ({detail})")
    if status == 0:
        return Diagnosis("rtsp_error", "the server did not answer RTSP")
    return Diagnosis("rtsp_error", detail)


def _request(
    sock: socket.socket, url: str, cseq: int, authorization: str | None
) -> tuple[int, str, dict[str, str]]:
    lines = [f"DESCRIBE {url} RTSP/1.0", f"CSeq: {cseq}", "Accept: application/sdp"]
    if authorization:
        lines.append(f"Authorization: {authorization}")
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    head = data.split(b"\r\n\r\n", 1)[0]
    m = _STATUS.match(head)
    if m is None:
        return 0, "", {}
    headers: dict[str, str] = {}
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body_len = int(headers.get("content-length", "0") or 0)
    body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    while len(body) < body_len:  # drain the body so a second request starts clean
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return int(m.group(1)), m.group(2).decode("latin-1"), headers


def _authorization(challenge: str, target: _Target) -> str | None:
    """The Authorization header answering a Basic or Digest (MD5) challenge."""
    user, pw = target.user or "", target.password or ""
    scheme = challenge.split(" ", 1)[0].lower()
    if scheme == "basic":
        return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
    if scheme == "digest":
        params = {k.lower(): a or b for k, a, b in _PARAM.findall(challenge)}
        realm, nonce = params.get("realm", ""), params.get("nonce", "")

        def md5(s: str) -> str:
            return hashlib.md5(s.encode(), usedforsecurity=False).hexdigest()

        response = md5(f"{md5(f'{user}:{realm}:{pw}')}:{nonce}:{md5(f'DESCRIBE:{target.url}')}")
        return (
            f'Digest username="{user}", realm="{realm}", nonce="{nonce}", '
            f'uri="{target.url}", response="{response}"'
        )
    return None
