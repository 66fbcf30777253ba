"""Sharding: rendezvous hashing puts every camera in exactly one shard and moves few."""

from __future__ import annotations

import pytest

from vidpipe.config import ConfigError
from vidpipe.shard import Shard, balanced_owners, owner, parse_shard, resolve_shard

CAMERAS = [f"cam-{i:04d}" for i in range(2000)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 8])
def test_every_camera_in_exactly_one_shard(count: int) -> None:
    shards = [Shard(i, count) for i in range(count)]
    for cam in CAMERAS:
        assert sum(s.owns(cam) for s in shards) == 1, cam
    sizes = [len(s.select(CAMERAS)) for s in shards]
    assert sum(sizes) == len(CAMERAS)
    # balanced within a generous band (a bad hash puts everything in one shard)
    assert min(sizes) > 0.7 * len(CAMERAS) / count, sizes


@pytest.mark.parametrize("count", [1, 2, 3, 4, 7])
def test_adding_a_shard_moves_only_cameras_to_the_new_shard(count: int) -> None:
    moved = [c for c in CAMERAS if owner(c, count) != owner(c, count + 1)]
    assert all(owner(c, count + 1) == count for c in moved), "a camera moved between old shards"
    expected = len(CAMERAS) / (count + 1)
    assert 0.7 * expected < len(moved) < 1.3 * expected, (len(moved), expected)


def test_assignment_depends_only_on_the_name() -> None:
    # stable across processes and orderings (Python's salted hash() would fail this)
    assert owner("front-door", 4) == owner("front-door", 4)
    assert Shard(0, 3).select(CAMERAS[::-1]) == Shard(0, 3).select(CAMERAS)[::-1]
    # a pinned value: the assignment must not change between releases
    assert [owner(f"cam-{i}", 4) for i in range(8)] == PINNED


# Computed once when the hash was chosen; a change here re-shards every deployment.
PINNED = [0, 3, 1, 1, 0, 1, 3, 1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0/1", Shard(0, 1)), ("2/4", Shard(2, 4)), (" 1 / 3 ", Shard(1, 3))],
)
def test_parse_shard(text: str, expected: Shard) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["4/4", "1/0", "-1/3", "a/b", "3", "1/2/3", ""])
def test_parse_shard_rejects_with_the_source_named(text: str) -> None:
    with pytest.raises(ConfigError, match="--shard"):
        parse_shard(text)


@pytest.mark.parametrize(
    ("arg", "env", "expected"),
    [
        (None, {}, None),
        ("1/2", {"VIDPIPE_SHARD": "0/3"}, Shard(1, 2)),  # the command line wins
        (None, {"VIDPIPE_SHARD": "2/3"}, Shard(2, 3)),
        (None, {"VIDPIPE_SHARD_COUNT": "4", "VIDPIPE_SHARD_INDEX": "3"}, Shard(3, 4)),
        (None, {"VIDPIPE_SHARD_COUNT": "3", "HOSTNAME": "vidpipe-2"}, Shard(2, 3)),
        (None, {"VIDPIPE_SHARD_COUNT": "3", "HOSTNAME": "vidpipe-web-0"}, Shard(0, 3)),
    ],
)
def test_resolve_shard(arg: str | None, env: dict[str, str], expected: Shard | None) -> None:
    assert resolve_shard(arg, env) == expected


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"VIDPIPE_SHARD": "5/3"}, r"\$VIDPIPE_SHARD"),
        ({"VIDPIPE_SHARD_COUNT": "3", "HOSTNAME": "box"}, "VIDPIPE_SHARD_INDEX"),
        ({"VIDPIPE_SHARD_COUNT": "3", "HOSTNAME": "vidpipe-3"}, "HOSTNAME ordinal"),
    ],
)
def test_resolve_shard_errors(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        resolve_shard(None, env)


@pytest.mark.parametrize(("cameras", "count"), [(120, 3), (120, 4), (160, 4), (7, 3), (2, 5)])
def test_balanced_shards_differ_by_at_most_one_camera(cameras: int, count: int) -> None:
    names = [f"cam{i}" for i in range(cameras)]
    sizes = [len(Shard(i, count).select(names, balanced=True)) for i in range(count)]
    assert sum(sizes) == cameras
    assert max(sizes) - min(sizes) <= 1, sizes
    if cameras >= 3 * count:  # rendezvous alone is uneven here, which is the point
        rendezvous = [len(Shard(i, count).select(names)) for i in range(count)]
        assert max(rendezvous) - min(rendezvous) > 1, rendezvous


def test_balanced_assignment_is_the_same_in_every_process_whatever_the_order() -> None:
    names = CAMERAS[:300]
    for count in (2, 3, 5):
        owners = balanced_owners(names, count)
        assert owners == balanced_owners(names[::-1], count)
        for i in range(count):  # each camera in exactly one shard, in config order
            picked = Shard(i, count).select(names, balanced=True)
            assert picked == [n for n in names if owners[n] == i]


def test_balanced_keeps_most_cameras_where_rendezvous_puts_them() -> None:
    # With room for every camera's first choice but the overflow, most keep the shard their
    # name alone gives them; one added camera moves only a few of the others.
    names = CAMERAS[:400]
    owners = balanced_owners(names, 4)
    same = sum(owners[n] == owner(n, 4) for n in names)
    assert same > 0.8 * len(names), same
    grown = balanced_owners([*names, "one-more"], 4)
    moved = [n for n in names if grown[n] != owners[n]]
    assert len(moved) < 0.05 * len(names), moved


def test_balanced_sizes_for_every_small_camera_and_shard_count() -> None:
    # a plain cap of ceil(N / n) can leave one shard short (7 in 3 as 3, 3, 1)
    for cameras in range(41):
        names = [f"door-{i}" for i in range(cameras)]
        for count in range(1, 8):
            owners = balanced_owners(names, count)
            sizes = [sum(1 for s in owners.values() if s == i) for i in range(count)]
            assert sorted(sizes) == sorted(
                [cameras // count + (i < cameras % count) for i in range(count)]
            ), (cameras, count, sizes)
