"""What a control API request does, without HTTP: the rules of runtime camera changes.

A change goes the way of a SIGHUP reload: the drop-in text it would write is validated with
the main file and every other drop-in by ``load_config`` (the code a restart runs), the
daemon diffs the new config against the running one and applies only that, all under the
daemon's one reload lock. The drop-in is written (atomically) before the change is applied
and put back if the apply is refused, so the files and the running pipeline agree.

Cameras of the main file are read-only here: the main file is never rewritten, and a
drop-in of the same name would be an error at the next start. A request to change one is a
409 that names the file.

ETags are an HMAC of the camera's resolved config under a key made at start: a credential
changed alone still changes the ETag, and no hash of a credential leaves the process.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import secrets
import threading
from pathlib import Path
from typing import Any, Protocol

import yaml
from pydantic import BaseModel

from vidpipe import redact
from vidpipe.config import CameraConfig, Config, ConfigError
from vidpipe.config.dropins import dropin_files, dropin_path
from vidpipe.fileio import write_atomic
from vidpipe.infer.base import BackendError
from vidpipe.reload import ConfigDiff

log = logging.getLogger(__name__)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")


class Runtime(Protocol):
    """What the control API needs of the daemon (``vidpipe.daemon.Daemon`` is one)."""

    cfg: Config
    config_path: Path | None
    reload_lock: threading.Lock

    def load(self, dropins: dict[str, str | None] | None = None) -> Config: ...

    def reload(self, new_cfg: Config) -> ConfigDiff: ...

    def capture_stats(self) -> dict[str, dict[str, Any]]: ...


class ControlError(Exception):
    """A refused request: the HTTP status, a message, and the config problems if any."""

    def __init__(self, status: int, message: str, problems: list[str] | None = None) -> None:
        super().__init__(redact.redact_text(message))
        self.status = status
        self.problems = [redact.redact_text(p) for p in problems or []]

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "problems": self.problems}


def masked(model: BaseModel) -> Any:
    """``model`` as JSON data with every secret masked: fields marked secret, URL passwords
    and any registered secret inside another text."""
    out: dict[str, Any] = {}
    for name, field in type(model).model_fields.items():
        extra = field.json_schema_extra
        secret = isinstance(extra, dict) and extra.get("secret") is True
        out[name] = _masked_value(getattr(model, name), secret)
    return out


def _masked_value(value: Any, secret: bool) -> Any:
    if isinstance(value, BaseModel):
        return masked(value)
    if isinstance(value, list | tuple):
        return [_masked_value(v, secret) for v in value]
    if isinstance(value, dict):
        return {k: _masked_value(v, secret) for k, v in value.items()}
    if isinstance(value, str):
        return redact.MASK if secret else redact.redact_text(value)
    if isinstance(value, Path):
        return str(value)
    return value


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: ``null`` removes a key, objects merge, the rest replaces."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class CameraControl:
    """The control API's operations on a running daemon (each call may block: the HTTP
    handlers run them in an executor)."""

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self._etag_key = secrets.token_bytes(32)

    # -- reading -----------------------------------------------------------------------------

    def etag(self, cam: CameraConfig) -> str:
        digest = hmac.new(self._etag_key, cam.model_dump_json().encode(), hashlib.sha256)
        return f'"{digest.hexdigest()[:32]}"'

    def cameras(self) -> list[dict[str, Any]]:
        """Every configured camera's view, in config order."""
        cfg, stats = self.rt.cfg, self.rt.capture_stats()
        return [self._view(cfg, c, stats) for c in cfg.cameras]

    def camera(self, name: str) -> dict[str, Any]:
        """One camera's view. Raises ControlError 404 for an unknown camera."""
        return self._view(self.rt.cfg, self._find(self.rt.cfg, name), self.rt.capture_stats())

    def config(self) -> Any:
        """The whole running config, secrets masked."""
        return masked(self.rt.cfg)

    def _view(self, cfg: Config, cam: CameraConfig, stats: dict[str, dict[str, Any]]) -> Any:
        own = stats.get(cam.name)
        if own is not None:
            state = str(own.get("state"))
        elif not cam.enabled:
            state = "disabled"
        else:  # enabled, owned by another shard of ``vidpipe run --shard``
            state = "paused" if cam.paused else "other shard"
        dropin = self._dropins().get(cam.name)
        return {
            "name": cam.name,
            "etag": self.etag(cam),
            "source": "api" if dropin else "main",
            "file": str(dropin or self.rt.config_path or "<memory>"),
            "state": state,
            "paused": cam.paused,
            "fps": round(float((own or {}).get("fps_in", 0.0)), 2),
            "config": masked(cam),
        }

    def _find(self, cfg: Config, name: str) -> CameraConfig:
        found = next((c for c in cfg.cameras if c.name == name), None)
        if found is None:
            raise ControlError(404, f"no camera named {name!r}")
        return found

    def _dropins(self) -> dict[str, Path]:
        path = self.rt.config_path
        return dropin_files(path) if path is not None else {}

    # -- writing -----------------------------------------------------------------------------

    def put(self, name: str, body: Any, if_match: str | None) -> tuple[dict[str, Any], bool]:
        """Create or replace camera ``name``; the view, and whether it was created."""
        body = self._camera_body(name, body)
        with self.rt.reload_lock:
            existed = self._writable(name, if_match) is not None
            self._apply(name, yaml.safe_dump(body, sort_keys=False))
            return self.camera(name), not existed

    def patch(self, name: str, patch: Any, if_match: str | None) -> dict[str, Any]:
        """Merge ``patch`` (RFC 7396) into camera ``name``'s stored body (its ``${VAR}``
        references are kept)."""
        if not isinstance(patch, dict):
            raise ControlError(422, "<body>: a merge patch must be a JSON object")
        with self.rt.reload_lock:
            self._writable(name, if_match, must_exist=True)
            body = self._camera_body(name, merge_patch(self._stored(name), patch))
            self._apply(name, yaml.safe_dump(body, sort_keys=False))
            return self.camera(name)

    def delete(self, name: str, if_match: str | None) -> None:
        """Remove camera ``name`` and its drop-in."""
        with self.rt.reload_lock:
            self._writable(name, if_match, must_exist=True)
            self._apply(name, None)

    def set_paused(self, name: str, paused: bool, if_match: str | None) -> dict[str, Any]:
        """Pause (stop capture and inference, keep the camera) or resume camera ``name``."""
        return self.patch(name, {"paused": paused}, if_match)

    def _camera_body(self, name: str, body: Any) -> dict[str, Any]:
        if not _NAME.fullmatch(name):
            raise ControlError(
                422,
                f"camera name {name!r}: may use only letters, digits, '_', '-', '.' (at most "
                "64) and must start with a letter or digit",
            )
        if not isinstance(body, dict):
            raise ControlError(422, "<body>: a camera must be a JSON object")
        if body.setdefault("name", name) != name:
            raise ControlError(
                422, f"name: {body['name']!r} in the body does not match {name!r} in the URL"
            )
        return body

    def _writable(
        self, name: str, if_match: str | None, must_exist: bool = False
    ) -> CameraConfig | None:
        """The camera as it runs (None: no such camera), if the API may change it and
        ``if_match`` (an ``If-Match`` header) holds.

        Preconditions come last, as RFC 9110 (13.2.1) orders them: a request that would fail
        without its ``If-Match`` (no such camera: 404; the main file's: 409) fails that way
        with it too; the body is checked after them (a stale ETag: 412, whatever it holds).
        """
        path = self.rt.config_path
        if path is None:
            raise ControlError(
                409, "this daemon runs a config with no file: nowhere to keep a change"
            )
        cam = next((c for c in self.rt.cfg.cameras if c.name == name), None)
        if cam is None and (must_exist or not _NAME.fullmatch(name)):
            raise ControlError(404, f"no camera named {name!r}")
        if cam is not None and name not in self._dropins():
            raise ControlError(
                409,
                f"camera {name!r} is defined in {path}: change it there and reload (SIGHUP); "
                "the API changes only the cameras it added (cameras.d/)",
            )
        if if_match is not None:
            tags = {t.strip() for t in if_match.split(",")}
            if cam is None or ("*" not in tags and self.etag(cam) not in tags):
                raise ControlError(412, f"camera {name!r} changed since that ETag was read")
        return cam

    def _stored(self, name: str) -> Any:
        """The camera's drop-in as written (references unresolved)."""
        assert self.rt.config_path is not None
        return yaml.safe_load(dropin_path(self.rt.config_path, name).read_text(encoding="utf-8"))

    def _apply(self, name: str, text: str | None) -> None:
        """Validate the change with every file, write (or remove) the drop-in, reload; the
        drop-in is put back if the reload refuses the config."""
        assert self.rt.config_path is not None
        try:
            new_cfg = self.rt.load({name: text})
        except ConfigError as exc:
            raise ControlError(
                422, "the camera is not valid; nothing changed", exc.problems
            ) from None
        path = dropin_path(self.rt.config_path, name)
        before = path.read_bytes() if path.exists() else None
        _write(path, None if text is None else text.encode())
        try:
            diff = self.rt.reload(new_cfg)
        except (ConfigError, BackendError) as exc:
            _write(path, before)
            problems = exc.problems if isinstance(exc, ConfigError) else [str(exc)]
            raise ControlError(422, "the change was refused; nothing changed", problems) from None
        except BaseException:
            _write(path, before)
            raise
        what = "removed" if text is None else "written"
        log.info("control API: %s %s; applied: %s", path.name, what, diff.summary())


def _write(path: Path, data: bytes | None) -> None:
    if data is None:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, data, mode=0o600)  # a drop-in may hold a literal credential
