"""A fake PyNvVideoCodec whose pictures carry their packet's number (no GPU, no NVDEC).

Importable by name, so that a decode process (``vidpipe/capture/nvdec_child.py``) can load it
as its codec (``CodecSpec("tests.fake_nvdec", "FakeCodec", args)``). Packet ``k`` decodes to a
``(H * 3 / 2, W)`` NV12 picture filled with ``k % 251``; a keyframe comes every ``gop``
packets with its parameter sets in front, as a camera sends them; the demuxer's last packet
is empty and flushes the decoder. A URL with ``broken`` in it fails to open, with the URL in
the library's message (credentials included, as FFmpeg's messages have them).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any

import numpy as np

_SETS = b"\x00\x00\x00\x01\x67\x64\x00\x28\x00\x00\x00\x01\x68\xee\x3c\x80"  # SPS, PPS
_IDR = b"\x00\x00\x00\x01\x65\x88\x84\x00"
_SLICE = b"\x00\x00\x00\x01\x41\x9a\x02\x00"


class Packet:
    """A demuxed packet as PyNvVideoCodec describes it: ``key``, ``bsl`` (its size, 0 for
    the empty one that flushes) and ``bsl_data`` (the address of its bytes)."""

    def __init__(self, number: int = -1, key: bool = False) -> None:
        self.number, self.key = number, int(key)
        data = b"" if number < 0 else (_SETS + _IDR if key else _SLICE)
        self._bytes = ctypes.create_string_buffer(data, max(1, len(data)))
        self.bsl, self.bsl_data = len(data), ctypes.addressof(self._bytes)


class _Demuxer:
    def __init__(self, packets: int, gop: int, size: tuple[int, int]) -> None:
        self._packets, self._gop, self._size = packets, gop, size

    def __iter__(self) -> Iterator[Packet]:
        yield from (Packet(k, k % self._gop == 0) for k in range(self._packets))
        yield Packet()

    def GetNvCodecId(self) -> str:
        return "H264"

    def FrameRate(self) -> float:
        return 25.0

    def Width(self) -> int:
        return self._size[0]

    def Height(self) -> int:
        return self._size[1]


class _Decoder:
    def __init__(self, size: tuple[int, int]) -> None:
        self._shape = (size[1] * 3 // 2, size[0])

    def Decode(self, packet: Packet) -> list[np.ndarray]:
        if packet.number < 0:
            return []
        return [np.full(self._shape, packet.number % 251, np.uint8)]


class FakeCodec:
    """Stands in for the PyNvVideoCodec module: every file holds ``packets`` packets."""

    PacketData = Packet

    def __init__(self, packets: int = 60, gop: int = 10, size: tuple[int, int] = (16, 12)):
        self._packets, self._gop, self._size = packets, gop, tuple(size)

    def CreateDemuxer(self, filename: str) -> _Demuxer:
        if "broken" in filename:
            raise RuntimeError(f"cannot open input {filename}: Connection refused")
        return _Demuxer(self._packets, self._gop, self._size)  # type: ignore[arg-type]

    def CreateDecoder(self, **kwargs: Any) -> _Decoder:
        return _Decoder(self._size)  # type: ignore[arg-type]
