"""Whether a keyframe carries its own parameter sets (``capture/annexb.py``), on streams made
by real encoders: PyAV's libx264 and libx265, in Annex B form as NVDEC is given them."""

from __future__ import annotations

import ctypes
import itertools
import re
from fractions import Fraction

import numpy as np
import pytest

from vidpipe.capture.annexb import carries_parameter_sets, packet_head

av = pytest.importorskip("av")


def _packets(codec: str, frames: int = 12, gop: int = 4) -> list[tuple[bool, bytes]]:
    """(keyframe, bytes) of each packet of a small stream in Annex B form, parameter sets
    repeated before every keyframe (x264's and x265's default for a raw stream)."""
    enc = av.CodecContext.create(codec, "w")
    enc.width, enc.height, enc.pix_fmt = 128, 96, "yuv420p"
    enc.time_base = Fraction(1, 25)
    enc.options = {"g": str(gop), "bf": "0", "preset": "ultrafast", "sc_threshold": "0"}
    if codec == "libx265":
        x265 = f"keyint={gop}:min-keyint={gop}:log-level=none"
        enc.options = {**enc.options, "x265-params": x265}
    out = []
    rng = np.random.default_rng(0)
    for k in range(frames):
        image = rng.integers(0, 255, (96, 128, 3), np.uint8)
        frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuv420p")
        frame.pts = k
        out += [(p.is_keyframe, bytes(p)) for p in enc.encode(frame)]
    out += [(p.is_keyframe, bytes(p)) for p in enc.encode()]
    return out


def _strip_sets(data: bytes, sets: set[int], h265: bool) -> bytes:
    """``data`` without its parameter-set NAL units."""
    starts = [m.start() for m in re.finditer(b"\x00\x00\x01", data)] + [len(data)]
    kept = [data[: starts[0]]]
    for a, b in itertools.pairwise(starts):
        header = data[a + 3]
        kind = (header >> 1) & 0x3F if h265 else header & 0x1F
        if kind not in sets:
            kept.append(data[a:b])
    return b"".join(kept)


@pytest.mark.parametrize(("codec", "sets"), [("libx264", {7, 8}), ("libx265", {32, 33, 34})])
def test_keyframes_carry_their_sets_and_other_frames_do_not(codec: str, sets: set[int]) -> None:
    packets = _packets(codec)
    keys = [data for key, data in packets if key]
    others = [data for key, data in packets if not key]
    assert len(keys) >= 2 and others
    assert all(carries_parameter_sets(data) for data in keys)
    assert not any(carries_parameter_sets(data) for data in others)
    # a keyframe of a camera that sent its sets only once: no sets to find
    stripped = _strip_sets(keys[1], sets, h265=codec == "libx265")
    assert len(stripped) < len(keys[1]) and not carries_parameter_sets(stripped)


def test_the_head_of_a_packet_is_read_from_its_address() -> None:
    key = next(data for is_key, data in _packets("libx264") if is_key)
    buffer = ctypes.create_string_buffer(key, len(key))

    class Packet:  # PyNvVideoCodec's PacketData: the address and size of its bytes
        bsl_data, bsl = ctypes.addressof(buffer), len(key)

    head = packet_head(Packet())
    assert head == key[: len(head)] and carries_parameter_sets(head)
    assert packet_head(object()) == b""  # a packet that says nothing of its bytes
