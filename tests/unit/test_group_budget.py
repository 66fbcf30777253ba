"""The share of groups of pictures a pipeline's cameras decode in full, and how each camera
spends it (``vidpipe/capture/group_budget.py``), on a fake clock."""

from __future__ import annotations

import gc

from vidpipe.capture import group_budget as gb
from vidpipe.capture.group_budget import GroupBudget, SharedShare, shed_groups


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Waits:
    """A hub's count of the seconds inference waited for frames (``FrameHub.waited_s``)."""

    def __init__(self) -> None:
        self.waited_s = 7.0  # what it waited before the cameras watched it does not count


def period(
    shared: SharedShare, clock: Clock, due: int, taken: int, waited: float = 0.0, *hubs: Waits
) -> float:
    """One period in which the cameras had ``due`` frames, ``taken`` of them finding the
    frame before taken, while inference waited for frames ``waited`` of the period on each
    of ``hubs``; the share after."""
    shared.due, shared.taken = due, taken
    for hub in hubs:
        hub.waited_s += waited * gb.PERIOD_S
    clock.now += gb.PERIOD_S
    shared.tick()
    return shared.share


def test_the_share_falls_while_inference_leaves_frames_and_rises_once_it_takes_them() -> None:
    clock = Clock()
    shared = SharedShare(clock)
    assert period(shared, clock, due=100, taken=95) == 1.0  # never above 1
    assert period(shared, clock, due=100, taken=50) == gb.DOWN
    assert period(shared, clock, due=100, taken=75) == gb.DOWN  # within the band: kept
    for _ in range(100):
        period(shared, clock, due=100, taken=10)
    assert shared.share == gb.MIN_SHARE  # never below the floor
    assert period(shared, clock, due=100, taken=95) == gb.MIN_SHARE + gb.UP
    assert period(shared, clock, due=gb.MIN_DUE - 1, taken=0) == gb.MIN_SHARE + gb.UP


def test_the_share_rises_while_inference_waits_for_frames_however_many_were_replaced() -> None:
    """A GPU process whose batches take longer than a frame interval: a third of the frames
    replaced before inference took them, while it waited for frames most of the time."""
    clock, hub = Clock(), Waits()
    unwatched = SharedShare(clock)
    unwatched.share = 0.4
    # a hub not watched: its waits are not seen, the frames left decide
    assert period(unwatched, clock, 100, 40, 0.6, hub) == 0.4 * gb.DOWN
    shared = SharedShare(clock)
    shared.share = 0.4
    shared.watch(hub)
    shared.watch(hub)  # every camera of the hub asks: counted once
    assert period(shared, clock, 100, 40, 0.6, hub) == 0.4 + gb.UP
    assert shared.last == (100, 40, 0.6)
    # waiting a quarter of the time or less: the frames left decide
    assert period(shared, clock, 100, 40, 0.25, hub) == (0.4 + gb.UP) * gb.DOWN
    # back up, by a quarter step: within NEAR of the share it fell from
    assert period(shared, clock, 100, 95, 0.0, hub) == (0.4 + gb.UP) * gb.DOWN + gb.UP * gb.SLOW


def test_the_share_rises_slowly_near_where_it_last_fell_and_fast_past_it() -> None:
    """An overshoot collapses what is inferred (180 cameras on an H100): the share nears the
    share at its last fall in quarter steps, and forgets it once past it without a fall."""
    clock = Clock()
    shared = SharedShare(clock)
    shared.share = 0.5
    assert period(shared, clock, due=100, taken=30) == 0.5 * gb.DOWN  # fell from 0.5
    assert period(shared, clock, due=100, taken=30) == 0.5 * gb.DOWN * gb.DOWN  # 0.5 kept
    rises = [period(shared, clock, due=100, taken=95) for _ in range(10)]
    steps = [round(b - a, 6) for a, b in zip([0.32, *rises], rises, strict=False)]
    whole, quarter = gb.UP, gb.UP * gb.SLOW
    # whole steps while they stay under 0.45 (0.9 of 0.5), quarter steps to past 0.5, then
    # whole steps again
    assert steps == [whole] * 2 + [quarter] * 7 + [whole], rises


def test_after_a_move_the_share_holds_for_a_group_of_pictures() -> None:
    """The cameras take a new share at their next keyframe: with 2 s groups, the period after
    a move still shows the share before it, and does not move it again."""
    clock = Clock()
    shared = SharedShare(clock)
    camera = GroupBudget(shared, 4.0)
    camera.keyframe(10.0)
    camera.keyframe(12.0)  # 2 s groups
    assert shared.group_s == 2.0
    camera.keyframe(17.0)  # a group longer than the budget's limit is never shed: not counted
    assert shared.group_s == 2.0
    assert period(shared, clock, due=100, taken=30) == gb.DOWN
    assert period(shared, clock, due=100, taken=30) == gb.DOWN  # held
    assert period(shared, clock, due=100, taken=30) == gb.DOWN * gb.DOWN
    assert period(shared, clock, due=100, taken=95) == gb.DOWN * gb.DOWN  # held
    assert period(shared, clock, due=100, taken=95) > gb.DOWN * gb.DOWN


def test_the_time_waited_is_the_mean_over_the_hubs_and_a_hub_gone_counts_no_more() -> None:
    """Two models' hubs, one waiting most of the time and one never: the cameras share one
    share, moved by the mean; once the idle hub is gone, by the other alone."""
    clock, busy, idle = Clock(), Waits(), Waits()
    shared = SharedShare(clock)
    shared.share = 0.4
    shared.watch(busy)
    shared.watch(idle)
    idle.waited_s += 0.4 * gb.PERIOD_S
    assert period(shared, clock, 100, 40, 0.0, busy) == 0.4 * gb.DOWN  # mean 0.2
    del idle
    gc.collect()
    assert period(shared, clock, 100, 40, 0.0, busy) == 0.4 * gb.DOWN * gb.DOWN
    assert period(shared, clock, 100, 40, 0.4, busy) == 0.4 * gb.DOWN * gb.DOWN + gb.UP


def test_the_share_moves_once_a_period_not_on_every_keyframe() -> None:
    clock = Clock()
    shared = SharedShare(clock)
    shared.due, shared.taken = 100, 0
    clock.now += gb.PERIOD_S / 2
    shared.tick()
    assert shared.share == 1.0 and shared.due == 100  # still counting
    clock.now += gb.PERIOD_S / 2
    shared.tick()
    assert shared.share == gb.DOWN and shared.due == shared.taken == 0
    assert shared.last == (100, 0, 0)  # what the period saw, for the bench's trace


def decisions(budget: GroupBudget, groups: int, group_s: float = 2.0) -> list[bool]:
    return [budget.keyframe(k * group_s) for k in range(groups)]


def test_a_camera_decodes_its_share_of_groups_and_every_group_at_full_share() -> None:
    shared = SharedShare(Clock())
    budget = GroupBudget(shared, max_group_s=4.0)
    assert all(decisions(budget, 20))
    shared.share = 0.25
    full = decisions(budget, 100)
    assert sum(full) == 25
    assert max(len(run) for run in "".join("x" if f else "." for f in full).split("x")) == 3


def test_cameras_of_other_phases_decode_other_groups() -> None:
    shared = SharedShare(Clock())
    shared.share = 0.5
    a, b = GroupBudget(shared, 4.0, phase=0.0), GroupBudget(shared, 4.0, phase=0.5)
    first_a, first_b = decisions(a, 41), decisions(b, 41)
    assert first_a[0] and first_b[0]  # the first group's length is not known yet
    assert sum(first_a[1:]) == sum(first_b[1:]) == 20
    assert all(x != y for x, y in zip(first_a[1:], first_b[1:], strict=True))


def test_long_groups_and_groups_of_unknown_length_are_always_decoded() -> None:
    shared = SharedShare(Clock())
    shared.share = gb.MIN_SHARE
    assert all(decisions(GroupBudget(shared, 4.0), 20, group_s=5.0))
    unknown = GroupBudget(shared, 4.0)
    assert all(unknown.keyframe(None) for _ in range(20))


def test_due_frames_count_into_the_shared_share() -> None:
    shared = SharedShare(Clock())
    a, b = GroupBudget(shared, 4.0), GroupBudget(shared, 4.0)
    a.due(taken=True)
    b.due(taken=False)
    b.due(taken=True)
    assert (shared.due, shared.taken) == (3, 2)


def test_only_a_source_that_can_shed_gets_a_budget_and_phases_spread_evenly() -> None:
    class Shedding:
        budget: GroupBudget | None = None

        def shed_groups(self, budget: GroupBudget | None) -> None:
            self.budget = budget

    shared = SharedShare(Clock())
    assert shed_groups(object(), shared, 4.0) is None
    source = Shedding()
    budget = shed_groups(source, shared, 4.0)
    assert budget is not None and source.budget is budget
    # any number of cameras: their phases leave no gap wider than about 2.6 / count
    phases = sorted([0.0] + [shared.next_phase() for _ in range(59)])
    gaps = [b - a for a, b in zip(phases, [*phases[1:], 1.0], strict=True)]
    assert max(gaps) < 2.7 / 60
    # so at a share of 0.25, every group is decoded in full by about a quarter of them
    shared.share = 0.25
    cameras = [GroupBudget(shared, 4.0, p) for p in phases]
    for k in range(8):
        full = sum(c.keyframe(2.0 * k) for c in cameras)
        assert full == 60 if k == 0 else 13 <= full <= 17, (k, full)


def test_a_camera_given_a_budget_has_its_hub_watched() -> None:
    class Shedding:
        def shed_groups(self, budget: GroupBudget | None) -> None:
            pass

    clock, hub = Clock(), Waits()
    shared = SharedShare(clock)
    shared.share = 0.4
    assert shed_groups(object(), shared, 4.0, hub) is None  # cannot shed: nothing watched
    assert period(shared, clock, 100, 70, 0.6, hub) == 0.4
    assert shed_groups(Shedding(), shared, 4.0, hub) is not None
    assert period(shared, clock, 100, 70, 0.6, hub) == 0.4 + gb.UP
