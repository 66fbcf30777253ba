"""Python-level PyTorch calls per batch on the GPU path: the GPU letterbox and the YOLOX
postprocessing of one batch.

``python -m benchmarks.torch_calls [--batch 64] [--device cpu|cuda:0]``

Every PyTorch call from Python gives up the GIL and takes it back. In one daemon with many
NVDEC cameras the batcher and completion threads wait behind every camera thread for each
of those hand-overs (benchmarks/README.md), so the count per batch is the cost that
matters there, and it is the same on a CPU build of PyTorch as on the GPU: this counts the
calls into ``torch`` (functions and tensor methods) with ``sys.setprofile``. Synthetic YOLOX
outputs: 30 candidate rows per image over three classes, the rest below the threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any


def count_torch_calls(torch: Any, fn: Callable[[], object]) -> int:
    """Calls into PyTorch's C functions and tensor methods made while ``fn`` runs."""
    calls = [0]

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event != "c_call":
            return
        owner = getattr(arg, "__self__", None)
        module = getattr(arg, "__module__", None) or type(owner).__module__
        if isinstance(owner, torch.Tensor) or module.startswith("torch"):
            calls[0] += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.torch_calls", description=__doc__)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--device", default="cpu", help="torch device (a CPU build is enough)")
    args = p.parse_args(argv)
    import torch

    from vidpipe.postprocess.gpu import YoloxGpuPostprocess
    from vidpipe.preprocess.gpu import nv12_letterbox_batch_into
    from vidpipe.types import Letterbox

    device, b = torch.device(args.device), args.batch
    gen = torch.Generator().manual_seed(0)
    out = torch.rand((b, 3549, 85), generator=gen) * 0.2
    for i in range(b):
        rows = torch.randint(0, 3549, (30,), generator=gen)
        out[i, rows, 4] = 0.9
        out[i, rows, 5 + rows % 3] = 0.95
    out = out.to(device)
    letterboxes = [Letterbox(416 / 1920, 1920, 1080)] * b
    post = YoloxGpuPostprocess(torch, device, 416, 416, 80, 0.45)
    nv12 = torch.randint(0, 255, (b, 1620, 1920), dtype=torch.uint8, generator=gen).to(device)
    dst = torch.empty((b, 416, 416, 3), dtype=torch.uint8, device=device)
    steps = {
        "letterbox_1080p": lambda: nv12_letterbox_batch_into(torch, nv12, dst),
        "yolox_postprocess": lambda: post(out, letterboxes, [0.3] * b),
    }
    report: dict[str, object] = {"batch": b, "torch": torch.__version__}
    for name, step in steps.items():
        step()  # first call: caches (the letterbox's plan per geometry)
        report[name] = count_torch_calls(torch, step)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
