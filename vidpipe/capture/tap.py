"""Feeding one source's packets to a packet tap (see ``source.PacketTap``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from vidpipe.capture.source import PacketTap, Source, TapPacket

log = logging.getLogger(__name__)


class TapFeed:
    """The ``packet_listener`` of one source: ``on_stream`` first, then every packet and
    decoded picture.

    Runs on the reader thread. A tap that raises never ends the session: the failure is
    logged once per stream and reported to ``on_error`` (the worker counts it).
    """

    def __init__(
        self, camera: str, tap: PacketTap, source: Source, on_error: Callable[[], None]
    ) -> None:
        self._camera = camera
        self._tap = tap
        self._source = source
        self._on_error = on_error
        self._announced = False
        self._failed = False

    def __call__(self, packet: TapPacket) -> None:
        try:
            if not self._announced:
                params = self._source.info.stream
                if params is None:
                    return  # a source without stream parameters cannot be remuxed
                self._tap.on_stream(self._camera, params)
                self._announced = True
            self._tap.on_packet(self._camera, packet)
        except Exception:
            self._failure()

    def frame(self, pts: int | None) -> None:
        if not self._announced:
            return  # no packet of this stream yet: nothing to place the picture in
        try:
            self._tap.on_frame(self._camera, pts, time.monotonic())
        except Exception:
            self._failure()

    def _failure(self) -> None:
        self._on_error()
        if not self._failed:
            self._failed = True
            log.exception("camera %s: packet tap failed (logged once per stream)", self._camera)


class TapSwitch:
    """A worker's packet tap, which may be set or cleared at any time: each source the worker
    opens gets a feed to it; ``errors`` counts the tap's failures."""

    def __init__(self, camera: str) -> None:
        self.camera = camera
        self.tap: PacketTap | None = None
        self.errors = 0

    def feed(self, source: Source) -> TapFeed | None:
        return None if self.tap is None else TapFeed(self.camera, self.tap, source, self._failed)

    def _failed(self) -> None:
        self.errors += 1
