"""A process-wide pause of GPU work while CUDA graphs are captured.

A stream capture records work instead of running it, and CUDA refuses calls from other
threads that would synchronise with it: on the H200, NVDEC cameras decoding while a graph was
captured had their copies fail (``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``) and the capture
was invalidated. So the threads that touch the GPU beside the scheduler (camera readers,
device postprocessing, the live view's conversion, secondary models) wrap that work in
``GPU_GATE.work()``, and a capture runs inside ``GPU_GATE.exclusive()``: it waits for the
work in progress, and new work waits for it (a capture of every graph size takes about
0.2 s per stream).

``work()`` costs two round trips of an uncontended lock (about a microsecond); it always
counts, so that a capture that starts while cameras run (a reload) sees every user.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class GpuGate:
    """Shared GPU work against exclusive captures (a readers-writer lock, writers first)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._users = 0
        self._closed = False

    @contextlib.contextmanager
    def work(self) -> Iterator[None]:
        """GPU work that must not run during a capture."""
        with self._cond:
            while self._closed:
                self._cond.wait()
            self._users += 1
        try:
            yield
        finally:
            with self._cond:
                self._users -= 1
                if self._closed and not self._users:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """Run the block while no ``work()`` is in progress; new work waits for it."""
        with self._cond:
            while self._closed:  # another capture
                self._cond.wait()
            self._closed = True
            while self._users:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._closed = False
                self._cond.notify_all()


#: The one gate of this process: CUDA's capture rules are per process (context), not per
#: pipeline.
GPU_GATE = GpuGate()
