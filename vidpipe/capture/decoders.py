"""The capture decoders as registered, and the state a pipeline's cameras share.

A decoder is a name declared in ``vidpipe.config.schema`` and one ``register_source`` call in
its module: the factory of its sources and, optionally, hooks the assembly calls for every
registered decoder (``check_decoders`` before anything starts, ``CaptureContext.bind_metrics``
and ``bind_camera_metrics`` when the pipeline starts), so the assembly names no decoder.

``CaptureContext`` is what the capture workers of one pipeline share: the read groups and
one instance of each decoder's shared state (``shared``; nvdec: its start-up gate and its
figures for the metrics). The pipeline makes one and hands it to each worker, and keeps it
across reloads; two pipelines of one process share nothing unless handed the same context.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from vidpipe.capture.group import ReadGroups
from vidpipe.capture.group_budget import SharedShare
from vidpipe.capture.source import Source
from vidpipe.config import CameraConfig, CaptureConfig, Config
from vidpipe.config.registry import CAPTURE_DECODERS
from vidpipe.metrics import Metrics

_T = TypeVar("_T")

SourceFactory = Callable[[CameraConfig, CaptureConfig, "CaptureContext"], Source]


@dataclass(frozen=True)
class DecoderKind:
    """A capture decoder as registered.

    Attributes:
        source: makes one camera's unopened source; it takes what it shares with the other
            cameras of its pipeline from the context (``CaptureContext.shared``).
        check: the config's problems that would stop this decoder's cameras at start-up (a
            library or device missing), each naming its YAML path; run before anything
            starts, also by ``vidpipe check``.
        bind_metrics: export the decoder's figures of the whole pipeline (read at scrape
            time); called once per pipeline start.
        bind_camera_metrics: export one camera's figures; called for each camera of this
            decoder when it starts.
    """

    source: SourceFactory
    check: Callable[[Config], list[str]] | None = None
    bind_metrics: Callable[[Metrics, Config, CaptureContext], None] | None = None
    bind_camera_metrics: Callable[[Metrics, CameraConfig, CaptureContext], None] | None = None


def register_source(
    decoder: str,
    source: SourceFactory,
    *,
    check: Callable[[Config], list[str]] | None = None,
    bind_metrics: Callable[[Metrics, Config, CaptureContext], None] | None = None,
    bind_camera_metrics: Callable[[Metrics, CameraConfig, CaptureContext], None] | None = None,
) -> DecoderKind:
    """Register ``decoder`` (declared in ``vidpipe.config.schema``): its sources and hooks."""
    kind = DecoderKind(source, check, bind_metrics, bind_camera_metrics)
    CAPTURE_DECODERS.register(decoder)(kind)
    return kind


def decoder_kind(decoder: str) -> DecoderKind:
    """The registration of ``decoder``; LookupError if none."""
    kind: DecoderKind = CAPTURE_DECODERS.factory(decoder)
    return kind


def check_decoders(cfg: Config) -> list[str]:
    """Every registered decoder's start-up problems with ``cfg`` (empty: none)."""
    kinds: dict[str, DecoderKind] = CAPTURE_DECODERS.factories
    return [p for kind in kinds.values() if kind.check is not None for p in kind.check(cfg)]


class CaptureContext:
    """What the capture workers of one pipeline share (made by the pipeline, kept across its
    reloads).

    Attributes:
        groups: the read groups of the pipeline's grouped cameras (``group.py``).
    """

    def __init__(self) -> None:
        self.groups = ReadGroups()
        self._lock = threading.Lock()  # sources are made on their cameras' reader threads
        self._shared: dict[type, Any] = {}

    def shared(self, kind: type[_T]) -> _T:
        """This context's one instance of ``kind``, made with no arguments on first use: the
        state that a decoder's sources share (``nvdec_source.NvdecShared``)."""
        with self._lock:
            if kind not in self._shared:
                self._shared[kind] = kind()
            found: _T = self._shared[kind]
            return found

    def close(self) -> None:
        """Release what the decoders' shared states hold beyond the cameras (an nvdec
        decode process): called once the pipeline's capture workers have stopped."""
        with self._lock:
            states = list(self._shared.values())
        for state in states:
            close = getattr(state, "close", None)
            if close is not None:
                close()

    def source(self, camera: CameraConfig, defaults: CaptureConfig) -> Source:
        """The unopened source for ``camera`` from its decoder (``capture.decoder`` unless the
        camera sets its own)."""
        return decoder_kind(camera.decoder or defaults.decoder).source(camera, defaults, self)

    def bind_metrics(self, metrics: Metrics, cfg: Config) -> None:
        """The share of groups decoded in full, and every registered decoder's pipeline-wide
        metrics."""
        shared = self.shared(SharedShare)
        metrics.gop_share.set_function(lambda: shared.share)
        kinds: dict[str, DecoderKind] = CAPTURE_DECODERS.factories
        for kind in kinds.values():
            if kind.bind_metrics is not None:
                kind.bind_metrics(metrics, cfg, self)

    def bind_camera_metrics(self, metrics: Metrics, cfg: Config, camera: CameraConfig) -> None:
        """The camera's decoder (``vidpipe_camera_decoder``) and that decoder's own metrics."""
        decoder = cfg.decoder_of(camera)
        metrics.camera_decoder.labels(camera=camera.name, decoder=decoder).set(1)
        hook = decoder_kind(decoder).bind_camera_metrics
        if hook is not None:
            hook(metrics, camera, self)
