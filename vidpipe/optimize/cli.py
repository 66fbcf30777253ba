"""``vidpipe optimize``: the command line.

Examples::

    vidpipe optimize --config configs/demo.yaml --output models/yolox_nano-int8.xml
    vidpipe optimize -c site.yaml -o int8.xml --clips a.mp4 b.mp4 --frames 400 --gate 0.97
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError("must be in (0, 1]")
    return value


def add_parser(sub: Any) -> None:
    """Register the ``optimize`` subcommand on the main parser's subparsers."""
    p = sub.add_parser(
        "optimize",
        help="make an INT8 OpenVINO IR of the configured model, gated by its agreement",
        description="Calibrate an INT8 copy of model.path with NNCF on frames made as its "
        "model.type wants them (letterbox placement, pad, mean and std), "
        "measure its agreement with the f32 model on other frames, and write it (with a JSON "
        "report beside it) only if both recall and precision reach the gate. Needs the "
        "optimize extra: pip install 'vidpipe[optimize]'.",
    )
    p.add_argument("--config", "-c", required=True, help="the daemon's config (model, cameras)")
    p.add_argument("--output", "-o", required=True, type=Path, help="the IR to write (.xml)")
    p.add_argument(
        "--clips",
        nargs="+",
        default=(),
        metavar="FILE",
        help="videos or images to take frames from (default: the configured cameras)",
    )
    p.add_argument("--frames", type=int, default=300, help="frames in all (default: %(default)s)")
    p.add_argument(
        "--gate",
        type=_fraction,
        default=0.95,
        help="least recall and precision against f32 (default: %(default)s)",
    )
    p.add_argument(
        "--method",
        choices=("plain", "accuracy-control"),
        default="plain",
        help="plain: one calibration pass; accuracy-control: then NNCF gives the most harmful "
        "layers back to floating point until the gate is met on a quarter of the frames (slow: "
        "it compiles the model once per quantized layer) (default: %(default)s)",
    )
    p.add_argument("--force", action="store_true", help="write the model even below the gate")
    p.add_argument(
        "--speed-seconds",
        type=float,
        default=10.0,
        help="how long each model's speed is measured (default: %(default)s)",
    )
    p.set_defaults(func=cmd_optimize)


def cmd_optimize(args: argparse.Namespace) -> int:
    from vidpipe.config import load_config
    from vidpipe.optimize.frames import FramesError
    from vidpipe.optimize.quantize import OptimizeError
    from vidpipe.optimize.run import Options, optimize

    if args.frames < 2:
        print("vidpipe optimize: --frames must be at least 2", file=sys.stderr)
        return EXIT_USAGE
    cfg = load_config(args.config)
    options = Options(
        output=args.output,
        sources=tuple(args.clips),
        frames=args.frames,
        gate=args.gate,
        method=args.method,
        force=args.force,
        speed_s=args.speed_seconds,
    )
    t0 = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - t0:6.1f} s] {message}", file=sys.stderr, flush=True)

    try:
        report = optimize(cfg, options, progress)
    except FramesError as exc:
        print(f"vidpipe optimize: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OptimizeError as exc:
        print(f"vidpipe optimize: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    int8 = report["agreement_with_f32"]["int8"]
    progress(
        f"wrote {args.output} and {args.output.with_suffix('.json')}: agreement recall "
        f"{int8['recall']:.3f}, precision {int8['precision']:.3f}; CPU per inference "
        + ", ".join(f"{k} {v['cpu_ms_per_frame']:g} ms" for k, v in report["speed"].items())
        + f"; recommended here: {report['recommendation']['use']}"
    )
    return EXIT_OK
