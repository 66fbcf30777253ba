"""An NVDEC camera's decoded frame before its copy out of the decoder (``NvdecPicture``).

``NvdecSource.read`` hands one out per decoded surface; the copy into memory the frame owns
(``DecoderStream.own_copy``: a device-to-device copy and a wait for the camera's stream) is
made only if the capture worker asks for the image, so frames it drops cost none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vidpipe.capture.source import Luma
from vidpipe.types import DeviceImage


class NvdecPicture:
    """A decoded surface (a ``source.Picture``), copied out of the decoder on the first
    ``image``; the worker asks only for frames it passes on.

    The surface is reused by the decoder's next ``read``: the source expires the picture
    then (and at ``rewind`` and ``close``), and an expired picture that was never copied
    refuses to be (RuntimeError: a bug in its caller, never a wrong frame).
    """

    __slots__ = ("_copy", "_image", "_surface")

    def __init__(self, surface: Any, copy: Callable[[Any], DeviceImage]) -> None:
        self._surface: Any = surface
        self._copy = copy
        self._image: DeviceImage | None = None

    @property
    def width(self) -> int:
        return int(self._nv12().shape[1])

    @property
    def height(self) -> int:
        return int(self._nv12().shape[0]) * 2 // 3

    def _nv12(self) -> Any:
        if self._image is not None:
            return self._image.nv12
        if self._surface is None:
            raise RuntimeError("an NVDEC picture was used after the decoder moved on")
        return self._surface

    def luma(self) -> Luma | None:
        return None  # on the GPU: nothing for a host-side gate to read

    def image(self) -> DeviceImage:
        if self._image is None:
            self._image = self._copy(self._nv12())
            self._surface = None
        return self._image

    def image_for(self, fit: tuple[int, int] | None) -> DeviceImage:
        return self.image()  # the letterbox scales on the GPU

    def expire(self) -> None:
        """The decoder is about to reuse the surface."""
        self._surface = None
