"""Command line: run / check / detect / optimize. Turns errors into exit codes.

Exit codes: 0 ok, 1 runtime failure, 2 bad config / model / arguments.
"""

from __future__ import annotations

import argparse
import ctypes
import faulthandler
import json
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vidpipe import __version__, redact
from vidpipe.cli_cameras import add_parser as add_cameras
from vidpipe.cli_events import add_parser as add_events
from vidpipe.config import (
    CameraConfig,
    CaptureConfig,
    Config,
    ConfigError,
    GpuConfig,
    LoggingConfig,
    ModelConfig,
    load_config,
)
from vidpipe.infer.base import BackendError
from vidpipe.types import Image

if TYPE_CHECKING:
    from vidpipe.supervisor.plan import ProcessPlan

log = logging.getLogger("vidpipe")

EXIT_OK, EXIT_FAIL, EXIT_CONFIG = 0, 1, 2
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_text:
            doc["exc"] = record.exc_text
        return json.dumps(doc)


def setup_logging(cfg: LoggingConfig) -> None:
    """Log to stderr through the credential-redacting filter."""
    handler = logging.StreamHandler(sys.stderr)
    if cfg.format == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s")
        )
    handler.addFilter(redact.RedactingFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(cfg.level)


# ---------------------------------------------------------------------------------- run


_M_ARENA_MAX = -8  # glibc mallopt parameters
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: glibc environment variable -> (mallopt parameter, value) set by ``tune_malloc``.
MALLOC_SETTINGS = {
    "MALLOC_ARENA_MAX": (_M_ARENA_MAX, 2),
    # Frames (6 MB at 1080p) come from the heap instead of a fresh mmap each: glibc's dynamic
    # threshold kept mmapping them (frames are freed on other threads than the one that
    # allocated them), and every new mapping is page-faulted in again. 32 MiB is glibc's
    # largest threshold. Page faults per frame at 8 cameras 1080p: 88 -> 11 (`vidpipe bench`,
    # benchmarks/README.md).
    "MALLOC_MMAP_THRESHOLD_": (_M_MMAP_THRESHOLD, 32 * 1024 * 1024),
    # ... and freed frames are not handed back to the kernel at once (trimmed above 256 MiB
    # free at the top of the heap), so the next frames do not fault their pages in again.
    "MALLOC_TRIM_THRESHOLD_": (_M_TRIM_THRESHOLD, 256 * 1024 * 1024),
}


def tune_malloc() -> dict[str, bool]:
    """Apply ``MALLOC_SETTINGS`` before any thread starts; one set in the environment wins.

    Arenas: glibc gives contending threads their own arenas (up to 8 per core). Frames are
    allocated by capture threads and freed by others, which left the arenas growing in the
    20-minute soak; two are enough. Returns, per setting, whether it was applied here.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc
        return dict.fromkeys(MALLOC_SETTINGS, False)
    return {
        name: name not in os.environ and mallopt(param, value) == 1
        for name, (param, value) in MALLOC_SETTINGS.items()
    }


SWITCH_INTERVAL_ENV = "VIDPIPE_SWITCH_INTERVAL_MS"
#: How long a thread may hold the GIL while another waits for it: Python's own 5 ms. 1 ms was
#: tried for the capture readers, which take the GIL back a few times a frame; at 28-36 gated
#: cameras on 2 cores it was no better (p95 205 against 138 ms at 28 cameras, 98 against
#: 84 % inferred at 36: one run each, ``vidpipe bench --mode density``). The variable lets a
#: run try another value (the GPU daemon's batcher waits for the GIL at every PyTorch call).
SWITCH_INTERVAL_MS = 5.0


OPENCV_THREADS_ENV = "OPENCV_FOR_THREADS_NUM"  # OpenCV's own variable for its pool size


def tune_opencv() -> bool:
    """Run OpenCV's functions on the calling thread (no thread pool), unless
    ``OPENCV_FOR_THREADS_NUM`` sets a pool size; returns whether it was set here.

    OpenCV splits a call such as a resize or a blur over a pool of one thread per core, and
    the pool's idle threads spin in ``sched_yield`` between calls. The daemon makes thousands
    of small calls a second from many threads (the motion gate's grey copies, letterboxing),
    which kept a pool thread spinning on a box the inference already fills: 45 gated RTSP
    cameras on 2 cores, no inference, took 1.05-1.15 ms of process CPU per frame with the
    pool and 0.82-0.87 ms without (``python -m benchmarks.rtsp_reader_cost``). The cameras
    are the parallelism.
    """
    if OPENCV_THREADS_ENV in os.environ:
        return False
    import cv2

    cv2.setNumThreads(1)
    return True


def tune_process() -> dict[str, bool]:
    """``tune_malloc``, ``tune_opencv``, and the GIL's switch interval (``SWITCH_INTERVAL_MS``,
    unless ``VIDPIPE_SWITCH_INTERVAL_MS`` says otherwise); before any thread starts."""
    applied = tune_malloc()
    applied[OPENCV_THREADS_ENV] = tune_opencv()
    text = os.environ.get(SWITCH_INTERVAL_ENV)
    try:
        ms = float(text) if text else SWITCH_INTERVAL_MS
    except ValueError:
        raise SystemExit(f"{SWITCH_INTERVAL_ENV}={text!r}: not a number of milliseconds") from None
    if not 0 < ms <= 1000:
        raise SystemExit(f"{SWITCH_INTERVAL_ENV}={text!r}: must be above 0 and at most 1000")
    sys.setswitchinterval(ms / 1000.0)
    applied[SWITCH_INTERVAL_ENV] = not text
    return applied


def enable_crash_dumps() -> None:
    """Dump every thread's Python stack to stderr on a fatal signal (SIGSEGV, SIGFPE,
    SIGABRT, SIGBUS, SIGILL).

    A native library that aborts (a C++ ``std::terminate``, a failed assertion in a decoder)
    kills the process before any Python handler or log line runs: without this, a daemon
    under systemd dies with nothing in its journal but the signal. The dump goes to fd 2,
    which systemd sends to the journal; ``vidpipe.capture.native_stderr`` moves it to the
    original stderr when it routes fd 2 through its pipe.
    """
    faulthandler.enable(file=sys.stderr, all_threads=True)


def cmd_run(args: argparse.Namespace) -> int:
    from vidpipe.daemon import run
    from vidpipe.shard import resolve_shard

    enable_crash_dumps()
    tune_process()

    cfg = load_config(args.config)
    shard = resolve_shard(args.shard)
    setup_logging(cfg.logging)
    if shard is None:  # an explicit shard is one process of a fleet: it runs alone
        from vidpipe.supervisor.plan import crowded, placement_problems, plan_processes

        plan = plan_processes(cfg)
        if problems := placement_problems(cfg, plan.gpus):
            raise ConfigError(problems)
        if warning := crowded(cfg, plan):
            log.warning("%s", warning)
        if plan.processes > 1:
            from vidpipe.supervisor.service import run_supervisor

            return run_supervisor(cfg, Path(args.config), plan, http_port=args.http_port)
    # FFmpeg (PyAV) logs through Python logging, redacted: nothing writes to fd 2 directly.
    return run(cfg, Path(args.config), shard=shard, http_port=args.http_port)


# ---------------------------------------------------------------------------------- check


def cmd_check(args: argparse.Namespace) -> int:
    from vidpipe.plan import check
    from vidpipe.supervisor.plan import placement_problems, plan_processes

    cfg = load_config(args.config)
    plan = plan_processes(cfg)
    problems = placement_problems(cfg, plan.gpus) + check(cfg)
    if problems:
        print(f"{args.config}: {len(problems)} problem(s)", file=sys.stderr)
        for p in problems:
            print(f"  - {redact.redact_text(p)}", file=sys.stderr)
        return EXIT_CONFIG
    names = ", ".join(
        m.path.name + (f" at {m.input_size[0]}x{m.input_size[1]}" if m.input_size else "")
        for m in cfg.detectors().values()
    )
    print(f"{args.config}: OK ({len(cfg.cameras)} camera(s), model {names})")
    _print_processes(cfg, plan)
    if args.shards:
        _print_shards(cfg, args.shards)
    return EXIT_OK


def _print_processes(cfg: Config, plan: ProcessPlan) -> None:
    """What ``vidpipe run`` will start (``plan``): processes, cameras in each and on each GPU,
    CUDA MPS or not."""
    from vidpipe.supervisor.mps import plan_mps
    from vidpipe.supervisor.plan import crowded

    counts = ", ".join(str(len(names)) for names in plan.shards)
    print(f"processes: {plan.processes} (inference.processes: {cfg.inference.processes})")
    print(f"cameras per process: {counts}")
    if plan.gpus:
        for gpu in sorted(set(plan.gpus)):
            mine = [i for i, g in enumerate(plan.gpus) if g == gpu]
            cams = sum(len(plan.shards[i]) for i in mine)
            shards = ", ".join(map(str, mine))
            print(f"GPU {gpu}: process(es) {shards}, {cams} camera(s) decoded and inferred there")
    print(f"CUDA MPS: {plan_mps(plan.gpu, plan.processes).describe()}")
    if warning := crowded(cfg, plan):
        print(f"warning: {warning}")


def _shard_count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a shard count of at least 1, got {text!r}")
    return int(text)


def _print_shards(cfg: Config, count: int) -> None:
    """Which cameras each of ``count`` shards runs (``vidpipe run --shard i/count``): the
    daemon's own split (``reload.active_cameras``), so an operator sizes shards before start."""
    from vidpipe.reload import active_cameras
    from vidpipe.shard import Shard

    print(f"{count} shards, sharding.assignment: {cfg.sharding.assignment}")
    for i in range(count):
        names = list(active_cameras(cfg, Shard(i, count)))
        print(f"  shard {i}/{count}: {len(names)} camera(s): {', '.join(names) or '-'}")


# ---------------------------------------------------------------------------------- detect


def _frames(path: Path, fit: tuple[int, int] | None) -> Iterator[tuple[int, Image]]:
    """The pictures of an image file, or the frames of a video decoded and converted as the
    daemon's pyav cameras do (for a model input of ``fit``; None: whole frames), so that
    ``vidpipe detect`` says what the daemon says of the same frames."""
    import cv2

    from vidpipe.capture.pyav_source import PyAVSource
    from vidpipe.capture.source import SourceError

    if path.suffix.lower() in IMAGE_SUFFIXES:
        img = cv2.imread(str(path), cv2.IMREAD_COLOR)
        if img is None:
            raise BackendError(f"cannot read image {path}")
        yield 0, np.asarray(img, np.uint8)
        return
    # decoder_threads 0: FFmpeg's own choice; a file read offline has no other camera to share
    camera = CameraConfig(name="detect", url=str(path))  # the name is for log lines only
    source = PyAVSource(camera, CaptureConfig(decoder_threads=0))
    try:
        source.open()
    except SourceError as exc:
        raise BackendError(f"cannot open video {path}: {exc.detail}") from None
    try:
        index = 0
        while (picture := source.read()) is not None:
            yield index, picture.image_for(fit)
            index += 1
    finally:
        source.close()


def _default_model(args: argparse.Namespace) -> ModelConfig:
    """Without --config: a YOLOX model, from --model/--labels or the assets directory."""
    if args.model and args.labels:
        return ModelConfig(path=Path(args.model), labels=Path(args.labels))
    from vidpipe.assets import default_assets_dir

    models = default_assets_dir() / "models"
    return ModelConfig(
        path=Path(args.model) if args.model else models / "yolox_nano.onnx",
        labels=Path(args.labels) if args.labels else models / "coco80.txt",
    )


def _detect_config(args: argparse.Namespace) -> Config:
    cfg = load_config(args.config) if args.config else Config(model=_default_model(args))
    updates = {}
    if args.score_threshold is not None:
        updates["score_threshold"] = args.score_threshold
    if args.iou_threshold is not None:
        updates["iou_threshold"] = args.iou_threshold
    if args.model and args.config:
        updates["path"] = Path(args.model)
    if args.labels and args.config:
        updates["labels"] = Path(args.labels)
    if updates:
        try:
            model = ModelConfig.model_validate({**cfg.default_detector().model_dump(), **updates})
        except Exception as exc:
            raise ConfigError([f"command line: {exc}"]) from None
        cfg = cfg.model_copy(update={"model": model})
    return cfg


def cmd_detect(args: argparse.Namespace) -> int:
    from vidpipe.plan import detector
    from vidpipe.sinks.record import encode, frame_record
    from vidpipe.types import Frame, FrameResult

    cfg = _detect_config(args)
    setup_logging(LoggingConfig(level="WARNING"))
    results: list[FrameResult] = []
    scheduler = detector(cfg, results.append)
    spec = scheduler.backend.input_spec
    fit = (spec.width, spec.height) if cfg.capture.convert_at_model_size else None
    status = EXIT_OK
    try:
        for src in args.inputs:
            path = Path(src)
            try:
                for index, img in _frames(path, fit):
                    scheduler.submit(
                        Frame(camera=path.name, seq=index, t_capture=time.monotonic(), image=img)
                    )
            except BackendError as exc:
                print(f"vidpipe detect: {exc}", file=sys.stderr)
                status = EXIT_FAIL
            scheduler.stop(60.0)  # every frame of this input is through
            # the v1 frame record, as the JSON lines sink writes it: one format, whoever writes
            for r in sorted(results, key=lambda r: r.seq):
                print(encode(frame_record(r)).decode())
            results.clear()
    finally:
        scheduler.close()
    return status


# ---------------------------------------------------------------------------------- build-engine


def cmd_build_engine(args: argparse.Namespace) -> int:
    """Build (or find in the cache) the TensorRT engine of every configured GPU."""
    from vidpipe.infer.cuda_rt import CudaRuntime
    from vidpipe.infer.tensorrt import TensorRTExecutor

    cfg = load_config(args.config)
    setup_logging(LoggingConfig(level="INFO"))
    inf = cfg.inference
    if inf.type != "tensorrt" or not isinstance(inf, GpuConfig):
        raise ConfigError([f"inference.type is {inf.type!r}: build-engine needs 'tensorrt'"])
    for dev in inf.devices:
        ex = TensorRTExecutor(
            cfg.default_detector().path,
            CudaRuntime(dev),
            inf.advanced.max_batch,
            inf.precision,
            inf.advanced.workspace,
            inf.advanced.cache_dir,
        )
        ex.close()
        print(f"cuda:{dev}: engine ready in {inf.advanced.cache_dir}")
    return EXIT_OK


# ---------------------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vidpipe", description="multi-stream video analytics daemon"
    )
    parser.add_argument("--version", action="version", version=f"vidpipe {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "run", help="run the daemon in the foreground until SIGINT/SIGTERM (SIGHUP reloads)"
    )
    p.add_argument("--config", "-c", required=True)
    p.add_argument(
        "--shard",
        metavar="I/N",
        help="run only the cameras that rendezvous hashing assigns to shard I of N "
        "(default: $VIDPIPE_SHARD, or $VIDPIPE_SHARD_COUNT with the StatefulSet ordinal)",
    )
    p.add_argument(
        "--http-port",
        type=int,
        metavar="PORT",
        help="override http.port (one port per shard under systemd's vidpipe@.service)",
    )
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("check", help="validate the config and the model, start nothing")
    p.add_argument("--config", "-c", required=True)
    p.add_argument(
        "--shards",
        type=_shard_count,
        metavar="N",
        help="also list the cameras each of N shards would run (vidpipe run --shard i/N)",
    )
    p.set_defaults(func=cmd_check)
    p = sub.add_parser(
        "detect", help="detect objects in images or video files: v1 frame records, JSON lines"
    )
    p.add_argument("--config", "-c")
    p.add_argument("--model")
    p.add_argument("--labels")
    p.add_argument("--score-threshold", type=float)
    p.add_argument("--iou-threshold", type=float)
    p.add_argument("inputs", nargs="+")
    p.set_defaults(func=cmd_detect)
    p = sub.add_parser("build-engine", help="build and cache the TensorRT engine(s) ahead of time")
    p.add_argument("--config", "-c", required=True)
    p.set_defaults(func=cmd_build_engine)
    from vidpipe.bench.cli import add_parser  # light: the rest loads on use
    from vidpipe.optimize.cli import add_parser as add_optimize  # nncf is imported on use

    add_parser(sub)
    add_optimize(sub)
    add_events(sub)
    add_cameras(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_CONFIG
    except BackendError as exc:
        print(f"vidpipe: {redact.redact_text(str(exc))}", file=sys.stderr)
        return EXIT_CONFIG
    except KeyboardInterrupt:
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
