"""The default capture source: libav through PyAV, for files and RTSP.

Every FFmpeg option is per container (per camera): RTSP over TCP, the socket timeout, how long
the stream is probed. PyAV releases the GIL in ``avformat_open_input``,
``avformat_find_stream_info``, ``av_read_frame`` and the decoder calls, so cameras open and
decode concurrently (``vidpipe bench capture`` measures eight RTSP cameras coming up).

Failures arrive as exceptions with FFmpeg's error code; for RTSP the server's status is one
of them (401 -> ``HTTPUnauthorizedError``, 404 -> ``HTTPNotFoundError``). ``classify`` turns
them into the worker's reasons. PyAV's exception text contains the URL, credentials
included, so it is never used: details are built from the code and the redacted FFmpeg line.
"""

from __future__ import annotations

import errno
import logging
import math
import threading
import urllib.parse
from collections import deque
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import av
import av.error
import cv2
import numpy as np
from av.bitstream import BitStreamFilterContext
from av.codec.hwaccel import HWAccel
from av.video.reformatter import VideoReformatter

from vidpipe.capture.decoders import CaptureContext, register_source
from vidpipe.capture.ffmpeg_log import install as install_ffmpeg_log
from vidpipe.capture.ffmpeg_log import last_error as ffmpeg_last_error
from vidpipe.capture.ffmpeg_log import opening
from vidpipe.capture.group_budget import GroupBudget
from vidpipe.capture.pyav_packets import tap_packet
from vidpipe.capture.skipping import HeldBack, NonRefSkipper, Wanted
from vidpipe.capture.source import (
    Luma,
    PacketListener,
    ReadTimeout,
    SourceError,
    SourceInfo,
    StreamParams,
    source_for,
)
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.preprocess.letterbox import letterbox_geometry
from vidpipe.preprocess.yuv import YuvFitter
from vidpipe.types import FittedImage

log = logging.getLogger(__name__)

_MAX_PLAUSIBLE_FPS = 1000.0  # above this a reported rate is a time base, not a frame rate
_AUTO_DEVICES = ("cuda", "vaapi", "qsv")
_ANNEXB_FILTERS = {"h264": "h264_mp4toannexb", "hevc": "hevc_mp4toannexb"}
# 8-bit formats whose first plane is luma, one byte a pixel. swscale reads the ``yuvj`` ones
# (and grey) as full range; the others as video range (16-235), whatever the frame's tag.
_LUMA_VIDEO_RANGE = frozenset(
    {"yuv420p", "yuv422p", "yuv444p", "yuv411p", "yuv440p", "nv12", "nv21", "nv16", "nv24"}
)
_LUMA_FULL_RANGE = frozenset({"yuvj420p", "yuvj422p", "yuvj444p", "yuvj440p", "yuvj411p", "gray"})
# 8-bit 4:2:0 formats converted at the model's size from their planes (``PyAVSource.fit``).
_FITTED_FORMATS = frozenset({"yuv420p", "yuvj420p", "nv12"})


def container_options(camera: CameraConfig, defaults: CaptureConfig) -> dict[str, str]:
    """FFmpeg demuxer options for ``camera`` (strings, as FFmpeg takes them)."""
    opts: dict[str, str] = {}
    if camera.is_stream:
        # TCP: no lost RTP packets on loaded hosts, and one port through firewalls. The socket
        # timeout (microseconds) bounds the stream probe too, which PyAV's timeout does not.
        io_timeout_ms = max(defaults.open_timeout_ms, defaults.read_timeout_ms)
        opts["rtsp_transport"] = "tcp"
        opts["timeout"] = str(io_timeout_ms * 1000)
        if defaults.analyze_duration_ms > 0:
            opts["analyzeduration"] = str(defaults.analyze_duration_ms * 1000)
    return opts


# -- hardware decode -------------------------------------------------------------------------

_hw_lock = threading.Lock()
_hw_devices: dict[str, bool] = {}  # device type -> a device of that type could be created
_hw_choice: dict[str, str | None] = {}  # capture.hwaccel setting -> device type used (or None)


def _device_exists(kind: str) -> bool:
    """Whether an FFmpeg ``kind`` device can be created here (tried once per process)."""
    if kind not in _hw_devices:
        try:
            HWAccel(kind).create(av.Codec("h264", "r"))
            _hw_devices[kind] = True
        except Exception:  # no driver, no device node, or not built into this FFmpeg
            _hw_devices[kind] = False
    return _hw_devices[kind]


def hwaccel_for(setting: str) -> HWAccel | None:
    """The ``HWAccel`` for ``capture.hwaccel``, or None for software decoding.

    The choice is made once per process; when no device fits, one log line says so. With a
    device, a stream its decoder cannot handle still decodes in software
    (``allow_software_fallback``).
    """
    if setting == "none":
        return None
    with _hw_lock:
        if setting not in _hw_choice:
            kinds = _AUTO_DEVICES if setting == "auto" else (setting,)
            found = next((k for k in kinds if _device_exists(k)), None)
            _hw_choice[setting] = found
            if found is None:
                log.warning(
                    "capture.hwaccel %s: no %s device here; decoding in software",
                    setting,
                    " or ".join(kinds),
                )
            else:
                log.info("capture.hwaccel %s: decoding on %s", setting, found)
        kind = _hw_choice[setting]
    return None if kind is None else HWAccel(kind, allow_software_fallback=True)


# -- errors ----------------------------------------------------------------------------------

_BY_CLASS: tuple[tuple[type[BaseException], str, str], ...] = (
    (av.error.HTTPForbiddenError, "unauthorized", "RTSP 403 Forbidden"),
    (av.error.HTTPNotFoundError, "not_found", "no stream at this path (RTSP 404 Not Found)"),
    (av.error.HTTPClientError, "rtsp_error", "RTSP 4xx"),
    (av.error.HTTPServerError, "rtsp_error", "RTSP 5xx"),
    (ConnectionRefusedError, "connection_refused", "the server refused the connection"),
    (TimeoutError, "unreachable", "connect timed out"),
    (av.error.ExitError, "unreachable", "no answer within the open timeout"),
)
_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN}


def classify(
    exc: BaseException, is_stream: bool, ffmpeg_said: str = "", *, has_user: bool = False
) -> SourceError:
    """The worker's reason for a failed open of a stream or a file. Never raises.

    ``ffmpeg_said`` is FFmpeg's last error line on the opening thread (redacted): a name
    that does not resolve has no code of its own (``EIO``), only that line.
    """
    code = getattr(exc, "errno", None)
    said = f": {ffmpeg_said}" if ffmpeg_said else ""
    if not is_stream:
        what = getattr(exc, "strerror", None) or type(exc).__name__
        return SourceError("open_failed", f"could not open the file ({what})")
    if isinstance(exc, av.error.HTTPUnauthorizedError):
        creds = "wrong credentials" if has_user else "no credentials given"
        return SourceError("unauthorized", f"{creds} (RTSP 401 Unauthorized)")
    for cls, reason, detail in _BY_CLASS:
        if isinstance(exc, cls):
            return SourceError(reason, detail + said)
    if code in _UNREACHABLE:
        return SourceError("unreachable", f"{getattr(exc, 'strerror', '')}{said}".strip())
    if "resolve hostname" in ffmpeg_said:
        return SourceError("host_not_found", ffmpeg_said)
    if "RTSP" in ffmpeg_said or "method " in ffmpeg_said:
        return SourceError("rtsp_error", ffmpeg_said)
    what = getattr(exc, "strerror", None) or type(exc).__name__
    return SourceError("open_failed", f"{what}{said}")


# -- the source ------------------------------------------------------------------------------


class PyAVSource:
    """One camera connection (or one pass over a file) through PyAV. See ``Source``."""

    def __init__(self, camera: CameraConfig, defaults: CaptureConfig) -> None:
        self.camera = camera
        self.defaults = defaults
        self.packet_listener: PacketListener | None = None
        self.decode_errors = 0
        self._container: Any = None
        self._stream: Any = None
        self._packets: Iterator[Any] | None = None
        self._pending: deque[Any] = deque()
        self._info = SourceInfo(0, 0, None)
        self._eof = False
        self._bsf: Any = None
        self._reformatter = VideoReformatter()
        self._fitters: dict[tuple[str, int, int], YuvFitter] = {}
        self.conversions = 0  # frames converted to BGR whole (``PyAVPicture.image``)
        self.fittings = 0  # frames converted at a model's size only (``PyAVPicture.image_for``)
        self.skipped = 0  # frames left undecoded as unused (``skip_unwanted``), in all
        self.skipped_unread = 0  # ... as they would replace an untaken frame (``held_back``)
        self.shed = 0  # frames left undecoded with their group of pictures (``shed_groups``)
        self._skipper: NonRefSkipper | None = None
        self._budget: GroupBudget | None = None
        self._shedding = False  # the packets up to the next keyframe are not decoded
        self._skip_mode = "DEFAULT"

    @property
    def info(self) -> SourceInfo:
        return self._info

    def open(self) -> SourceInfo:
        install_ffmpeg_log()
        timeouts = (self.defaults.open_timeout_ms / 1000.0, self.defaults.read_timeout_ms / 1000.0)
        try:
            with opening():
                self._container = av.open(
                    source_for(self.camera.url),
                    options=container_options(self.camera, self.defaults),
                    timeout=timeouts,
                    hwaccel=hwaccel_for(self.defaults.hwaccel),
                )
        except (av.error.FFmpegError, OSError) as exc:
            said = ffmpeg_last_error()
            has_user = urllib.parse.urlsplit(self.camera.url).username is not None
            raise classify(exc, self.camera.is_stream, said, has_user=has_user) from None
        video = self._container.streams.video
        if not video:
            self.close()
            raise SourceError("no_frames", "the source has no video stream")
        self._stream = video[0]
        ctx = self._stream.codec_context
        if self.defaults.decoder_threads > 0:
            ctx.thread_count = self.defaults.decoder_threads
        ctx.thread_type = "AUTO"  # frame and slice threads, as FFmpeg's own tools use
        if not ctx.width:
            self.close()
            raise SourceError("no_frames", "the source has no decodable video (width 0)")
        self._info = SourceInfo(ctx.width, ctx.height, _fps(self._stream), _params(self._stream))
        extradata = bytes(ctx.extradata or b"")
        if ctx.name in _ANNEXB_FILTERS and extradata[:1] == b"\x01":  # avcC / hvcC form
            self._bsf = BitStreamFilterContext(_ANNEXB_FILTERS[ctx.name], self._stream)
        return self._info

    def skip_unwanted(self, wanted: Wanted | None, held_back: HeldBack | None = None) -> None:
        """Let the decoder skip non-reference frames that ``wanted`` says detection will
        not use, or that would replace a frame ``held_back`` says still waits
        (``vidpipe/capture/skipping.py``); both None decodes every frame."""
        skips = wanted is not None or held_back is not None
        self._skipper = NonRefSkipper(wanted, held_back) if skips else None

    def shed_groups(self, budget: GroupBudget | None) -> None:
        """At each keyframe, ask ``budget`` whether to decode its group of pictures in full
        or only the keyframe (``vidpipe/capture/group_budget.py``); None decodes every frame."""
        self._budget, self._shedding = budget, False

    def read(self) -> PyAVPicture | None:
        while not self._pending:
            if self._eof:
                return None
            self._decode_next()
        frame = self._pending.popleft()
        if self._skipper is not None:
            unused, unread = self._skipper.handed(frame.pts)
            self.skipped += unused
            self.skipped_unread += unread
        listener = self.packet_listener
        if listener is not None:
            listener.frame(frame.pts)
        return PyAVPicture(frame, self)

    def to_bgr(self, frame: av.VideoFrame) -> np.ndarray:
        """``frame`` as a contiguous ``(H, W, 3)`` uint8 BGR array (counted in
        ``conversions``). Call on the reader thread: the scaler is the source's own."""
        self.conversions += 1
        # One scaler per source, one thread: ``to_ndarray(format=...)`` would set up a new
        # scaler context for every frame and scale on every core, which cost 0.3 ms a frame
        # at 768x432 (``python -m benchmarks.capture_cost``). The array is a view of the
        # converted frame: no copy after the conversion.
        return _array(self._reformatter.reformat(frame, format="bgr24", threads=1))

    def fit(self, frame: av.VideoFrame, fit: tuple[int, int]) -> FittedImage:
        """``frame`` converted to BGR at the size its letterbox has in a model input of
        ``fit`` (counted in ``fittings``); the whole frame is converted only if a sink asks.
        Call on the reader thread: the fitters are the source's own.

        8-bit 4:2:0 pictures are resized plane by plane and converted at the letterbox size
        (``vidpipe/preprocess/yuv.py``: BT.601, bilinear with half-pixel centres, the GPU
        letterbox's sampling). libav's scaler cannot sample that way: its ``FAST_BILINEAR``
        starts its columns half a pixel off, and its chroma and rounding differ, so that
        1080p frames converted by it gave other detections than the same NVDEC frames on 55
        of 500 frames. Other formats are converted whole by libav, then resized by OpenCV, as
        the CPU letterbox does.
        """
        self.fittings += 1
        width, height = int(frame.width), int(frame.height)
        _, new_w, new_h = letterbox_geometry(width, height, *fit)
        whole = WholeFrame(frame)
        name = frame.format.name
        if name in _FITTED_FORMATS:
            key = (name, new_w, new_h)
            fitter = self._fitters.get(key)
            if fitter is None:
                fitter = YuvFitter(new_w, new_h, full_range=name == "yuvj420p")
                self._fitters = {key: fitter}  # one camera, one size: no growth on reloads
            if name == "nv12":
                fitted = fitter.semi_planar(_plane(frame, 0), _plane(frame, 1, channels=2))
            else:
                fitted = fitter.planar(_plane(frame, 0), _plane(frame, 1), _plane(frame, 2))
        else:
            resized = cv2.resize(whole(), (new_w, new_h), interpolation=cv2.INTER_LINEAR)
            fitted = np.asarray(resized, np.uint8)
        return FittedImage(fitted, fit, width, height, whole)

    def _decode_next(self) -> None:
        """Demux one packet, tap it, decode it into ``_pending`` (sets ``_eof`` at the end)."""
        if self._packets is None:
            self._packets = self._container.demux(self._stream)
        try:
            packet = next(self._packets, None)
        except (av.error.ExitError, TimeoutError):
            self._packets = None  # the container stays usable; demux again on the next read
            raise ReadTimeout(f"no packet within {self.defaults.read_timeout_ms} ms") from None
        except (av.error.FFmpegError, OSError) as exc:
            self._packets = None
            if not self.camera.is_stream:
                self._eof = True  # damaged file: what decoded so far is what there is
                return
            said = ffmpeg_last_error() or getattr(exc, "strerror", "") or type(exc).__name__
            raise SourceError("read_failed", f"demux failed: {said}") from None
        if packet is None:
            self._eof = True
            return
        if not self._shed(packet):
            self._decode(packet)
        listener = self.packet_listener
        if listener is not None and packet.size:
            self._tap(listener, packet)

    def _shed(self, packet: Any) -> bool:
        """Whether ``packet`` is left undecoded with the rest of its group of pictures."""
        if self._budget is None or not packet.size:
            return False
        if packet.is_keyframe:
            media_s = None if packet.pts is None else float(packet.pts * packet.time_base)
            self._shedding = not self._budget.keyframe(media_s)
            return False
        self.shed += self._shedding
        return self._shedding

    def _decode(self, packet: Any) -> None:
        ctx = self._stream.codec_context
        if self._skipper is not None:
            mode = "NONREF" if self._skipper.may_skip(packet.pts, packet.time_base) else "DEFAULT"
            if mode != self._skip_mode:  # FFmpeg reads it per packet, frame threads too
                ctx.skip_frame = self._skip_mode = mode
        try:
            self._pending.extend(ctx.decode(packet))
        except av.error.FFmpegError:
            self.decode_errors += 1  # a corrupt packet: FFmpeg conceals what it can

    def _tap(self, listener: PacketListener, packet: Any) -> None:
        """Hand ``packet`` to the listener in Annex-B form (after decoding: the filter eats it).

        MP4 files carry H.264/HEVC length-prefixed, with the parameter sets out of band; a
        muxer given such packets without those headers writes an unplayable file. The
        ``*_mp4toannexb`` filter puts them in band before every keyframe, as RTSP cameras
        send them, so every tapped stream is remuxable from any keyframe on.
        """
        if self._bsf is None:
            return listener(tap_packet(packet))
        time_base = packet.time_base  # the filter takes the packet over, time base and all
        for out in self._bsf.filter(packet):
            out.time_base = time_base
            listener(tap_packet(out))
        return None

    def close(self) -> None:
        container, self._container = self._container, None
        self._packets = None
        self._pending.clear()
        if container is not None:
            container.close()


class PyAVPicture:
    """A frame as PyAV decoded it (a ``Picture``): converted to BGR on the first ``image()``.

    The luma plane is read in place, so the motion gate needs no conversion at all.
    """

    __slots__ = ("_frame", "_image", "_source", "height", "width")

    def __init__(self, frame: av.VideoFrame, source: PyAVSource) -> None:
        self._frame: av.VideoFrame | None = frame
        self._source = source
        self._image: np.ndarray | None = None
        self.width = int(frame.width)
        self.height = int(frame.height)

    def luma(self) -> Luma | None:
        frame = self._frame
        if frame is None:
            return None  # converted: the decoded frame is gone
        name = frame.format.name
        if name not in _LUMA_VIDEO_RANGE and name not in _LUMA_FULL_RANGE:
            return None
        return Luma(_plane(frame, 0), full_range=name in _LUMA_FULL_RANGE)

    def image(self) -> np.ndarray:
        if self._image is None:
            assert self._frame is not None
            self._image = self._source.to_bgr(self._frame)
            self._frame = None  # give the decoder's buffer back now
        return self._image

    def image_for(self, fit: tuple[int, int] | None) -> np.ndarray | FittedImage:
        if fit is None or self._frame is None:  # (or converted whole already, by the gate)
            return self.image()
        return self._source.fit(self._frame, fit)


class WholeFrame:
    """``FittedImage.to_host`` of a PyAV frame: converts the whole frame to BGR once, on
    whichever thread asks first (a sink's), and keeps the result."""

    __slots__ = ("_frame", "_image", "_lock")

    def __init__(self, frame: av.VideoFrame) -> None:
        self._frame: av.VideoFrame | None = frame
        self._image: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def converted(self) -> bool:
        return self._image is not None

    def __call__(self) -> np.ndarray:
        with self._lock:
            if self._image is None:
                assert self._frame is not None
                # a scaler of its own: the source's belongs to the reader thread
                self._image = _array(self._frame.reformat(format="bgr24", threads=1))
                self._frame = None
            return self._image


def _plane(frame: av.VideoFrame, index: int, channels: int = 1) -> np.ndarray:
    """Plane ``index`` of an 8-bit ``frame`` as a ``(rows, width)`` uint8 view, or
    ``(rows, width, channels)`` for interleaved samples (NV12's chroma); no copy: its rows
    are ``line_size`` bytes apart (FFmpeg pads them for SIMD)."""
    plane = frame.planes[index]
    rows = np.frombuffer(memoryview(plane), np.uint8, count=plane.line_size * plane.height)
    pixels = rows.reshape(plane.height, plane.line_size)[:, : plane.width * channels]
    return pixels if channels == 1 else pixels.reshape(plane.height, plane.width, channels)


def _array(converted: av.VideoFrame) -> np.ndarray:
    """A converted frame as a contiguous array: a view of its pixels where the rows are not
    padded, else one copy."""
    image: np.ndarray = converted.to_ndarray()
    return image if image.flags.c_contiguous else np.ascontiguousarray(image)


def _fps(stream: Any) -> float | None:
    rate = stream.average_rate or stream.guessed_rate
    fps = float(rate) if rate else math.nan
    return fps if math.isfinite(fps) and 0 < fps <= _MAX_PLAUSIBLE_FPS else None


def _params(stream: Any) -> StreamParams:
    ctx = stream.codec_context
    rate = stream.average_rate or stream.guessed_rate
    extradata = bytes(ctx.extradata or b"")
    return StreamParams(
        codec=ctx.name,
        extradata=b"" if extradata[:1] == b"\x01" else extradata,  # tapped as Annex-B
        width=ctx.width,
        height=ctx.height,
        pix_fmt=ctx.pix_fmt,
        time_base=Fraction(stream.time_base),
        rate=Fraction(rate) if rate else None,
    )


def _source(camera: CameraConfig, defaults: CaptureConfig, _context: CaptureContext) -> PyAVSource:
    return PyAVSource(camera, defaults)  # nothing shared between pyav cameras


register_source("pyav", _source)
