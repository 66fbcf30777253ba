"""The live mailbox's drop rule (``capture.mailbox.OnceInARow``), over a mailbox whose waiting
frame the test sets."""

from __future__ import annotations

from vidpipe.capture.mailbox import OnceInARow


class Box:
    def __init__(self, policy: str = "newest") -> None:
        self.policy = policy
        self.waiting: int | None = None

    def unread_seq(self) -> int | None:
        return self.waiting


def test_a_frame_after_an_untaken_one_is_dropped_but_never_two_in_a_row() -> None:
    box = Box()
    rule = OnceInARow(box)  # type: ignore[arg-type]
    assert rule.drop(0, undecoded=False) == (False, None)
    box.waiting = 0  # frame 0 was put and waits
    assert rule.drop(1, undecoded=False) == (True, 0)
    assert rule.drop(2, undecoded=False) == (False, 0), "the second in a row replaces it"
    box.waiting = 2
    assert rule.drop(3, undecoded=True) == (False, 2), "a frame left undecoded was the drop"


def test_the_decoder_may_leave_a_frame_while_the_last_due_one_waits() -> None:
    box = Box()
    rule = OnceInARow(box)  # type: ignore[arg-type]
    assert not rule.held_back(), "no frame yet"
    rule.drop(0, undecoded=False)
    assert not rule.held_back(), "frame 0 was taken"
    box.waiting = 0
    assert rule.held_back(), "frame 0 waits: the next would be dropped"
    rule.drop(1, undecoded=False)  # dropped: 0 still waits, but it is not the last due one
    assert not rule.held_back(), "the next replaces it: never two in a row"
    rule.reset()
    assert not rule.held_back()


def test_a_block_mailbox_never_drops() -> None:
    box = Box("block")
    rule = OnceInARow(box)  # type: ignore[arg-type]
    box.waiting = 0
    assert rule.drop(0, undecoded=False) == (False, None)
    assert rule.drop(1, undecoded=False) == (False, None)
    assert not rule.held_back()
