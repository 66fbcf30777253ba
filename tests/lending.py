"""Feeding a backend one frame the scheduler's way, for tests that drive a backend directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from vidpipe.preprocess.buffers import InputBuffer
from vidpipe.types import DeviceImage


def lend_and_submit(
    backend: Any,
    frame: np.ndarray | DeviceImage,
    tag: Any,
    on_done: Callable[[Any], None],
    timeout_s: float = 10.0,
) -> InputBuffer:
    """``lend``, fill the lent buffer, ``submit``; returns the lent buffer.

    ``frame`` is a ``(1, h, w, 3)`` u8 input already at the model's size (the fill's letterbox
    is then a plain copy into the lent memory) or a GPU picture.
    """
    buf = backend.lend(timeout_s)
    assert buf is not None, f"no free slot within {timeout_s} s"
    buf.fill(frame if isinstance(frame, DeviceImage) else frame[0])
    backend.submit(buf, tag, on_done)
    return buf
