"""Where a GPU process's start-up goes, phase by phase, in this (fresh) process.

Times what ``vidpipe run`` does before its first camera can be inferred on the torch backend:
the CUDA runtime, the executor (PyTorch import, ONNX conversion, the letterbox kernel's
compilation, the warm-up of every graph size, each size timed), then ``--streams`` contexts
with their CUDA graphs, and the tight-loop rate at the batch sizes of ``--rates`` with the
result (so that a faster start is not paid for in throughput). ``--no-autotune`` turns cuDNN's
per-shape autotuning off for the whole process. Prints one JSON line.

    python -m benchmarks.startup_phases --model yolox_nano.onnx --precision f16 [--no-autotune]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

T0 = time.perf_counter()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--precision", default="f16")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--no-autotune", dest="autotune", action="store_false")
    p.add_argument("--rates", default="8,64", help="batch sizes of the tight-loop rate")
    p.add_argument("--seconds", type=float, default=3.0, help="each rate's window")
    args = p.parse_args()

    from benchmarks.gpu import tight_loop
    from vidpipe.infer.cuda_rt import CudaRuntime
    from vidpipe.infer.torch_executor import TorchExecutor

    out: dict[str, object] = {"autotune": args.autotune, "precision": args.precision}
    t = time.perf_counter()
    out["python_imports_s"] = t - T0
    rt = CudaRuntime(0)
    out["cuda_runtime_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ex = TorchExecutor(args.model, 0, args.max_batch, args.precision, True, args.autotune)
    out["executor_s"] = time.perf_counter() - t
    out.update(ex.timings)
    t = time.perf_counter()
    contexts = []
    for _ in range(args.streams):
        stream = rt.stream_create()
        d_in = rt.device_alloc(ex.max_batch * ex.io.input.frame_elems)
        d_outs = [rt.device_alloc(ex.max_batch * o.frame_elems * 4) for o in ex.io.outputs]
        contexts.append(ex.create_context(stream, d_in, d_outs))
    out["contexts_s"] = time.perf_counter() - t
    out["ready_s"] = time.perf_counter() - T0
    for batch in (int(b) for b in args.rates.split(",")):
        out[f"tight_img_s_{batch}"] = round(tight_loop(rt, ex, batch, args.seconds), 1)
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
