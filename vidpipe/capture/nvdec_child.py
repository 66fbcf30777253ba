"""A decode process of NVDEC cameras (``capture.nvdec_processes``): it demuxes and decodes.

Past what one process infers, the camera threads' demuxing and decoding took the GIL that
the process's inference threads needed: one GPU process at three times its count inferred
about 0.7 of what it inferred at its count (benchmarks/README.md, GPU). A decode process has
a GIL of its own. Each of its cameras is a thread here that serves one connection to the
camera's capture worker in the daemon's process (``nvdec_remote.RemoteNvdecReader``): the
worker asks for a frame and names a slot; this side demuxes, sheds or decodes, copies the
picture into that slot of the camera's ring of frame buffers and answers. The ring is memory
both processes see: on the GPU a PyTorch tensor passed by CUDA IPC (no pixel leaves the
device), in tests and the CPU model shared host memory (``HostRing``).

The protocol (tuples, one answer to each request; ``*counts`` is the reader's frames shed
with their group and packets the decoder rejected):

* ``("open", url, gpu)`` -> ``("ok", (width, height, fps))``
* ``("read", slot)`` -> ``("frame", slot, ring or None, *counts)``, ``("end", None, None,
  *counts)``; a ring comes with the first frame and whenever the picture's size or the slot
  asked for (None: every slot is in use) needs a new one. While it reads, a keyframe asks
  ``("key", media_s)`` and waits for ``("decide", bool)``: the daemon's process keeps the
  share of groups decoded in full (``group_budget.py``).
* ``("shed", bool)``, ``("rewind",)``, ``("close",)`` -> ``("ok", value)``
* any request -> ``("error", message)`` when it fails (the message without credentials).
"""

from __future__ import annotations

import contextlib
import importlib
import mmap
import os
import signal
import threading
import time
from dataclasses import dataclass
from multiprocessing import reduction, shared_memory
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from vidpipe.capture.nvdec import NvdecError, NvdecReader, load_codec
from vidpipe.capture.nvdec_memory import POOL_KEEP
from vidpipe.redact import redact_text

#: Frame buffers in a camera's ring: as many as a camera's in-process pool keeps.
RING_SLOTS = POOL_KEEP
#: How long a decode process told to end waits for its cameras' connections to close.
CLOSE_WAIT_S = 2.0


@dataclass(frozen=True, slots=True)
class CodecSpec:
    """What stands in for PyNvVideoCodec in a decode process: ``module.name(*args)`` (tests
    and the CPU model; the daemon passes none and imports PyNvVideoCodec)."""

    module: str
    name: str
    args: tuple[Any, ...] = ()

    def load(self) -> Any:
        return getattr(importlib.import_module(self.module), self.name)(*self.args)


@dataclass(frozen=True, slots=True)
class HostRing:
    """A ring of frame buffers in shared host memory, as sent to the daemon's process."""

    name: str
    slots: int
    shape: tuple[int, ...]

    def attach(self) -> np.ndarray:
        """The daemon's side: the ring as one array over its own mapping, which lives as long
        as any view of it (a frame still out after its camera reopened keeps its pixels)."""
        fd = os.open(f"/dev/shm/{self.name.lstrip('/')}", os.O_RDWR)
        try:
            mapping = mmap.mmap(fd, self.slots * int(np.prod(self.shape)))
        finally:
            os.close(fd)
        return np.frombuffer(mapping, np.uint8).reshape((self.slots, *self.shape))


class _HostRings:
    """Rings in shared host memory; a picture is copied in on the CPU."""

    def __init__(self) -> None:
        self._memory: shared_memory.SharedMemory | None = None
        self.array: np.ndarray | None = None

    def make(self, slots: int, shape: tuple[int, ...]) -> HostRing:
        self.free()
        size = max(1, slots * int(np.prod(shape)))
        self._memory = memory = shared_memory.SharedMemory(create=True, size=size)
        self.array = np.ndarray((slots, *shape), np.uint8, memory.buf)
        return HostRing(memory.name, slots, tuple(shape))

    def current(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()  # no stream: the picture is host memory

    def copy(self, slot: int, surface: Any) -> None:
        assert self.array is not None
        self.array[slot][...] = np.asarray(surface)

    def free(self) -> None:
        memory, self._memory, self.array = self._memory, None, None
        if memory is not None:
            memory.unlink()  # the daemon's process keeps its own mapping while it reads
            with contextlib.suppress(BufferError):  # a view still out: closed with the process
                memory.close()


class _CudaRings:
    """Rings of device memory on the camera's GPU, sent as PyTorch tensors (CUDA IPC); a
    picture is copied in on the camera's own stream (``DecoderStream``), complete before the
    answer goes."""

    def __init__(self, gpu: int) -> None:
        from vidpipe.capture.nvdec_stream import DecoderStream

        self.stream = DecoderStream(gpu)
        self.gpu = gpu
        self.array: Any = None

    def make(self, slots: int, shape: tuple[int, ...]) -> Any:
        import torch

        # A new ring, not one resized: the daemon's process may still read the old one, and
        # PyTorch keeps a tensor sent by IPC alive until the receiver lets it go.
        self.array = torch.empty((slots, *shape), dtype=torch.uint8, device=f"cuda:{self.gpu}")
        return self.array

    def current(self) -> contextlib.AbstractContextManager[None]:
        """The camera's stream as PyTorch's current one (the decode, the dlpack hand-over)."""
        return self.stream.current()

    def copy(self, slot: int, surface: Any) -> None:
        self.stream.copy_into(self.array[slot], surface)

    def free(self) -> None:
        self.array = None


class _AskDaemon:
    """The group budget of a camera in a decode process: each keyframe asks the daemon's
    process, which keeps the share (``GroupBudget.keyframe``)."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def keyframe(self, media_s: float | None) -> bool:
        self._conn.send(("key", media_s))
        answer = self._conn.recv()
        return bool(answer[1])


class CameraServer:
    """One camera's connection in a decode process (its thread runs ``serve``)."""

    def __init__(self, conn: Connection, codec: CodecSpec | None, ring: str) -> None:
        self._conn = conn
        self._codec = codec
        self._ring_kind = ring
        self._reader: NvdecReader | None = None
        self._rings: _HostRings | _CudaRings | None = None
        self._shape: tuple[int, ...] | None = None

    def serve(self) -> None:
        """Answer requests until the daemon's side closes the connection."""
        try:
            while True:
                try:
                    request = self._conn.recv()
                except (EOFError, OSError):
                    return
                self._conn.send(self._answer(request))
        except (EOFError, OSError):  # the daemon's side went away mid-answer
            return
        finally:
            self._close()
            self._conn.close()

    def _answer(self, request: tuple[Any, ...]) -> tuple[Any, ...]:
        try:
            op = request[0]
            if op == "open":
                return ("ok", self._open(request[1], request[2]))
            if op == "read":
                return self._read(request[1], request[2])
            if op == "shed":
                self._require().shed_groups(_AskDaemon(self._conn) if request[1] else None)
                return ("ok", None)
            if op == "rewind":
                return ("ok", self._require().rewind())
            if op == "close":
                self._close()
                return ("ok", None)
            return ("error", f"unknown request {op!r}")
        except NvdecError as exc:  # its message is redacted already
            return ("error", str(exc))
        except Exception as exc:
            return ("error", f"{type(exc).__name__}: {redact_text(str(exc))}")

    def _require(self) -> NvdecReader:
        if self._reader is None:
            raise NvdecError("read before open (or after close)")
        return self._reader

    def _open(self, url: str, gpu: int) -> tuple[int, int, float | None]:
        self._close()
        codec = self._codec.load() if self._codec is not None else load_codec()
        rings: _HostRings | _CudaRings
        if self._ring_kind == "cuda":
            rings = _CudaRings(gpu)
            stream = rings.stream
            reader = NvdecReader(
                url, gpu, codec=codec, cuda_context=stream.context, cuda_stream=stream.handle
            )
        else:
            rings = _HostRings()
            reader = NvdecReader(url, gpu, codec=codec, to_tensor=np.asarray)
        self._rings, self._reader = rings, reader
        with rings.current():
            info = reader.open()
        return (info.width, info.height, info.fps)

    def _read(self, slot: int | None, skip: int) -> tuple[Any, ...]:
        """The next frame into ``slot`` of the ring, after ``skip`` frames decoded and let go
        (the daemon would drop them: their picture is never copied, nor their answer sent).

        The daemon counted ``skip`` on the frames right after the last one it had; a group of
        pictures shed meanwhile moves the frames let go past it, and the frame sent later."""
        reader, rings = self._require(), self._rings
        assert rings is not None
        passed = 0
        with rings.current():
            while passed < skip and reader.skip():
                passed += 1
            surface = reader.read() if passed == skip else None
        counts = (reader.shed, reader.decode_errors, passed)
        if surface is None:
            return ("end", None, None, *counts)
        ring = None
        shape = tuple(int(n) for n in surface.shape)
        if slot is None or shape != self._shape or rings.array is None:
            ring, slot, self._shape = rings.make(RING_SLOTS, shape), 0, shape
        rings.copy(slot, surface)
        return ("frame", slot, ring, *counts)

    def _close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()
        if self._rings is not None:
            self._rings.free()
        self._rings, self._shape = None, None


def serve(control: Connection, codec: CodecSpec | None, ring: str) -> None:
    """A decode process's main: each ``"camera"`` on ``control`` comes with a connection's
    handle, served on a thread of its own; the process ends when ``control`` closes.

    SIGINT and SIGTERM are left to the daemon's process: a service stop reaches the whole
    process group, and the cameras here must outlive the daemon's capture workers, which
    close their connections as they stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if ring == "cuda":
        import torch.multiprocessing  # noqa: F401  (registers the CUDA IPC pickling)
    threads: list[threading.Thread] = []
    while True:
        try:
            control.recv()
            handle = reduction.recv_handle(control)
        except (EOFError, OSError):
            break
        server = CameraServer(Connection(handle), codec, ring)
        thread = threading.Thread(target=server.serve, name="nvdec-decode", daemon=True)
        thread.start()
        threads = [t for t in threads if t.is_alive()] + [thread]
    deadline = time.monotonic() + CLOSE_WAIT_S
    for thread in threads:  # their cameras close and free their rings (shared memory)
        thread.join(max(0.0, deadline - time.monotonic()))
