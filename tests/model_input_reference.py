"""The GPU letterbox's arithmetic in numpy: what a model input from a YUV 4:2:0 picture is.

``vidpipe/preprocess/gpu.py`` (PyTorch) and ``gpu_kernel.py`` (CUDA) compute, per output pixel
of the letterbox: the two source rows and columns of a bilinear sample with half-pixel centres;
each of those four pixels converted BT.601 limited range with its 2x2 block's chroma (float32
products summed left to right, rounded half to even, clamped to 0-255); then PyTorch's
``lerp`` across, then down, rounded and clamped again. Written out again here, from the
description rather than by importing it, so that the CPU tests (``test_model_input_agreement``)
can hold the CPU conversion to it without a GPU or PyTorch, and the GPU tests can hold the GPU
to it (``tests/gpu/test_gpu_preprocess_gpu.py``).
"""

from __future__ import annotations

import numpy as np

_GAIN = np.float32(255.0 / 219.0)
_COEF = np.array(
    [[_GAIN, 2.017232, 0.0], [_GAIN, -0.391762, -0.812968], [_GAIN, 0.0, 1.596027]], np.float32
)


def _taps(size_in: int, size_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ratio = np.float32(size_in / size_out)
    src = (np.arange(size_out, dtype=np.float32) + np.float32(0.5)) * ratio - np.float32(0.5)
    src = np.maximum(src, np.float32(0.0))
    i0 = np.minimum(np.floor(src).astype(np.int64), size_in - 1)
    i1 = np.minimum(i0 + 1, size_in - 1)
    return i0, i1, np.clip(src - i0.astype(np.float32), 0.0, 1.0).astype(np.float32)


def _lerp(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    one = np.float32(1.0)
    return np.where(np.abs(w) < 0.5, a + w * (b - a), b - (b - a) * (one - w)).astype(np.float32)


def _level(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0.0, 255.0).astype(np.float32)


def reference_fit(
    y: np.ndarray, u: np.ndarray, v: np.ndarray, new_w: int, new_h: int
) -> np.ndarray:
    """``(new_h, new_w, 3)`` uint8 BGR of a 4:2:0 picture: luma ``y`` (H, W), chroma ``u``, ``v``
    (H / 2, W / 2), H and W even; resized to ``new_w`` x ``new_h`` as the GPU does."""
    src_h, src_w = y.shape
    y0, y1, wy = _taps(src_h, new_h)
    x0, x1, wx = _taps(src_w, new_w)
    taps = []
    for rows in (y0, y1):
        for cols in (x0, x1):
            lum = y[np.ix_(rows, cols)].astype(np.float32) - np.float32(16.0)
            cu = u[np.ix_(rows // 2, cols // 2)].astype(np.float32) - np.float32(128.0)
            cv = v[np.ix_(rows // 2, cols // 2)].astype(np.float32) - np.float32(128.0)
            bgr = [
                _level((lum * _COEF[k, 0] + cu * _COEF[k, 1]) + cv * _COEF[k, 2]) for k in range(3)
            ]
            taps.append(np.stack(bgr, axis=-1))
    gx, gy = wx[None, :, None], wy[:, None, None]
    upper = _lerp(taps[0], taps[1], gx)
    lower = _lerp(taps[2], taps[3], gx)
    return _level(_lerp(upper, lower, gy)).astype(np.uint8)
