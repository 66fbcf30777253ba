"""NVDEC cameras decoded in decode processes: the daemon's side (``capture.nvdec_processes``).

``DecodeProcesses`` starts the decode processes of a pipeline (``nvdec_child.serve``) and
gives each camera a connection to one of them, in turn. ``RemoteNvdecReader`` is the
camera's ``NvdecReader`` as ``NvdecSource`` uses it: ``read`` names a free slot of the
camera's ring, the decode process fills it, and the frame is that slot (no copy here; the
decode process's copy was complete before it answered). A slot is free once nothing but the
reader refers to it, the rule of ``nvdec_source.FramePool``: the mailbox, a batch until its
letterbox has run, a live view download hold it until they are done.

What stays in the daemon's process is the capture worker of each camera (pacing, the
mailbox, reconnects, counters) and the share of groups decoded in full; what leaves it is
every packet's demux, every decode and every copy, which at three times a process's count
took most of its GIL. Frames the worker would drop (``skip_unwanted``) are decoded there and
never sent, sparing it their round trips. A decode process that dies ends its cameras'
connections: their workers see a read error, back off and reopen, and the next open starts
it again.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import sys
import threading
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from vidpipe.capture.nvdec import KeyframeBudget, NvdecError, NvdecInfo
from vidpipe.capture.nvdec_child import CodecSpec, HostRing, serve

if TYPE_CHECKING:
    from vidpipe.capture.skipping import HeldBack, Wanted

# At most this many frames in a row are let go as detection would not use them: a detect_fps
# far below the stream's rate then costs a round trip every this many frames, and the
# decimator drops the frame it brings.
_MAX_UNUSED = 250


class _Child:
    def __init__(self, codec: CodecSpec | None, ring: str) -> None:
        context = multiprocessing.get_context("spawn")  # CUDA cannot cross a fork
        self.control, child_end = context.Pipe()
        self.process = context.Process(
            target=serve, args=(child_end, codec, ring), name="vidpipe-decode", daemon=True
        )
        self.process.start()
        child_end.close()

    def connect(self) -> Connection:
        ours, theirs = multiprocessing.Pipe()
        try:
            self.control.send("camera")
            reduction.send_handle(self.control, theirs.fileno(), self.process.pid)
        finally:
            theirs.close()
        return ours

    def close(self, timeout_s: float) -> None:
        self.control.close()  # the decode process ends when it sees this
        self.process.join(timeout_s)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1.0)


class DecodeProcesses:
    """The decode processes of one pipeline (``CaptureContext.shared``), started on first use.

    Args:
        codec: what stands in for PyNvVideoCodec there (tests, the CPU model); None imports it.
        ring: ``cuda`` (frames stay on the GPU) or ``host`` (shared host memory: tests and the
            CPU model).
    """

    def __init__(self, codec: CodecSpec | None = None, ring: str = "cuda") -> None:
        self.codec, self.ring = codec, ring
        self._lock = threading.Lock()
        self._children: list[_Child | None] = []
        self._next = 0
        self.started = 0  # decode processes started, restarts included

    def connect(self, processes: int) -> Connection:
        """A connection for one camera, to the next of ``processes`` decode processes in turn
        (started, or started again if it died)."""
        with self._lock:
            if len(self._children) < processes:
                self._children += [None] * (processes - len(self._children))
            index = self._next % processes
            self._next += 1
            child = self._children[index]
            if child is None or not child.process.is_alive():
                if child is not None:
                    child.close(0.0)
                child = self._children[index] = _Child(self.codec, self.ring)
                self.started += 1
            return child.connect()

    @property
    def alive(self) -> int:
        with self._lock:
            return sum(1 for c in self._children if c is not None and c.process.is_alive())

    def close(self, timeout_s: float = 5.0) -> None:
        """End every decode process (their cameras' connections are closed first by their
        workers; a process that does not end in ``timeout_s`` is killed)."""
        with self._lock:
            children, self._children = self._children, []
        if any(c is not None for c in children):
            gc.collect()  # frames of the rings caught in reference cycles go first
        for child in children:
            if child is not None:
                child.close(timeout_s)


class RemoteNvdecReader:
    """A camera's ``NvdecReader`` whose demux, decode and copy run in a decode process.

    Args:
        url: the camera's URL (sent over the connection, never on a command line).
        gpu: the device it decodes on.
        connect: a new connection to a decode process (``DecodeProcesses.connect``).
    """

    def __init__(self, url: str, gpu: int, connect: Any) -> None:
        self.url, self.gpu = url, gpu
        self._connect = connect
        self._conn: Connection | None = None
        self._budget: KeyframeBudget | None = None
        self._slots: list[Any] = []
        self._wanted: Wanted | None = None
        self._held_back: HeldBack | None = None
        self._fps: float | None = None
        self.frames = 0
        self.decode_errors = 0
        self.shed = 0
        self.skipped = 0  # decoded there and let go: detection would not use them
        self.skipped_unread = 0  # ... they would replace a frame still waiting for inference

    @property
    def is_open(self) -> bool:
        return self._conn is not None

    def _ask(self, *request: Any) -> tuple[Any, ...]:
        if self._conn is None:
            raise NvdecError("read before open (or after close)")
        try:
            self._conn.send(request)
            while True:
                answer: tuple[Any, ...] = self._conn.recv()
                if answer[0] != "key":
                    break
                decide = self._budget is None or self._budget.keyframe(answer[1])
                self._conn.send(("decide", decide))
        except (EOFError, OSError) as exc:
            self._drop()
            raise NvdecError(f"the decode process exited ({type(exc).__name__})") from None
        if answer[0] == "error":
            raise NvdecError(answer[1])
        return answer

    def open(self) -> NvdecInfo:
        """Connect to a decode process and open the camera there."""
        self.close()
        self._conn = self._connect()
        _, (width, height, fps) = self._ask("open", self.url, self.gpu)
        if self._budget is not None:
            self._ask("shed", True)
        self._fps = fps
        return NvdecInfo(width, height, fps)

    def skip_unwanted(self, wanted: Wanted | None, held_back: HeldBack | None) -> None:
        """Let the decode process decode and let go, without copying or sending them, the
        frames that detection would not use (``wanted``) or that would only replace a frame
        still waiting for inference (``held_back``), as ``capture/skipping.py`` lets FFmpeg.
        Each frame let go spares this process's capture worker a wake-up and a round trip."""
        self._wanted, self._held_back = wanted, held_back

    def _ahead(self) -> tuple[int, int]:
        """Frames to let go before the next one handed over: unused by detection, else, one
        that would replace an untaken frame (once in a row: ``OnceInARow.held_back``)."""
        unused, wanted, fps = 0, self._wanted, self._fps
        if wanted is not None and fps:
            while unused < _MAX_UNUSED and not wanted((unused + 1) / fps):
                unused += 1
        if unused or self._held_back is None:
            return unused, 0
        return 0, min(1, self._held_back())

    def read(self) -> Any | None:
        """The next frame (a slot of the ring), or None at the end of a file."""
        slot = self._free_slot()
        unused, unread = self._ahead()
        answer = self._ask("read", slot, unused + unread)
        kind, slot, ring, self.shed, self.decode_errors, passed = answer
        if unused:  # passed: fewer than asked only at the end of a file
            self.skipped += passed
        else:
            self.skipped_unread += passed
        if kind == "end":
            return None
        if ring is not None:
            self._adopt(ring)
        self.frames += 1
        return self._slots[slot]

    def _free_slot(self) -> int | None:
        slots = self._slots
        for i in range(len(slots)):
            # The list and getrefcount's own argument: nobody else holds it.
            if sys.getrefcount(slots[i]) <= 2:
                return i
        return None  # none yet, or all in use: the decode process makes a new ring

    def _adopt(self, ring: Any) -> None:
        array = ring.attach() if isinstance(ring, HostRing) else ring
        self._slots = [array[i] for i in range(int(array.shape[0]))]

    def shed_groups(self, budget: KeyframeBudget | None) -> None:
        """Shed groups as ``budget`` says; the decode process asks it at each keyframe."""
        self._budget = budget
        if self._conn is not None:
            self._ask("shed", budget is not None)

    def rewind(self) -> bool:
        return bool(self._ask("rewind")[1]) if self._conn is not None else False

    def close(self) -> None:
        """Close the camera in its decode process and the connection. Idempotent."""
        if self._conn is not None:
            with contextlib.suppress(NvdecError):  # gone already: nothing to close there
                self._ask("close")
        self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        self._slots = []  # frames still out keep their own views, and the memory under them
