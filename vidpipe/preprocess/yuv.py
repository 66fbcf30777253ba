"""A decoded YUV 4:2:0 picture to the model's BGR view, at its letterbox size, on the CPU.

Every path from a decoded frame to a model input samples the picture one way, so that a
camera's detections do not depend on its decoder:

* **Colour**: BT.601, limited range (Y 16-235, U and V centred on 128), each 2x2 block of
  pixels with its one chroma sample; what OpenCV's ``cvtColor`` and libav's scaler use for a
  stream that is untagged or tagged SMPTE 170M / BT.601 (the clips here are), and what the GPU
  letterbox (:mod:`vidpipe.preprocess.gpu`, ``gpu_kernel``) uses for every NVDEC picture.
* **Resampling**: bilinear with half-pixel centres and no antialias (OpenCV's ``INTER_LINEAR``,
  PyTorch's ``interpolate(align_corners=False)``), which the GPU computes exactly with four
  reads per output pixel.

The GPU converts the four source pixels of an output pixel, then blends them. Here the planes
are blended first (``cv2.resize`` of the luma plane and of each chroma plane straight to the
letterbox size), then converted with one 3x4 matrix (``cv2.transform``): the conversion is
affine, so the two orders differ only by rounding, by chroma sampled from the plane rather
than from the 2x2 blocks, and where a colour clips: on the assets' clips the mean absolute
difference to the GPU's arithmetic is 0.06-0.3 levels against 1.2-2.8 for libav's
``FAST_BILINEAR`` conversion at the letterbox size, which this replaces
(``tests/component/test_model_input_agreement.py``). It costs 0.11-0.15 ms a frame more than
libav's (``python -m benchmarks.capture_cost``, benchmarks/README.md).
"""

from __future__ import annotations

import cv2
import numpy as np
import numpy.typing as npt

# BT.601 limited range: B, G, R from (Y - 16, U - 128, V - 128).
Y_GAIN = 255.0 / 219.0
BGR_FROM_UV = (
    (2.017232, 0.0),  # B = Y' + 2.017 U'
    (-0.391762, -0.812968),  # G = Y' - 0.392 U' - 0.813 V'
    (0.0, 1.596027),  # R = Y' + 1.596 V'
)
# BT.601 full range (JPEG: ``yuvj420p``, as libav and OpenCV read it): no offset on Y.
_BGR_FROM_UV_FULL = ((1.772, 0.0), (-0.344136, -0.714136), (0.0, 1.402))


def _matrix(full_range: bool) -> npt.NDArray[np.float32]:
    """``cv2.transform``'s 3x4 matrix: B, G, R from (Y, U, V, 1)."""
    gain, offset = (1.0, 0.0) if full_range else (Y_GAIN, 16.0)
    gains = _BGR_FROM_UV_FULL if full_range else BGR_FROM_UV
    m = np.zeros((3, 4), np.float64)
    for row, (cu, cv) in enumerate(gains):
        m[row, :3] = (gain, cu, cv)
        m[row, 3] = -(gain * offset + cu * 128.0 + cv * 128.0)
    return m.astype(np.float32)


class YuvFitter:
    """Converts 8-bit 4:2:0 pictures of one size to BGR at one letterbox size.

    Made once per geometry and reused (the scratch planes are its own): call it from one
    thread at a time. Each call returns a new ``(new_h, new_w, 3)`` uint8 array.
    """

    def __init__(self, new_w: int, new_h: int, *, full_range: bool = False) -> None:
        self.size = (new_w, new_h)
        self._matrix = _matrix(full_range)
        self._y = np.empty((new_h, new_w), np.uint8)
        self._u = np.empty((new_h, new_w), np.uint8)
        self._v = np.empty((new_h, new_w), np.uint8)
        self._uv = np.empty((new_h, new_w, 2), np.uint8)
        self._yuv = np.empty((new_h, new_w, 3), np.uint8)

    def planar(
        self, y: npt.NDArray[np.uint8], u: npt.NDArray[np.uint8], v: npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.uint8]:
        """BGR from the luma plane and the half-size U and V planes (``yuv420p``)."""
        linear = cv2.INTER_LINEAR
        cv2.resize(y, self.size, dst=self._y, interpolation=linear)
        cv2.resize(u, self.size, dst=self._u, interpolation=linear)
        cv2.resize(v, self.size, dst=self._v, interpolation=linear)
        cv2.merge([self._y, self._u, self._v], self._yuv)
        return self._convert()

    def semi_planar(
        self, y: npt.NDArray[np.uint8], uv: npt.NDArray[np.uint8]
    ) -> npt.NDArray[np.uint8]:
        """BGR from the luma plane and the interleaved half-size chroma plane (``nv12``):
        ``uv`` is ``(H / 2, W / 2, 2)``."""
        linear = cv2.INTER_LINEAR
        cv2.resize(y, self.size, dst=self._y, interpolation=linear)
        cv2.resize(uv, self.size, dst=self._uv, interpolation=linear)
        cv2.split(self._uv, [self._u, self._v])
        cv2.merge([self._y, self._u, self._v], self._yuv)
        return self._convert()

    def _convert(self) -> npt.NDArray[np.uint8]:
        return np.asarray(cv2.transform(self._yuv, self._matrix), np.uint8)  # (no copy: u8)
