"""What a capture worker reads from: the source interface, its errors and the packet tap.

A source is one connection to one camera (or one pass over a file). The worker owns every
policy around it (reconnects, backoff, the stall watchdog, pacing, decimation); a source only
opens, reads decoded frames and closes. A new decoder is a name declared in
``vidpipe.config.schema`` and one ``register_source`` call in its module (``decoders.py``).

A source hands over a ``Picture``: the decoded frame as the decoder left it. Its conversion to
what the pipeline takes (BGR) happens only when ``image()`` is called, so the frames that the
worker drops (decimated to ``detect_fps``, still for the motion gate) are never converted; the
motion gate reads the luma plane where the decoder has one.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

import numpy as np
import numpy.typing as npt

from vidpipe.types import DeviceImage, FittedImage, Image, image_size

REASONS = (
    "host_not_found",
    "connection_refused",
    "unreachable",
    "unauthorized",
    "not_found",
    "rtsp_error",
    "open_failed",
    "no_frames",
    "read_failed",
)
"""Every ``reason`` a source raises (the worker adds ``stalled``, ``eof`` and ``stopped``)."""


class SourceError(Exception):
    """A source failed; ``reason`` is the ``camera_errors`` label, ``detail`` has no secrets."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class ReadTimeout(SourceError):
    """No packet within the read timeout. The source stays usable: read again to go on.

    The worker keeps reading; its frame-age watchdog decides when this is a stall.
    """

    def __init__(self, detail: str) -> None:
        super().__init__("stalled", detail)


@dataclass(frozen=True, slots=True)
class StreamParams:
    """What a muxer needs to write a video stream's packets unchanged (stream copy).

    Attributes:
        codec: FFmpeg codec name (``h264``, ``hevc``).
        extradata: the codec's Annex-B parameter sets when the source had them out of band
            (RTSP's SDP), else empty. H.264/HEVC packets are tapped in Annex-B form with
            the parameter sets in band before keyframes (files are converted).
        width, height: coded picture size.
        pix_fmt: decoded pixel format name, or None.
        time_base: the unit of every packet's ``pts``/``dts``.
        rate: nominal frame rate, or None.
    """

    codec: str
    extradata: bytes
    width: int
    height: int
    pix_fmt: str | None
    time_base: Fraction
    rate: Fraction | None


@dataclass(frozen=True, slots=True)
class TapPacket:
    """One demuxed (still compressed) video packet, as it came from the camera.

    Attributes:
        data: the packet's bytes.
        pts, dts: timestamps in ``time_base`` units (None when the container has none).
        duration: in ``time_base`` units (0 if unknown).
        time_base: see ``StreamParams.time_base``.
        keyframe: a clip may start here.
        t_capture: monotonic time the packet was demuxed.
        t_sender: when the camera took the picture, on the camera's wall clock (seconds since
            the epoch), from the stream's RTCP sender reports; None without them (files,
            servers that send none, a connection's first packets).
    """

    data: bytes
    pts: int | None
    dts: int | None
    duration: int
    time_base: Fraction
    keyframe: bool
    t_capture: float
    t_sender: float | None = None


class PacketTap(Protocol):
    """A consumer of one camera's packets (e.g. an event-clip ring buffer).

    Every method runs on the camera's reader thread, between two demuxed packets: they must
    return quickly and not block (copy, queue, count). ``on_stream`` comes first and again at
    every new connection or pass; packets after it belong to that stream (a consumer resets
    its buffer there, as the timestamps may restart).
    """

    def on_stream(self, camera: str, params: StreamParams) -> None: ...

    def on_packet(self, camera: str, packet: TapPacket) -> None: ...

    def on_frame(self, camera: str, pts: int | None, t_decoded: float) -> None:
        """A decoded picture leaves the source at ``t_decoded`` (monotonic).

        The worker stamps the picture's ``Frame.t_capture`` after this call and before the
        next one, so the last call at or before a frame's ``t_capture`` gives its ``pts``
        (in ``StreamParams.time_base``; None where its packet had none). A frame's place in
        the stream is its pts: its demux time is later by the decoder's reordering delay.
        """
        ...


class PacketListener(Protocol):
    """What a source hands its packets and decoded pictures to (the worker's ``TapFeed``)."""

    def __call__(self, packet: TapPacket) -> None:
        """A demuxed video packet."""
        ...

    def frame(self, pts: int | None) -> None:
        """``read`` is about to return the decoded picture with this ``pts``."""
        ...


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """What an opened source reports about its video.

    Attributes:
        width: frame width in pixels.
        height: frame height in pixels.
        fps: nominal frame rate, or None if unknown or implausible.
        stream: the stream's parameters for the packet tap, or None if the source has none.
    """

    width: int
    height: int
    fps: float | None
    stream: StreamParams | None = None


@dataclass(frozen=True, slots=True)
class Luma:
    """The luma (Y) plane of a decoded YUV picture, as the decoder wrote it.

    Attributes:
        pixels: ``(H, W)`` uint8, a view of the decoder's buffer: rows may be padded (a row
            stride above ``W``), so it need not be contiguous. Read it, never keep it (a
            reference keeps the decoded frame alive) and never write to it.
        full_range: the levels span 0-255 (JPEG range); else 16-235 (video range), which the
            BGR conversion stretches to 0-255.
    """

    pixels: npt.NDArray[np.uint8]
    full_range: bool


class Picture(Protocol):
    """One decoded frame, converted to the pipeline's ``Image`` only when ``image`` is called.

    Used on the reader thread that read it, before the next ``read``. A conversion that
    fails raises ``SourceError`` (nvdec's copy out of the decoder: the session ends).
    """

    @property
    def width(self) -> int: ...

    @property
    def height(self) -> int: ...

    def luma(self) -> Luma | None:
        """The picture's luma plane without any conversion, or None if it has none on the
        host (an RGB or device picture)."""
        ...

    def image(self) -> Image:
        """The frame as ``(H, W, 3)`` uint8 BGR (or a ``DeviceImage``); converted on the first
        call, the same object after it."""
        ...

    def image_for(self, fit: tuple[int, int] | None) -> Image:
        """The frame for a model whose input is ``fit`` (width, height): a ``FittedImage``
        where the decoder converts and scales in one step, else ``image()`` (also for None:
        no model size known, or fitting switched off)."""
        ...


class ReadyPicture:
    """A ``Picture`` around an image that is already converted (a numpy BGR array from a
    source that decodes to BGR, or a ``DeviceImage``): nothing is deferred."""

    __slots__ = ("_image",)

    def __init__(self, image: Image) -> None:
        self._image = image

    @property
    def width(self) -> int:
        return image_size(self._image)[0]

    @property
    def height(self) -> int:
        return image_size(self._image)[1]

    def luma(self) -> Luma | None:
        return None

    def image(self) -> Image:
        return self._image

    def image_for(self, fit: tuple[int, int] | None) -> Image:
        return self._image


def as_picture(decoded: Picture | Image) -> Picture:
    """What ``Source.read`` returned, as a ``Picture`` (a ready image is wrapped)."""
    if isinstance(decoded, np.ndarray | DeviceImage | FittedImage):
        return ReadyPicture(decoded)
    return decoded


class Source(Protocol):
    """One connection to a camera. Used from a single reader thread; ``close`` is idempotent.

    ``open`` and ``read`` raise ``SourceError``; anything else they raise is a bug.
    ``packet_listener``, when set, is called with every demuxed video packet (None: nobody
    listens, and no packet is copied).

    A source may also have ``rewind() -> bool``: start a file again without closing it. At
    the end of a looping file's pass the worker tries it first, and closes and reopens only
    when it is missing or returns False (``nvdec`` keeps its decoder this way).

    A source may also have ``wait_turn(cancel: threading.Event) -> bool``: wait until it may
    start opening (``nvdec`` limits how many cameras start at once, ``open_gate.py``). The
    worker calls it before ``open``, and the wait does not count as open time; False: the
    session was cancelled first, and the worker does not open.
    """

    packet_listener: PacketListener | None

    @property
    def info(self) -> SourceInfo: ...

    def open(self) -> SourceInfo:
        """Connect and find the video stream. May block about the open timeout."""
        ...

    def read(self) -> Picture | Image | None:
        """The next decoded frame, or None at the end of the stream: a ``Picture`` whose
        conversion waits until it is used, or an image ready to use (``(H, W, 3)`` uint8 BGR
        in host memory, or a ``DeviceImage``: a decoder whose frames stay on the GPU).
        ``as_picture`` makes either a ``Picture``.

        May block about the read timeout.
        """
        ...

    def close(self) -> None: ...


def source_for(url: str) -> str:
    """What to hand to the demuxer: ``file://`` URLs become plain paths.

    Examples:
        ``file:///data/a%20b.mp4`` -> ``/data/a b.mp4``; ``rtsp://...`` and plain paths are
        returned unchanged.
    """
    if not url.lower().startswith("file://"):
        return url
    parsed = urllib.parse.urlparse(url)
    host = "" if parsed.netloc in ("", "localhost") else parsed.netloc
    return urllib.parse.unquote(host + parsed.path)
