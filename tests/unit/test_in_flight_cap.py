"""The in-flight cap as a rule of cameras, streams and pool (no OpenVINO: the
cap with a real request pool is tested in tests/component/test_scheduler_inflight.py)."""

from __future__ import annotations

import pytest

from vidpipe.schedule.inflight import in_flight_cap


@pytest.mark.parametrize(
    ("cameras", "cap"), [(1, 4), (4, 4), (5, 5), (8, 5), (15, 5), (16, 6), (24, 7), (40, 8)]
)
def test_every_two_cameras_per_stream_queue_one_more_request_up_to_the_pool(
    cameras: int, cap: int
) -> None:
    """Four streams and a pool of eight: one request per stream whatever the cameras, then
    one queued per two active cameras per stream (at least one), never past the pool."""
    assert in_flight_cap(cameras, 4, 8) == cap


def test_on_two_streams_eight_cameras_queue_two_requests() -> None:
    assert [in_flight_cap(n, 2, 4) for n in (1, 2, 3, 7, 8, 12)] == [2, 2, 3, 3, 4, 4]
