"""Reading a camera with NVDEC through PyNvVideoCodec: frames stay on the GPU.

PyNvVideoCodec (pip ``pynvvideocodec``, NVIDIA's MIT-licensed binding) brings FFmpeg's
demuxer, so files and RTSP URLs open the same way as with the CPU capture. Its decoder hands
out NV12 surfaces in device memory; ``torch.from_dlpack`` sees one as a ``(H * 3 / 2, W)``
uint8 tensor without a copy, which :func:`vidpipe.preprocess.gpu.nv12_letterbox_into` turns
into the model's input on the GPU.

:class:`NvdecReader` is the decode loop of one connection: ``open`` (demuxer and decoder),
``read`` one frame at a time, ``close``. It keeps the rules of the CPU capture: a packet the
decoder rejects is counted as a decode error and skipped; more than ``max_consecutive_errors``
in a row end the connection with :class:`NvdecError` (the capture worker then backs off and
reconnects), and the end of a file is ``None`` from ``read``.

A frame returned by ``read`` lives in the decoder's surface pool: it is valid until the next
``read`` or ``close``. Letterbox it (or clone it) before reading on.

The ``codec`` argument is the PyNvVideoCodec module; CPU tests pass a fake one (named as
fake) to check this state machine without a GPU.
"""

from __future__ import annotations

import collections
import importlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from vidpipe.capture.annexb import carries_parameter_sets, packet_head
from vidpipe.capture.native_stderr import install as install_native_stderr
from vidpipe.gpu_gate import GPU_GATE
from vidpipe.redact import redact_text

log = logging.getLogger(__name__)


class KeyframeBudget(Protocol):
    """Which groups of pictures to decode in full (``group_budget.GroupBudget``, or in a
    decode process the daemon's process asked at each keyframe)."""

    def keyframe(self, media_s: float | None) -> bool: ...


_END = object()  # no more packets (the demuxer's own last packet is an empty one)


class NvdecError(Exception):
    """A connection cannot go on (open failed, the stream is broken); the message says why."""


@dataclass(frozen=True, slots=True)
class NvdecInfo:
    """What the demuxer reports about the video: size and nominal rate (None if unknown)."""

    width: int
    height: int
    fps: float | None


def load_codec() -> Any:
    """Import PyNvVideoCodec, or raise NvdecError saying what is missing.

    Once it is imported, what its C++ code prints to file descriptor 2 (and to fd 1, where
    the daemon opted in: its own error lines go there) goes through the redacting reader of
    ``vidpipe.capture.native_stderr`` (installed here, once).
    """
    try:
        # Imported by name: the package ships no type information and is absent in CI.
        codec = importlib.import_module("PyNvVideoCodec")
    except Exception as exc:  # ImportError, or its RuntimeError when the driver lacks NVDEC
        raise NvdecError(
            f"capture.decoder nvdec needs PyNvVideoCodec (pip install pynvvideocodec) and an "
            f"NVIDIA driver with NVDEC: {exc}"
        ) from None
    install_native_stderr()
    return codec


def _torch_from_dlpack(frame: Any) -> Any:
    import torch

    return torch.from_dlpack(frame)


def _ask(demuxer: Any, method: str) -> float:
    """A number the demuxer reports, 0 when it cannot say (a stream without that header)."""
    try:
        return float(getattr(demuxer, method)() or 0.0)
    except Exception:
        return 0.0


class NvdecReader:
    """One connection's demux and decode loop on one GPU.

    Args:
        url: file path, ``file://`` path or ``rtsp://`` URL.
        gpu: the CUDA device the frames are decoded on (the camera's batches run there too).
        codec: the PyNvVideoCodec module (None: import it).
        to_tensor: turns a decoded frame into a tensor (default ``torch.from_dlpack``).
        max_consecutive_errors: rejected packets in a row that end the connection.
        cuda_context: with ``cuda_stream``, the CUDA context (handle) the decoder works in.
        cuda_stream: the decoder's CUDA stream (handle). Without it, PyNvVideoCodec uses the
            legacy default stream, which waits for, and holds up, the work of every blocking
            stream of the context.
    """

    def __init__(
        self,
        url: str,
        gpu: int = 0,
        codec: Any = None,
        to_tensor: Callable[[Any], Any] = _torch_from_dlpack,
        max_consecutive_errors: int = 25,
        cuda_context: int | None = None,
        cuda_stream: int | None = None,
    ) -> None:
        self.url = url
        self.gpu = gpu
        self._codec = codec
        self._to_tensor = to_tensor
        self._max_errors = max_consecutive_errors
        self._cuda = (
            {"cudacontext": cuda_context, "cudastream": cuda_stream}
            if cuda_stream is not None
            else {}
        )
        self._demuxer: Any = None
        self._decoder: Any = None
        self._codec_id: Any = None
        self._packets: Iterator[Any] | None = None
        self._ready: collections.deque[Any] = collections.deque()
        self._ended = False
        self.frames = 0
        self.decode_errors = 0
        self._consecutive = 0
        self._budget: KeyframeBudget | None = None
        self._shedding = False  # the packets up to the next keyframe are not decoded
        self.shed = 0  # packets left undecoded with their group of pictures
        self._fps: float | None = None
        self._packet_no = 0  # video packets demuxed since open: the media clock of shedding
        self._empty_packet: Callable[[], Any] | None = None  # makes the packet that flushes
        self._keys = 0  # keyframes seen since open, while a budget was attached
        self._keys_carry_sets = True  # every one of them held its own parameter sets

    @property
    def is_open(self) -> bool:
        return self._decoder is not None

    def open(self) -> NvdecInfo:
        """Create the demuxer and the decoder. Raises NvdecError (credentials left out)."""
        self.close()
        codec = self._codec if self._codec is not None else load_codec()
        try:
            demuxer = codec.CreateDemuxer(filename=self._path())
            codec_id = demuxer.GetNvCodecId()
            decoder = codec.CreateDecoder(
                gpuid=self.gpu, codec=codec_id, usedevicememory=True, **self._cuda
            )
        except Exception as exc:
            raise NvdecError(
                f"cannot open {redact_text(self.url)} with NVDEC: {type(exc).__name__}: "
                f"{redact_text(str(exc))}"
            ) from None
        self._demuxer, self._decoder, self._codec_id = demuxer, decoder, codec_id
        self._empty_packet = getattr(codec, "PacketData", None)
        self._packets = iter(demuxer)
        self._ended = False
        self._consecutive = 0
        self._shedding = False
        self._keys, self._keys_carry_sets = 0, True
        fps = _ask(demuxer, "FrameRate")
        self._fps = fps if fps > 0 else None
        return NvdecInfo(
            int(_ask(demuxer, "Width")), int(_ask(demuxer, "Height")), fps if fps > 0 else None
        )

    def rewind(self) -> bool:
        """Start the file again on the same decoder (a looping file camera at its end).

        Only the demuxer is made anew. Destroying an NVDEC decoder took 84-198 ms on the
        H200, all of it holding the GIL (PyNvVideoCodec's destructor), which stalled every
        camera of the process at each loop; a decoder that has been flushed by the file's
        last (empty) packet decodes the file again frame for frame (both checked on the H200
        by ``tests/gpu/test_nvdec_gpu.py``).

        Returns:
            True if the reader is ready to read the file from its start; False if it was not
            at the end of a pass, or the file now holds another codec or cannot be opened (the
            caller then closes and opens, which reports why).
        """
        if self._decoder is None or not self._ended or self._ready:
            return False
        codec = self._codec if self._codec is not None else load_codec()
        try:
            demuxer = codec.CreateDemuxer(filename=self._path())
            same = demuxer.GetNvCodecId() == self._codec_id
        except Exception:
            return False
        if not same:
            return False
        self._demuxer = demuxer
        self._packets = iter(demuxer)
        self._ended = False
        self._consecutive = 0
        return True

    def _path(self) -> str:
        return self.url[len("file://") :] if self.url.lower().startswith("file://") else self.url

    def read(self) -> Any | None:
        """The next frame as a ``(H * 3 / 2, W)`` uint8 device tensor, or None at the end.

        Raises:
            NvdecError: not open, or too many packets in a row failed to decode.
        """
        picture = self._next_picture()
        return None if picture is None else self._to_tensor(picture)

    def skip(self) -> bool:
        """Decode the next frame and let it go without handing it over (a decode process's
        frame that the daemon would drop); False at the end."""
        return self._next_picture() is not None

    def _next_picture(self) -> Any | None:
        if self._decoder is None or self._packets is None:
            raise NvdecError("read before open (or after close)")
        while not self._ready:
            if self._ended:
                return None
            packet = next(self._packets, _END)
            if packet is _END:
                self._ended = True  # the demuxer's last packet already flushed the decoder
                continue
            if not self._shed(packet):
                self._decode(packet)
                if self._shedding and getattr(packet, "key", None) and self._flush_safe():
                    self._flush()  # a shed group's keyframe: out now, not a group later
        self.frames += 1
        return self._ready.popleft()

    def shed_groups(self, budget: KeyframeBudget | None) -> None:
        """At each keyframe, ask ``budget`` whether to decode its group of pictures in full
        or only the keyframe (``vidpipe/capture/group_budget.py``); None decodes every packet.

        A shed group costs the camera's thread one demux per packet and no decode, no copy
        and no frame: past what a process infers, those were the GIL time that starved its
        inference threads."""
        self._budget, self._shedding = budget, False

    def _shed(self, packet: Any) -> bool:
        """Whether ``packet`` is left undecoded with the rest of its group of pictures.

        PyNvVideoCodec's packets say whether they hold a keyframe (``key``) and their size
        (``bsl``; the demuxer's last packet is empty and flushes the decoder), but not the
        unit of their ``pts``: the media time of a keyframe is its packet's place in the
        stream at the nominal rate, which is all a group's length needs."""
        self._packet_no += 1
        budget = self._budget
        if budget is None or not getattr(packet, "bsl", 0):
            return False
        if getattr(packet, "key", 0):
            self._keys += 1
            if self._keys_carry_sets:
                self._keys_carry_sets = carries_parameter_sets(packet_head(packet))
            media_s = self._packet_no / self._fps if self._fps else None
            self._shedding = not budget.keyframe(media_s)
            return False
        self.shed += self._shedding
        return self._shedding

    def _flush(self) -> None:
        """Take every picture the decoder holds back, as at the end of a file.

        PyNvVideoCodec's decoder holds up to 4 pictures back (its default display delay),
        so the keyframe of a shed group would come out only once the next group's packets
        reached it: a group later, and stale. A flushed decoder decodes on from the next
        keyframe, as ``rewind`` relies on."""
        if self._empty_packet is not None:
            self._decode(self._empty_packet())

    def _flush_safe(self) -> bool:
        """Whether the next keyframe will bring the parameter sets that a flush forgets
        (``capture/annexb.py``): so far every keyframe did, and there were two at least, since
        a stream's first keyframe brings them whether the others do or not. Otherwise the
        keyframe of a shed group comes out a group late, but it does come out."""
        return self._keys >= 2 and self._keys_carry_sets

    def _decode(self, packet: Any) -> None:
        try:
            with GPU_GATE.work():  # not the demuxing before it: a live camera waits there
                frames = self._decoder.Decode(packet)
        except Exception as exc:
            self.decode_errors += 1
            self._consecutive += 1
            if self._consecutive > self._max_errors:
                raise NvdecError(
                    f"{self._consecutive} packets in a row failed to decode "
                    f"({type(exc).__name__}: {redact_text(str(exc))})"
                ) from None
            return
        self._consecutive = 0
        self._ready.extend(frames)

    def close(self) -> None:
        """Release the decoder, then the demuxer (PyNvVideoCodec's order). Idempotent."""
        self._ready.clear()
        self._packets = None
        self._decoder = None
        self._demuxer = None
