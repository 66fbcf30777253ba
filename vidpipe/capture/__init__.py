"""Capture stage: one worker per camera, with reconnects, backoff and a stall watchdog."""

from vidpipe.capture import nvdec_source, pyav_source  # register decoders nvdec, pyav
from vidpipe.capture.backoff import Backoff, BackoffStep
from vidpipe.capture.decoders import CaptureContext, DecoderKind, register_source
from vidpipe.capture.pacing import Decimator
from vidpipe.capture.session import ALLOWED_TRANSITIONS, IllegalTransitionError, check_transition
from vidpipe.capture.source import PacketTap, StreamParams, TapPacket
from vidpipe.capture.worker import CaptureWorker

__all__ = [
    "ALLOWED_TRANSITIONS",
    "Backoff",
    "BackoffStep",
    "CaptureContext",
    "CaptureWorker",
    "Decimator",
    "DecoderKind",
    "IllegalTransitionError",
    "PacketTap",
    "StreamParams",
    "TapPacket",
    "check_transition",
    "nvdec_source",
    "pyav_source",
    "register_source",
]
