"""A ``realtime`` file camera past what inference takes: wait for the take, not the clock.

A file camera played in real time with a ``newest`` mailbox stands for a live camera. Past
what inference takes, its reader used to wake at every due time, read a frame, and replace
the one still waiting (``overwritten``), or drop it unmade once in a row (``mailbox_full``).
Its decode process (``capture.nvdec_processes``) had taken the decoding away, but every read
is still a round trip on the camera's thread under the process's one GIL, and with 270
cameras on one GPU process most of those reads brought frames that were replaced or dropped
before inference took them.

A file's next frame need not be read before the last one is taken: nothing arrives off a
network meanwhile. So when the frame it put still waits as the next comes due, the camera's
thread sleeps until the scheduler takes that frame (``FrameSink.wait_taken``, woken by the
take's own notify; at most ``WAIT_S``), then reads. It wakes about once a frame put, and what
it puts is taken rather than replaced.

A camera that waited falls behind its file's rate. The frames already due are let go in the
decode process, unsent (``behind``: the decoder is asked as it reads, and lets at most one go a
read, ``RemoteNvdecReader``), and counted as ``mailbox_full``. A frame let go is still decoded:
NVDEC does the work of every frame a camera skips that way, so one a read keeps it well below
its bound. A camera that would let go more plays behind its file's rate, and its pacer starts
a new schedule once it is a second late.

On an H100 with 4 decode processes, 270 such cameras in one process (three times what it
holds) inferred 1,133 frames a second against 942 reading on the clock, the worst camera at
0.94 of the mean against 0.54 (``benchmarks/README.md``, "A file camera waiting for the
take"); what bounds it then is the GIL, half of it the 270 reader threads.

Live streams never wait: their frames arrive off the network whether or not they are read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from vidpipe.capture.mailbox import FrameSink
from vidpipe.capture.pacing import Pacer
from vidpipe.config import CaptureConfig


class TakeWait:
    """The wait for the take, and what the decoder may let go after it, for one camera.

    Args:
        sink: the camera's ``newest`` mailbox.
        pacer: the camera's ``realtime`` pacer (what is due when).
        fps: the file's frame rate (None: unknown, nothing is let go).
        clock: the worker's monotonic clock.
    """

    #: The longest wait for one take: a scheduler that takes nothing for this long (paused,
    #: or its model still loading) must not stop the camera reading.
    WAIT_S = 0.25

    def __init__(
        self, sink: FrameSink, pacer: Pacer, fps: float | None, clock: Callable[[], float]
    ) -> None:
        self._sink = sink
        self._pacer = pacer
        self._fps = fps
        self._clock = clock

    def wait(self, stop: threading.Event) -> bool:
        """Sleep until the frame waiting in the mailbox is taken (at once if none waits), at
        most ``WAIT_S``. False if ``stop`` was set: read nothing more."""
        seq = self._sink.unread_seq()
        if seq is not None:
            self._sink.wait_taken(seq, stop, self.WAIT_S)
        return not stop.is_set()

    def behind(self) -> int:
        """For the decoder (``skipping.HeldBack``): how many due frames it may let go before
        the one it reads now, all that the camera is behind its file's rate."""
        return self._pacer.behind(self._clock(), self._fps)


def take_wait_for(
    source: Any,
    defaults: CaptureConfig,
    sink: FrameSink,
    pacer: Pacer | None,
    group_size: int,
    fps: float | None,
    clock: Callable[[], float],
) -> TakeWait | None:
    """A ``TakeWait`` for a camera it serves, else None: a ``realtime`` file (``pacer``) with
    a ``newest`` mailbox, on a thread of its own (a group thread serves others meanwhile),
    whose source lets frames go for free (``NvdecSource.skips_ahead``: in a decode process)
    as ``capture.skip_unused_frames`` allows."""
    if pacer is None or sink.policy != "newest" or group_size != 1:
        return None
    if not defaults.skip_unused_frames or not getattr(source, "skips_ahead", False):
        return None
    return TakeWait(sink, pacer, fps, clock)
