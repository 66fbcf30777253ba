"""``vidpipe bench``: the command line of the benchmark harness.

Examples::

    vidpipe bench --suite smoke --out /tmp/bench
    vidpipe bench --cameras 4 --clip car-detection.mp4 --seconds 30 --json out.json
    vidpipe bench --mode density --density-clip one-by-one-person-detection.mp4

``python -m benchmarks`` runs the same command with the other designs registered.
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from vidpipe.bench.common import all_contenders

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
SUITE_NAMES = ("smoke", "full")  # harness.SUITES, which loads on use


def _csv(kind: type, choices: tuple[str, ...] | None = None) -> Any:
    """An argparse type: a comma list of ``kind``, among ``choices`` when given."""

    def parse(text: str) -> tuple[Any, ...]:
        items = tuple(kind(x.strip()) for x in text.split(",") if x.strip())
        bad = [x for x in items if choices is not None and x not in choices]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad)}; choose from {', '.join(choices or ())}"
            )
        if not items:
            raise argparse.ArgumentTypeError("empty list")
        if kind is int and any(x < 1 for x in items):
            raise argparse.ArgumentTypeError("camera counts must be >= 1")
        return items

    return parse


def add_parser(sub: Any) -> None:
    """Register the ``bench`` subcommand on the main parser's subparsers."""
    p = sub.add_parser(
        "bench",
        help="size this machine: fps, CPU and latency on looping files, live cameras it holds",
        description="Run vidpipe on the same model and clips, one process per point; with "
        "--mode density, the largest number of live RTSP cameras it keeps up with. Writes JSON "
        "and a Markdown table.",
    )
    add_arguments(p)
    p.set_defaults(func=cmd_bench)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``vidpipe bench`` (``python -m benchmarks`` adds its own after them);
    help lists them in the order they are added here."""
    contenders = all_contenders()
    p.add_argument("--suite", choices=SUITE_NAMES, default="full",
                   help="defaults for everything below (default: %(default)s)")  # fmt: skip
    p.add_argument("--contenders", type=_csv(str, contenders),
                   help=f"comma list among {','.join(contenders)} (python -m benchmarks adds "
                   "the other designs)")  # fmt: skip
    p.add_argument("--cameras", type=_csv(int), help="camera counts, e.g. 1,4,8")
    p.add_argument("--clip", "--clips", dest="clips", type=_csv(str),
                   help="clip names in the assets' videos/ (NAME-1080p.mp4 is made with "
                   "ffmpeg, NAME-432p5.mp4 also at 5 fps) or paths")  # fmt: skip
    p.add_argument("--seconds", type=float, help="measurement window per point")
    p.add_argument("--warmup", type=float, dest="warmup_s", help="seconds before the window")
    p.add_argument("--repeats", type=int, help="repeats per point")
    p.add_argument("--precision", choices=("f32", "bf16", "f16"),
                   help="inference precision (default: the device's)")  # fmt: skip
    p.add_argument("--realtime", action="store_const", const=True,
                   help="throughput mode: every camera reads its clip at the clip's frame "
                   "rate, as a live camera delivers it (latency at a load every contender "
                   "sustains)")  # fmt: skip
    p.add_argument("--assets", type=Path, help="assets directory (default: as vidpipe finds it)")
    p.add_argument("--model", type=Path,
                   help="ONNX or OpenVINO IR model, e.g. an INT8 IR from vidpipe optimize "
                   "(default: the assets' yolox_nano.onnx)")  # fmt: skip
    _add_density_arguments(p)
    p.add_argument("--json", type=Path, help="result file (default: OUT/bench-SUITE-TIME.json)")
    p.add_argument("--out", type=Path, help="directory for the Markdown table")


def _add_density_arguments(p: argparse.ArgumentParser) -> None:
    """Which measurement runs (throughput, density) and density mode's knobs."""
    p.add_argument("--mode", choices=("throughput", "density", "both"),
                   help="throughput (unpaced files, the default), density (live RTSP cameras: "
                   "the largest N vidpipe keeps up with), or both")  # fmt: skip
    p.add_argument("--density-clip", help="clip served over RTSP in density mode")
    p.add_argument("--density-detect-fps", type=_csv(float),
                   help="detect_fps values of density mode")  # fmt: skip
    p.add_argument("--density-start", choices=("staggered", "same"),
                   help="density mode: each camera's stream starts at a different point of "
                   "the clip (staggered, the default: real cameras are not in step) or all "
                   "at its first frame")  # fmt: skip
    p.add_argument("--density-cameras", type=_csv(int),
                   help="density mode: try these camera counts only (e.g. 48,56,64) instead "
                   "of searching; the largest that passes is reported")  # fmt: skip
    p.add_argument("--density-order", choices=("ascending", "given"),
                   help="density mode: try the --density-cameras counts ascending, each once "
                   "(the default), or in the order given, repeats kept (e.g. 36,64,36: what "
                   "an overloaded trial leaves to the next)")  # fmt: skip
    p.add_argument("--density-sub-clip",
                   help="density mode: also serve this clip as each camera's sub-stream "
                   "(e.g. NAME-432p.mp4 or, at 5 fps, NAME-432p5.mp4 beside --density-clip "
                   "NAME-1080p.mp4), for "
                   "contenders that detect on it and record the main stream")  # fmt: skip
    p.add_argument("--density-repeats", type=int,
                   help="density mode: run every search this many times, the contenders' "
                   "order reversed on every other repeat (default 1)")  # fmt: skip


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 when every point ran, 1 when some failed, 2 on bad options."""
    from vidpipe.bench.harness import SUITES, run, with_overrides
    from vidpipe.bench.report import write_outputs

    start = None if args.density_start is None else args.density_start != "same"
    options = with_overrides(
        SUITES[args.suite],
        contenders=args.contenders,
        cameras=args.cameras,
        clips=args.clips,
        seconds=args.seconds,
        warmup_s=args.warmup_s,
        repeats=args.repeats,
        precision=args.precision,
        assets=args.assets,
        mode=args.mode,
        density_clip=args.density_clip,
        density_detect_fps=args.density_detect_fps,
        density_staggered=start,
        density_cameras=args.density_cameras,
        density_ascending=None if args.density_order is None else args.density_order == "ascending",
        density_sub_clip=args.density_sub_clip,
        density_repeats=args.density_repeats,
        model=args.model,
        realtime=args.realtime,
    )
    if options.seconds <= 0 or options.warmup_s < 0 or options.repeats < 1:
        print("vidpipe bench: --seconds > 0, --warmup >= 0 and --repeats >= 1", file=sys.stderr)
        return EXIT_USAGE
    if options.density_repeats < 1:
        print("vidpipe bench: --density-repeats >= 1", file=sys.stderr)
        return EXIT_USAGE
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    json_path = args.json or (args.out or Path(".")) / f"bench-{options.suite}-{stamp}.json"
    doc = run(options)
    for kind, path in write_outputs(doc, json_path, args.out).items():
        print(f"{kind}: {path}")
    if failed := [p for p in doc["points"] if p.get("error")]:
        print(f"vidpipe bench: {len(failed)} point(s) failed; see the JSON", file=sys.stderr)
        return EXIT_FAIL
    return EXIT_OK
