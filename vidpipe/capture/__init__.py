"""Capture stage: one worker per camera, with reconnects, backoff and a stall watchdog."""

from vidpipe.capture.backoff import Backoff, BackoffStep
from vidpipe.capture.source import Decimator, configure_ffmpeg_env
from vidpipe.capture.worker import (
    ALLOWED_TRANSITIONS,
    CaptureWorker,
    IllegalTransitionError,
    check_transition,
)

__all__ = [
    "ALLOWED_TRANSITIONS",
    "Backoff",
    "BackoffStep",
    "CaptureWorker",
    "Decimator",
    "IllegalTransitionError",
    "check_transition",
    "configure_ffmpeg_env",
]
