"""Webhook sink: frame and event records POSTed as JSON, with filters, cool-down and retries.

The body is a record of ``vidpipe.sinks.record`` (the README's "Record format"). A frame
record is sent for a frame that still has detections after the filters (classes, minimum
score), unless its camera sent one less than ``cooldown_s`` ago (capture time). A failed POST
(network error, timeout, 408, 429 or 5xx) is retried with exponential backoff; after the last
attempt, or on any other 4xx, the event is dropped and counted
(``vidpipe_sink_dropped{reason="delivery_failed"|"rejected"}``). The pool's bounded queue in
front of the sink drops the oldest events while a slow endpoint holds it up (also counted).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import numpy as np

from vidpipe import __version__
from vidpipe.config import WebhookSinkConfig
from vidpipe.metrics import Metrics
from vidpipe.redact import redact_text, register_secret
from vidpipe.sinks.record import encode, event_record, frame_record
from vidpipe.types import FrameResult

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 425, 429})


def filter_detections(
    result: FrameResult, classes: frozenset[str] | None, min_score: float
) -> FrameResult:
    """``result`` with only the detections of ``classes`` (None: all) scoring ``min_score``+."""
    det = result.detections
    keep = det.score >= min_score
    if classes is not None:
        names = [result.labels.name(c) for c in det.class_id.tolist()]
        keep &= np.array([n in classes for n in names], dtype=bool).reshape(-1)
    if bool(keep.all()):
        return result
    return dataclasses.replace(result, detections=det.select(keep))


def _split_userinfo(url: str) -> tuple[str, dict[str, str]]:
    """``https://user:pw@host/x`` -> (``https://host/x``, a Basic ``Authorization`` header).

    urllib would take the user info for part of the host name.
    """
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, {}
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    register_secret(token)
    host = parts.netloc.rsplit("@", 1)[1]
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), {"Authorization": f"Basic {token}"}


class WebhookDeliveryError(RuntimeError):
    """An event could not be delivered (already counted as dropped)."""


class WebhookSink:
    """POSTs one JSON event per matching frame to ``cfg.url``.

    Args:
        name: the sink's unique name (metric label).
        cfg: URL, timeout, retries, filters and queue size.
        metrics: where skipped and dropped events are counted.
    """

    wants_images = False

    def __init__(self, name: str, cfg: WebhookSinkConfig, metrics: Metrics) -> None:
        self.name = name
        self.queue_size = cfg.queue_size
        self._cfg = cfg
        self._classes = frozenset(cfg.classes) if cfg.classes is not None else None
        self._url_shown = redact_text(cfg.url)
        self._url, auth = _split_userinfo(cfg.url)
        self._headers = {
            "Content-Type": "application/json",
            "User-Agent": f"vidpipe/{__version__}",
            **auth,
            **cfg.headers,
        }
        self._last_sent: dict[str, float] = {}
        self._closed = threading.Event()  # ends a retry wait at shutdown
        self._skipped = {
            r: metrics.sink_skipped.labels(sink=name, reason=r)
            for r in ("no_detections", "filtered", "cooldown")
        }
        self._dropped = {
            r: metrics.sink_dropped.labels(sink=name, reason=r)
            for r in ("delivery_failed", "rejected", "shutdown")
        }

    def handle(self, result: FrameResult) -> None:
        """POST ``result``'s zone and line event records, then its frame record.

        Event records are each POSTed on their own, whatever the cool-down (each one matters),
        when their class passes ``classes``. The frame record (with the detections that pass
        the filters) is sent if some pass and its camera is not cooling down.

        Raises:
            WebhookDeliveryError: an event was dropped after the retries (counted); the others
                of the frame were still tried.
        """
        failure: WebhookDeliveryError | None = None
        for event in result.events:
            label = getattr(event, "label", None)  # a reid match has no class: always sent
            if self._classes is not None and label is not None and label not in self._classes:
                self._skipped["filtered"].inc()
                continue
            body = encode(event_record(event))
            try:
                self._deliver(body, f"{result.camera}#{result.seq} {event.kind}")
            except WebhookDeliveryError as exc:
                failure = failure or exc
        self._handle_detections(result)
        if failure is not None:
            raise failure

    def _handle_detections(self, result: FrameResult) -> None:
        if result.events_only:
            return
        if len(result.detections) == 0:
            self._skipped["no_detections"].inc()
            return
        kept = filter_detections(result, self._classes, self._cfg.min_score)
        if len(kept.detections) == 0:
            self._skipped["filtered"].inc()
            return
        last = self._last_sent.get(result.camera)
        if last is not None and result.t_capture - last < self._cfg.cooldown_s:
            self._skipped["cooldown"].inc()
            return
        body = encode(frame_record(kept))
        self._deliver(body, f"{result.camera}#{result.seq}")
        self._last_sent[result.camera] = result.t_capture

    def close(self) -> None:
        """Abort a retry wait in progress. Idempotent."""
        self._closed.set()

    def _deliver(self, body: bytes, what: str) -> None:
        cfg = self._cfg
        delay_s = cfg.backoff_initial_s
        for attempt in range(cfg.retries + 1):
            problem, retry = self._post(body)
            if problem is None:
                return
            if not retry:
                self._dropped["rejected"].inc()
                raise WebhookDeliveryError(f"{self._url_shown} rejected event {what}: {problem}")
            if attempt == cfg.retries:
                break
            log.debug("webhook %s: %s; retry in %.1f s", self.name, problem, delay_s)
            if self._closed.wait(delay_s):
                self._dropped["shutdown"].inc()
                return
            delay_s = min(delay_s * 2, cfg.backoff_max_s)
        self._dropped["delivery_failed"].inc()
        raise WebhookDeliveryError(
            f"event {what} not delivered to {self._url_shown} after {cfg.retries + 1} "
            f"attempt(s): {problem}"
        )

    def _post(self, body: bytes) -> tuple[str | None, bool]:
        """One POST: (None, _) on 2xx, else (what went wrong, whether to retry)."""
        request = urllib.request.Request(self._url, data=body, headers=self._headers, method="POST")
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=self._cfg.timeout_s) as resp:
                resp.read()
                return None, False
        except urllib.error.HTTPError as exc:
            code = exc.code
            retry = code >= 500 or code in _RETRY_STATUS
            return f"HTTP {code}", retry
        except (OSError, ValueError) as exc:  # refused, reset, timeout, DNS, bad URL
            reason = getattr(exc, "reason", exc)
            took = time.monotonic() - t0
            return redact_text(f"{type(exc).__name__}: {reason} after {took:.1f} s"), True
