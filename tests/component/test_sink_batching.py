"""The sink pool's delivery modes: inline sinks on the submitting thread, and batch windows
that let items gather before a sink handles them (counted, and drained at shutdown)."""

from __future__ import annotations

import threading
import time

from tests.component.test_sinks import StalledSink, make_result, sample
from vidpipe.metrics import Metrics
from vidpipe.sinks import SinkPool
from vidpipe.types import FrameResult


class RecordingSink:
    """Records, per handled item, its seq, the handling thread and whether ``gathered`` was
    already set; ``fail`` makes ``handle`` raise."""

    wants_images = False

    def __init__(self, *, inline: bool = False, batch_window_s: float = 0.0, fail=False) -> None:
        self.name = "recording"
        self.queue_size = 100
        self.inline = inline
        self.batch_window_s = batch_window_s
        self.fail = fail
        self.gathered = threading.Event()
        self.seen: list[tuple[int, str, bool]] = []

    def handle(self, result: FrameResult) -> None:
        self.seen.append((result.seq, threading.current_thread().name, self.gathered.is_set()))
        if self.fail:
            raise RuntimeError("refused")

    def close(self) -> None:
        pass


def test_an_inline_sink_runs_on_the_submitting_thread_and_is_counted() -> None:
    metrics = Metrics()
    ok, failing = RecordingSink(inline=True), RecordingSink(inline=True, fail=True)
    failing.name = "failing"
    pool = SinkPool([ok, failing], metrics)
    pool.start()
    pool.submit(make_result(0))
    # handled before submit returned, on this thread; no thread of its own
    assert ok.seen == [(0, threading.current_thread().name, False)]
    assert not [t for t in threading.enumerate() if t.name.startswith("sink-")]
    assert sample(metrics, "vidpipe_sink_written_total", sink="recording") == 1
    assert sample(metrics, "vidpipe_sink_errors_total", sink="failing") == 1
    assert pool.close(timeout_s=5) == {"recording": 0, "failing": 0}
    pool.submit(make_result(1))  # after close: counted as dropped, not handled
    assert len(ok.seen) == 1
    assert sample(metrics, "vidpipe_sink_dropped_total", sink="recording", reason="shutdown") == 1


def test_a_batch_window_lets_items_gather_before_they_are_handled() -> None:
    """The first item waits out the window: the ten submitted 0.2 s after it are handled in
    the same batch, after all were submitted. Without the window the first item would be
    handled during the pause."""
    metrics = Metrics()
    sink = RecordingSink(batch_window_s=1.0)
    pool = SinkPool([sink], metrics)
    pool.start()
    pool.submit(make_result(0))
    time.sleep(0.2)
    for seq in range(1, 11):
        pool.submit(make_result(seq))
    sink.gathered.set()
    assert pool.flush(timeout_s=10)
    assert [s for s, _, _ in sink.seen] == list(range(11))
    assert all(gathered for _, _, gathered in sink.seen), sink.seen
    assert {thread for _, thread, _ in sink.seen} == {"sink-recording"}
    assert sample(metrics, "vidpipe_sink_written_total", sink="recording") == 11
    assert pool.close(timeout_s=5) == {"recording": 0}


def test_a_half_full_queue_ends_the_batch_window_early() -> None:
    """A 60 s window on a queue of 4: the second item (half full) ends the wait, so a small
    queue never overflows while its window runs."""
    metrics = Metrics()
    sink = RecordingSink(batch_window_s=60.0)
    sink.queue_size = 4
    pool = SinkPool([sink], metrics)
    pool.start()
    pool.submit(make_result(0))
    pool.submit(make_result(1))
    assert pool.flush(timeout_s=5)
    assert [s for s, _, _ in sink.seen] == [0, 1]
    assert sample(metrics, "vidpipe_sink_dropped_total", sink="recording", reason="queue_full") == 0
    assert pool.close(timeout_s=5) == {"recording": 0}


def test_items_gathered_in_a_batch_window_wait_in_the_queue_and_count_at_shutdown() -> None:
    """A stalled sink with a batch window holds one item in hand, as without the window: the
    rest stay queued and are counted as left unwritten when the pool closes, not lost."""
    metrics = Metrics()
    stalled = StalledSink(queue_size=8)
    stalled.batch_window_s = 0.2  # type: ignore[attr-defined]
    pool = SinkPool([stalled], metrics)
    pool.start()
    try:
        for seq in range(5):
            pool.submit(make_result(seq))
        assert stalled.entered.wait(timeout=5)
        assert sample(metrics, "vidpipe_sink_queue_depth", sink="stalled") == 4
        assert pool.close(timeout_s=0.3) == {"stalled": 4}
        assert sample(metrics, "vidpipe_sink_dropped_total", sink="stalled", reason="shutdown") == 4
    finally:
        stalled.release.set()
