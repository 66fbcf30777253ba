"""NVDEC cameras past what inference takes shed whole groups of pictures before the decoder.

Real capture workers, ``newest`` mailboxes, metrics and the pipeline's shared share of groups
(``capture/group_budget.py``), held by the test; faked: PyNvVideoCodec
(``tests/unit/test_nvdec_fake_gpu.py``: packet ``k`` decodes to frame ``k``, a keyframe every
``gop`` packets) and the copy out of the decoder. The real decoder sheds in
``tests/gpu/test_nvdec_gpu.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.component.capture_rig import until
from tests.component.test_nvdec_config_fake_gpu import _config
from tests.component.test_nvdec_source_fake_gpu import FAST
from tests.component.test_skip_unread_fake_gpu import Cameras
from tests.unit.test_nvdec_fake_gpu import FakeCodec
from vidpipe.capture.decoders import DecoderKind
from vidpipe.capture.group_budget import SharedShare
from vidpipe.config import CAPTURE_DECODERS
from vidpipe.types import CameraState

GOP = 10
SHED = FAST.model_copy(update={"shed_gops": True})


@pytest.fixture
def cameras(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Cameras]:
    """``Cameras`` whose ``nvdec`` cameras open through their fake decoders."""

    def make(codecs: dict[str, FakeCodec], **kw: Any) -> Cameras:
        cams = Cameras(codecs, **kw)
        monkeypatch.setitem(CAPTURE_DECODERS.factories, "nvdec", DecoderKind(cams.source))
        return cams

    return make


def _held_share(cams: Cameras, share: float) -> None:
    shared = cams.context.shared(SharedShare)
    shared.share = share
    shared.tick = lambda: None  # type: ignore[method-assign]  # held: nothing moves it


@pytest.mark.timeout(30)
def test_a_live_nvdec_camera_sheds_whole_groups_and_counts_every_frame_fake_gpu(
    cameras: Callable[..., Cameras],
) -> None:
    codecs = {name: FakeCodec(packets=400, delay=1, gop=GOP) for name in ("a", "b")}
    cams = cameras(codecs, capture=SHED)
    cfg = _config(inference={"type": "torch"}, cameras=[{"name": "a", "url": "a.mp4"}])
    cams.context.bind_metrics(cams.metrics, cfg)  # as the pipeline does
    _held_share(cams, 0.25)
    cams.start()
    until(lambda: all(w.state is CameraState.STOPPED for w in cams.workers))  # files ended
    cams.stop()
    assert "vidpipe_gop_share 0.25" in generate_latest(cams.metrics.registry).decode()
    for name, codec in codecs.items():
        decoded = set(codec.decoded)
        groups = [set(range(g, g + GOP)) for g in range(0, 400, GOP)]
        full = [g for g in groups if g <= decoded]
        # every keyframe decoded; every other frame only with the whole of its group
        assert all(min(g) in decoded for g in groups), name
        assert decoded == set().union(*full) | {min(g) for g in groups}, name
        assert 0.15 * len(groups) <= len(full) <= 0.35 * len(groups), (name, len(full))
        shed = cams.dropped(name, "gop_shed")
        assert shed == 400 - len(decoded)
        # every frame counted once: shed, or decoded and then dropped or left waiting
        made = len(cams.copied[name])
        dropped = cams.dropped(name, "mailbox_full") + cams.dropped(name, "overwritten")
        waiting = cams.boxes[name].clear() is not None
        assert cams.count("vidpipe_frames_captured_total", name) == 400
        assert shed + dropped + waiting == 400 and made <= len(decoded)


@pytest.mark.timeout(30)
def test_a_file_camera_that_waits_for_inference_never_sheds_fake_gpu(
    cameras: Callable[..., Cameras],
) -> None:
    # ``block`` mailboxes (files not played in real time) wait for inference instead
    codec = FakeCodec(packets=60, delay=1, gop=GOP)
    cams = cameras({"file": codec}, policy="block", capture=SHED)
    _held_share(cams, 0.05)
    cams.start()
    taken = 0
    while taken < 60:
        frame = cams.hub.take(5.0)
        assert frame is not None, f"frame {taken + 1} never came"
        taken += 1
    cams.stop()
    assert codec.decoded == list(range(60)) and cams.dropped("file", "gop_shed") == 0


@pytest.mark.timeout(30)
@pytest.mark.parametrize("shed_gops", [None, False])
def test_nvdec_cameras_shed_groups_by_default_and_not_when_told_fake_gpu(
    cameras: Callable[..., Cameras], shed_gops: bool | None
) -> None:
    """``capture.shed_gops`` left out: NVDEC cameras shed (a process past its count decoding
    every frame collapses); false: they decode every frame."""
    codec = FakeCodec(packets=200, delay=1, gop=GOP)
    capture = FAST if shed_gops is None else FAST.model_copy(update={"shed_gops": shed_gops})
    cams = cameras({"a": codec}, capture=capture)
    _held_share(cams, 0.25)
    cams.start()
    until(lambda: all(w.state is CameraState.STOPPED for w in cams.workers))
    cams.stop()
    shed = cams.dropped("a", "gop_shed")
    if shed_gops is None:
        assert shed > 0 and len(codec.decoded) == 200 - shed
    else:
        assert shed == 0 and codec.decoded == list(range(200))
