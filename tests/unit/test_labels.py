"""The one label table: naming class ids and resolving class filters, with one error format."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidpipe.config import CameraConfig, ConfigError
from vidpipe.labels import Labels
from vidpipe.model import class_ids_for
from vidpipe.track.stage import resolve_classes

LABELS = Labels(("person", "bicycle", "car"))


@pytest.mark.parametrize(
    ("class_id", "name"), [(0, "person"), (2, "car"), (3, "3"), (-1, "-1"), (80, "80")]
)
def test_name_falls_back_to_the_number(class_id: int, name: str) -> None:
    assert LABELS.name(class_id) == name


def test_load_skips_blank_lines_and_is_immutable(tmp_path: Path) -> None:
    path = tmp_path / "labels.txt"
    path.write_text("person\n\n  car \n")
    labels = Labels.load(path)
    assert labels == ("person", "car") and labels.name(1) == "car"
    with pytest.raises(TypeError):
        labels[0] = "x"  # type: ignore[index]
    assert Labels.numbered(3) == ("0", "1", "2")
    assert Labels.of(labels) is labels and isinstance(Labels.of(["a"]), Labels)


@pytest.mark.parametrize(
    ("items", "expected"),
    [(None, None), ([], frozenset()), (["car", 0], frozenset({0, 2})), ([1, 1], frozenset({1}))],
)
def test_ids_resolves_names_and_ids(
    items: list[str | int] | None, expected: frozenset[int] | None
) -> None:
    assert LABELS.ids(items, where="cameras[0].classes", camera="door") == expected


def test_ids_names_every_bad_entry_with_path_and_camera() -> None:
    with pytest.raises(ConfigError) as err:
        LABELS.ids(["persn", "car", 7, "zebra"], where="cameras[1].classes", camera="door")
    assert err.value.problems == [
        "cameras[1].classes[0] (door): unknown class 'persn' (did you mean 'person'?)",
        "cameras[1].classes[2] (door): class id 7 out of range 0..2",
        "cameras[1].classes[3] (door): unknown class 'zebra'",
    ]


def test_camera_and_zone_filters_report_an_unknown_class_the_same_way() -> None:
    cam = CameraConfig(name="door", url="/dev/null", classes=["persn"])
    with pytest.raises(ConfigError) as camera_err:
        class_ids_for(cam, 0, LABELS)
    with pytest.raises(ConfigError) as zone_err:
        resolve_classes(["persn"], "cameras[0].zones[0].classes", "door", LABELS, None)
    suffix = "[0] (door): unknown class 'persn' (did you mean 'person'?)"
    assert camera_err.value.problems == [f"cameras[0].classes{suffix}"]
    assert zone_err.value.problems == [f"cameras[0].zones[0].classes{suffix}"]
