"""A sticky CUDA error ends the daemon with a non-zero status (only the GPU is faked)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.component.test_streamset_fake_gpu import echo_decoder, make_backend
from vidpipe import daemon as daemon_mod
from vidpipe import plan
from vidpipe.config import Config
from vidpipe.labels import Labels
from vidpipe.model import LoadedModel

pytestmark = pytest.mark.timeout(60)


def test_daemon_exits_nonzero_after_a_sticky_error_fake_gpu(
    assets_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, rts, _ = make_backend(max_batch=2, timeout_ms=5)
    rts[0].sticky_on_next_wait = "cudaErrorIllegalAddress"
    monkeypatch.setattr(
        plan,
        "open_model",
        lambda model, inference: LoadedModel(backend, echo_decoder, Labels(("a", "b")), 2),
    )
    cfg = Config.model_validate(
        {
            "model": {"path": str(assets_dir / "models" / "yolox_nano.onnx")},
            "inference": {"type": "torch"},
            "http": {"enabled": False},
            "shutdown_timeout_s": 5,
            "cameras": [
                {
                    "name": "cam",
                    "url": str(assets_dir / "videos" / "car-detection.mp4"),
                    "loop": True,
                }
            ],
        }
    )
    t0 = time.monotonic()
    assert daemon_mod.run(cfg) == 1  # returned by itself: no signal was sent
    assert time.monotonic() - t0 < 30
    assert backend.fatal is not None


def test_a_failed_health_stays_unhealthy() -> None:
    from vidpipe.health import Health

    health = Health()
    health.attach(lambda: (time.monotonic(), 0))
    assert health.check().ok
    health.fail("inference device lost: cudaErrorIllegalAddress")
    status = health.check()
    assert not status.ok and "cudaErrorIllegalAddress" in status.reason
