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

from vidpipe.bench.common import INT8_CONTENDERS, all_contenders

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
    # help lists the options in the order they are added here
    _add_selection_arguments(p)
    _add_measurement_arguments(p)
    _add_model_arguments(p)
    _add_mode_arguments(p)
    p.add_argument("--json", type=Path, help="result file (default: OUT/bench-SUITE-TIME.json)")
    p.add_argument("--out", type=Path, help="directory for the Markdown table and the PNG plot")
    p.set_defaults(func=cmd_bench)


def _add_selection_arguments(p: argparse.ArgumentParser) -> None:
    """What is compared: the suite's defaults, the contenders, camera counts and clips."""
    p.add_argument(
        "--suite",
        choices=("smoke", "full"),
        default="full",
        help="defaults for everything below (default: %(default)s)",
    )
    p.add_argument(
        "--contenders",
        type=_csv(str, all_contenders()),
        help=f"comma list among {','.join(all_contenders())} (python -m benchmarks adds the "
        "other designs)",
    )
    p.add_argument("--cameras", type=_csv(int), help="camera counts, e.g. 1,4,8")
    p.add_argument(
        "--clip",
        "--clips",
        dest="clips",
        type=_csv(str),
        help="clip names in the assets' videos/ (NAME-1080p.mp4 is made with ffmpeg) or paths",
    )


def _add_measurement_arguments(p: argparse.ArgumentParser) -> None:
    """How each point is measured: window, warm-up, repeats, precision and cross-checks."""
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
    p.add_argument(
        "--realtime",
        action="store_const",
        const=True,
        help="throughput mode: every camera reads its clip at the clip's frame rate, as a live "
        "camera delivers it (compare latency at a load every contender sustains)",
    )


def _add_model_arguments(p: argparse.ArgumentParser) -> None:
    """Where the model and the clips come from."""
    p.add_argument("--assets", type=Path, help="assets directory (default: as vidpipe resolves it)")
    p.add_argument(
        "--model",
        type=Path,
        help="model for every contender: ONNX or OpenVINO IR, e.g. an INT8 IR from vidpipe "
        "optimize (default: the assets' yolox_nano.onnx)",
    )
    p.add_argument(
        "--int8-model",
        type=Path,
        help="INT8 IR (vidpipe optimize) that the contenders vidpipe-int8 and "
        "vidpipe-motion-int8 run, while the others run --model: both in one run",
    )


def _add_mode_arguments(p: argparse.ArgumentParser) -> None:
    """Which measurement runs (throughput, density, capture) and density mode's knobs."""
    p.add_argument(
        "--mode",
        choices=("throughput", "density", "both", "capture"),
        help="throughput (unpaced files, the default), density (live RTSP cameras: the largest "
        "N vidpipe keeps up with), both, or capture (decode costs and RTSP time to streaming, "
        "libav against OpenCV)",
    )
    p.add_argument("--density-clip", help="clip served over RTSP in density mode")
    p.add_argument(
        "--density-detect-fps", type=_csv(float), help="detect_fps values of density mode"
    )
    p.add_argument(
        "--density-start",
        choices=("staggered", "same"),
        help="density mode: each camera's stream starts at a different point of the clip "
        "(staggered, the default: real cameras are not in step) or all at its first frame",
    )
    p.add_argument(
        "--density-cameras",
        type=_csv(int),
        help="density mode: try these camera counts only (e.g. 48,56,64) instead of searching; "
        "the largest that passes is reported",
    )


def _ints(text: str) -> list[int]:
    """A comma list of integers; empty text is an empty list (that measurement is skipped)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None


def add_gpu_parser(sub: Any) -> None:
    """Register the ``bench-gpu`` subcommand on the main parser's subparsers."""
    p = sub.add_parser(
        "bench-gpu",
        help="GPU stream set vs tight loop; 1080p streams",
        description="The GPU stream set against the same executor in a tight loop (inference "
        "img/s per batch and stream count), then N cameras of a 1080p clip through the whole "
        "daemon; one JSON document.",
    )
    p.add_argument("--model", type=Path, required=True, help="the ONNX model")
    p.add_argument("--labels", type=Path, required=True, help="its labels file")
    p.add_argument("--type", choices=("torch", "tensorrt"), default="torch")
    p.add_argument("--precision", choices=("f32", "tf32", "f16"), default="f32")
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    p.add_argument("--batches", type=_ints, default=[1, 8, 32, 64], help="batch sizes, or ''")
    p.add_argument("--streams", type=_ints, default=[1, 2, 4], help="streams per GPU")
    p.add_argument("--seconds", type=float, default=4.0, help="window per inference point")
    p.add_argument("--images", type=Path, help="images to letterbox as the synthetic frames")
    p.add_argument("--clip", type=Path, help="source clip for the 1080p streams test")
    p.add_argument("--cameras", type=_ints, default=[], help="camera counts of the streams test")
    p.add_argument("--stream-batch", type=int, default=32, help="max batch in the streams test")
    p.add_argument("--warmup", type=float, default=6.0, help="seconds before a streams window")
    p.add_argument("--window", type=float, default=12.0, help="streams measurement window")
    p.add_argument("--eager", action="store_true", help="torch: no CUDA graphs")
    p.add_argument(
        "--outputs",
        choices=("device", "host"),
        default="device",
        help="stream set: postprocess on the device as the daemon does (default), or bring "
        "the raw outputs to the host",
    )
    p.add_argument(
        "--inputs",
        choices=("host", "device"),
        default="host",
        help="stream set: letterboxed frames copied into its pinned batch (CPU decode, the "
        "default), or 1080p NV12 pictures already on the GPU that it letterboxes there (NVDEC)",
    )
    p.add_argument("--model-type", default="yolox", help="the model's decoder (model.type)")
    p.add_argument("--json", type=Path, required=True, help="result file")
    p.set_defaults(func=cmd_bench_gpu)


def cmd_bench_gpu(args: argparse.Namespace) -> int:
    """Run ``vidpipe bench-gpu`` (torch or TensorRT are imported only now)."""
    from vidpipe.bench.gpu import run

    return run(args)


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark; 0 when every point ran, 1 when some failed, 2 on bad options."""
    from vidpipe.bench.harness import SUITES, run, with_overrides

    if args.mode == "capture":
        from vidpipe.bench.capture_cost import cmd_capture

        return cmd_capture(args)
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
        density_detect_fps=args.density_detect_fps,
        density_staggered=None if args.density_start is None else args.density_start != "same",
        density_cameras=args.density_cameras,
        model=args.model,
        int8_model=args.int8_model,
        realtime=args.realtime,
    )
    if options.seconds <= 0 or options.warmup_s < 0 or options.repeats < 1:
        print("vidpipe bench: --seconds > 0, --warmup >= 0 and --repeats >= 1", file=sys.stderr)
        return EXIT_USAGE
    int8 = sorted(INT8_CONTENDERS.intersection(options.contenders or ()))
    if int8 and options.int8_model is None:
        print(f"vidpipe bench: {', '.join(int8)} run the model of --int8-model", file=sys.stderr)
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
