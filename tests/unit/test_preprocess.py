"""Letterbox geometry and the preallocated buffer pool."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.preprocess.buffers import BufferPool
from vidpipe.preprocess.letterbox import letterbox, letterbox_geometry
from vidpipe.types import TensorSpec


@pytest.mark.parametrize(
    ("src", "dst", "expected"),
    [
        ((768, 432), (416, 416), (416, 233)),  # 233.99.. truncated
        ((640, 426), (416, 416), (416, 276)),  # truncates like the YOLOX reference (276.9)
        ((432, 768), (416, 416), (233, 416)),
        ((416, 416), (416, 416), (416, 416)),
        ((100, 50), (416, 416), (416, 208)),  # upscaling
        ((1920, 1080), (640, 384), (640, 360)),
    ],
)
def test_geometry(src: tuple[int, int], dst: tuple[int, int], expected: tuple[int, int]) -> None:
    scale, w, h = letterbox_geometry(*src, *dst)
    assert (w, h) == expected
    assert scale == pytest.approx(min(dst[0] / src[0], dst[1] / src[1]))


def test_geometry_rejects_empty_image() -> None:
    with pytest.raises(ValueError, match="empty image"):
        letterbox_geometry(0, 10, 416, 416)


def test_letterbox_places_top_left_and_pads_114() -> None:
    img = np.full((432, 768, 3), 7, np.uint8)
    out, lb = letterbox(img, 416, 416)
    assert out.shape == (416, 416, 3)
    assert (out[:233] == 7).all()
    assert (out[233:] == 114).all()
    assert lb.src_w == 768 and lb.src_h == 432


def test_buffer_reuse_clears_old_content() -> None:
    """A small frame after a large one must not leave stale pixels in the padding."""
    pool = BufferPool(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 1)
    buf = pool.acquire(1.0)
    assert buf is not None
    buf.fill(np.zeros((416, 416, 3), np.uint8))
    buf.fill(np.full((100, 400, 3), 3, np.uint8))
    assert (buf.hwc[:104, :416] == 3).all()
    assert (buf.hwc[104:] == 114).all()


def test_f32_nchw_buffer_matches_u8() -> None:
    pool = BufferPool(TensorSpec("x", (1, 3, 416, 416), "f32", "NCHW"), 1)
    buf = pool.acquire(1.0)
    assert buf is not None
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (432, 768, 3), dtype=np.uint8)
    buf.fill(img)
    np.testing.assert_array_equal(buf.tensor[0], buf.hwc.transpose(2, 0, 1).astype(np.float32))


def test_pool_preallocates_and_never_grows() -> None:
    pool = BufferPool(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 4)
    addresses = {b.hwc.ctypes.data for b in pool.buffers}
    img = np.zeros((432, 768, 3), np.uint8)
    for _ in range(50):
        buf = pool.acquire(1.0)
        assert buf is not None
        buf.fill(img)
        assert buf.hwc.ctypes.data in addresses
        pool.release(buf)
    assert pool.allocations == 4
    assert pool.free_count == 4


def test_pool_acquire_times_out_when_empty() -> None:
    pool = BufferPool(TensorSpec("x", (1, 8, 8, 3), "u8", "NHWC"), 1)
    assert pool.acquire(0.1) is not None
    assert pool.acquire(0.05) is None
