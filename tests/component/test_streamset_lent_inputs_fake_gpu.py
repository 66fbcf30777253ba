"""The stream set lends rows of its pinned batches (GPU faked: tests/fake_gpu.py).

A host frame is letterboxed by the scheduler straight into a row of the open batch's pinned
input; the batch then goes to the device in one copy. Counted here: the fake runtime's
host-to-device copies (one per batch) and the backend's ``input_copies`` (frames copied a
second time: only when a batch left on its timer while its lent row was being filled).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.component.test_streamset_fake_gpu import Collector, echo_scheduler, make_backend
from tests.fake_gpu import device_frame, tagged_frame
from tests.lending import lend_and_submit
from vidpipe.infer.streamset import StreamSetBackend
from vidpipe.preprocess.buffers import InputBuffer
from vidpipe.preprocess.letterbox import letterbox
from vidpipe.types import Frame

pytestmark = pytest.mark.timeout(60)


def pinned_inputs(backend: StreamSetBackend) -> list[np.ndarray]:
    return [io.host_in.array for s in backend.sets for slot in s.slots for io in slot.io_sets]


def test_scheduler_letterboxes_into_the_pinned_batch_with_no_second_copy_fake_gpu() -> None:
    # Batches leave full, never on their timer: a timer that fires while the scheduler fills
    # a lent row costs that frame one counted copy (the test below), which a 5 ms timer did
    # on a loaded CI machine.
    backend, rts, _ = make_backend(streams=2, max_batch=4, timeout_ms=10_000, kernel_s=(0.002,))
    pinned = pinned_inputs(backend)
    submit = backend.submit
    outside: list[int] = []

    def checked_submit(buf: InputBuffer, tag, on_done) -> None:  # type: ignore[no-untyped-def]
        if not any(np.shares_memory(buf.tensor, p) for p in pinned):
            outside.append(tag.frame.seq)
        submit(buf, tag, on_done)

    backend.submit = checked_submit  # type: ignore[method-assign]
    engine, results = echo_scheduler(backend)
    engine.start()
    frames = 60
    try:
        for seq in range(frames):
            img = np.empty((16, 16, 3), np.uint8)  # letterboxed to the fake model's 8x8
            img[...] = (seq % 8, seq, 0)
            assert engine.submit(Frame(f"cam{seq % 8}", seq, time.monotonic(), img))
        assert engine.stop(20)
    finally:
        engine.close(5.0)
    assert outside == [], "frames letterboxed outside the pinned batches"
    assert sorted(r.seq for r in results) == list(range(frames))
    for r in results:  # each frame's pixels reached the device in its own row
        assert int(r.detections.class_id[0]) == int(r.camera[3:])
        assert int(r.detections.score[0] * 256) == r.seq
    batches = sum(s.batches for s in backend.sets)
    assert batches < frames
    assert rts[0].copies == 2 * batches  # one copy up and one down per batch, none per frame
    assert backend.input_copies == 0


def test_lend_returns_the_same_row_until_it_is_submitted_fake_gpu() -> None:
    backend, _, _ = make_backend(max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        first = backend.lend(1.0)
        assert first is not None and backend.lend(1.0) is first  # e.g. a too old frame
        lend_and_submit(backend, tagged_frame(1, 0), (1, 0), done)
        second = backend.lend(1.0)
        assert second is not None and second is not first
        assert not np.shares_memory(first.hwc, second.hwc)
    finally:
        backend.close()
    assert [c.tag for c in done.wait(1)] == [(1, 0)]


def test_a_batch_that_left_while_its_row_was_filled_costs_one_copy_fake_gpu() -> None:
    """The batch's timer fires while the scheduler letterboxes into its lent row: that row
    is outside the batch's copy to the device, so ``submit`` moves the frame into the next
    batch (one copy, counted) and the frame's own result still comes back."""
    backend, rts, exs = make_backend(max_batch=4, timeout_ms=10_000)
    done = Collector()
    try:
        lend_and_submit(backend, tagged_frame(1, 0), (1, 0), done)
        buf = backend.lend(1.0)
        assert buf is not None
        backend.flush()  # what the timer does: the batch of one frame leaves
        buf.fill(tagged_frame(2, 1)[0])
        backend.submit(buf, (2, 1), done)
        backend.flush()
        got = done.wait(2)
        assert sorted((int(c.outputs[0][0, 0]), int(c.outputs[0][0, 1])) for c in got) == [
            (1, 0),
            (2, 1),
        ]
        assert sorted(c.tag for c in got) == [(1, 0), (2, 1)]
        assert all(int(c.outputs[0][0, 3]) == 1 for c in got)  # two batches of one
        assert backend.input_copies == 1
        assert sorted(b for ctx in exs[0].contexts for b in ctx.batches) == [1, 1]
        assert rts[0].copies == 4
    finally:
        backend.close()


def test_a_copied_row_remembers_the_pad_it_was_given_fake_gpu() -> None:
    """The copy above brings the source buffer's pad into the row: the row must take the
    source's pad geometry, or its next frame of the size it held before would skip a pad
    that is no longer there (a stale model input)."""
    backend, _, _ = make_backend(streams=1, max_batch=4, timeout_ms=10_000)
    tall = np.full((16, 8, 3), 50, np.uint8)  # into 8x8: picture 4x8, pad on the right
    wide = np.full((8, 16, 3), 200, np.uint8)  # picture 8x4, pad at the bottom
    rows = [row for s in backend.sets for slot in s.slots for io in slot.io_sets for row in io.rows]
    done = Collector()
    try:
        for row in rows:
            row.fill(tall)  # every row last held a tall camera's frame
        lend_and_submit(backend, tagged_frame(1, 0), (1, 0), done)
        buf = backend.lend(1.0)
        assert buf is not None
        backend.flush()  # the batch leaves while ``buf`` is filled: submit copies the frame
        buf.fill(wide)
        backend.submit(buf, (2, 1), done)
        backend.flush()
        assert sorted(c.tag for c in done.wait(2)) == [(1, 0), (2, 1)]
        assert backend.input_copies == 1
        wide_input = letterbox(wide, 8, 8)[0]
        [copied] = [r for r in rows if r is not buf and np.array_equal(r.hwc, wide_input)]
        assert copied.padded_for == buf.padded_for == (8, 4)
        copied.fill(tall)  # the row's next frame, its batch done
        np.testing.assert_array_equal(copied.hwc, letterbox(tall, 8, 8)[0])
    finally:
        backend.close()


def test_a_lent_batch_with_no_frame_is_never_dispatched_and_comes_back_fake_gpu() -> None:
    backend, _, _ = make_backend(devices=2, streams=1, max_batch=4, timeout_ms=20)
    done = Collector()
    try:
        assert backend.lend(1.0) is not None  # opens a batch on GPU 0 ...
        time.sleep(0.1)  # ... whose timer never starts: it holds no frame
        assert [s.batches for s in backend.sets] == [0, 0]
        # a GPU-1 picture cannot use GPU 0's batch: its I/O set goes back unused
        buf = lend_and_submit(backend, device_frame(3, 1, gpu=1), (3, 1), done)
        assert buf.device is None  # the lent row keeps no GPU picture alive
        assert [c.tag for c in done.wait(1)] == [(3, 1)]
        assert [s.batches for s in backend.sets] == [0, 1]
        assert backend.sets[0].free_io_sets() == 2
    finally:
        backend.close()
