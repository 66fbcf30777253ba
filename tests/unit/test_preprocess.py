"""Letterbox geometry and the input buffers backends lend."""

from __future__ import annotations

import numpy as np
import pytest

from vidpipe.preprocess.buffers import allocations, input_buffer
from vidpipe.preprocess.letterbox import hwc_to_chw_float, letterbox, letterbox_geometry
from vidpipe.types import DeviceImage, TensorSpec


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
    buf = input_buffer(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 0)
    buf.fill(np.zeros((416, 416, 3), np.uint8))
    buf.fill(np.full((100, 400, 3), 3, np.uint8))
    assert (buf.hwc[:104, :416] == 3).all()
    assert (buf.hwc[104:] == 114).all()


def test_f32_nchw_buffer_matches_u8() -> None:
    buf = input_buffer(TensorSpec("x", (1, 3, 416, 416), "f32", "NCHW"), 0)
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (432, 768, 3), dtype=np.uint8)
    buf.fill(img)
    np.testing.assert_array_equal(buf.tensor[0], buf.hwc.transpose(2, 0, 1).astype(np.float32))


def test_f32_conversion_splits_channels_into_the_buffers_own_planes() -> None:
    """The split goes through scratch the buffer made once; a second frame reuses it."""
    buf = input_buffer(TensorSpec("x", (1, 3, 64, 64), "f32", "NCHW"), 0)
    planes = [id(p) for p in buf.planes]
    rng = np.random.default_rng(1)
    for _ in range(2):
        buf.fill(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8))
        expected = buf.hwc.transpose(2, 0, 1).astype(np.float32)
        np.testing.assert_array_equal(buf.tensor[0], expected)
        for channel, plane in enumerate(buf.planes):
            np.testing.assert_array_equal(plane, buf.hwc[:, :, channel])
    assert [id(p) for p in buf.planes] == planes


def test_f32_conversion_without_scratch_planes() -> None:
    src = np.random.default_rng(2).integers(0, 255, (40, 30, 3), dtype=np.uint8)
    dst = np.zeros((3, 40, 30), np.float32)
    hwc_to_chw_float(src, dst)
    np.testing.assert_array_equal(dst, src.transpose(2, 0, 1).astype(np.float32))


def test_u8_buffer_letterboxes_straight_into_the_memory_it_is_given() -> None:
    """The backend's memory is the letterbox target itself: nothing is copied afterwards."""
    memory = np.zeros((4, 416, 416, 3), np.uint8)  # e.g. a pinned batch of 4 rows
    buf = input_buffer(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 2, memory[2:3])
    made = allocations()
    img = np.full((432, 768, 3), 9, np.uint8)
    for _ in range(5):
        buf.fill(img)
    assert allocations() == made
    assert np.shares_memory(buf.hwc, memory[2]) and np.shares_memory(buf.tensor, memory[2])
    assert (memory[2, :233] == 9).all() and (memory[2, 233:] == 114).all()
    assert not memory[[0, 1, 3]].any()  # the other rows are untouched


@pytest.mark.parametrize(
    ("spec", "memory", "message"),
    [
        (
            ("x", (1, 8, 8, 3), "u8", "NHWC"),
            np.zeros((1, 8, 8, 3), np.float32),
            "u8 \\[1, 8, 8, 3\\]",
        ),
        (
            ("x", (1, 3, 8, 8), "f32", "NCHW"),
            np.zeros((1, 3, 8, 9), np.float32),
            "float32 \\[1, 3, 8, 9\\]",
        ),
        (("x", (1, 8, 8, 3), "f32", "NHWC"), None, "unsupported input spec"),
    ],
)
def test_memory_that_does_not_fit_the_spec_is_refused(spec, memory, message) -> None:
    with pytest.raises(ValueError, match=message):
        input_buffer(TensorSpec(*spec), 0, memory)


def frame(width: int, height: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 255, (height, width, 3), dtype=np.uint8)


@pytest.mark.parametrize(
    "spec",
    [("x", (1, 416, 416, 3), "u8", "NHWC"), ("x", (1, 3, 416, 416), "f32", "NCHW")],
    ids=["u8", "f32-scratch"],
)
def test_the_pad_is_written_once_per_geometry(spec: tuple) -> None:
    """A fill of the size the buffer holds the pad of leaves the pad alone (poisoned here, to
    see it); a fill of another size writes the whole buffer as a fresh letterbox does."""
    buf = input_buffer(TensorSpec(*spec), 0)
    buf.fill(frame(640, 480, 0))  # 4:3: picture 416x312
    buf.hwc[312:] = 7
    second = frame(640, 480, 1)
    buf.fill(second)
    assert (buf.hwc[312:] == 7).all(), "the pad of the same geometry was written again"
    np.testing.assert_array_equal(buf.hwc[:312], letterbox(second, 416, 416)[0][:312])
    if buf.tensor.dtype == np.float32:  # the scratch's pad goes on into the tensor
        assert (buf.tensor[0, :, 312:] == 7).all()
    wide = frame(1920, 1080, 2)  # 16:9: picture 416x234, rows 234..312 become pad
    buf.fill(wide)
    expected = letterbox(wide, 416, 416)[0]
    np.testing.assert_array_equal(buf.hwc, expected)
    if buf.tensor.dtype == np.float32:
        np.testing.assert_array_equal(buf.tensor[0], expected.transpose(2, 0, 1))


def test_backend_memory_gets_its_pad_on_the_first_fill() -> None:
    """Memory the backend lends may hold anything: the first fill writes the pad."""
    memory = frame(416, 416, 3)[None]  # garbage everywhere
    buf = input_buffer(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 0, memory)
    wide = frame(1920, 1080, 4)
    buf.fill(wide)
    np.testing.assert_array_equal(memory[0], letterbox(wide, 416, 416)[0])


def test_a_gpu_picture_leaves_the_pad_the_buffer_holds() -> None:
    """A ``DeviceImage`` fill does not write ``hwc``: the next host frame of the GPU
    picture's size must still get its pad, over what the previous host frame left."""
    buf = input_buffer(TensorSpec("x", (1, 416, 416, 3), "u8", "NHWC"), 0)
    buf.fill(frame(640, 480, 5))  # picture rows 0..312
    host = np.zeros((1080, 1920, 3), np.uint8)
    buf.fill(DeviceImage(None, 0, 1920, 1080, lambda: host))
    wide = frame(1920, 1080, 6)
    buf.fill(wide)
    np.testing.assert_array_equal(buf.hwc, letterbox(wide, 416, 416)[0])
