"""safe_name and safe_join: untrusted camera names must never leave the sink's directory."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from vidpipe.sinks.paths import MAX_NAME_LEN, safe_join, safe_name

_SAFE_COMPONENT = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


@pytest.mark.parametrize(
    ("name", "expected_stem"),
    [
        ("ok-name_1.2", None),  # already safe: returned unchanged
        ("front door", "front_door"),
        ("../etc/passwd", "_etc_passwd"),
        ("/abs", "_abs"),
        ("a\x00b", "a_b"),
        ("a/b", "a_b"),
        ("a\\b", "a_b"),
        ("..", "_"),
        (".", "_"),
        ("", "_"),
        (".hidden", "hidden"),
        ("caméra", "cam_ra"),
        ("x" * 200, "x" * (MAX_NAME_LEN - 9)),
    ],
)
def test_safe_name_table(name: str, expected_stem: str | None) -> None:
    out = safe_name(name)
    assert _SAFE_COMPONENT.fullmatch(out), out
    assert 0 < len(out) <= MAX_NAME_LEN
    assert out not in {".", ".."}
    if expected_stem is None:
        assert out == name
    else:
        # changed names carry "-" and an 8-hex-digit hash of the original
        stem, _, digest = out.rpartition("-")
        assert stem == expected_stem
        assert re.fullmatch(r"[0-9a-f]{8}", digest)


@pytest.mark.parametrize(
    "names",
    [
        ("a/b", "a_b", "a\\b", "a b"),
        ("..", ".", "", "_"),
        ("x" * 100, "x" * 101, "x" * 64 + "y"),
    ],
)
def test_safe_name_distinct_inputs_do_not_collide(names: tuple[str, ...]) -> None:
    assert len({safe_name(n) for n in names}) == len(names)


@pytest.mark.parametrize("name", ["ok", "a/b", "../x", "x" * 300])
def test_safe_name_is_stable_and_idempotent(name: str) -> None:
    assert safe_name(name) == safe_name(name)
    assert safe_name(safe_name(name)) == safe_name(name)


def test_safe_name_max_length_unchanged() -> None:
    name = "c" * MAX_NAME_LEN
    assert safe_name(name) == name


@pytest.mark.parametrize(
    "parts",
    [("../etc/passwd",), ("/abs",), ("a", "..", ".."), ("..",), ("a\x00b",)],
)
def test_safe_join_refuses_escapes(tmp_path: Path, parts: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        safe_join(tmp_path, *parts)


@pytest.mark.parametrize(
    ("parts", "relative"),
    [
        (("cam",), "cam"),
        (("cam", "cam-1.jpg"), "cam/cam-1.jpg"),
        (("a", "..", "b"), "b"),
        ((), "."),
    ],
)
def test_safe_join_inside(tmp_path: Path, parts: tuple[str, ...], relative: str) -> None:
    assert safe_join(tmp_path, *parts) == (tmp_path / relative).resolve()


def test_safe_join_refuses_symlink_out_of_base(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    os.symlink(tmp_path, base / "link")
    with pytest.raises(ValueError):
        safe_join(base, "link", "x.jpg")


@pytest.mark.parametrize("name", ["../etc/passwd", "/abs", "a\x00b", "..", "", "ok-name_1.2"])
def test_safe_name_then_join_stays_inside(tmp_path: Path, name: str) -> None:
    path = safe_join(tmp_path, safe_name(name))
    assert path.parent == tmp_path.resolve()
