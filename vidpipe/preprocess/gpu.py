"""NV12 to letterboxed BGR on the GPU (PyTorch): what NVDEC gives to what the model takes.

The model takes BGR, 0-255, letterboxed top-left with pad value 114 (the same as
:func:`vidpipe.preprocess.letterbox.letterbox_into` on the CPU). Here a decoded NV12 surface,
``(H * 3 / 2, W)`` uint8 on the device (a luma plane, then interleaved half-resolution U, V),
becomes that ``(h, w, 3)`` uint8 tensor, written into a caller-given device view (a row of
the open batch's device input), on the caller's current CUDA stream. No pixel crosses to the
host.

Order of work, as on the CPU path (OpenCV's NV12 conversion, then ``INTER_LINEAR``): each
pixel is converted with its 2x2 block's chroma sample and rounded to 0-255, then the picture
is resized bilinearly (half-pixel centres, no antialias: OpenCV's sampling). Resizing the
planes before converting would differ from the CPU path's chroma enough to move scores near
the threshold by more than the golden rule allows (seen on the H200 with
``tests/gpu/test_gpu_preprocess_gpu.py``). But a bilinear output pixel reads only four
source pixels, so only those are converted: four gathers per output pixel at the model's
size instead of a float conversion of the whole frame. Converting whole 1080p frames took
about 60 MB of float temporaries per frame (4 GB for a batch of 64); the caching allocator's
work for them, under its lock and the GIL, slowed every camera thread that allocated a frame
copy (a GIL profile of the daemon at 72 NVDEC cameras on the H200).

Colour: BT.601 limited range, the matrix FFmpeg's swscale and OpenCV's ``cvtColor`` use for a
stream that does not say otherwise (the CPU capture path decodes through them). The CPU path
converts a frame for a model with the same matrix and the same bilinear sampling
(:mod:`vidpipe.preprocess.yuv`), so that a camera's detections do not depend on its decoder.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from vidpipe.preprocess.letterbox import PAD_VALUE, letterbox_geometry

# BT.601 limited range: one definition for the CPU conversion at the model's size and this one
from vidpipe.preprocess.yuv import BGR_FROM_UV as _BGR_FROM_UV
from vidpipe.preprocess.yuv import Y_GAIN as _Y_GAIN
from vidpipe.types import Letterbox


def nv12_letterbox_into(torch: Any, nv12: Any, dst: Any) -> Letterbox:
    """Letterbox one NV12 frame into ``dst`` as BGR, on the current CUDA stream.

    Args:
        torch: the ``torch`` module.
        nv12: ``(H * 3 // 2, W)`` uint8 CUDA tensor (H and W even).
        dst: ``(h, w, 3)`` uint8 CUDA tensor on the same device, overwritten entirely.

    Returns:
        The mapping back to frame pixels (as the CPU letterbox gives it).

    Raises:
        ValueError: ``nv12`` or ``dst`` has the wrong shape or type.
    """
    if nv12.dim() != 2 or nv12.dtype != torch.uint8 or nv12.shape[0] % 3 or nv12.shape[1] % 2:
        raise ValueError(
            f"NV12 frame must be a (H*3/2, W) uint8 tensor with H, W even, got "
            f"{nv12.dtype} {tuple(nv12.shape)}"
        )
    if dst.dim() != 3 or dst.shape[2] != 3 or dst.dtype != torch.uint8:
        raise ValueError(f"destination must be (h, w, 3) uint8, got {dst.dtype} {tuple(dst.shape)}")
    src_h, src_w = nv12.shape[0] * 2 // 3, nv12.shape[1]
    dst_h, dst_w = dst.shape[0], dst.shape[1]
    scale, new_w, new_h = letterbox_geometry(src_w, src_h, dst_w, dst_h)
    bgr = _nv12_to_bgr(torch, nv12, src_h, src_w, new_h, new_w)
    dst[:new_h, :new_w].copy_(bgr)
    if new_h < dst_h:
        dst[new_h:].fill_(PAD_VALUE)
    if new_w < dst_w:
        dst[:new_h, new_w:].fill_(PAD_VALUE)
    return Letterbox(scale=scale, src_w=int(src_w), src_h=int(src_h))


def _nv12_to_bgr(torch: Any, nv12: Any, src_h: int, src_w: int, new_h: int, new_w: int) -> Any:
    """``(new_h, new_w, 3)`` uint8 BGR from an NV12 frame: convert, then resize."""
    return _nv12_to_bgr_batch(torch, nv12[None], src_h, src_w, new_h, new_w)[0]


def _taps(torch: Any, size_in: int, size_out: int, device: Any) -> tuple[Any, Any, Any]:
    """Bilinear taps along one axis, as ``interpolate(mode="bilinear", align_corners=False)``
    computes them: the two source indices and the second one's weight per output index."""
    ratio = size_in / size_out
    src = ((torch.arange(size_out, device=device, dtype=torch.float32) + 0.5) * ratio - 0.5).clamp_(
        min=0.0
    )
    i0 = src.floor().long().clamp_(max=size_in - 1)
    i1 = torch.clamp(i0 + 1, max=size_in - 1)
    return i0, i1, (src - i0.float()).clamp_(0.0, 1.0)


class Plan(NamedTuple):
    """What one geometry's conversion reads (made once per geometry and device)."""

    index: Any  # (3, 2h, 2w) flat offsets of the Y, U, V samples of every tap
    offsets: Any  # (1, 3, 1, 1): 16, 128, 128
    coef: Any  # (1, 3, 3, 1, 1): B, G, R from (Y - 16, U - 128, V - 128)
    wx: Any | None  # (w,) the right tap's weight per column; None: no resize
    wy: Any | None  # (h,) the lower tap's weight per row; None: no resize
    ys: Any  # (2h,) int32 source rows: the upper taps, then the lower ones
    xs: Any  # (2w,) int32 source columns: the left taps, then the right ones


_PLAN_CACHE: dict[tuple[Any, ...], Plan] = {}


def plan(torch: Any, device: Any, src_h: int, src_w: int, new_h: int, new_w: int) -> Plan:
    """The taps, weights and colour matrix of one geometry, made once per geometry and
    device: rows list the upper taps, then the lower ones; columns likewise."""
    key = (str(device), src_h, src_w, new_h, new_w)
    if key not in _PLAN_CACHE:
        if (new_h, new_w) == (src_h, src_w):  # no resize: each pixel is its own four taps
            ys, wy = torch.arange(src_h, device=device).repeat(2), None
            xs, wx = torch.arange(src_w, device=device).repeat(2), None
        else:
            y0, y1, wy = _taps(torch, src_h, new_h, device)
            x0, x1, wx = _taps(torch, src_w, new_w, device)
            ys, xs = torch.cat([y0, y1]), torch.cat([x0, x1])
        luma = ys[:, None] * src_w + xs[None, :]
        chroma = (src_h + ys // 2)[:, None] * src_w + ((xs // 2) * 2)[None, :]
        index = torch.stack([luma, chroma, chroma + 1])
        offsets = torch.tensor([16.0, 128.0, 128.0], device=device).view(1, 3, 1, 1)
        matrix = [(_Y_GAIN, cu, cv) for cu, cv in _BGR_FROM_UV]
        coef = torch.tensor(matrix, device=device, dtype=torch.float32).view(1, 3, 3, 1, 1)
        made = Plan(index, offsets, coef, wx, wy, ys.to(torch.int32), xs.to(torch.int32))
        if index.is_cuda:  # made on this stream; other streams read it from now on
            torch.cuda.current_stream(index.device).synchronize()
        _PLAN_CACHE[key] = made
    return _PLAN_CACHE[key]


def _nv12_to_bgr_batch(
    torch: Any, nv12: Any, src_h: int, src_w: int, new_h: int, new_w: int
) -> Any:
    """``(B, new_h, new_w, 3)`` uint8 BGR from ``(B, H * 3 / 2, W)`` NV12 frames.

    One gather reads the Y, U and V samples of the (at most) four source pixels of every
    output pixel; they are converted and rounded as the CPU path's uint8 BGR, then blended
    bilinearly. About 20 kernels per batch, whatever its size.
    """
    b = nv12.shape[0]
    index, offsets, coef, wx, wy, _, _ = plan(torch, nv12.device, src_h, src_w, new_h, new_w)
    yuv = nv12.reshape(b, -1)[:, index].to(torch.float32) - offsets  # (B, 3, 2h, 2w)
    bgr = (yuv[:, None] * coef).sum(dim=2).round_().clamp_(0.0, 255.0)  # (B, 3, 2h, 2w)
    taps = bgr.view(b, 3, 2, new_h, 2, new_w)
    if wx is None or wy is None:  # no resize: the first tap is the pixel itself
        out = taps[:, :, 0, :, 0]
    else:
        across = torch.lerp(taps[:, :, :, :, 0], taps[:, :, :, :, 1], wx)  # (B, 3, 2, h, w)
        out = torch.lerp(across[:, :, 0], across[:, :, 1], wy[:, None])
        out = out.round_().clamp_(0.0, 255.0)
    return out.permute(0, 2, 3, 1).to(torch.uint8)


def nv12_letterbox_batch_into(torch: Any, nv12: Any, dst: Any) -> Letterbox:
    """Letterbox ``B`` NV12 frames of one size into ``dst`` as BGR, in one pass of kernels.

    The same arithmetic as :func:`nv12_letterbox_into`, frame for frame (a batch dimension in
    front), so the stream set's Python is per batch and size, not per frame.

    Args:
        torch: the ``torch`` module.
        nv12: ``(B, H * 3 // 2, W)`` uint8 CUDA tensor (H and W even).
        dst: ``(B, h, w, 3)`` uint8 CUDA tensor (or view) on the same device, overwritten.

    Returns:
        The mapping back to frame pixels (the same for every frame of the batch).
    """
    if nv12.dim() != 3 or nv12.dtype != torch.uint8 or nv12.shape[1] % 3 or nv12.shape[2] % 2:
        raise ValueError(
            f"NV12 batch must be a (B, H*3/2, W) uint8 tensor with H, W even, got "
            f"{nv12.dtype} {tuple(nv12.shape)}"
        )
    if dst.dim() != 4 or dst.shape[0] != nv12.shape[0] or dst.shape[3] != 3:
        raise ValueError(f"destination must be (B, h, w, 3) uint8, got {tuple(dst.shape)}")
    src_h, src_w = nv12.shape[1] * 2 // 3, nv12.shape[2]
    dst_h, dst_w = dst.shape[1], dst.shape[2]
    scale, new_w, new_h = letterbox_geometry(src_w, src_h, dst_w, dst_h)
    dst[:, :new_h, :new_w].copy_(_nv12_to_bgr_batch(torch, nv12, src_h, src_w, new_h, new_w))
    if new_h < dst_h:
        dst[:, new_h:].fill_(PAD_VALUE)
    if new_w < dst_w:
        dst[:, :new_h, new_w:].fill_(PAD_VALUE)
    return Letterbox(scale=scale, src_w=int(src_w), src_h=int(src_h))


def bgr_to_nv12(image: Any) -> Any:
    """A BGR ``(H, W, 3)`` uint8 numpy image as NV12 ``(H * 3 // 2, W)`` (tests, benchmarks).

    OpenCV converts to I420 (BT.601 limited, the inverse of the matrix above); the U and V
    planes are then interleaved.
    """
    import cv2
    import numpy as np

    h, w = image.shape[:2]
    flat = cv2.cvtColor(image, cv2.COLOR_BGR2YUV_I420).reshape(-1)
    n = h * w
    u = flat[n : n + n // 4]
    v = flat[n + n // 4 : n + n // 2]
    nv12 = np.empty((h * 3 // 2, w), np.uint8)
    nv12[:h] = flat[:n].reshape(h, w)
    nv12[h:] = np.stack([u, v], axis=1).reshape(h // 2, w)
    return nv12
