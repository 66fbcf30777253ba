"""The NV12 letterbox of :mod:`vidpipe.preprocess.gpu` as one CUDA kernel per batch.

The PyTorch form of the letterbox (``nv12_letterbox_batch_into``) runs about 20 kernels over
float temporaries of every source pixel that the output reads, after a ``torch.stack`` of the
batch's pictures: about 6 GB of memory traffic for a batch of 64 1080p pictures, 2.57 ms on
the H200, more than a third of YOLOX-Nano's own f16 run of the same batch, so a stream set fed
with NVDEC pictures reached only 0.57-0.68 of the model's tight loop. This kernel takes 0.10 ms
for that batch (``python -m benchmarks.gpu_letterbox``; with it the stream set reaches
0.91-0.98, benchmarks/README.md). It does the same arithmetic per output pixel in registers:
it reads the four source pixels' Y, U and V bytes straight from each picture (their addresses
in a small table, so no stack), and writes the three output bytes into the picture's row of
the batch, pad included.

Same arithmetic as the PyTorch form, step for step, so that the two agree (the GPU tests
compare them): the taps and weights come from the same plan (``gpu.plan``); each tap is
converted with float32 products summed in the order PyTorch's reduction sums them, rounded
half to even and clamped; the blend is PyTorch's ``lerp`` formula, rows then columns.

Compiled at run time with NVRTC through ``torch.cuda._compile_kernel`` (PyTorch 2.8 and
later; the wheels bring NVRTC). Where that is missing or fails, :func:`compile_letterbox`
says why and the caller keeps the PyTorch form.
"""

from __future__ import annotations

import logging
from typing import Any

from vidpipe.preprocess.gpu import Plan, plan
from vidpipe.preprocess.letterbox import PAD_VALUE, letterbox_geometry

log = logging.getLogger(__name__)

_BLOCK = 256

_SOURCE = r"""
__device__ __forceinline__ float lerp_(float a, float b, float w) {
    /* PyTorch's lerp: the form that keeps precision on the weight's side */
    return fabsf(w) < 0.5f ? a + w * (b - a) : b - (b - a) * (1.0f - w);
}

__device__ __forceinline__ float level(float x) {
    return fminf(fmaxf(rintf(x), 0.0f), 255.0f);
}

extern "C" __global__ void nv12_letterbox(
    const long long* table,  /* [0, n): NV12 picture addresses; [n, 2n): their rows in dst */
    const int* ys, const int* xs,      /* upper then lower row taps; left then right columns */
    const float* wy, const float* wx,  /* the second tap's weight per output row, column */
    const float* coef,                 /* 3x3: B, G, R from (Y - 16, U - 128, V - 128) */
    unsigned char* dst,                /* (rows, dst_h, dst_w, 3) */
    int n, int src_h, int src_w, int new_h, int new_w, int dst_h, int dst_w, int pad)
{
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    int i = blockIdx.y;
    if (p >= dst_h * dst_w || i >= n) return;
    int oy = p / dst_w, ox = p - oy * dst_w;
    unsigned char* out = dst + ((size_t)table[n + i] * dst_h * dst_w + p) * 3;
    if (oy >= new_h || ox >= new_w) {
        out[0] = out[1] = out[2] = (unsigned char)pad;
        return;
    }
    const unsigned char* f = (const unsigned char*)table[i];
    float tap[2][2][3];
    for (int a = 0; a < 2; ++a) {
        int y = ys[a * new_h + oy];
        for (int b = 0; b < 2; ++b) {
            int x = xs[b * new_w + ox];
            float l = (float)f[(size_t)y * src_w + x] - 16.0f;
            size_t c = (size_t)(src_h + y / 2) * src_w + (x / 2) * 2;
            float u = (float)f[c] - 128.0f, v = (float)f[c + 1] - 128.0f;
            for (int k = 0; k < 3; ++k) {
                /* products rounded one by one, summed left to right: no fused multiply-add */
                float s = __fadd_rn(__fadd_rn(__fmul_rn(l, coef[3 * k]),
                                              __fmul_rn(u, coef[3 * k + 1])),
                                    __fmul_rn(v, coef[3 * k + 2]));
                tap[a][b][k] = level(s);
            }
        }
    }
    float gx = wx[ox], gy = wy[oy];
    for (int k = 0; k < 3; ++k) {
        float upper = lerp_(tap[0][0][k], tap[0][1][k], gx);
        float lower = lerp_(tap[1][0][k], tap[1][1][k], gx);
        out[k] = (unsigned char)level(lerp_(upper, lower, gy));
    }
}
"""


def compile_letterbox(torch: Any, device: Any) -> tuple[Any | None, str]:
    """The kernel, compiled for ``device``, and how the letterbox runs there.

    Returns:
        ``(kernel, "fused kernel (NVRTC)")``, or ``(None, "PyTorch ops (<why>)")`` when this
        PyTorch cannot compile it (the caller keeps the PyTorch form).
    """
    compile_kernel = getattr(torch.cuda, "_compile_kernel", None)
    if compile_kernel is None:
        return None, f"PyTorch ops (torch {torch.__version__} has no NVRTC kernel compiler)"
    try:
        with torch.cuda.device(device):
            kernel = compile_kernel(_SOURCE, "nv12_letterbox")
    except Exception as exc:  # NVRTC missing or refusing: the PyTorch form still works
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        log.warning("GPU letterbox kernel not compiled (%s); using PyTorch ops", reason)
        return None, f"PyTorch ops (kernel not compiled: {reason})"
    return kernel, "fused kernel (NVRTC)"


def letterbox_rows(torch: Any, kernel: Any, pictures: list[Any], rows: list[int], dst: Any) -> None:
    """Letterbox same-size NV12 ``pictures`` into rows ``rows`` of ``dst`` with ``kernel``,
    on the current CUDA stream.

    Args:
        torch: the ``torch`` module.
        kernel: what :func:`compile_letterbox` gave.
        pictures: ``(H * 3 // 2, W)`` uint8 CUDA tensors of one size (H and W even).
        rows: each picture's row of ``dst``.
        dst: ``(N, h, w, 3)`` uint8 CUDA tensor, contiguous; each listed row is overwritten.
    """
    first = pictures[0]
    if first.dim() != 2 or first.dtype != torch.uint8 or first.shape[0] % 3 or first.shape[1] % 2:
        raise ValueError(
            f"NV12 frame must be a (H*3/2, W) uint8 tensor with H, W even, got "
            f"{first.dtype} {tuple(first.shape)}"
        )
    if any(p.shape != first.shape for p in pictures):
        raise ValueError("pictures of one call must all have one size")
    if dst.dim() != 4 or dst.shape[3] != 3 or dst.dtype != torch.uint8 or not dst.is_contiguous():
        raise ValueError(f"destination must be contiguous (N, h, w, 3) uint8, got {dst.shape}")
    src_h, src_w = int(first.shape[0]) * 2 // 3, int(first.shape[1])
    _, dst_h, dst_w, _ = (int(s) for s in dst.shape)
    _, new_w, new_h = letterbox_geometry(src_w, src_h, dst_w, dst_h)
    geometry = plan(torch, dst.device, src_h, src_w, new_h, new_w)
    wy, wx = _weights(torch, geometry, new_h, new_w)
    # Allocations on the current stream (the copies, the table) are reused only by later
    # work on that stream, so they need not outlive this call; the pinned source of the
    # table's copy is held by PyTorch's host allocator until the copy has run.
    flat = [p if p.is_contiguous() else p.contiguous() for p in pictures]
    table = torch.tensor(
        [p.data_ptr() for p in flat] + list(rows), dtype=torch.int64, pin_memory=True
    ).to(dst.device, non_blocking=True)
    n = len(flat)
    grid = ((dst_h * dst_w + _BLOCK - 1) // _BLOCK, n, 1)
    coef = geometry.coef.reshape(9)
    sizes = [n, src_h, src_w, new_h, new_w, dst_h, dst_w, PAD_VALUE]
    kernel(
        grid=grid,
        block=(_BLOCK, 1, 1),
        args=[table, geometry.ys, geometry.xs, wy, wx, coef, dst, *sizes],
    )


_ZEROS: dict[tuple[str, int], Any] = {}


def _weights(torch: Any, geometry: Plan, new_h: int, new_w: int) -> tuple[Any, Any]:
    """The plan's weights; zeros where it has none (no resize: a zero weight keeps the
    first tap exactly, as the PyTorch form's "first tap is the pixel")."""
    if geometry.wx is not None and geometry.wy is not None:
        return geometry.wy, geometry.wx
    device = geometry.index.device
    key = (str(device), max(new_h, new_w))
    if key not in _ZEROS:
        _ZEROS[key] = torch.zeros(max(new_h, new_w), dtype=torch.float32, device=device)
        torch.cuda.current_stream(device).synchronize()  # other streams read it from now on
    zeros = _ZEROS[key]
    return zeros[:new_h], zeros[:new_w]
