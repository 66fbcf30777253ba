"""A camera's record input: its main stream, demuxed only, its packets fed to the clip ring.

A camera with ``inputs:`` detects on one stream (its ``detect`` input, read by the ordinary
``CaptureWorker`` as a ``url:`` camera is) and may record clips from another (its ``record``
input, usually the camera's full-size main stream). The record input is never decoded: this
worker opens it with PyAV, demuxes its video packets and hands each to the camera's packet tap
(the ``PacketRing`` the clip recorder reads), exactly as the detect worker would hand its own.
Demuxing costs a small fraction of decoding (``python -m benchmarks.record_input_cost``).

The two inputs are independent: each has its own connection, reconnects, backoff and state,
and losing one never stops the other. Clips are placed by packet arrival time (``monotonic``):
a trigger at a detect frame's ``t_capture`` cuts the record packets that arrived around it.

One thread per record input: it opens (bounded by ``open_timeout_ms``), reads (each read
bounded by ``read_timeout_ms``; no packet for ``stall_timeout_s`` is a stall), and on any
failure or end of stream waits its backoff (``capture/backoff.py``) and opens again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import av
import av.error
from av.bitstream import BitStreamFilterContext

from vidpipe.capture.backoff import Backoff
from vidpipe.capture.ffmpeg_log import attributed_to, opening
from vidpipe.capture.ffmpeg_log import install as install_ffmpeg_log
from vidpipe.capture.ffmpeg_log import last_error as ffmpeg_last_error
from vidpipe.capture.pyav_packets import tap_packet
from vidpipe.capture.pyav_source import (
    _ANNEXB_FILTERS,
    _params,
    classify,
    container_options,
)
from vidpipe.capture.session import check_transition
from vidpipe.capture.source import PacketTap, ReadTimeout, SourceError, StreamParams, TapPacket
from vidpipe.config import CameraConfig, CaptureConfig, InputConfig
from vidpipe.metrics import Metrics
from vidpipe.redact import redact_text
from vidpipe.types import CameraState

log = logging.getLogger(__name__)

ROLE = "record"


class PacketReader:
    """One connection to a record input: open, then its video packets, undecoded.

    Args:
        camera: the camera (for its name and, through ``container_options``, the RTSP
            options every capture source uses).
        url: the record input's URL.
        defaults: timeouts and probe settings shared by all cameras.
    """

    def __init__(self, camera: CameraConfig, url: str, defaults: CaptureConfig) -> None:
        self._camera = camera.model_copy(update={"url": url, "inputs": None})
        self._defaults = defaults
        self._container: Any = None
        self._packets: Iterator[Any] | None = None
        self._stream: Any = None
        self._bsf: Any = None
        self.params: StreamParams | None = None

    def open(self) -> StreamParams:
        """Connect and find the video stream; raises ``SourceError``."""
        install_ffmpeg_log()
        d = self._defaults
        try:
            with opening():
                self._container = av.open(
                    self._camera.url,
                    options=container_options(self._camera, d),
                    timeout=(d.open_timeout_ms / 1000.0, d.read_timeout_ms / 1000.0),
                )
        except (av.error.FFmpegError, OSError) as exc:
            has_user = urllib.parse.urlsplit(self._camera.url).username is not None
            raise classify(exc, True, ffmpeg_last_error(), has_user=has_user) from None
        video = self._container.streams.video
        if not video or not video[0].codec_context.width:
            self.close()
            raise SourceError("no_frames", "the record input has no video stream")
        self._stream = video[0]
        ctx = self._stream.codec_context
        extradata = bytes(ctx.extradata or b"")
        if ctx.name in _ANNEXB_FILTERS and extradata[:1] == b"\x01":  # avcC / hvcC form
            self._bsf = BitStreamFilterContext(_ANNEXB_FILTERS[ctx.name], self._stream)
        self.params = _params(self._stream)
        return self.params

    def read(self) -> list[TapPacket] | None:
        """The next demuxed packet(s) in Annex-B form, or None at the end of the stream.

        Raises:
            ReadTimeout: no packet within the read timeout (read again to go on).
            SourceError: the connection failed.
        """
        if self._packets is None:
            self._packets = self._container.demux(self._stream)
        try:
            packet = next(self._packets, None)
        except (av.error.ExitError, TimeoutError):
            self._packets = None
            raise ReadTimeout(f"no packet within {self._defaults.read_timeout_ms} ms") from None
        except (av.error.FFmpegError, OSError) as exc:
            self._packets = None
            said = ffmpeg_last_error() or getattr(exc, "strerror", "") or type(exc).__name__
            raise SourceError("read_failed", f"demux failed: {said}") from None
        if packet is None:
            return None
        if not packet.size:
            return []  # a demuxer's flush packet: no data
        if self._bsf is None:
            return [tap_packet(packet)]
        time_base = packet.time_base
        out = []
        for filtered in self._bsf.filter(packet):
            filtered.time_base = time_base
            out.append(tap_packet(filtered))
        return out

    def close(self) -> None:
        container, self._container = self._container, None
        self._packets = None
        if container is not None:
            container.close()


class RecordInputWorker:
    """Keeps one camera's record input connected and its packets flowing into ``tap``.

    Args:
        camera: the camera (``camera.record_input`` is the input read).
        defaults: timeouts and backoff shared by all cameras.
        tap: where the packets go (the camera's clip ring).
        metrics: the process's metrics (``vidpipe_camera_input_*{input="record"}``).
        clock: the monotonic clock of the stall watchdog.
    """

    def __init__(
        self,
        camera: CameraConfig,
        defaults: CaptureConfig,
        tap: PacketTap,
        metrics: Metrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        record = camera.record_input
        if record is None:
            raise ValueError(f"camera {camera.name!r} has no record input")
        self.camera = camera
        self.input: InputConfig = record
        self._defaults = defaults
        self._tap = tap
        self._clock = clock
        self._up = metrics.camera_input_up.labels(camera=camera.name, input=ROLE)
        self._reconnects_metric = metrics.camera_input_reconnects.labels(
            camera=camera.name, input=ROLE
        )
        self._up.set(0)
        self._url = redact_text(record.url)
        self._backoff = Backoff(defaults.backoff_initial_s, defaults.backoff_max_s)
        self._stop = threading.Event()
        self._state = CameraState.CONNECTING
        self._state_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._reader: PacketReader | None = None
        self.packets = 0
        self.reconnects = 0
        self.tap_errors = 0
        self.last_error = ""

    @property
    def name(self) -> str:
        return self.camera.name

    @property
    def state(self) -> CameraState:
        return self._state

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name=f"capture-{self.name}-record", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop reading; returns at once (``join`` waits). A read in progress ends within the
        read timeout."""
        self._stop.set()

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the thread; True if it ended."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning(
                    "camera %s: record input still running after %.1f s", self.name, timeout_s
                )
                return False
        return True

    def stats(self) -> dict[str, Any]:
        """What the status page shows of this input."""
        return {
            "role": ROLE,
            "state": self._state.value,
            "packets": self.packets,
            "reconnects": self.reconnects,
            "last_error": self.last_error,
        }

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            with attributed_to(self.name):
                self._loop()
        except Exception:  # a bug: make it visible; detection goes on without clips' input
            log.exception("camera %s: record input failed", self.name)
        finally:
            self._set_state(CameraState.STOPPED)

    def _loop(self) -> None:
        while not self._stop.is_set():
            reason, detail = self._session()
            if self._stop.is_set():
                return
            self.last_error = redact_text(f"{reason}: {detail}")
            step = self._backoff.next()
            self._set_state(CameraState.BACKOFF)
            log.warning(
                "camera %s: record input %s (%s); reconnecting in %.2f s (attempt %d) to %s",
                self.name,
                reason,
                redact_text(detail),
                step.delay_s,
                step.attempt,
                self._url,
            )
            if self._stop.wait(step.delay_s):
                return
            self.reconnects += 1
            self._reconnects_metric.inc()
            self._set_state(CameraState.CONNECTING)

    def _session(self) -> tuple[str, str]:
        """One connection, until it fails or the worker stops: why it ended."""
        reader = PacketReader(self.camera, self.input.url, self._defaults)
        try:
            try:
                params = reader.open()
            except SourceError as exc:
                return exc.reason, exc.detail
            announced = False
            last_packet_s = self._clock()
            stall_s = self._defaults.stall_timeout_s
            while not self._stop.is_set():
                try:
                    packets = reader.read()
                except ReadTimeout:
                    idle_s = self._clock() - last_packet_s
                    if idle_s > stall_s:
                        return "stalled", f"no packet for {idle_s:.1f} s"
                    continue
                except SourceError as exc:
                    return exc.reason, exc.detail
                if packets is None:
                    return "eof", "the stream ended"
                if not packets:
                    continue
                last_packet_s = self._clock()
                if not announced:
                    with self._tap_guard():
                        self._tap.on_stream(self.name, params)
                    announced = True
                    self._streaming(params)
                for packet in packets:
                    with self._tap_guard():
                        self._tap.on_packet(self.name, packet)
                self.packets += len(packets)
            return "stopped", "worker stopped"
        finally:
            reader.close()

    @contextlib.contextmanager
    def _tap_guard(self) -> Iterator[None]:
        """A tap that raises never ends the session (as ``capture/tap.py``): counted, and
        logged the first time."""
        try:
            yield
        except Exception:
            self.tap_errors += 1
            if self.tap_errors == 1:
                log.exception("camera %s: packet tap of the record input failed", self.name)

    def _streaming(self, params: StreamParams) -> None:
        self._backoff.reset()
        self._set_state(CameraState.STREAMING)
        log.info(
            "camera %s: record input streaming %dx%d %s from %s (demux only)",
            self.name,
            params.width,
            params.height,
            params.codec,
            self._url,
        )

    def _set_state(self, new: CameraState) -> None:
        with self._state_lock:
            old = self._state
            if old is new:
                return
            check_transition(old, new)
            self._state = new
        self._up.set(1 if new is CameraState.STREAMING else 0)
