"""What the first NAL units of an H.264 or H.265 access unit in Annex B form say: whether a
keyframe carries its own parameter sets.

A decoder flushed (as at a file's end) forgets the stream's parameter sets (H.264's SPS and
PPS; H.265's VPS, SPS and PPS). If the next keyframe does not bring them again, it cannot be
decoded: NVDEC, flushed after each keyframe of a stream that sends them once, at its start (as
some cameras do), decoded its first keyframe and none after
(``benchmarks/results/gpu/gpu-tests-h100-nvdec-shed-sets-lost.log``). MP4 files brought to
Annex B by FFmpeg's ``*_mp4toannexb`` filters carry them before every keyframe, as do most
cameras' streams.
"""

from __future__ import annotations

import ctypes

START = b"\x00\x00\x01"
# Parameter sets come before the keyframe's slices (after an access unit delimiter and,
# with some encoders, an SEI of a few hundred bytes): the first bytes hold them when present.
HEAD_BYTES = 4096
H264_SETS = frozenset({7, 8})  # SPS, PPS
H265_SETS = frozenset({33, 34})  # SPS, PPS (the VPS, 32, comes with them)


def carries_parameter_sets(head: bytes) -> bool:
    """Whether the access unit that ``head`` begins holds an SPS and a PPS, of H.264 or of
    H.265. The NAL header byte of one codec's parameter sets never reads as the other's."""
    h264: set[int] = set()
    h265: set[int] = set()
    at = head.find(START)
    while 0 <= at < len(head) - 3:
        header = head[at + 3]
        h264.add(header & 0x1F)
        h265.add((header >> 1) & 0x3F)
        at = head.find(START, at + 4)
    return h264 >= H264_SETS or h265 >= H265_SETS


def packet_head(packet: object) -> bytes:
    """The first bytes of a PyNvVideoCodec packet (``bsl_data``: the address of its ``bsl``
    bytes); empty when the packet says neither."""
    address = getattr(packet, "bsl_data", 0)
    size = getattr(packet, "bsl", 0)
    if not address or not size:
        return b""
    return ctypes.string_at(address, min(int(size), HEAD_BYTES))
