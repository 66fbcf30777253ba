"""GPU time of the NV12 letterbox of one batch: the PyTorch form against the fused kernel.

``python -m benchmarks.gpu_letterbox [--batch 64] [--size 1920x1080] [--rounds 50]``

Both letterbox the same ``B`` random NV12 pictures into a ``(B, 416, 416, 3)`` input on one
stream; the time per batch is measured with CUDA events over ``rounds`` back-to-back calls,
after a warm-up, and reported with the ratio of the two (one JSON line). The pictures are kept
as separate tensors, as NVDEC cameras hand them over: the PyTorch form stacks them first, as
the stream set does.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any


def _time(torch: Any, fn: Callable[[], object], rounds: int) -> float:
    """Milliseconds per call of ``fn`` on the current stream (CUDA events)."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(rounds):
        fn()
    end.record()
    end.synchronize()
    return float(start.elapsed_time(end)) / rounds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_letterbox", description=__doc__)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", default="1920x1080", help="picture size WxH (even)")
    p.add_argument("--rounds", type=int, default=50)
    args = p.parse_args(argv)
    import torch

    from vidpipe.preprocess.gpu import nv12_letterbox_batch_into
    from vidpipe.preprocess.gpu_kernel import compile_letterbox, letterbox_rows

    w, h = (int(v) for v in args.size.split("x"))
    device = torch.device("cuda", 0)
    kernel, how = compile_letterbox(torch, device)
    gen = torch.Generator(device=device).manual_seed(0)
    pictures = [
        torch.randint(16, 236, (h * 3 // 2, w), generator=gen, device=device, dtype=torch.uint8)
        for _ in range(args.batch)
    ]
    dst = torch.empty((args.batch, 416, 416, 3), dtype=torch.uint8, device=device)
    rows = list(range(args.batch))
    report: dict[str, object] = {"batch": args.batch, "size": args.size, "kernel": how}
    report["pytorch_ms"] = round(
        _time(
            torch, lambda: nv12_letterbox_batch_into(torch, torch.stack(pictures), dst), args.rounds
        ),
        3,
    )
    if kernel is not None:
        ms = _time(torch, lambda: letterbox_rows(torch, kernel, pictures, rows, dst), args.rounds)
        report["kernel_ms"] = round(ms, 3)
        report["speedup"] = round(float(report["pytorch_ms"]) / ms, 1)  # type: ignore[arg-type]
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
