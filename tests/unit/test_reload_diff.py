"""Live reload: the difference between two configs decides what restarts."""

from __future__ import annotations

from typing import Any

import pytest

from vidpipe.config import Config, ConfigError
from vidpipe.reload import (
    active_cameras,
    diff_configs,
    effective_config,
    running_inference,
    with_http_port,
)
from vidpipe.shard import Shard


def cfg(cameras: list[dict[str, Any]], **sections: Any) -> Config:
    return Config.model_validate({"model": {"path": "m.onnx"}, "cameras": cameras, **sections})


A = {"name": "a", "url": "rtsp://h/a"}
B = {"name": "b", "url": "rtsp://h/b"}
C = {"name": "c", "url": "rtsp://h/c"}


def test_add_remove_change_keep() -> None:
    old = cfg([A, B, C])
    new = cfg([{**A, "detect_fps": 2}, C, {"name": "d", "url": "rtsp://h/d"}])
    d = diff_configs(old, new)
    assert d.start == ("d",)
    assert d.stop == ("b",)
    assert d.restart == ("a",)
    assert d.keep == ("c",)
    assert not d.rebuild_inference and not d.restart_only
    assert "start d" in d.summary() and "stop b" in d.summary() and "restart a" in d.summary()


def test_identical_config_changes_nothing() -> None:
    d = diff_configs(cfg([A, B]), cfg([B, A]))  # order alone is no change
    assert d.empty and d.keep == ("b", "a")  # in the new file's order


def test_disabling_is_stopping_and_enabling_is_starting() -> None:
    d = diff_configs(cfg([A, {**B, "enabled": False}]), cfg([{**A, "enabled": False}, B]))
    assert d.stop == ("a",) and d.start == ("b",) and not d.restart


@pytest.mark.parametrize(
    "section",
    [
        {"model": {"path": "other.onnx"}},
        {"model": {"path": "m.onnx", "score_threshold": 0.5}},
        {"inference": {"advanced": {"num_requests": 3}}},
        {"scheduler": {"max_frame_age_ms": 200}},
    ],
)
def test_engine_sections_rebuild_the_pool(section: dict[str, Any]) -> None:
    d = diff_configs(cfg([A]), cfg([A], **section))
    assert d.rebuild_inference and d.keep == ("a",)


def test_capture_defaults_restart_every_camera() -> None:
    d = diff_configs(cfg([A, B]), cfg([A, B], capture={"stall_timeout_s": 3}))
    assert d.restart == ("a", "b") and not d.keep


def test_restart_only_sections_are_reported_and_kept() -> None:
    old = cfg([A], http={"port": 9000})
    new = cfg([A], http={"port": 9001}, sinks=[{"type": "jsonl", "path": "x.jsonl"}])
    d = diff_configs(old, new)
    assert d.restart_only == ("http", "sinks") and d.empty
    assert "http, sinks changed: applies at the next start" in d.summary()
    running = effective_config(old, new)
    assert running.http.port == 9000 and running.sinks == []


def test_an_event_store_change_applies_at_the_next_start() -> None:
    old = cfg([A])
    new = cfg([A], events={"max_age_days": 3})
    d = diff_configs(old, new)
    assert d.restart_only == ("events",) and d.empty
    assert effective_config(old, new).events == old.events


def test_shard_filters_both_sides() -> None:
    names = [f"cam{i}" for i in range(20)]
    shard = Shard(1, 3)
    old = cfg([{"name": n, "url": f"rtsp://h/{n}"} for n in names])
    new = cfg([{"name": n, "url": f"rtsp://h/{n}"} for n in [*names, "new1", "new2", "new3"]])
    d = diff_configs(old, new, shard)
    assert set(d.keep) == {n for n in names if shard.owns(n)}
    assert set(d.start) == {n for n in ("new1", "new2", "new3") if shard.owns(n)}
    assert not d.stop


def test_http_port_override() -> None:
    assert with_http_port(cfg([A]), 9200).http.port == 9200
    assert with_http_port(cfg([A]), None).http.port == 9108
    with pytest.raises(ConfigError, match="--http-port"):
        with_http_port(cfg([A]), 70000)


def test_editing_zones_lines_or_tracking_restarts_no_camera() -> None:
    line = {"name": "door", "points": [[0, 0], [5, 5]]}
    old = cfg([A, B])
    new = cfg([{**A, "lines": [line], "tracking": {"max_lost_frames": 30}}, B])
    d = diff_configs(old, new)
    assert d.restart == () and d.keep == ("a", "b")
    # the same edit together with a capture setting still restarts that camera
    moved = cfg([{**A, "lines": [line], "url": "rtsp://h/a2"}, B])
    assert diff_configs(old, moved).restart == ("a",)


def test_balanced_sharding_splits_the_enabled_cameras_evenly_and_a_switch_reassigns() -> None:
    cams = [{"name": f"cam{i}", "url": f"rtsp://h/{i}"} for i in range(12)]
    cams.append({"name": "off", "url": "rtsp://h/off", "enabled": False})
    rendezvous = cfg(cams)
    balanced = cfg(cams, sharding={"assignment": "balanced"})
    sizes = [len(active_cameras(balanced, Shard(i, 3))) for i in range(3)]
    assert sizes == [4, 4, 4], "a disabled camera takes no room"
    assert all("off" not in active_cameras(balanced, Shard(i, 3)) for i in range(3))
    shard = Shard(0, 3)
    d = diff_configs(rendezvous, balanced, shard)  # a reload that switches the assignment
    assert set(d.keep) | set(d.start) == set(active_cameras(balanced, shard))
    assert set(d.keep) | set(d.stop) == set(active_cameras(rendezvous, shard))


def test_hint_auto_is_latency_for_one_camera_and_throughput_for_more_or_none() -> None:
    assert running_inference(cfg([A]), None).hint == "latency"
    assert running_inference(cfg([A, B]), None).hint == "throughput"
    assert running_inference(cfg([]), None).hint == "throughput"  # vidpipe detect, check
    assert running_inference(cfg([A, {**B, "enabled": False}]), None).hint == "latency"
    pinned = cfg([A], inference={"hint": "throughput"})
    assert running_inference(pinned, None).hint == "throughput"


def test_hint_auto_counts_the_cameras_of_this_shard() -> None:
    three = cfg([A, B, C])
    hints = sorted(running_inference(three, Shard(i, 2)).hint for i in range(2))
    assert hints == ["latency", "throughput"]  # one shard runs 1 camera, the other 2


def test_crossing_one_camera_rebuilds_the_pool_only_under_hint_auto() -> None:
    d = diff_configs(cfg([A]), cfg([A, B]))
    assert d.rebuild_inference and d.start == ("b",) and d.keep == ("a",)
    assert diff_configs(cfg([A, B]), cfg([B])).rebuild_inference
    assert not diff_configs(cfg([A, B]), cfg([A, B, C])).rebuild_inference  # still throughput
    pinned = {"inference": {"hint": "latency"}}
    assert not diff_configs(cfg([A], **pinned), cfg([A, B], **pinned)).rebuild_inference
