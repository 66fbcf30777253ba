"""Reconnect delays: exponential backoff with full jitter.

Attempt ``n`` (from 0) waits a uniformly random time in ``[0, min(max_s, initial_s * 2**n)]``
("full jitter"), so cameras that failed together do not reconnect in lockstep. ``reset`` starts
again from ``initial_s`` once frames flow again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackoffStep:
    """One reconnect delay.

    Attributes:
        attempt: 1 for the first delay after frames last flowed, then 2, 3, ...
        ceiling_s: the exponential bound of this attempt, ``min(max_s, initial_s * 2**(n-1))``.
        delay_s: the jittered delay actually used, in ``[0, ceiling_s]``.
    """

    attempt: int
    ceiling_s: float
    delay_s: float


class Backoff:
    """Exponential backoff with full jitter.

    Args:
        initial_s: ceiling of the first delay.
        max_s: cap of every ceiling.
        rng: random source (tests pass a seeded one).
    """

    def __init__(self, initial_s: float, max_s: float, rng: random.Random | None = None) -> None:
        if initial_s <= 0 or max_s <= 0:
            raise ValueError(f"backoff times must be > 0, got initial {initial_s}, max {max_s}")
        self.initial_s = initial_s
        self.max_s = max(max_s, initial_s)
        self._rng = rng or random.Random()
        self._attempt = 0

    @property
    def attempt(self) -> int:
        """How many delays were handed out since the last ``reset``."""
        return self._attempt

    def ceiling(self, attempt: int) -> float:
        """The upper bound of delay number ``attempt`` (1-based)."""
        # min() before the power would overflow for long outages; cap the exponent instead.
        exponent = min(attempt - 1, 64)
        return min(self.max_s, self.initial_s * 2.0**exponent)

    def next(self) -> BackoffStep:
        """The next delay; each call doubles the ceiling up to ``max_s``."""
        self._attempt += 1
        ceiling_s = self.ceiling(self._attempt)
        return BackoffStep(self._attempt, ceiling_s, self._rng.uniform(0.0, ceiling_s))

    def reset(self) -> None:
        """Frames flow again: the next delay starts from ``initial_s``."""
        self._attempt = 0
