"""Capture stage: one worker per camera, with reconnects, backoff and a stall watchdog."""

from vidpipe.capture import pyav_source  # registers capture.backend "pyav"
from vidpipe.capture.backoff import Backoff, BackoffStep
from vidpipe.capture.pacing import Decimator
from vidpipe.capture.source import PacketTap, StreamParams, TapPacket
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
    "PacketTap",
    "StreamParams",
    "TapPacket",
    "check_transition",
    "pyav_source",
]
