"""``/cameras/NAME/snapshot.jpg``, what the status page's tiles show: encoded only when asked,
and at most once per camera per ``SNAPSHOT_INTERVAL_S`` whatever the number of viewers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.component.test_live_view import Served, image, make_result, served
from vidpipe.web import live as live_routes

__all__ = ["image", "served"]  # fixtures


def test_snapshots_encode_once_per_interval_for_every_viewer(
    served: Served, image: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert served.get("/cameras/front/snapshot.jpg")[0] == 503  # no frame yet
    for seq in range(50):
        served.live.handle(make_result("front", seq, image))
    assert served.encoded("front") == 0  # nobody asked: not one JPEG
    monkeypatch.setattr(live_routes, "SNAPSHOT_INTERVAL_S", 3600.0)
    status, first, headers = served.get("/cameras/front/snapshot.jpg")
    assert status == 200 and headers["Content-Type"] == "image/jpeg"
    assert headers["X-Frame-Seq"] == "49"
    for seq in range(50, 60):  # newer frames, many viewers: the held snapshot, no encode
        served.live.handle(make_result("front", seq, image))
        status, body, headers = served.get("/cameras/front/snapshot.jpg")
        assert (status, body, headers["X-Frame-Seq"]) == (200, first, "49")
    assert served.encoded("front") == 1
    monkeypatch.setattr(live_routes, "SNAPSHOT_INTERVAL_S", 0.0)  # the interval is over
    status, _, headers = served.get("/cameras/front/snapshot.jpg")
    assert status == 200 and headers["X-Frame-Seq"] == "59"
    assert served.encoded("front") == 2
    assert served.get("/cameras/nowhere/snapshot.jpg")[0] == 404


def test_camera_records_carry_the_snapshot_url(served: Served) -> None:
    status, body, _ = served.get("/api/cameras")
    assert status == 200
    urls = {c["name"]: c["snapshot_url"] for c in json.loads(body)["cameras"]}
    assert urls == {"front": "/cameras/front/snapshot.jpg", "back": "/cameras/back/snapshot.jpg"}
