"""The ``clips:`` config: top-level defaults merged under each camera's own, and clear errors."""

from __future__ import annotations

import pytest

from vidpipe.config import ConfigError, parse_config
from vidpipe.labels import Labels
from vidpipe.model import clip_trigger_classes

BASE = """\
model:
  path: /m.onnx
clips:
  enabled: true
  pre_s: 3
  dir: /var/clips
  triggers: {zones: [enter, leave], classes: [person]}
  crop: {padding: 0.2}
cameras:
  - name: door
    url: rtsp://10.0.0.2/stream
    clips:
      post_s: 8
      triggers: {min_score: 0.7}
      crop: {enabled: false}
  - name: yard
    url: rtsp://10.0.0.3/stream
  - name: shed
    url: rtsp://10.0.0.4/stream
    clips: {enabled: false}
"""


def test_camera_clips_override_the_defaults_key_by_key() -> None:
    cfg = parse_config(BASE)
    door, yard, shed = (c.clips for c in cfg.cameras)
    assert (door.enabled, door.pre_s, door.post_s, door.dir) == (True, 3, 8, "/var/clips")
    assert door.triggers.zones == ["enter", "leave"] and door.triggers.classes == ["person"]
    assert door.triggers.min_score == 0.7 and door.triggers.lines == ["cross"]
    assert (door.crop.enabled, door.crop.padding) == (False, 0.2)
    assert (yard.enabled, yard.post_s, yard.crop.padding, yard.triggers.min_score) == (
        True, 5, 0.2, 0.5,
    )  # fmt: skip
    assert shed.enabled is False and shed.pre_s == 3


def test_without_clips_nothing_records() -> None:
    cfg = parse_config("model: {path: /m.onnx}\ncameras: [{name: a, url: rtsp://h/s}]\n")
    assert cfg.clips.enabled is False and cfg.cameras[0].clips.enabled is False


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (
            ("post_s: 8", "post_s: 8\n      max_s: 10"),
            "cameras[0].clips (line 13): camera 'door': pre_s + post_s (3 + 8 s) must not "
            "exceed max_s (10 s)",
        ),
        (("min_score: 0.7", "min_score: 1.5"), "cameras[0].clips.triggers.min_score (line 14)"),
        (("zones: [enter, leave]", "zones: [enter, exit]"), "clips.triggers.zones[1] (line 7)"),
        (("post_s: 8", "post_sec: 8"), "cameras[0].clips.post_sec (line 13): unknown key "
         "(did you mean 'post_s'?)"),
        (("pre_s: 3", "pre_s: 300"), "clips.pre_s (line 5)"),
    ],
)  # fmt: skip
def test_bad_clip_settings_name_their_yaml_path(edit: tuple[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE.replace(*edit, 1))
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


def test_unknown_trigger_class_names_the_camera_and_path() -> None:
    cfg = parse_config(BASE.replace("classes: [person]", "classes: [person, persn]"))
    with pytest.raises(ConfigError) as err:
        clip_trigger_classes(cfg, lambda _: Labels(["person", "car"]))
    assert err.value.problems == [
        "cameras[0].clips.triggers.classes[1] (door): unknown class 'persn' (did you mean "
        "'person'?)",
        "cameras[1].clips.triggers.classes[1] (yard): unknown class 'persn' (did you mean "
        "'person'?)",
    ]
    ok = clip_trigger_classes(parse_config(BASE), lambda _: Labels(["car", "person"]))
    assert ok == {"door": frozenset({1}), "yard": frozenset({1})}  # shed records nothing


def test_crops_from_the_record_stream_need_a_record_input() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(BASE.replace("crop: {padding: 0.2}", "crop: {source: record}"))
    assert any(
        p.startswith("cameras[1].clips")
        and "camera 'yard': crop.source: record needs a record input" in p
        for p in err.value.problems
    ), err.value.problems
    dual = BASE.replace(
        "    url: rtsp://10.0.0.3/stream\n",
        "    inputs:\n      - {url: rtsp://10.0.0.3/sub, roles: [detect]}\n"
        "      - {url: rtsp://10.0.0.3/main, roles: [record]}\n    clips:\n"
        "      crop: {source: record}\n",
    )
    door, yard, _ = (c.clips for c in parse_config(dual).cameras)
    assert (door.crop.source, yard.crop.source) == ("detect", "record")
