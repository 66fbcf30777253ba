"""The cross-camera gallery (``vidpipe.secondary.gallery``) with synthetic embeddings: which
tracks share a global id under the window, the links, the threshold and the one-to-one rules."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.config.models import ReidLink
from vidpipe.secondary.gallery import Gallery

T0 = 1_000_000.0


def unit(*values: float) -> np.ndarray:
    v = np.zeros(8, np.float32)
    v[: len(values)] = values
    return v / np.linalg.norm(v)


ALICE = unit(1, 0.1)
ALICE_AGAIN = unit(1, 0.2)  # cosine 0.995 with ALICE
BOB = unit(0, 1)
LIKE_ALICE = unit(1, 0.6)  # cosine 0.91 with ALICE, less than ALICE_AGAIN's


def link(src: str, dst: str, min_s: float = 0.0, max_s: float = 60.0) -> ReidLink:
    return ReidLink.model_validate({"from": src, "to": dst, "min_s": min_s, "max_s": max_s})


def ended(g: Gallery, camera: str, tid: int, vec: np.ndarray, first: float, end: float) -> int:
    """Place a track, end it; its global id."""
    g.place(camera, tid, vec, first, end)
    g.end(camera, tid, end)
    gid = g.global_id(camera, tid)
    assert gid is not None
    return gid


def test_a_match_on_another_camera_gives_the_earlier_global_id() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    gid = ended(g, "a", 1, ALICE, T0, T0 + 10)
    match = g.place("b", 7, ALICE_AGAIN, T0 + 20, T0 + 25)
    assert match is not None
    assert (match.global_id, match.camera, match.track_id) == (gid, "a", 1)
    assert match.similarity == pytest.approx(float(ALICE @ ALICE_AGAIN))
    assert g.global_id("b", 7) == gid


def test_no_match_gives_fresh_ids_never_reused() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    a = ended(g, "a", 1, ALICE, T0, T0 + 10)
    assert g.place("b", 1, BOB, T0 + 20, T0 + 25) is None
    b = g.global_id("b", 1)
    c = ended(g, "c", 1, unit(0, 0, 1), T0 + 30, T0 + 31)
    assert len({a, b, c}) == 3


def test_the_same_camera_is_never_matched_without_reassociation() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    gid = ended(g, "a", 1, ALICE, T0, T0 + 10)
    assert g.place("a", 2, ALICE, T0 + 11, T0 + 14) is None
    assert g.global_id("a", 2) != gid


@pytest.mark.parametrize(
    ("starts_after_end_s", "vec", "matched"),
    [
        (2.0, ALICE_AGAIN, True),  # an occlusion: the person again, soon after
        (-1.0, ALICE_AGAIN, True),  # seen again before the tracker gave the old track up
        (4.9, ALICE_AGAIN, True),
        (5.1, ALICE_AGAIN, False),  # too late to be the same walk
        (2.0, BOB, False),  # soon, but someone else
    ],
)
def test_same_camera_reassociation_after_an_occlusion(
    starts_after_end_s: float, vec: np.ndarray, matched: bool
) -> None:
    g = Gallery(threshold=0.8, window_s=600, reassociate_s=5.0)
    gid = ended(g, "a", 1, ALICE, T0, T0 + 10)
    match = g.place("a", 2, vec, T0 + 10 + starts_after_end_s, T0 + 16)
    assert (match is not None) is matched
    assert (g.global_id("a", 2) == gid) is matched


def test_reassociation_never_takes_a_live_tracks_id() -> None:
    """Two people of one camera at once are two tracks, however alike: only an ended track
    may be its camera's person again."""
    g = Gallery(threshold=0.8, window_s=600, reassociate_s=5.0)
    g.place("a", 1, ALICE, T0, T0 + 1)
    assert g.place("a", 2, ALICE_AGAIN, T0 + 2, T0 + 3) is None
    assert g.global_id("a", 1) != g.global_id("a", 2)


@pytest.mark.parametrize(
    ("threshold", "matched"), [(0.99, True), (0.995, True), (0.996, False), (0.999, False)]
)
def test_threshold(threshold: float, matched: bool) -> None:
    g = Gallery(threshold=threshold, window_s=600)
    ended(g, "a", 1, ALICE, T0, T0 + 10)  # cosine with ALICE_AGAIN: 0.9955
    assert (g.place("b", 1, ALICE_AGAIN, T0 + 20, T0 + 20) is not None) is matched


@pytest.mark.parametrize(("after_s", "matched"), [(59.0, True), (61.0, False)])
def test_window(after_s: float, matched: bool) -> None:
    g = Gallery(threshold=0.8, window_s=60)
    ended(g, "a", 1, ALICE, T0, T0 + 10)
    now = T0 + 10 + after_s
    assert (g.place("b", 1, ALICE_AGAIN, now - 2, now) is not None) is matched


def test_ended_tracks_are_forgotten_after_the_window() -> None:
    g = Gallery(threshold=0.8, window_s=60)
    ended(g, "a", 1, ALICE, T0, T0 + 10)
    g.place("a", 2, BOB, T0 + 20, T0 + 20)  # alive: kept however long
    g.prune(T0 + 200)
    assert g.global_id("a", 1) is None
    assert g.global_id("a", 2) is not None
    assert len(g) == 1


@pytest.mark.parametrize(
    ("src", "dst", "gap_s", "matched"),
    [
        ("a", "b", 30.0, True),  # along the link, within its span
        ("a", "b", 5.0, False),  # sooner than min_s: not walkable
        ("a", "b", 100.0, False),  # later than max_s
        ("b", "a", 30.0, False),  # a link has a direction
        ("a", "c", 30.0, False),  # no link to c
    ],
)
def test_links(src: str, dst: str, gap_s: float, matched: bool) -> None:
    g = Gallery(threshold=0.8, window_s=600, links=[link("a", "b", 10, 60)])
    ended(g, src, 1, ALICE, T0, T0 + 10)
    first = T0 + 10 + gap_s
    assert (g.place(dst, 1, ALICE_AGAIN, first, first + 5) is not None) is matched


def test_along_a_link_a_live_track_is_not_matched() -> None:
    g = Gallery(threshold=0.8, window_s=600, links=[link("a", "b", 0, 60)])
    g.place("a", 1, ALICE, T0, T0 + 5)  # still on camera a
    assert g.place("b", 1, ALICE_AGAIN, T0 + 10, T0 + 12) is None


def test_without_links_a_live_track_on_another_camera_matches() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    g.place("a", 1, ALICE, T0, T0 + 5)  # two overlapping views
    assert g.place("b", 1, ALICE_AGAIN, T0 + 1, T0 + 6) is not None


def test_one_global_id_is_not_held_by_two_live_tracks_of_one_camera() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    gid = ended(g, "a", 1, ALICE, T0, T0 + 10)
    assert g.place("b", 1, ALICE_AGAIN, T0 + 20, T0 + 25) is not None  # alive on b
    # a second live track on b that looks like the same person does not take the id too
    assert g.place("b", 2, ALICE_AGAIN, T0 + 21, T0 + 26) is None
    assert g.global_id("b", 2) != gid


def test_the_mutual_best_match_wins_and_the_other_stays_apart() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    g.place("b", 1, LIKE_ALICE, T0, T0 + 1)  # Alice's double, and Alice, on camera b first
    g.place("b", 2, ALICE_AGAIN, T0, T0 + 1)
    match = g.place("a", 1, ALICE, T0 + 2, T0 + 3)  # then Alice on camera a
    assert match is not None and (match.camera, match.track_id) == ("b", 2)
    ended(g, "b", 2, ALICE_AGAIN, T0, T0 + 4)
    # the double ends and tries again: a1 is above the threshold for it (0.91), but b2 is
    # more like a1, so the double is not a1's best match and keeps its own id
    assert float(LIKE_ALICE @ ALICE) >= 0.8
    assert g.place("b", 1, LIKE_ALICE, T0, T0 + 5) is None
    assert g.global_id("b", 1) != g.global_id("a", 1) == g.global_id("b", 2)


def test_a_lookalike_does_not_take_an_id_a_closer_track_of_its_camera_holds() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    gid = ended(g, "a", 1, ALICE, T0, T0 + 10)
    assert ended(g, "b", 1, ALICE_AGAIN, T0 + 20, T0 + 25) == gid  # Alice on b, gone again
    assert g.place("b", 2, LIKE_ALICE, T0 + 40, T0 + 45) is None  # not two people in one
    assert g.global_id("b", 2) != gid


def test_a_track_whose_own_id_is_taken_keeps_it() -> None:
    g = Gallery(threshold=0.8, window_s=600)
    g.place("a", 1, ALICE, T0, T0 + 5)  # stable on a: a fresh id
    own = g.global_id("a", 1)
    assert g.place("b", 1, ALICE_AGAIN, T0 + 6, T0 + 8) is not None  # b takes it
    ended(g, "c", 1, ALICE, T0, T0 + 9)  # c took it as well
    # placed again at its end, a1 does not move: its id is shared
    assert g.place("a", 1, ALICE, T0, T0 + 10) is None
    assert g.global_id("a", 1) == own == g.global_id("b", 1)


def test_disabled_matching_gives_every_track_its_own_id() -> None:
    g = Gallery(threshold=0.5, window_s=600, enabled=False)
    a = ended(g, "a", 1, ALICE, T0, T0 + 10)
    assert g.place("b", 1, ALICE, T0 + 20, T0 + 25) is None
    assert g.global_id("b", 1) != a
