"""``vidpipe bench``: the command line of the benchmark harness.

Examples::

    vidpipe bench --suite smoke --out /tmp/bench
    vidpipe bench --contenders vidpipe,naive --cameras 4 --clip car-detection.mp4 \\
        --seconds 30 --json out.json
    vidpipe bench --suite full --out benchmarks/results
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from vidpipe.bench.common import ALL_CONTENDERS

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _csv(kind: type, choices: tuple[str, ...] | None = None) -> Any:
    def parse(text: str) -> tuple[Any, ...]:
        items = tuple(kind(x.strip()) for x in text.split(",") if x.strip())
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        if choices is not None:
            bad = [x for x in items if x not in choices]
            if bad:
                raise argparse.ArgumentTypeError(
                    f"unknown {', '.join(bad)}; choose from {', '.join(choices)}"
                )
        if kind is int and any(x < 1 for x in items):
            raise argparse.ArgumentTypeError("camera counts must be >= 1")
        return items

    return parse


def add_parser(sub: Any) -> None:
    """Register the ``bench`` subcommand on the main parser's subparsers."""
    p = sub.add_parser(
        "bench",
        help="benchmark vidpipe against other designs (fps, CPU, latency)",
        description="Run every contender on the same model, clips and machine, one process per "
        "point, repeats alternated; write JSON, a Markdown table and a PNG plot.",
    )
    p.add_argument(
        "--suite",
        choices=("smoke", "full"),
        default="full",
        help="defaults for everything below (default: %(default)s)",
    )
    p.add_argument(
        "--contenders",
        type=_csv(str, ALL_CONTENDERS),
        help=f"comma list among {','.join(ALL_CONTENDERS)}",
    )
    p.add_argument("--cameras", type=_csv(int), help="camera counts, e.g. 1,4,8")
    p.add_argument(
        "--clip",
        "--clips",
        dest="clips",
        type=_csv(str),
        help="clip names in the assets' videos/ (NAME-1080p.mp4 is made with ffmpeg) or paths",
    )
    p.add_argument("--seconds", type=float, help="measurement window per point")
    p.add_argument("--warmup", type=float, dest="warmup_s", help="seconds before the window")
    p.add_argument("--repeats", type=int, help="repeats per point, alternated")
    p.add_argument(
        "--precision",
        choices=("f32", "bf16", "f16"),
        help="inference precision for every contender (default: the device's)",
    )
    p.add_argument(
        "--benchmark-app",
        dest="benchmark_app",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also run OpenVINO's benchmark_app as a cross-check",
    )
    p.add_argument("--stage-frames", type=int, help="frames timed per stage for the stage costs")
    p.add_argument("--assets", type=Path, help="assets directory (default: as vidpipe resolves it)")
    p.add_argument(
        "--model",
        type=Path,
        help="model for every contender: ONNX or OpenVINO IR, e.g. an INT8 IR from vidpipe "
        "optimize (default: the assets' yolox_nano.onnx)",
    )
    p.add_argument(
        "--mode",
        choices=("throughput", "density", "both"),
        help="throughput (unpaced files, the default), density (live RTSP cameras: the largest "
        "N vidpipe keeps up with), or both",
    )
    p.add_argument("--density-clip", help="clip served over RTSP in density mode")
    p.add_argument("--json", type=Path, help="result file (default: OUT/bench-SUITE-TIME.json)")
    p.add_argument("--out", type=Path, help="directory for the Markdown table and the PNG plot")
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 when every point ran, 1 when some failed, 2 on bad options."""
    from vidpipe.bench.harness import SUITES, run, with_overrides
    from vidpipe.bench.report import plot_unavailable, write_outputs

    options = with_overrides(
        SUITES[args.suite],
        contenders=args.contenders,
        cameras=args.cameras,
        clips=args.clips,
        seconds=args.seconds,
        warmup_s=args.warmup_s,
        repeats=args.repeats,
        precision=args.precision,
        benchmark_app=args.benchmark_app,
        stage_frames=args.stage_frames,
        assets=args.assets,
        mode=args.mode,
        density_clip=args.density_clip,
        model=args.model,
    )
    if options.seconds <= 0 or options.warmup_s < 0 or options.repeats < 1:
        print("vidpipe bench: --seconds > 0, --warmup >= 0 and --repeats >= 1", file=sys.stderr)
        return EXIT_USAGE
    json_path = args.json
    if json_path is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        json_path = (args.out or Path(".")) / f"bench-{options.suite}-{stamp}.json"
    if reason := plot_unavailable():
        print(f"vidpipe bench: {reason}", file=sys.stderr)
    doc = run(options)
    paths = write_outputs(doc, json_path, args.out)
    for kind, path in paths.items():
        print(f"{kind}: {path}")
    failed = [p for p in doc["points"] if p.get("error")]
    if failed:
        print(f"vidpipe bench: {len(failed)} point(s) failed; see the JSON", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK
