"""Where an inference's time goes, layer type by layer type: a model as given against the same
model after vidpipe's load-time rewrites (``vidpipe/infer/ov_rewrites.py``).

One stream of one thread, OpenVINO's own per-layer counters (``PERF_COUNT``), both models
measured in turn ``--rounds`` times so that a machine that slows down between them shows in
both. Prints each round's total and the costliest layer types::

    python -m benchmarks.layer_times --model yolox_nano.onnx --precision bf16 --rounds 2
    ONEDNN_MAX_CPU_ISA=AVX2 python -m benchmarks.layer_times --model yolox_nano.onnx \
        --precision f32 --other int8.xml

``ONEDNN_MAX_CPU_ISA=AVX2`` in the environment makes oneDNN (the convolutions) use its AVX2
kernels on a newer CPU; OpenVINO's own kernels (slices, transposes) still use what the CPU has.
"""

from __future__ import annotations

import argparse
import collections
import os
from pathlib import Path

import numpy as np
import openvino as ov

from vidpipe.infer.ov_rewrites import rewrite_graph


def layer_times(
    core: ov.Core, model: ov.Model, precision: str, runs: int
) -> collections.Counter[tuple[str, str]]:
    """Mean ms per inference by ``(layer type, kernel)`` over ``runs`` inferences."""
    compiled = core.compile_model(
        model,
        "CPU",
        {
            "PERF_COUNT": "YES",
            "INFERENCE_PRECISION_HINT": precision,
            "INFERENCE_NUM_THREADS": 1,
            "NUM_STREAMS": 1,
        },
    )
    request = compiled.create_infer_request()
    shape = [int(d) for d in compiled.input(0).get_shape()]
    image = np.random.default_rng(0).uniform(0, 255, shape).astype(np.float32)
    for _ in range(5):
        request.infer({0: image})
    totals: collections.Counter[tuple[str, str]] = collections.Counter()
    for _ in range(runs):
        request.infer({0: image})
        for layer in request.profiling_info:
            key = (layer.node_type, layer.exec_type)
            totals[key] += layer.real_time.total_seconds() * 1000.0 / runs
    return totals


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--precision", default="f32", help="INFERENCE_PRECISION_HINT (f32, bf16)")
    p.add_argument("--runs", type=int, default=40, help="inferences per measurement")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--top", type=int, default=6, help="layer types shown per measurement")
    p.add_argument(
        "--other",
        type=Path,
        help="another model measured in the same rounds, as it is (e.g. vidpipe optimize's "
        "INT8 IR, whose graph has the rewrites already)",
    )
    args = p.parse_args(argv)
    core = ov.Core()
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA", "the CPU's own")
    print(f"{args.model.name} at {args.precision}, oneDNN ISA: {isa}")
    for round_ in range(1, args.rounds + 1):
        models = [("as given", args.model), ("rewritten", args.model)]
        models += [(f"other: {args.other.name}", args.other)] if args.other else []
        for name, path in models:
            model = core.read_model(str(path))
            label = f"{name} ({rewrite_graph(model).describe()})" if name == "rewritten" else name
            times = layer_times(core, model, args.precision, args.runs)
            print(f"round {round_}, {label}: {sum(times.values()):.2f} ms per inference")
            for (kind, kernel), ms in times.most_common(args.top):
                print(f"    {ms:6.2f} ms  {kind} ({kernel})")


if __name__ == "__main__":
    main()
