"""What a capture worker needs of the place its frames go: a small protocol.

The scheduling side (``vidpipe.schedule.hub.Mailbox``) implements it; capture depends on this
protocol only, so data keeps flowing one way in the import graph too.
"""

from __future__ import annotations

import threading
from typing import Literal, Protocol

from vidpipe.types import Frame

Policy = Literal["newest", "block"]


class FrameSink(Protocol):
    """A camera's one-frame hand-off to inference.

    ``newest`` (live streams): ``put`` never blocks; an untaken frame is replaced and counted.
    ``block`` (files): the reader waits for a turn (``wait_empty``) before it decodes.
    """

    policy: Policy

    @property
    def fit(self) -> tuple[int, int] | None:
        """The model's input size (width, height), for conversion at that size; None: unknown."""
        ...

    @property
    def starting(self) -> bool:
        """No inference takes frames yet (the models load): a live camera drops them unmade."""
        ...

    def unread_seq(self) -> int | None:
        """The ``seq`` of the frame waiting untaken (None: none), read without a lock."""
        ...

    def put(self, frame: Frame, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Hand ``frame`` on; False if ``stop`` was set first."""
        ...

    def wait_empty(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Wait for the reader's turn to decode; False if ``stop`` was set first."""
        ...
