"""``python -m benchmarks [vidpipe bench options] [study options]``: ``vidpipe bench`` with the
other designs, vidpipe's variants and the study registered (``benchmarks/__init__.py``).

``make bench`` runs ``python -m benchmarks --suite full --out benchmarks/results``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from benchmarks.plot import plot_unavailable
from benchmarks.study import Study
from benchmarks.variants import INT8_VARIANTS
from vidpipe.bench.cli import EXIT_USAGE, add_arguments, cmd_bench
from vidpipe.bench.harness import register_extension

#: the smoke suite's contenders: one of each kind
SMOKE_CONTENDERS = ("ceiling", "naive", "vidpipe")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="vidpipe bench against the other designs: every contender on the same "
        "model, clips and machine, one process per point, repeats alternated; JSON, a Markdown "
        "table and a PNG plot.",
    )
    add_arguments(p)
    study = p.add_argument_group("the study")
    study.add_argument(
        "--benchmark-app",
        dest="benchmark_app",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run OpenVINO's benchmark_app as a cross-check (default: with --suite full)",
    )
    study.add_argument(
        "--stage-frames", type=int, help="frames timed per stage for the stage costs"
    )
    study.add_argument(
        "--int8-model",
        type=Path,
        help="INT8 IR (vidpipe optimize) that the contenders vidpipe-int8 and "
        "vidpipe-motion-int8 run, while the others run --model: both in one run",
    )
    study.add_argument(
        "--frame-waits",
        action="store_true",
        help="time where each frame of vidpipe's contenders waits before its inference "
        "(reader, mailbox) and sample the scheduler's requests in flight "
        "(benchmarks/frame_waits.py; adds a little work per frame)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    smoke = args.suite == "smoke"
    if smoke and args.contenders is None:
        args.contenders = SMOKE_CONTENDERS
    int8 = sorted(INT8_VARIANTS.intersection(args.contenders or ()))
    if int8 and args.int8_model is None:
        print(f"vidpipe bench: {', '.join(int8)} run the model of --int8-model", file=sys.stderr)
        return EXIT_USAGE
    register_extension(
        Study(
            int8_model=args.int8_model,
            stage_frames=args.stage_frames or (30 if smoke else 150),
            benchmark_app=not smoke if args.benchmark_app is None else args.benchmark_app,
            frame_waits=args.frame_waits,
        )
    )
    if reason := plot_unavailable():
        print(f"vidpipe bench: {reason}", file=sys.stderr)
    return cmd_bench(args)


if __name__ == "__main__":
    sys.exit(main())
