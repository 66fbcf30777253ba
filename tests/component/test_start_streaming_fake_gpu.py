"""With ``inference.stream_while_loading`` the cameras stream while the GPU model loads (only
the GPU is faked).

A GPU model takes seconds to load and warm up (the module onto the device, cuDNN's tuning,
the first CUDA graph). So such a config opens the HTTP server and the cameras first: ``/metrics``
and the page answer, ``/readyz`` says not ready, and a live camera's frames are counted as
dropped ``starting`` (never inferred, never lost uncounted) until its model is open. A model
that then fails to open stops what started: no port, no camera, no sink output left.

A real RTSP server on loopback and real ``/metrics`` scrapes; the model's opening (the fake
GPU backend of ``tests.fake_gpu``) waits until the test has seen the camera stream, so nothing
here depends on how long a load takes.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.component.test_streamset_fake_gpu import echo_decoder, make_backend
from tests.integration.conftest import free_port, metric, scrape, scrape_soon, wait_for
from tests.integration.test_systemd_notify import http_status
from tests.rtsp import RtspServer
from vidpipe import plan
from vidpipe.config import Config
from vidpipe.daemon import Daemon
from vidpipe.infer.base import BackendError
from vidpipe.labels import Labels
from vidpipe.model import LoadedModel

pytestmark = pytest.mark.timeout(120)

CAMERA = "walkway"
LABELS = Labels(tuple(f"class{i}" for i in range(256)))  # the echo's class: a pixel value


def _config(assets_dir: Path, url: str, port: int, out: Path, early: bool = True) -> Config:
    return Config.model_validate(
        {
            "model": {"path": str(assets_dir / "models" / "yolox_nano.onnx")},
            "inference": {"type": "torch", "stream_while_loading": early},
            "http": {"port": port},
            "shutdown_timeout_s": 5,
            "sinks": [{"type": "jsonl", "path": str(out)}],
            "cameras": [{"name": CAMERA, "url": url}],
        }
    )


def _streaming(port: int) -> bool:
    text = scrape_soon(port)
    return bool(text) and (
        metric(text, "vidpipe_camera_state", camera=CAMERA, state="streaming") == 1
        and metric(text, "vidpipe_frames_dropped_total", camera=CAMERA, reason="starting") >= 3
    )


def _counts(daemon: Daemon) -> dict[str, float]:
    """The camera's captured and inferred frames and its drops by reason, from the registry."""
    out: dict[str, float] = {}
    for family in daemon.metrics.registry.collect():
        for s in family.samples:
            if s.labels.get("camera") != CAMERA:
                continue
            if s.name in ("vidpipe_frames_captured_total", "vidpipe_frames_inferred_total"):
                out[s.name] = out.get(s.name, 0.0) + s.value
            elif s.name == "vidpipe_frames_dropped_total":
                out[s.labels["reason"]] = s.value
    return out


def test_cameras_stream_and_are_counted_while_the_model_loads_fake_gpu(
    assets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    seen: dict[str, Any] = {}
    backend, _, _ = make_backend(max_batch=2, timeout_ms=5)

    def open_after_streaming(model: Any, inference: Any) -> LoadedModel:
        wait_for(lambda: _streaming(port), 60, "the camera streaming before its model opens")
        seen["readyz"] = http_status(port, "/readyz")
        seen["page"] = http_status(port, "/")
        seen["inferred"] = metric(scrape(port), "vidpipe_frames_inferred_total", camera=CAMERA)
        return LoadedModel(backend, echo_decoder, LABELS, len(LABELS))

    monkeypatch.setattr(plan, "open_model", open_after_streaming)
    with RtspServer(assets_dir / "videos", loop=True) as server:
        url = server.url("one-by-one-person-detection")
        daemon = Daemon(_config(assets_dir, url, port, tmp_path / "out" / "results.jsonl"))
        daemon.start()
        try:
            assert http_status(port, "/readyz") == 200
            wait_for(
                lambda: metric(scrape(port), "vidpipe_frames_inferred_total", camera=CAMERA) >= 5,
                60,
                "frames inferred once the model is open",
            )
        finally:
            clean = daemon.shutdown()
    assert seen == {"readyz": 503, "page": 200, "inferred": 0.0}
    counts = _counts(daemon)
    captured = counts.pop("vidpipe_frames_captured_total")
    inferred = counts.pop("vidpipe_frames_inferred_total")
    assert counts["starting"] >= 3, counts
    # every frame the camera decoded was inferred or dropped with a reason
    assert captured == inferred + sum(counts.values()), (captured, inferred, counts)
    assert clean


def test_a_model_that_fails_to_open_stops_the_started_cameras_fake_gpu(
    assets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()

    def fail_after_streaming(model: Any, inference: Any) -> LoadedModel:
        wait_for(lambda: _streaming(port), 60, "the camera streaming before its model opens")
        raise BackendError("cannot read model: a test's bad model")

    monkeypatch.setattr(plan, "open_model", fail_after_streaming)
    out = tmp_path / "out" / "results.jsonl"
    with RtspServer(assets_dir / "videos", loop=True) as server:
        daemon = Daemon(_config(assets_dir, server.url("one-by-one-person-detection"), port, out))
        with pytest.raises(BackendError, match="model: cannot read model"):
            daemon.start()
    assert http_status(port, "/metrics") == -1  # the server is closed
    assert not [t for t in threading.enumerate() if t.name.startswith(f"capture-{CAMERA}")]
    assert not out.parent.exists()  # no sink started


def test_by_default_the_model_opens_before_the_port_and_the_cameras_fake_gpu(
    assets_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    seen: dict[str, Any] = {}

    def fail_at_once(model: Any, inference: Any) -> LoadedModel:
        seen["metrics"] = scrape_soon(port)  # "": nothing answers the port yet
        seen["threads"] = [t.name for t in threading.enumerate() if "capture-" in t.name]
        raise BackendError("cannot read model: a test's bad model")

    monkeypatch.setattr(plan, "open_model", fail_at_once)
    out = tmp_path / "out" / "results.jsonl"
    with RtspServer(assets_dir / "videos", loop=True) as server:
        url = server.url("one-by-one-person-detection")
        daemon = Daemon(_config(assets_dir, url, port, out, early=False))
        with pytest.raises(BackendError, match="model: cannot read model"):
            daemon.start()
    assert seen == {"metrics": "", "threads": []}
    assert not out.parent.exists()
