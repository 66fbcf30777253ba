"""Where a frame waits before its inference, from outside the daemon (``--frame-waits``).

A probe (``vidpipe.bench.worker.Probe``) that wraps the frame hub's ``Mailbox.put`` and
``FrameHub.take`` of the worker process for the window, and samples the scheduler every
``_SAMPLE_S``:

* **reader**: from a frame's capture time (after its decode) to its entering its camera's
  mailbox: the motion gate, the conversion at the model's size, the reader's GIL waits;
* **mailbox**: from entering the mailbox to the scheduler taking it (frames overwritten
  while waiting are counted apart);
* the samples: how often the scheduler had every request in flight (its cap) while two or
  more frames waited (**full**: the device was the limit), how often frames waited with a
  request free (**scheduler-bound**), and how often nothing waited and nothing was in flight
  (**idle**).

Nothing of the daemon changes: the wrappers only time what the two methods already do. They
cost a dict operation per frame, so the figures of a point measured with them are not those
of one without.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

from vidpipe.bench.common import PointResult
from vidpipe.quantiles import quantile_of
from vidpipe.schedule.hub import FrameHub, Mailbox

_SAMPLE_S = 0.002


class FrameWaitsProbe:
    def __init__(self) -> None:
        self._put_at: dict[int, tuple[float, float]] = {}  # id(frame) -> (t_capture, t_put)
        self._reader: list[float] = []
        self._mailbox: list[float] = []
        self._overwritten = 0
        self._samples: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._originals: tuple[Any, Any] | None = None
        self._sampler: threading.Thread | None = None

    def before(self, contender: Any) -> None:
        scheduler = getattr(getattr(contender, "daemon", None), "scheduler", None)
        if scheduler is None:
            return  # not vidpipe
        self._install()
        self._sampler = threading.Thread(
            target=self._sample, args=(scheduler,), name="frame-waits", daemon=True
        )
        self._sampler.start()

    def after(self, contender: Any, result: PointResult) -> None:
        del contender
        if self._originals is None:
            return
        self._stop.set()
        if self._sampler is not None:
            self._sampler.join(1.0)
        Mailbox.put, FrameHub.take = self._originals  # type: ignore[method-assign]
        result.info["frame_waits"] = self.summary()

    def finish(self, contender: Any, result: PointResult) -> None:
        del contender, result

    def summary(self) -> dict[str, Any]:
        """Quantiles (ms) of the two waits, and the samples' shares."""

        def ms(values: list[float]) -> dict[str, float | None]:
            return {
                f"p{round(q * 100)}": None if (v := quantile_of(values, q)) is None else v * 1e3
                for q in (0.5, 0.95, 0.99)
            }

        total = sum(self._samples.values())
        return {
            "frames": len(self._mailbox),
            "overwritten_waiting": self._overwritten,
            "reader_ms": ms(self._reader),
            "mailbox_ms": ms(self._mailbox),
            "samples": {k: round(n / total, 3) for k, n in self._samples.items()} if total else {},
        }

    def _install(self) -> None:
        put, take = Mailbox.put, FrameHub.take
        self._originals = (put, take)
        probe = self

        def timed_put(box: Mailbox, frame: Any, *args: Any, **kwargs: Any) -> bool:
            now = time.monotonic()
            with probe._lock:
                waiting = box._frame
                if waiting is not None and probe._put_at.pop(id(waiting), None) is not None:
                    probe._overwritten += 1  # replaced while it waited: never taken
                probe._put_at[id(frame)] = (frame.t_capture, now)
            return bool(put(box, frame, *args, **kwargs))

        def timed_take(hub: FrameHub, timeout_s: float) -> Any:
            frame = take(hub, timeout_s)
            if frame is not None:
                now = time.monotonic()
                with probe._lock:
                    entry = probe._put_at.pop(id(frame), None)
                if entry is not None:
                    probe._reader.append(entry[1] - entry[0])
                    probe._mailbox.append(now - entry[1])
            return frame

        Mailbox.put = timed_put  # type: ignore[method-assign,assignment]
        FrameHub.take = timed_take  # type: ignore[method-assign,assignment]

    def _sample(self, scheduler: Any) -> None:
        while not self._stop.wait(_SAMPLE_S):
            with self._lock:
                waiting = len(self._put_at)
            in_flight, cap = scheduler._in_backend, scheduler._cap
            if waiting >= 2 and in_flight >= cap:
                self._samples["full"] += 1
            elif waiting >= 2:
                self._samples["scheduler_bound"] += 1
            elif waiting == 0 and in_flight == 0:
                self._samples["idle"] += 1
            else:
                self._samples["other"] += 1
