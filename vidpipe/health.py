"""Is the pipeline alive? One answer shared by /healthz, /readyz and systemd's watchdog.

"Alive" means the inference stage makes progress: it completed a request within
``stall_after_s``, or it has nothing to do (every camera is in backoff or idle and nothing is
in flight). A hung request pool keeps frames in flight with no completion, so it turns
unhealthy, the watchdog pings stop and the service manager restarts the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HealthStatus:
    """One health verdict: ``ok`` and a short human reason."""

    ok: bool
    reason: str


class Health:
    """Tracks readiness and inference progress.

    Args:
        stall_after_s: how long work may wait without any completed inference.
    """

    def __init__(self, stall_after_s: float = 30.0) -> None:
        self.stall_after_s = stall_after_s
        self._ready = threading.Event()
        self._stopping = threading.Event()
        self._progress: Callable[[], tuple[float, int]] | None = None
        self._failed: str | None = None

    def attach(self, progress: Callable[[], tuple[float, int]]) -> None:
        """Set the probe: returns (monotonic time of the last completion, frames pending)."""
        self._progress = progress

    def set_ready(self) -> None:
        """The config is valid, the model compiled, the HTTP port bound, the pipeline runs."""
        self._ready.set()

    def fail(self, reason: str) -> None:
        """The process is unusable for good (e.g. a sticky CUDA error): unhealthy from now on."""
        self._failed = reason

    def set_stopping(self) -> None:
        """Shutdown began: not ready any more (still alive while draining)."""
        self._stopping.set()

    @property
    def ready(self) -> bool:
        """True between start-up and the beginning of shutdown."""
        return self._ready.is_set() and not self._stopping.is_set()

    def check(self, now: float | None = None) -> HealthStatus:
        """The liveness verdict at ``now`` (monotonic seconds)."""
        if self._failed is not None:
            return HealthStatus(False, self._failed)
        if self._progress is None:
            return HealthStatus(True, "starting")
        now = time.monotonic() if now is None else now
        last, pending = self._progress()
        age = now - last
        if pending == 0:
            return HealthStatus(True, "idle: nothing to infer")
        if age <= self.stall_after_s:
            return HealthStatus(True, f"last inference {age:.1f} s ago")
        return HealthStatus(
            False, f"no inference completed for {age:.0f} s with {pending} frame(s) pending"
        )
