"""The ``worker`` modifier of ``benchmarks.overload_model``: vidpipe's own capture workers.

Each camera is a real ``CaptureWorker`` of a ``realtime`` NVDEC file camera (``newest``
mailbox, as the daemon gives a live camera): ``NvdecSource`` with its deferred copy
(``NvdecPicture``), ``NvdecReader`` and the worker's decision to leave a frame unmade, over a
fake PyNvVideoCodec that puts the model's GIL load where NVDEC has it:

* the demux: a native call (``benchmarks.gil_worker``'s demuxer);
* the decode (PyNvVideoCodec 2.2.4's ``Decode`` keeps the GIL): ``--calls`` native calls with
  the pre-decode share of ``--worker-py-us`` between them;
* the copy out of the decoder (``own_copy``): the post-decode share of ``--worker-py-us``, one
  native call (``cuMemcpyDtoDAsync``) and the GPU wait (``cuStreamSynchronize``, a sleep of
  ``--gpu-wait-us``). A frame left unmade skips all of it, as on the GPU.

The worker's own Python per frame (pacing, counters, the Frame, the mailbox) comes on top: the
load is near the synthetic camera's, not equal, so compare ``worker`` with
``worker+skip-unread``, not with the synthetic cameras. ``worker``
alone is the capture before issue 39 (every frame made): the rig hides waiting frames from the
worker (its mailboxes' ``unread_seq`` says none waits; the daemon has no such switch).
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from benchmarks.gil_model import native_call, python_work
from benchmarks.gil_worker import FakeDemuxer
from vidpipe.capture.decoders import CaptureContext, DecoderKind
from vidpipe.capture.group_budget import SharedShare
from vidpipe.capture.nvdec import NvdecReader
from vidpipe.capture.nvdec_child import CodecSpec
from vidpipe.capture.nvdec_source import NvdecShared, NvdecSource
from vidpipe.capture.worker import CaptureWorker
from vidpipe.config import CAPTURE_DECODERS, CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.schedule.hub import FrameHub, Mailbox

_SURFACE = (18, 16)  # NV12 of the fake GPU's 16x12 pictures (tests/fake_gpu.py)
_PICTURE = np.zeros(_SURFACE, np.uint8)  # every decoded picture (a decode process copies it)


# An access unit with an SPS and a PPS in front of its picture: what a camera's keyframe
# holds, so that the reader flushes a shed group's keyframe out at once, as on the GPU.
_KEY_HEAD = b"\x00\x00\x00\x01\x67\x00\x00\x00\x01\x68\x00\x00\x00\x01\x65"
_KEY_BUFFER = ctypes.create_string_buffer(_KEY_HEAD, len(_KEY_HEAD))


class _Packet:
    """A PyNvVideoCodec packet as ``NvdecReader`` reads it: ``key``, ``bsl`` (its size) and
    ``bsl_data`` (the address of its bytes); an empty one flushes the decoder."""

    __slots__ = ("bsl", "bsl_data", "key")

    def __init__(self, key: bool = False, size: int = 0) -> None:
        self.key = int(key)
        self.bsl = size
        self.bsl_data = ctypes.addressof(_KEY_BUFFER) if key else 0


class _KeyedDemuxer(FakeDemuxer):
    """The fake demuxer with a keyframe every ``gop`` packets, so that the reader can shed
    groups of pictures (``capture.shed_gops``) as it does a camera's stream."""

    def __init__(self, fps: float, gop: int) -> None:
        super().__init__(fps)
        self._gop = gop

    def __iter__(self) -> Iterator[_Packet]:  # type: ignore[override]
        for k in super().__iter__():  # the demux's native call, then the packet's number
            yield _Packet() if k is None else _Packet(k % self._gop == 0, len(_KEY_HEAD))


class _Engine:
    """The decoders of one process, as NVDEC bounds them: one picture at a time, ``period_s``
    each, whichever camera asks. The wait is a sleep: it holds no GIL (in a decode process
    none that inference needs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._free_s = 0.0  # when the engine finishes the pictures asked for so far

    def decode(self, period_s: float) -> None:
        with self._lock:
            now = time.monotonic()
            self._free_s = done = max(now, self._free_s) + period_s
        time.sleep(done - now)


_ENGINE = _Engine()  # one a process: a decode process has its own


class _Decoder:
    def __init__(self, calls: int, pre_us: float, period_s: float) -> None:
        self._calls, self._pre_us, self._period_s = calls, pre_us, period_s
        self._hasher = hashlib.sha256()

    def Decode(self, packet: Any) -> list[Any]:
        for _ in range(self._calls):
            native_call(self._hasher)
            python_work(self._pre_us)
        empty = packet is None or (isinstance(packet, _Packet) and not packet.bsl)
        if not empty and self._period_s:
            _ENGINE.decode(self._period_s)
        return [] if empty else [_PICTURE]


class _Codec:
    """Stands in for the PyNvVideoCodec module (no GPU)."""

    PacketData = _Packet  # the empty packet that flushes the decoder

    def __init__(
        self, fps: float, calls: int, pre_us: float, gop: int = 0, period_s: float = 0.0
    ) -> None:
        self._fps, self._calls, self._pre_us, self._gop = fps, calls, pre_us, gop
        self._period_s = period_s

    def CreateDemuxer(self, filename: str) -> FakeDemuxer:
        return _KeyedDemuxer(self._fps, self._gop) if self._gop else FakeDemuxer(self._fps)

    def CreateDecoder(self, **kwargs: Any) -> _Decoder:
        return _Decoder(self._calls, self._pre_us, self._period_s)


class WorkerCameras:
    """``cameras`` capture workers feeding ``hub``; ``copies`` counts the frames they copied
    out of the decoder.

    Args:
        calls, py_us, post_decode_share, gpu_wait_us, fps: the model's camera (``Point``;
            ``py_us`` is its ``worker_py_us``).
        skip: the worker may leave frames unmade (the daemon as it is); False hides waiting
            frames from it.
        gop: a keyframe every ``gop`` frames, and the cameras shed groups of pictures as the
            daemon's do (``capture.shed_gops``); 0: no keyframes, nothing shed.
        group_size: cameras read by one thread (``capture.nvdec_group_size``).
        processes: decode processes (``capture.nvdec_processes``): the fake decoder runs
            there, and its pictures come back through shared host memory.
        skip_unused: ``capture.skip_unused_frames``: a decode process lets go, uncopied and
            unsent, the frames the worker would drop (False: it sends every frame).
        on_drop: each mailbox's ``on_drop`` (the model counts overwritten frames).
        decoder_fps: pictures a second the decoders make, split evenly between the decode
            processes (or all in this one); 0: no bound.
    """

    def __init__(
        self,
        hub: FrameHub,
        cameras: int,
        *,
        calls: int,
        py_us: float,
        post_decode_share: float,
        gpu_wait_us: float,
        fps: float,
        skip: bool,
        on_drop: Any,
        gop: int = 0,
        group_size: int = 1,
        processes: int = 0,
        skip_unused: bool = True,
        decoder_fps: float = 0.0,
    ) -> None:
        self.copies = 0
        self._post_us = py_us * post_decode_share / calls
        self._calls, self._gpu_wait_s = calls, gpu_wait_us / 1e6
        period_s = max(processes, 1) / decoder_fps if decoder_fps else 0.0
        codec_args = (fps, calls, py_us * (1.0 - post_decode_share) / calls, gop, period_s)
        self._codec = _Codec(*codec_args)
        self._surface = np.zeros(_SURFACE, np.uint8)
        metrics, context = Metrics(), CaptureContext()
        self._context = context
        self.share = context.shared(SharedShare)  # the groups decoded in full (gop > 0)
        if processes:
            decoding = context.shared(NvdecShared).decoding
            decoding.codec = CodecSpec(__name__, "_Codec", codec_args)
            decoding.ring = "host"
        defaults = CaptureConfig(
            decoder="nvdec",
            nvdec_group_size=group_size,
            nvdec_processes=processes,
            skip_unused_frames=skip_unused,
        )
        self.workers: list[CaptureWorker] = []
        for i in range(cameras):
            cam = CameraConfig(name=f"cam{i}", url=f"file:///fake/cam{i}.mp4", realtime=True)
            box = hub.add(cam.name, "newest", on_drop)
            if not skip:
                _hide_waiting_frames(box)
            cm = metrics.camera(cam.name)
            self.workers.append(CaptureWorker(cam, defaults, box, cm, context=context))

    def _source(self, cam: CameraConfig, defaults: CaptureConfig, ctx: CaptureContext) -> Any:
        hasher = hashlib.sha256()

        def own_copy(surface: np.ndarray) -> tuple[np.ndarray, None]:
            for _ in range(self._calls):
                python_work(self._post_us)  # the pool, the DeviceImage, the Frame, the put
            native_call(hasher)  # cuMemcpyDtoDAsync
            time.sleep(self._gpu_wait_s)  # cuStreamSynchronize
            self.copies += 1  # one thread at a time holds the GIL: a lost count is rare
            return np.copy(surface), None

        shared = ctx.shared(NvdecShared)
        if defaults.nvdec_processes:  # decoded and copied in a decode process: count it only

            def counted(surface: np.ndarray) -> tuple[np.ndarray, None]:
                self.copies += 1
                return surface, None

            return NvdecSource(cam, defaults, shared=shared, own_copy=counted)
        reader = NvdecReader(cam.url, codec=self._codec, to_tensor=lambda _f: self._surface)
        return NvdecSource(cam, defaults, shared=shared, reader=reader, own_copy=own_copy)

    def start(self) -> None:
        """Start every worker, their sources made by this rig's fake decoder."""
        self._saved = CAPTURE_DECODERS.factories["nvdec"]
        CAPTURE_DECODERS.factories["nvdec"] = DecoderKind(self._source)
        for w in self.workers:
            w.start()

    def stop(self) -> None:
        for w in self.workers:
            w.stop()
        for w in self.workers:
            w.join(5.0)
        self._context.close()  # the decode processes, if any
        CAPTURE_DECODERS.factories["nvdec"] = self._saved

    def left_unmade(self) -> int:
        """Frames decoded but never copied out, so far (the workers' own counts: cheaper to
        read than the registry's, which would skew the window's edges). A frame between its
        count and its copy counts as unmade for that moment: at most one per camera."""
        return sum(int(w.stats()["frames"]) for w in self.workers) - self.copies

    def lags(self) -> list[float]:
        """Not measured here: a file camera's pacer starts a new schedule past 1 s behind."""
        return []


def _hide_waiting_frames(box: Mailbox) -> None:
    def none_waits() -> None:
        return None

    box.unread_seq = none_waits  # type: ignore[method-assign]
