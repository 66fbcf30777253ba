"""An NVDEC reader that decodes ahead on PyNvVideoCodec's own C++ thread (file cameras).

``NvdecReader`` demuxes and decodes on the camera's thread, and PyNvVideoCodec 2.2.4's
``Decoder.Decode`` keeps Python's GIL while it runs: with dozens of NVDEC cameras in one
process the camera threads hold the GIL that the batcher and the completion thread need for
every PyTorch call (benchmarks/README.md, "GPU: cameras per H200"). PyNvVideoCodec's
``ThreadedDecoder`` demuxes and decodes on a thread of its own into a buffer of ``prefetch``
frames, and the camera's thread only takes the next one. On the H200, N threads each taking
one 1080p frame every 40 ms (``python -m benchmarks.nvdec_gil``): 0.34 host cores against 0.61
at 40 cameras; at 120 cameras another thread's worst wake-up from a 1 ms sleep was 12 ms late
against 482 ms.

:class:`PrefetchNvdecReader` has ``NvdecReader``'s interface (``open``, ``read``, ``rewind``,
``close``, ``frames``, ``decode_errors``), so ``NvdecSource`` and the capture worker do not
change. What differs:

- Files only. ``ThreadedDecoder`` takes a path; whether it opens RTSP URLs is not known, so
  live cameras keep ``NvdecReader`` (``NvdecSource`` decides).
- Packets the decoder rejects are not reported one by one (the C++ thread skips them), so
  ``decode_errors`` stays 0; a file that cannot be opened still fails ``open``.
- The end of the file is an empty batch (PyNvVideoCodec's own samples stop on it); ``rewind``
  starts the same decoder on the file again (``reconfigure_decoder``).

The ``codec`` argument is the PyNvVideoCodec module; CPU tests pass a fake one (named as fake).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from vidpipe.capture.nvdec import NvdecError, NvdecInfo, _torch_from_dlpack, load_codec
from vidpipe.redact import redact_text


class PrefetchNvdecReader:
    """One file camera's decoding on PyNvVideoCodec's ``ThreadedDecoder``.

    Args:
        url: file path or ``file://`` path.
        prefetch: frames decoded ahead (the decoder's buffer).
        gpu: the CUDA device the frames are decoded on.
        codec: the PyNvVideoCodec module (None: import it).
        to_tensor: turns a decoded frame into a tensor (default ``torch.from_dlpack``).
        cuda_context: with ``cuda_stream``, the CUDA context (handle) the decoder works in.
        cuda_stream: the decoder's CUDA stream (handle).
    """

    def __init__(
        self,
        url: str,
        prefetch: int,
        gpu: int = 0,
        codec: Any = None,
        to_tensor: Callable[[Any], Any] = _torch_from_dlpack,
        cuda_context: int | None = None,
        cuda_stream: int | None = None,
    ) -> None:
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, got {prefetch}")
        self.url = url
        self.gpu = gpu
        self.prefetch = prefetch
        self._codec = codec
        self._to_tensor = to_tensor
        self._cuda = (
            {"cuda_context": cuda_context, "cuda_stream": cuda_stream}
            if cuda_stream is not None
            else {}
        )
        self._decoder: Any = None
        self._ended = False
        self.frames = 0
        self.decode_errors = 0  # not reported by ThreadedDecoder (see the module docstring)

    @property
    def is_open(self) -> bool:
        return self._decoder is not None

    def _path(self) -> str:
        return self.url[len("file://") :] if self.url.lower().startswith("file://") else self.url

    def open(self) -> NvdecInfo:
        """Start decoding the file ahead. Raises NvdecError (credentials left out)."""
        self.close()
        codec = self._codec if self._codec is not None else load_codec()
        try:
            decoder = codec.ThreadedDecoder(
                self._path(), self.prefetch, gpu_id=self.gpu, use_device_memory=True, **self._cuda
            )
            meta = decoder.get_stream_metadata()
        except Exception as exc:
            raise NvdecError(
                f"cannot open {redact_text(self.url)} with NVDEC: {type(exc).__name__}: "
                f"{redact_text(str(exc))}"
            ) from None
        width, height = int(getattr(meta, "width", 0) or 0), int(getattr(meta, "height", 0) or 0)
        if width <= 0 or height <= 0:  # the decoding thread found nothing to decode
            with contextlib.suppress(Exception):
                decoder.end()
            raise NvdecError(f"cannot open {redact_text(self.url)} with NVDEC: no video stream")
        self._decoder = decoder
        self._ended = False
        fps = float(getattr(meta, "average_fps", 0.0) or 0.0)
        return NvdecInfo(width, height, fps if fps > 0 else None)

    def read(self) -> Any | None:
        """The next frame as a ``(H * 3 / 2, W)`` uint8 device tensor, or None at the end.

        Raises:
            NvdecError: not open, or the decoder failed.
        """
        if self._decoder is None:
            raise NvdecError("read before open (or after close)")
        if self._ended:
            return None
        try:
            batch = self._decoder.get_batch_frames(1)
        except Exception as exc:
            raise NvdecError(
                f"decoding {redact_text(self.url)} failed: {type(exc).__name__}: "
                f"{redact_text(str(exc))}"
            ) from None
        if not batch:
            self._ended = True
            return None
        self.frames += 1
        return self._to_tensor(batch[0])

    def rewind(self) -> bool:
        """Start the file again on the same decoder (a looping file camera at its end).

        Returns:
            True if the reader will read the file from its start; False if it was not at
            the end, or the decoder refused (the caller then closes and opens).
        """
        if self._decoder is None or not self._ended:
            return False
        try:
            self._decoder.reconfigure_decoder(self._path(), 0)
        except Exception:
            return False
        self._ended = False
        return True

    def close(self) -> None:
        """Stop the decoding thread and release the decoder. Idempotent."""
        decoder, self._decoder = self._decoder, None
        if decoder is not None:
            with contextlib.suppress(Exception):  # already stopped: nothing more to release
                decoder.end()
