"""The file reader and result log every baseline contender uses: OpenCV FFmpeg, one decoder
thread, looped.

It is deliberately the plain loop a user would write, with the same decoder settings as
vidpipe's capture workers (``capture.decoder_threads: 1``), so that decoding costs the same in
every contender.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

import cv2
import numpy as np

from vidpipe.capture.pacing import Pacer

DECODER_THREADS = 1


def open_clip(path: str, decoder_threads: int = DECODER_THREADS) -> cv2.VideoCapture:
    """Open a video file with FFmpeg and ``decoder_threads`` decoder threads.

    Raises:
        RuntimeError: the file does not open.
    """
    cap = cv2.VideoCapture(path, cv2.CAP_FFMPEG, [cv2.CAP_PROP_N_THREADS, decoder_threads])
    if not cap.isOpened():
        raise RuntimeError(f"cannot open {path}")
    return cap


class LoopingReader:
    """Frames of a file, forever: at the end the file is opened again.

    ``realtime``: each frame is read when it is due at the file's frame rate, as a live camera
    delivers it, with vidpipe's own ``Pacer``, aligned to the clock as the daemon's cameras are
    in ``vidpipe bench --realtime`` (``Pipeline.capture_phase = "aligned"``), so that every
    contender's cameras deliver in step at the same instants. ``clock`` and ``sleep`` are for
    tests.
    """

    def __init__(
        self,
        path: str,
        decoder_threads: int = DECODER_THREADS,
        *,
        realtime: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = path
        self.decoder_threads = decoder_threads
        self.loops = 0
        self._cap = open_clip(path, decoder_threads)
        self._pacer = Pacer(aligned=True) if realtime else None
        self._fps = float(self._cap.get(cv2.CAP_PROP_FPS) or 0.0)
        self._clock, self._sleep = clock, sleep

    def read(self) -> np.ndarray:
        """The next ``(H, W, 3)`` uint8 BGR frame (once it is due, when ``realtime``).

        Raises:
            RuntimeError: the file yields no frame even right after opening.
        """
        if self._pacer is not None and (delay_s := self._pacer.delay_s(self._clock(), self._fps)):
            self._sleep(delay_s)
        ok, img = self._cap.read()
        if ok and img is not None:
            return img
        self._cap.release()
        self._cap = open_clip(self.path, self.decoder_threads)
        self.loops += 1
        ok, img = self._cap.read()
        if not ok or img is None:
            raise RuntimeError(f"{self.path} yields no frame")
        return img

    def close(self) -> None:
        self._cap.release()


def start_camera_threads(n: int, body: Callable[[int], None], name: str) -> list[threading.Thread]:
    """Start ``n`` daemon threads running ``body(camera_index)``."""
    threads = [
        threading.Thread(target=body, args=(i,), name=f"{name}-{i}", daemon=True) for i in range(n)
    ]
    for t in threads:
        t.start()
    return threads


class ResultLog:
    """Per-camera completions of a baseline contender: counts and capture-to-result latency.

    ``record`` is called from many threads; list appends and integer stores are atomic under
    the GIL, and each camera index is written by one thread only.
    """

    def __init__(self, cameras: int) -> None:
        self.per_camera = [0] * cameras
        self._done: list[tuple[float, float]] = []  # (t_done, latency_s), in completion order
        self._lock = threading.Lock()

    def record(self, camera: int, t_capture: float) -> None:
        with self._lock:  # timestamp under the lock: the list stays sorted by t_done
            t_done = time.monotonic()
            self.per_camera[camera] += 1
            self._done.append((t_done, t_done - t_capture))

    @property
    def frames(self) -> int:
        with self._lock:
            return len(self._done)

    def latencies_ms(self, t0: float, t1: float) -> list[float]:
        """Latencies (ms, sorted) of results completed in ``[t0, t1]`` (monotonic)."""
        with self._lock:
            done = list(self._done)
        lo = bisect.bisect_left(done, (t0, -1.0))
        hi = bisect.bisect_right(done, (t1, float("inf")))
        return sorted(lat * 1000.0 for _, lat in done[lo:hi])
