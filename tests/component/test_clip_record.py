"""The ``clip`` record: the same JSON in the JSONL file, on MQTT (real mosquitto) and in the
webhook's POST (a real HTTP endpoint), like every other record."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from tests.component.test_record_format import (
    _RFC3339_UTC_MS,
    send_through_every_sink,
    tracked_frame_with_an_event,
)
from vidpipe.stages import events_result
from vidpipe.types import ClipEvent

pytestmark = pytest.mark.timeout(120)


def door_clip() -> ClipEvent:
    wall = time.time()
    return ClipEvent(
        camera="door", seq=42, wall_time=wall, clip_id="20261130-183438-720",
        start=wall - 9.25, end=wall - 0.5, url="/clips/door/20261130-183438-720.mp4",
        label="person", classes=("person",), tracker_ids=(7,), size=123456,
        crop_url="/clips/door/20261130-183438-720.t7.jpg",
    )  # fmt: skip


def test_clip_record_is_the_same_in_every_sink(tmp_path: Path) -> None:
    clip = door_clip()
    frame = tracked_frame_with_an_event()
    result = dataclasses.replace(frame, events=(clip,))
    # a class filter that passes the clip's class: the clip goes out like a zone event
    sent = send_through_every_sink(
        tmp_path,
        result,
        ("vidpipe/door/events",),
        only_with_detections=True,
        webhook_classes=["person"],
    )
    clip_line = sent.jsonl[-1]
    (mqtt_clip,) = sent.mqtt["vidpipe/door/events"]
    hook_clip = sent.webhook[0]
    assert clip_line == mqtt_clip == hook_clip
    assert clip_line == {
        "v": 1,
        "event": "clip",
        "camera": "door",
        "frame": 42,
        "ts": clip_line["ts"],
        "id": "20261130-183438-720",
        "start": clip_line["start"],
        "end": clip_line["end"],
        "duration_s": 8.75,
        "url": "/clips/door/20261130-183438-720.mp4",
        "label": "person",
        "classes": ["person"],
        "tracker_ids": [7],
        "size": 123456,
        "crop_url": "/clips/door/20261130-183438-720.t7.jpg",
    }
    for key in ("ts", "start", "end"):
        assert _RFC3339_UTC_MS.fullmatch(clip_line[key]), clip_line[key]


def test_a_clip_without_a_frame_is_its_record_alone_in_every_sink(tmp_path: Path) -> None:
    """A clip written after its camera's last result (at shutdown, or of a removed camera)
    reaches every sink as its record, with no frame record, even where sinks write frames
    without detections."""
    clip = door_clip()
    sent = send_through_every_sink(
        tmp_path,
        events_result("door", [clip]),
        ("vidpipe/door/events",),
        only_with_detections=False,
        mqtt_only_with_detections=False,
    )
    (clip_line,) = sent.jsonl
    (mqtt_clip,) = sent.mqtt["vidpipe/door/events"]
    (hook_clip,) = sent.webhook
    assert clip_line == mqtt_clip == hook_clip
    assert (clip_line["event"], clip_line["id"]) == ("clip", clip.clip_id)
    assert sent.mqtt["vidpipe/door/detections"] == []
