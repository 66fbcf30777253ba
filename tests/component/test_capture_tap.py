"""The packet tap: real workers, real clips, a real RTSP server, and a real remux to MP4.

What a tap receives must be enough to write a playable clip by stream copy: the test writes
one and decodes it again with libav.
"""

from __future__ import annotations

import threading
from pathlib import Path

import av
import numpy as np
import pytest

from tests.component.capture_rig import CAR, CAR_FRAMES, PERSON, Rig, S, wait_until
from tests.rtsp import RtspServer
from vidpipe.capture.remux import write_mp4
from vidpipe.capture.source import StreamParams, TapPacket


class RecordingTap:
    """Keeps every stream and packet it is given, per camera, as an event-clip buffer would."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.streams: list[tuple[str, StreamParams]] = []
        self.packets: list[tuple[int, TapPacket]] = []  # (index of the stream, packet)
        self.threads: set[str] = set()
        self._fail_after = fail_after
        self._lock = threading.Lock()

    def on_stream(self, camera: str, params: StreamParams) -> None:
        with self._lock:
            self.streams.append((camera, params))

    def on_packet(self, camera: str, packet: TapPacket) -> None:
        with self._lock:
            self.threads.add(threading.current_thread().name)
            self.packets.append((len(self.streams) - 1, packet))
            if self._fail_after is not None and len(self.packets) > self._fail_after:
                raise RuntimeError("tap consumer broke")

    def on_frame(self, camera: str, pts: int | None, t_decoded: float) -> None:
        pass

    def of_stream(self, index: int) -> list[TapPacket]:
        with self._lock:
            return [p for i, p in self.packets if i == index]


def _decode_all(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as clip:
        return [f.to_ndarray(format="bgr24") for f in clip.decode(video=0)]


@pytest.mark.timeout(60)
def test_file_packets_remux_to_the_same_pictures(rig: Rig, videos: Path, tmp_path: Path) -> None:
    tap = RecordingTap()
    worker, states = rig.worker("street", str(videos / f"{CAR}.mp4"), "block")
    worker.set_packet_tap(tap)
    worker.start()
    states.wait_for(S.STOPPED, 30)
    frames = rig.collector.wait_count("street", CAR_FRAMES, 5)

    assert [c for c, _ in tap.streams] == ["street"]
    params = tap.streams[0][1]
    assert (params.codec, params.width, params.height) == ("h264", 768, 432)
    packets = tap.of_stream(0)
    assert len(packets) == CAR_FRAMES  # one packet per picture, none lost
    assert packets[0].keyframe
    assert 1 < sum(p.keyframe for p in packets) < CAR_FRAMES / 10  # a keyframe every 4.8 s
    dts = [p.dts for p in packets]
    assert dts == sorted(dts) and len(set(dts)) == len(dts)
    assert all(p.data[:4] == b"\x00\x00\x00\x01" for p in packets if p.keyframe)  # Annex-B
    assert tap.threads == {t for t in tap.threads if t.startswith("capture-street-reader")}

    clip = tmp_path / "all.mp4"
    assert write_mp4(clip, params, packets) == CAR_FRAMES
    decoded = _decode_all(clip)
    assert len(decoded) == CAR_FRAMES
    assert np.array_equal(decoded[0], frames[0].image)
    assert np.array_equal(decoded[-1], frames[-1].image)

    # A clip cut at a later keyframe (what an event clip does) plays from there.
    k = next(i for i, p in enumerate(packets) if p.keyframe and i > 0)
    tail = tmp_path / "tail.mp4"
    assert write_mp4(tail, params, packets[k - 3 :]) == CAR_FRAMES - k  # starts at keyframe
    decoded_tail = _decode_all(tail)
    assert len(decoded_tail) == CAR_FRAMES - k
    assert np.array_equal(decoded_tail[0], frames[k].image)


@pytest.mark.timeout(60)
def test_rtsp_packets_remux_and_reconnect_announces_a_new_stream(
    rig: Rig, videos: Path, tmp_path: Path, rtsp_ok: None
) -> None:
    tap = RecordingTap()
    with RtspServer(videos) as server:
        worker, states = rig.worker("walkway", server.url(PERSON), "newest")
        worker.start()
        rig.collector.wait_count("walkway", 3, 15)
        worker.set_packet_tap(tap)  # attached while streaming: takes effect at once
        wait_until(lambda: sum(p.keyframe for p in tap.of_stream(0)) >= 3, 15, "3 keyframes")
        server.kill()
        states.wait_for(S.BACKOFF, 10)
        server.restart()
        n = len(states.states())
        states.wait_for(S.STREAMING, 15, after=n)
        wait_until(lambda: len(tap.streams) == 2 and tap.of_stream(1), 15, "second stream")

    params = tap.streams[0][1]
    assert (params.codec, params.width, params.height) == ("h264", 768, 432)
    packets = tap.of_stream(0)
    clip = tmp_path / "live.mp4"
    written = write_mp4(clip, params, packets)
    first_key = next(i for i, p in enumerate(packets) if p.keyframe)
    assert written == len(packets) - first_key > 0
    decoded = _decode_all(clip)
    assert len(decoded) == written
    assert decoded[0].shape == (432, 768, 3)
    assert worker.stats()["tap_errors"] == 0


@pytest.mark.timeout(60)
def test_detached_or_failing_tap_never_disturbs_capture(rig: Rig, videos: Path) -> None:
    broken = RecordingTap(fail_after=10)
    worker, states = rig.worker("street", str(videos / f"{CAR}.mp4"), "block", loop=True)
    worker.set_packet_tap(broken)
    worker.start()
    rig.collector.wait_count("street", 60, 20)
    assert worker.stats()["tap_errors"] > 0  # counted (and logged once), capture carries on
    worker.set_packet_tap(None)
    seen = len(broken.packets)
    rig.collector.wait_count("street", len(rig.collector.of("street")) + 60, 20)
    assert len(broken.packets) <= seen + 1  # at most the packet in flight when detached
    assert worker.state is S.STREAMING and worker.stats()["errors"] == 0
    assert S.BACKOFF not in states.states()
