"""The ``nvdec`` capture decoder: ``NvdecReader`` behind the capture worker's source interface.

The worker's policies (reconnect with backoff, the stall watchdog, the mailbox, pacing,
decimation, drop reasons and metrics) are the same as for ``pyav`` cameras: this adapter only
maps the reader's ``open``/``read``/``close`` and its errors onto ``source.Source``.

Frames are ``DeviceImage`` s: NV12 on the camera's GPU. A decoded surface is only valid until
the reader's next ``read``, while a frame may wait in the mailbox (the ``newest`` policy keeps
decoding), so each frame is copied once on the GPU into memory the frame owns (3 MB at 1080p,
a device-to-device copy; no pixel crosses to the host). ``read`` hands out an ``NvdecPicture``
that makes this copy only when the worker asks for its image: a frame the worker drops
(decimated, or left unmade while its camera's last frame still waits) costs no copy, and its
GIL time goes to the threads that infer. ``DeviceImage.to_host`` downloads and converts a
picture for the live view and snapshots only when they ask.

The packet tap is not fed: PyNvVideoCodec's demuxer gives no stream parameters to remux
with (``info.stream`` is None, so event clips are not written for nvdec cameras).
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

from vidpipe.capture.decoders import CaptureContext, register_source
from vidpipe.capture.group_budget import GroupBudget
from vidpipe.capture.native_stderr import attribute_camera, release_camera
from vidpipe.capture.nvdec import NvdecError, NvdecReader, load_codec
from vidpipe.capture.nvdec_memory import (
    DEFAULT_SIZE,
    FreeMemory,
    shortage,
    torch_free_memory,
    torch_memory,
)
from vidpipe.capture.nvdec_picture import NvdecPicture
from vidpipe.capture.nvdec_prefetch import PrefetchNvdecReader
from vidpipe.capture.nvdec_remote import DecodeProcesses, RemoteNvdecReader
from vidpipe.capture.nvdec_stream import DecoderStream
from vidpipe.capture.open_gate import OpenGate, Permit
from vidpipe.capture.skipping import HeldBack, Wanted
from vidpipe.capture.source import PacketListener, SourceError, SourceInfo
from vidpipe.config import CameraConfig, CaptureConfig, Config, GpuConfig
from vidpipe.gpu_gate import GPU_GATE
from vidpipe.metrics import Metrics
from vidpipe.types import DeviceImage


class NvdecStats:
    """NVDEC figures of one pipeline for the metrics: open decoders, rejected packets per
    camera. Sources update it on their reader threads; scrapes read it (``bind_metrics``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sessions = 0
        self._errors: dict[str, int] = {}

    def opened(self, delta: int) -> None:
        with self._lock:
            self.sessions += delta

    def rejected(self, camera: str, n: int) -> None:
        with self._lock:
            self._errors[camera] = self._errors.get(camera, 0) + n

    def decode_errors(self, camera: str) -> int:
        with self._lock:
            return self._errors.get(camera, 0)


@dataclass(frozen=True)
class NvdecShared:
    """What the nvdec cameras of one pipeline share (``CaptureContext.shared``).

    Attributes:
        stats: the figures for the metrics.
        opening: how many cameras are starting (open to first read) at once
            (``capture.nvdec_open_concurrency``; ``open_gate.py``).
        decoding: the decode processes of cameras that decode outside the daemon's process
            (``capture.nvdec_processes``; ``nvdec_remote.py``).
    """

    stats: NvdecStats = field(default_factory=NvdecStats)
    opening: OpenGate = field(default_factory=OpenGate)
    decoding: DecodeProcesses = field(default_factory=DecodeProcesses)

    def close(self) -> None:
        """End the decode processes (``capture.nvdec_processes``) once no camera reads."""
        self.decoding.close()


def bind_metrics(metrics: Metrics, cfg: Config, context: CaptureContext) -> None:
    """Export the NVDEC sessions open, the decode processes running and the memory in use on
    the inference GPUs (read at scrape time; nothing on the frame path)."""
    shared = context.shared(NvdecShared)
    metrics.nvdec_sessions.set_function(lambda: shared.stats.sessions)
    metrics.nvdec_decode_processes.set_function(lambda: shared.decoding.alive)
    metrics.nvdec_opens.labels(state="opening").set_function(lambda: shared.opening.opening)
    metrics.nvdec_opens.labels(state="waiting").set_function(lambda: shared.opening.waiting)
    if isinstance(cfg.inference, GpuConfig) and cfg.inference.type == "torch":
        for gpu in cfg.inference.devices:
            used = metrics.gpu_memory_used.labels(gpu=str(gpu))
            used.set_function(functools.partial(_memory_used, gpu))


def bind_camera_metrics(metrics: Metrics, camera: CameraConfig, context: CaptureContext) -> None:
    """Export the packets an nvdec camera's GPU decoder rejected."""
    stats = context.shared(NvdecShared).stats
    errors = metrics.gpu_decode_errors.labels(camera=camera.name)
    errors.set_function(lambda: stats.decode_errors(camera.name))


def _memory_used(gpu: int) -> float:
    try:
        free, total = torch_memory(gpu)
    except Exception:  # no torch or no device: the gauge reads NaN, the scrape goes on
        return float("nan")
    return float(total - free)


def nv12_to_bgr(nv12: Any, ready: Any = None) -> npt.NDArray[np.uint8]:
    """Download a ``(H * 3 / 2, W)`` NV12 picture and convert it to ``(H, W, 3)`` BGR.

    ``ready`` (the copy's event) is waited for first: the copy ran on the camera's stream,
    which the caller's stream does not follow by itself.
    """
    with GPU_GATE.work():
        if ready is not None:
            ready.synchronize()
        host = nv12.cpu().numpy() if hasattr(nv12, "cpu") else np.asarray(nv12)
    bgr = cv2.cvtColor(np.ascontiguousarray(host, np.uint8), cv2.COLOR_YUV2BGR_NV12)
    return np.asarray(bgr, np.uint8)


class NvdecSource:
    """One NVDEC connection of one camera (``source.Source``).

    Its start-up, from ``open`` (``wait_turn`` when the worker calls it first) to the end of
    its first read, holds a turn of its pipeline's gate (``NvdecShared.opening``), so at most
    ``capture.nvdec_open_concurrency`` cameras start at once; a failed open and ``close``
    give the turn back too.

    Args:
        camera: the camera's config (``gpu`` picks the device, default 0).
        defaults: the shared capture settings (``nvdec_prefetch``: file cameras decode
            ahead on PyNvVideoCodec's own thread, ``PrefetchNvdecReader``;
            ``nvdec_open_concurrency``: the gate's limit).
        shared: the gate and figures of the pipeline's nvdec cameras (None: its own, shared
            with no other source).
        reader: the reader to use (tests pass one over a fake PyNvVideoCodec).
        own_copy: copies a decoded surface into memory the frame owns; returns the copy and
            the CUDA event that marks it complete (default ``DecoderStream.own_copy``).
        cuda: makes the decoder's context and stream (``DecoderStream``) when no reader is
            given.
        free_memory: bytes free on a GPU, asked before each open (``nvdec_memory.py``);
            default ``torch_free_memory`` when no reader is given, else no check.
    """

    def __init__(
        self,
        camera: CameraConfig,
        defaults: CaptureConfig,
        *,
        shared: NvdecShared | None = None,
        reader: NvdecReader | PrefetchNvdecReader | RemoteNvdecReader | None = None,
        own_copy: Callable[[Any], tuple[Any, Any]] | None = None,
        cuda: Callable[[int], DecoderStream] = DecoderStream,
        free_memory: FreeMemory | None = None,
    ) -> None:
        self._processes = defaults.nvdec_processes
        self._is_stream = camera.is_stream
        self._prefetch = 0 if camera.is_stream or self._processes else defaults.nvdec_prefetch
        self._open_limit = defaults.nvdec_open_concurrency
        self._shared = NvdecShared() if shared is None else shared
        self._permit: Permit | None = None  # this camera's turn at the gate, until started
        self.packet_listener: PacketListener | None = None
        self.gpu = 0 if camera.gpu is None else camera.gpu
        self._url = camera.url
        self._reader = reader
        self._make_cuda = cuda
        self._free_memory = free_memory if free_memory or reader else torch_free_memory
        self._cuda: DecoderStream | None = None
        self._own_copy = own_copy
        self._info = SourceInfo(0, 0, None)
        self._camera = camera.name
        self._counted_errors = 0
        self._session = False
        self._attributed = False
        self._picture: NvdecPicture | None = None  # the last read's, until the next read

    @property
    def info(self) -> SourceInfo:
        return self._info

    @property
    def decode_errors(self) -> int:
        """Packets the decoder rejected over this source's life (skipped, not fatal)."""
        return 0 if self._reader is None else self._reader.decode_errors

    def shed_groups(self, budget: GroupBudget | None) -> None:
        """Leave groups of pictures undecoded as ``budget`` says (``NvdecReader.shed_groups``;
        a read-ahead reader decodes on a thread of its own and never sheds)."""
        if isinstance(self._reader, NvdecReader | RemoteNvdecReader):
            self._reader.shed_groups(budget)

    @property
    def shed(self) -> int:
        """Frames left undecoded with their group of pictures (counted ``gop_shed``)."""
        return self._reader.shed if isinstance(self._reader, NvdecReader | RemoteNvdecReader) else 0

    def skip_unwanted(self, wanted: Wanted | None, held_back: HeldBack | None = None) -> None:
        """A camera in a decode process: the frames detection would not use, or that would
        only replace an untaken frame, are decoded there and never copied nor sent
        (``RemoteNvdecReader.skip_unwanted``). On this process's own decoder they are made
        and dropped as before: every frame must be decoded, and the copy is dropped anyway.

        A live stream's frames are never let go for an untaken one: ``held_back`` is asked
        when the read is sent, and a stream's next frame comes later, off the network, when
        the frame now waiting has mostly been taken (a file's read is sent when its frame is
        due, or at once)."""
        if isinstance(self._reader, RemoteNvdecReader):
            self._reader.skip_unwanted(wanted, None if self._is_stream else held_back)

    @property
    def skipped(self) -> int:
        """Frames let go as detection would not use them (counted ``decimated``)."""
        return self._reader.skipped if isinstance(self._reader, RemoteNvdecReader) else 0

    @property
    def skipped_unread(self) -> int:
        """Frames let go as they would replace an untaken frame (counted ``mailbox_full``)."""
        reader = self._reader
        return reader.skipped_unread if isinstance(reader, RemoteNvdecReader) else 0

    @property
    def skips_ahead(self) -> bool:
        """A frame let go for an untaken one costs this process nothing: a file camera in a
        decode process, whose decoder drops it there unsent (``skip_unwanted``)."""
        return isinstance(self._reader, RemoteNvdecReader) and not self._is_stream

    def _stream(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext() if self._cuda is None else self._cuda.current()

    def _open_reader(self) -> NvdecReader | PrefetchNvdecReader | RemoteNvdecReader:
        """The reader, made on first open (on the camera's thread) in the primary context, or
        in a decode process (``capture.nvdec_processes``)."""
        if self._reader is None and self._processes:
            connect = functools.partial(self._shared.decoding.connect, self._processes)
            self._reader = RemoteNvdecReader(self._url, self.gpu, connect)
            if self._own_copy is None:
                self._own_copy = _as_is
        if self._reader is None:
            try:
                self._cuda = self._make_cuda(self.gpu)
            except (NvdecError, RuntimeError) as exc:
                raise SourceError("open_failed", f"CUDA on GPU {self.gpu}: {exc}") from None
            context, stream = self._cuda.context, self._cuda.handle
            self._reader = (
                PrefetchNvdecReader(
                    self._url, self._prefetch, self.gpu, cuda_context=context, cuda_stream=stream
                )
                if self._prefetch
                else NvdecReader(self._url, self.gpu, cuda_context=context, cuda_stream=stream)
            )
            if self._own_copy is None:
                self._own_copy = self._cuda.own_copy
        return self._reader

    def wait_turn(self, cancel: threading.Event) -> bool:
        """Wait until fewer than ``capture.nvdec_open_concurrency`` cameras of the pipeline
        are starting. The worker calls it before ``open`` and does not count the wait as
        open time. False: ``cancel`` was set, or the source was closed, first."""
        return self._turn(cancel).wait()

    def _turn(self, cancel: threading.Event | None = None) -> Permit:
        """This start's permit: the one ``wait_turn`` took, else a new one."""
        if self._permit is None or self._permit.released:
            self._permit = self._shared.opening.permit(self._open_limit, cancel)
        return self._permit

    def _end_turn(self) -> None:
        permit, self._permit = self._permit, None
        if permit is not None:
            permit.release()

    def open(self) -> SourceInfo:
        # A caller other than the worker (no wait_turn first) waits for its turn here.
        if not self._turn().wait():
            raise SourceError("open_failed", "closed while waiting for its turn to open")
        try:
            return self._open_decoder()
        except BaseException:
            self._end_turn()  # a failed open gives its turn to the next camera
            raise

    def _open_decoder(self) -> SourceInfo:
        if not self._attributed:  # lines the library prints to fd 2 may name this camera
            self._attributed = True
            attribute_camera(self._camera, self._url)
        known = (self._info.width, self._info.height) if self._info.width > 0 else DEFAULT_SIZE
        self._check_memory(known)
        reader = self._open_reader()
        try:
            with GPU_GATE.work(), self._stream():
                opened = reader.open()
        except NvdecError as exc:  # its message is redacted already
            raise SourceError("open_failed", str(exc)) from None
        if opened.width <= 0 or opened.height <= 0:
            reader.close()
            raise SourceError("no_frames", "NVDEC found no video stream")
        if opened.width * opened.height > known[0] * known[1]:
            try:  # larger than assumed: ask again before the first frame is decoded
                self._check_memory((opened.width, opened.height))
            except SourceError:
                reader.close()
                raise
        self._info = SourceInfo(opened.width, opened.height, opened.fps)
        if not self._session:
            self._session = True
            self._shared.stats.opened(1)
        return self._info

    def _check_memory(self, size: tuple[int, int]) -> None:
        """Refuse to open (``open_failed``) when the GPU lacks the memory for this camera
        and for the others of the pipeline that are starting with it."""
        if self._free_memory is None:
            return
        starting = self._shared.opening.opening  # this camera holds a turn too
        why = shortage(self.gpu, size, self._prefetch, self._free_memory, starting)
        if why is not None:
            raise SourceError("open_failed", why)

    def read(self) -> NvdecPicture | None:
        """The next frame, its copy out of the decoder deferred (``NvdecPicture``)."""
        if self._reader is None:
            raise SourceError("read_failed", "read before open")
        self._expire()
        with self._stream():  # the decode and the dlpack hand-over: the camera's stream
            try:
                surface = self._reader.read()
            except NvdecError as exc:
                raise SourceError("read_failed", str(exc)) from None
            finally:
                self._count_errors()
                self._end_turn()  # started: the first read decoded a frame, ended or failed
        if surface is None:
            return None
        if self._own_copy is None:  # a reader was given without its copy
            raise SourceError("read_failed", "no way to copy the frame out of the decoder")
        self._picture = NvdecPicture(surface, self._copy_out)
        return self._picture

    def _copy_out(self, surface: Any) -> DeviceImage:
        """``surface`` copied into memory the frame owns: on the camera's stream, as its
        decode, and gated (the decode is gated by the reader, not its demuxing)."""
        assert self._own_copy is not None  # read checked it
        try:
            with self._stream(), GPU_GATE.work():
                nv12, ready = self._own_copy(surface)
        except NvdecError as exc:
            raise SourceError("read_failed", str(exc)) from None
        height, width = int(nv12.shape[0]) * 2 // 3, int(nv12.shape[1])
        to_host = functools.partial(nv12_to_bgr, nv12, ready)
        return DeviceImage(nv12, self.gpu, width, height, to_host, ready)

    def _expire(self) -> None:
        """The decoder is about to reuse the last picture's surface (read, rewind, close)."""
        if self._picture is not None:
            self._picture.expire()
            self._picture = None

    def rewind(self) -> bool:
        """Play a file again on the same decoder (``NvdecReader.rewind``); False: reopen."""
        if self._reader is None:
            return False
        self._expire()
        with GPU_GATE.work(), self._stream():
            return self._reader.rewind()

    def _count_errors(self) -> None:
        new = self.decode_errors - self._counted_errors
        if new:
            self._counted_errors += new
            self._shared.stats.rejected(self._camera, new)

    def close(self) -> None:
        self._end_turn()  # first: a turn is never kept, even if closing the reader fails
        self._expire()
        if self._reader is not None:
            self._reader.close()
        if self._session:
            self._session = False
            self._shared.stats.opened(-1)
        if self._attributed:
            self._attributed = False
            release_camera(self._camera)


def _as_is(frame: Any) -> tuple[Any, Any]:
    """A decode process's frame: a slot of the camera's ring, complete already (no copy)."""
    return frame, None


def check_nvdec(cfg: Config) -> list[str]:
    """Problems that stop the config's nvdec cameras at start-up (PyNvVideoCodec or CUDA
    missing), one per camera, naming it and its YAML path; empty when none decodes with nvdec.
    """
    cameras = [(i, cam) for i, cam in enumerate(cfg.cameras) if cfg.decoder_of(cam) == "nvdec"]
    if not cameras:
        return []
    reason = _nvdec_missing()
    if reason is None:
        return []
    return [
        f"{f'cameras[{i}].decoder' if cam.decoder else 'capture.decoder'}: camera "
        f"{cam.name!r} decodes with nvdec, but {reason}"
        for i, cam in cameras
    ]


def _nvdec_missing() -> str | None:
    try:
        load_codec()
    except NvdecError as exc:
        return str(exc)
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed (nvdec frames are PyTorch CUDA tensors)"
    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA device"
    return None


def _source(camera: CameraConfig, defaults: CaptureConfig, context: CaptureContext) -> NvdecSource:
    return NvdecSource(camera, defaults, shared=context.shared(NvdecShared))


register_source(
    "nvdec",
    _source,
    check=check_nvdec,
    bind_metrics=bind_metrics,
    bind_camera_metrics=bind_camera_metrics,
)
