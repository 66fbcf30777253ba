"""NVDEC cameras shed groups of pictures before the decoder (``NvdecReader.shed_groups``) on
the real GPU: PyNvVideoCodec's packets flag keyframes, a keyframe decoded alone is the full
decode's picture, and it leaves the decoder with its own packet (the decoder is flushed after
it, where every keyframe brings the parameter sets that a flush forgets), decoding on from
the next keyframe; a stream that sends its parameter sets once is never flushed.

The clip is ``$VIDPIPE_GPU_CLIP`` (scripts/gpu-clip.sh: 1080p25 H.264, no B-frames), else the
assets' car clip. The CPU side (the budget, the counts through the capture worker) is in
tests/component/test_nvdec_gop_shed_fake_gpu.py.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from vidpipe.capture.nvdec import NvdecReader

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]

torch = pytest.importorskip("torch")
av = pytest.importorskip("av")


class _Groups:
    """A group budget that decodes every group in full, or none (keyframes only)."""

    def __init__(self, full: bool) -> None:
        self.full, self.keyframes = full, 0

    def keyframe(self, media_s: float | None) -> bool:
        self.keyframes += 1
        return self.full


def _sums(clip: Path, groups: _Groups) -> tuple[list[float], list[int], int, bool]:
    """Each frame's pixel sum, how many packets had been demuxed when it came out, the
    frames shed, and whether every keyframe carried its parameter sets."""
    reader = NvdecReader(str(clip), 0)
    reader.open()
    reader.shed_groups(groups)  # type: ignore[arg-type]  # the reader asks only keyframe()
    sums, demuxed = [], []
    while (nv12 := reader.read()) is not None:
        sums.append(float(nv12.float().sum().item()))
        demuxed.append(reader._packet_no)
    reader.close()
    return sums, demuxed, reader.shed, reader._keys_carry_sets


def test_a_shed_group_decodes_only_its_keyframe_and_the_same_picture_gpu(clip: Path) -> None:
    """PyNvVideoCodec's packets flag keyframes, so a group can be left undecoded after its
    keyframe; the keyframes decoded alone are the full decode's, pixel for pixel, and each
    leaves the decoder at once (flushed, from the second keyframe on: the clip's keyframes
    carry their parameter sets), decoding on from the next keyframe."""
    with av.open(str(clip)) as container:
        keys = [i for i, f in enumerate(container.decode(video=0)) if f.key_frame]
    every = _Groups(full=True)
    full, _, shed, _ = _sums(clip, every)
    assert shed == 0 and every.keyframes == len(keys) >= 2, (every.keyframes, keys)
    none = _Groups(full=False)
    alone, demuxed, shed, carry = _sums(clip, none)
    assert none.keyframes == len(keys)
    assert alone == [full[i] for i in keys]
    assert shed == len(full) - len(keys)
    # PyNvVideoCodec's packets of an MP4 carry the parameter sets before each keyframe
    # (read through ``bsl_data``), so from the second keyframe on the decoder is flushed
    # and each came out with its own packet, not a group later
    assert carry
    assert demuxed[1:] == [i + 1 for i in keys[1:]] and demuxed[0] <= keys[1] + 1, (
        demuxed,
        keys,
    )


def _headers_once(src: Path, dst: Path, frames: int, gop: int) -> None:
    """The first ``frames`` of ``src`` as a raw H.264 stream that carries its parameter sets
    (SPS, PPS) once, before the first frame, as a camera that sends them only at the start of
    a session: the decoder must keep them across a flush."""
    out = io.BytesIO()
    with av.open(str(src)) as inp, av.open(out, "w", format="h264") as mux:
        vin = inp.streams.video[0]
        enc = mux.add_stream("libx264", rate=25)
        enc.width, enc.height, enc.pix_fmt = vin.width, vin.height, "yuv420p"
        enc.options = {"g": str(gop), "bf": "0", "preset": "ultrafast", "sc_threshold": "0"}
        for k, frame in enumerate(inp.decode(video=0)):
            if k == frames:
                break
            frame.pts = None
            for packet in enc.encode(frame):
                mux.mux(packet)
        for packet in enc.encode():
            mux.mux(packet)
    data = out.getvalue()
    starts = [m.start() for m in re.finditer(b"\x00\x00\x01", data)]
    units, seen = [], set()
    for a, b in zip(starts, [*starts[1:], len(data)], strict=True):
        unit = data[a:b].rstrip(b"\x00")
        kind = unit[3] & 0x1F  # 7: SPS, 8: PPS
        if kind in (7, 8) and kind in seen:
            continue
        seen.add(kind)
        units.append(b"\x00" + unit)
    dst.write_bytes(b"".join(units))
    assert b"".join(units).count(b"\x00\x00\x01\x67") == 1  # one SPS (0x67: nal_ref 3, type 7)


def test_a_stream_that_sends_its_parameter_sets_once_is_never_flushed_gpu(
    clip: Path, tmp_path: Path
) -> None:
    """NVDEC forgets the parameter sets when flushed (this stream's keyframes after a flush
    did not decode), so the reader flushes only where every keyframe brings them."""
    once = tmp_path / "headers-once.h264"
    _headers_once(clip, once, frames=100, gop=25)
    every = _Groups(full=True)
    full, _, _, carry = _sums(once, every)
    assert len(full) == 100 and every.keyframes == 4 and not carry
    none = _Groups(full=False)
    alone, demuxed, shed, carry = _sums(once, none)
    # never flushed (a flush would lose the parameter sets, and every keyframe after it):
    # each keyframe comes out late, but each comes out, the full decode's picture
    assert not carry
    assert alone == [full[k] for k in (0, 25, 50, 75)], (len(alone), demuxed)
    assert shed == 96
