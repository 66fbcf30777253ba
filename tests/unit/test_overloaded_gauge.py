"""``vidpipe_overloaded``: 1 while more than 1 % of the frames reaching inference are shed
for lack of capacity over the last window; decimation and the motion gate never count."""

from __future__ import annotations

import pytest

from vidpipe.metrics import OVERLOAD_WINDOW_S, LoadWindow, Metrics


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _gauge(m: Metrics) -> float | None:
    return m.registry.get_sample_value("vidpipe_overloaded")


@pytest.mark.parametrize(
    ("shed", "inferred", "overloaded"),
    [
        (0, 0, False),  # nothing happened
        (0, 500, False),
        (5, 500, False),  # 0.99 % shed: a count that holds by the density rule
        (6, 500, True),
        (900, 100, True),
        (1, 0, True),
    ],
)
def test_the_share_shed_decides(shed: int, inferred: int, overloaded: bool) -> None:
    clock = Clock()
    w = LoadWindow(clock=clock)
    clock.t += 1
    w.shed, w.inferred = shed, inferred
    assert w.overloaded() is overloaded


def test_only_the_last_window_counts() -> None:
    clock = Clock()
    w = LoadWindow(window_s=10.0, clock=clock)
    w.shed, w.inferred = 500, 500  # a burst of overload...
    clock.t += 5
    assert w.overloaded()
    for _ in range(12):  # ... then 12 s of a box keeping up, read every second
        clock.t += 1
        w.inferred += 100
        w.overloaded()
    assert not w.overloaded()


def test_rarely_read_it_compares_against_the_last_reading() -> None:
    clock = Clock()
    w = LoadWindow(window_s=10.0, clock=clock)
    w.shed = 100
    clock.t += 15
    assert w.overloaded()  # a scrape every 15 s sees those 15 s
    w.inferred += 1000
    clock.t += 15
    assert not w.overloaded()


def test_the_gauge_follows_the_drop_reasons() -> None:
    m = Metrics()
    assert _gauge(m) == 0.0
    cam = m.camera("gate")
    for _ in range(100):
        cam.infer_done()
    cam.drop("decimated", 500)
    cam.drop("no_motion", 500)
    assert _gauge(m) == 0.0, "shedding by design is not overload"
    cam.overwritten(None)  # type: ignore[arg-type]
    cam.drop("too_old", 10)
    assert _gauge(m) == 1.0
    assert m.load.shed == 11 and m.load.inferred == 100
    assert OVERLOAD_WINDOW_S == 10.0  # the docs and the alert rule quote it
