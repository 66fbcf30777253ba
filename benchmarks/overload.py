"""``python -m benchmarks.overload``: what one daemon does with more cameras than it can infer.

    python -m benchmarks.overload --device cuda --model M --labels L --clip car-1080p25.mp4 \\
        --cameras 64,80,96,128 --json overload.jsonl
    python -m benchmarks.overload --device cpu --cameras 8,24,48      # OpenVINO, the walkway
    python -m benchmarks.overload --device cpu --cameras 3x           # 3 times the capacity

The real daemon (``vidpipe.daemon.Daemon``, built through ``vidpipe.assemble``), configured as
``benchmarks.gpu_daemon`` configures it: N cameras looping one clip in real time (``newest``
mailboxes: a frame not taken before the next one is overwritten and counted), NVDEC and torch
with ``--device cuda`` (PyAV's decoding on the CPU with ``--decoder pyav``), PyAV and OpenVINO
with ``--device cpu``; groups of pictures shed (``capture.shed_gops``) unless
``--no-shed-gops``; non-reference frames that would only replace an untaken one left
undecoded (``capture.skip_unused_frames``) unless ``--no-skip-unused-frames``. Per count,
over one window after a warm-up, from the daemon's own registry: total inferred fps, the
worst and mean camera, drops by reason, mean batch and batches per second (the time a batch
takes to form and go is their inverse), host cores by thread group and
``vidpipe_overloaded``.

And, without py-spy, where the threads are: a sampler thread reads every thread's stack with
``sys._current_frames()`` every ``--sample-ms`` and counts, for the scheduler, postprocess,
batcher and completion threads, the innermost frame in vidpipe (file:function:line) with the
call it is in. The sampler itself needs the GIL to take a sample, so how late it wakes
(``sampler_late_ms``: p50, p95, max) measures how long a thread that has slept waits for the
GIL: milliseconds when the GIL is saturated. The fewer samples it took, the worse.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

from benchmarks.gpu_daemon import (
    _add_nvdec_arguments,
    _snapshot,
    point_config,
    start_dmon,
    stop_dmon,
    thread_cpu,
)
from vidpipe.capture.group_budget import SharedShare
from vidpipe.quantiles import bucket_quantile, quantile_of
from vidpipe.reload import active_cameras

# The threads whose states are reported (by name, digits folded): the consumers of frames.
_WATCHED = re.compile(r"vidpipe-(scheduler|postprocess|gpu-batcher|gpu#-slot#)|capture-.*")
_PACKAGE = f"{os.sep}vidpipe{os.sep}"

# The capacity's cameras, read as fast as inference takes them, as tests/integration/
# test_overload.py measures it: enough to keep a request of each core's busy.
CAPACITY_CAMERAS = 4


def _where(frame: FrameType | None) -> str:
    """The innermost vidpipe frame as ``file:function:line``, with the call it waits in."""
    leaf = frame.f_code.co_name if frame is not None else "?"
    while frame is not None:
        code = frame.f_code
        if _PACKAGE in code.co_filename:
            where = f"{Path(code.co_filename).name}:{code.co_name}:{frame.f_lineno}"
            return where if leaf == code.co_name else f"{where} > {leaf}"
        frame = frame.f_back
    return f"(outside vidpipe) {leaf}"


class StackSampler:
    """Every ``period_s``, each watched thread's state; and how late the sampler woke."""

    def __init__(self, period_s: float) -> None:
        self.period_s = period_s
        self.states: dict[str, Counter[str]] = {}
        self.late_ms: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="overload-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, Any]:
        """End sampling; the states as shares of each thread group's samples."""
        self._stop.set()
        self._thread.join(5.0)
        states = {}
        for group, counts in sorted(self.states.items()):
            total = sum(counts.values())
            states[group] = {
                "samples": total,
                "top": {k: round(n / total, 3) for k, n in counts.most_common(8)},
            }
        late = sorted(self.late_ms)

        def q(p: float) -> float | None:
            v = quantile_of(late, p) if late else None
            return None if v is None else round(v, 2)

        return {
            "samples": len(late),
            "sampler_late_ms": {"p50": q(0.5), "p95": q(0.95), "max": q(1.0)},
            "threads": states,
        }

    def _run(self) -> None:
        due = time.perf_counter() + self.period_s
        while not self._stop.is_set():
            time.sleep(max(0.0, due - time.perf_counter()))
            self.late_ms.append(1000.0 * (time.perf_counter() - due))  # GIL wait, mostly
            names = {t.ident: re.sub(r"\d+", "#", t.name) for t in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                group = names.get(ident, "")
                if _WATCHED.fullmatch(group):
                    self.states.setdefault(group, Counter())[_where(frame)] += 1
            due = max(due + self.period_s, time.perf_counter())


_READER = re.compile(r"capture-.*-reader-\d+")


class Renicer:
    """Lowers the OS priority (``nice``) of the capture readers' threads, each as it appears
    (a reader thread is made per connection): does inference keep more of a CPU box past its
    count when the readers yield the cores to it?"""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self._done: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-renicer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for t in threading.enumerate():
                tid = t.native_id
                if tid and tid not in self._done and _READER.fullmatch(t.name):
                    with contextlib.suppress(OSError):  # ended meanwhile
                        os.setpriority(os.PRIO_PROCESS, tid, self.nice)
                    self._done.add(tid)


def watch_share(shared: SharedShare, window_s: float, every_s: float = 0.5) -> dict[str, Any]:
    """The share of groups decoded in full (``vidpipe_gop_share``) read every ``every_s``
    over the window: its least, mean and most, and every reading in order with what the
    period before it saw (due frames, taken, the share of the time inference waited for
    frames): the share moves once a second, the trace shows whether it swings and why."""
    seen: list[float] = []
    periods: list[tuple[int, int, float]] = []
    end = time.monotonic() + window_s
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(every_s, left))
        seen.append(shared.share)
        periods.append(shared.last)
    return {
        "min": min(seen),
        "mean": round(sum(seen) / len(seen), 3),
        "max": max(seen),
        "trace": [round(v, 3) for v in seen],
        "due_taken_idle": periods,
    }


def _share_rule(rule: str) -> None:
    """Set the share's rule for this process (``--share-rule``)."""
    from vidpipe.capture import group_budget

    if rule in ("taken", "plain"):  # no hold after a move, no slow rise near the last fall
        group_budget.HOLD_GROUPS, group_budget.SLOW = 0.0, 1.0
    if rule == "taken":  # inference's waiting never counts: more than the whole period
        group_budget.IDLE = float("inf")
    if rule == "woken":  # a wait ends when the scheduler runs again, the GIL's hand-over in it
        from vidpipe.schedule import hub

        hub.WAIT_ENDS_AT_HANDOVER = False


def measure(args: argparse.Namespace, cameras: int, realtime: bool = True) -> dict[str, Any]:
    """One daemon with ``cameras`` cameras: warm up, measure a window, shut down.
    ``realtime`` False: the files are read as fast as inference takes them (capacity)."""
    from vidpipe.daemon import Daemon

    decoder = args.decoder or ("nvdec" if args.inference == "torch" else "pyav")
    with tempfile.TemporaryDirectory(prefix="vidpipe-overload-") as tmp:
        cfg = point_config(args, decoder, cameras, Path(tmp) / "results.jsonl")
        if not realtime:
            flat_out = [c.model_copy(update={"realtime": False}) for c in cfg.cameras]
            cfg = cfg.model_copy(update={"cameras": flat_out})
        mine = list(active_cameras(cfg, None))
        daemon = Daemon(cfg)
        t_start = time.monotonic()
        daemon.start()
        renicer = Renicer(args.reader_nice) if args.reader_nice else None
        if renicer is not None:  # each reader as it appears: they are made per connection
            renicer.start()
        try:
            startup_s = time.monotonic() - t_start
            time.sleep(args.warmup)
            # a service's start captures most CUDA graphs on a background thread: its warm-ups
            # would fall into the window (and hold the GIL), so the window waits for them
            for thread in threading.enumerate():
                if thread.name.startswith("vidpipe-graphs-"):
                    thread.join(300.0)
            registry = daemon.metrics.registry
            sampler = StackSampler(args.sample_ms / 1000.0)
            dmon = start_dmon(args.device) if args.inference == "torch" else None
            before, cpu0, t0, threads0 = (
                _snapshot(registry, mine),
                time.process_time(),
                time.time(),
                thread_cpu(),
            )
            sampler.start()
            share = watch_share(daemon.pipeline.capture.shared(SharedShare), args.window)
            stacks = sampler.stop()
            after, cpu1, t1, threads1 = (
                _snapshot(registry, mine),
                time.process_time(),
                time.time(),
                thread_cpu(),
            )
            overloaded = registry.get_sample_value("vidpipe_overloaded")
            utilisation = stop_dmon(dmon)
        finally:
            if renicer is not None:
                renicer.stop()
            daemon.shutdown()
    return summarise(
        cameras, before, after, t1 - t0, (cpu1 - cpu0) / (t1 - t0), threads0, threads1
    ) | {
        "decoder": decoder,
        "inference": args.inference,
        "switch_interval_s": sys.getswitchinterval(),
        "nvdec_group_size": args.nvdec_group_size,
        "nvdec_processes": args.nvdec_processes,
        "startup_s": round(startup_s, 1),
        "overloaded": overloaded,
        "lag_max_s": after["lag_max_s"],
        "reader_nice": args.reader_nice,
        "shed_gops": args.shed_gops,
        "share_rule": args.share_rule,
        # inference's waits timed up to the frame's hand-over (before 2026-12-06 "timed": up to
        # the scheduler's wake-up, the GIL's hand-over included; before that, sampled)
        "idle_signal": "handed",
        "skip_unused_frames": args.skip_unused_frames,
        "gpu_util": utilisation,
        "gop_share": share,
        "stacks": stacks,
    }


def summarise(
    cameras: int,
    before: dict[str, Any],
    after: dict[str, Any],
    seconds: float,
    cores: float,
    threads0: dict[str, float],
    threads1: dict[str, float],
) -> dict[str, Any]:
    """The window's figures from two registry snapshots."""
    fps = [
        (a["inferred"] - before["cams"][name]["inferred"]) / seconds
        for name, a in after["cams"].items()
    ]
    total = sum(fps)
    batches = after["batches"] - before["batches"]
    frames = after["frames"] - before["frames"]
    buckets = {le: n - before["buckets"].get(le, 0.0) for le, n in after["buckets"].items()}
    drops = {r: n - before["drops"].get(r, 0.0) for r, n in after["drops"].items()}
    return {
        "cameras": cameras,
        "total_fps": round(total, 1),
        "mean_fps": round(total / len(fps), 2) if fps else 0.0,
        "worst_fps": round(min(fps), 2) if fps else 0.0,
        "fairness": round(min(fps) / (total / len(fps)), 3) if total else None,
        "camera_fps": [round(f, 2) for f in fps],  # in the cameras' order of name
        "p50_latency_s": bucket_quantile({}, buckets, 0.5),
        "p95_latency_s": bucket_quantile({}, buckets, 0.95),
        "mean_batch": round(frames / batches, 1) if batches else None,
        "batches_per_s": round(batches / seconds, 1),
        "drops_per_s": {r: round(n / seconds, 1) for r, n in sorted(drops.items()) if n},
        "host_cores": round(cores, 2),
        "thread_cores": {
            name: round((cpu - threads0.get(name, 0.0)) / seconds, 3)
            for name, cpu in sorted(threads1.items(), key=lambda kv: -kv[1])
            if (cpu - threads0.get(name, 0.0)) / seconds > 0.01
        },
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.overload", description=__doc__)
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--model", type=Path, help="the ONNX model (default: the assets')")
    p.add_argument("--labels", type=Path, help="its labels (default: the assets')")
    p.add_argument("--clip", type=Path, help="the clip every camera plays")
    p.add_argument(
        "--cameras",
        default="64,80,96,128",
        help="camera counts; Nx: N times what the capacity holds, measured first with "
        f"{CAPACITY_CAMERAS} cameras read as fast as inference takes them",
    )
    p.add_argument("--gpu", type=int, default=0, help="CUDA device (cuda)")
    p.add_argument(
        "--decoder",
        choices=("nvdec", "pyav"),
        help="the cameras' decoder (default: nvdec with cuda, pyav with cpu)",
    )
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--batch-timeout-ms", type=float, default=20.0)
    p.add_argument("--precision", choices=("f32", "tf32", "f16"), default="f16")
    _add_nvdec_arguments(p)
    p.add_argument("--warmup", type=float, default=6.0, help="seconds before the window")
    p.add_argument("--window", type=float, default=12.0, help="measurement window, seconds")
    p.add_argument("--sample-ms", type=float, default=10.0, help="stack sampling period")
    p.add_argument(
        "--switch-interval",
        type=float,
        help="sys.setswitchinterval for the run, seconds (default: Python's, 0.005)",
    )
    p.add_argument(
        "--reader-nice",
        type=int,
        default=0,
        help="nice the capture readers' threads by this much (0: as the daemon runs them)",
    )
    p.add_argument(
        "--no-shed-gops",
        dest="shed_gops",
        action="store_false",
        help="capture.shed_gops: false (decode every frame, shed after decoding)",
    )
    p.add_argument(
        "--no-skip-unused-frames",
        dest="skip_unused_frames",
        action="store_false",
        help="capture.skip_unused_frames: false (decode the non-reference frames that would "
        "only replace an untaken one, too)",
    )
    p.add_argument(
        "--share-rule",
        choices=("idle", "plain", "taken", "woken"),
        default="idle",
        help="how the share of groups decoded in full moves (capture/group_budget.py): up "
        "while inference waits for frames over a quarter of the time, else by the due frames "
        "taken, holding a group after each move and rising slowly near the share of the last "
        "fall (idle, as shipped; results before 2026-12-06 sampled the wait at each due "
        "frame instead of timing it, and neither held nor rose slowly); the same without the "
        "hold and the slow rise (plain); by the due frames taken alone, without them (taken); "
        "as shipped, but a wait for frames ending when the scheduler runs again, not when it "
        "is handed a frame (woken: as results with idle_signal timed were measured)",
    )
    p.add_argument("--json", type=Path, help="append each point here (JSON lines)")
    return p


def _defaults(args: argparse.Namespace) -> None:
    """The assets' model, labels and walkway clip where none is given; the device's backend;
    the fields ``point_config`` reads that this rig does not vary."""
    from vidpipe.assets import default_assets_dir
    from vidpipe.bench.common import cache_dir, resolve_clip

    assets = default_assets_dir()
    args.model = args.model or assets / "models" / "yolox_nano.onnx"
    args.labels = args.labels or assets / "models" / "coco80.txt"
    args.clip = args.clip or assets / "videos" / "one-by-one-person-detection.mp4"
    if not args.clip.is_file():  # a derived clip's name (``vidpipe.bench.common.resolve_clip``)
        args.clip = resolve_clip(str(args.clip), assets / "videos", cache_dir())
    args.inference = "torch" if args.device == "cuda" else "openvino"
    args.shard_assignment = "rendezvous"
    args.device = args.gpu  # point_config's name for the CUDA device


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    _defaults(args)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    _share_rule(args.share_rule)
    counts, capacity = args.cameras.split(","), None
    if any(c.endswith("x") for c in counts):
        capacity = measure(args, CAPACITY_CAMERAS, realtime=False)
        _emit(args, capacity | {"capacity": True})
    for count in (c for c in counts if c):
        n = _cameras(count, capacity, args.clip)
        point = measure(args, n)
        if capacity is not None:
            point["capacity_fps"] = capacity["total_fps"]
            point["of_capacity"] = round(point["total_fps"] / capacity["total_fps"], 3)
        _emit(args, point)
    return 0


def _cameras(count: str, capacity: dict[str, Any] | None, clip: Path) -> int:
    """A count of cameras, or ``Nx``: N times the cameras the measured capacity holds at the
    clip's rate."""
    if not count.endswith("x"):
        return int(count)
    from vidpipe.bench.common import clip_geometry

    assert capacity is not None  # main measured it for any ``x`` count
    _, _, fps, _ = clip_geometry(clip)
    if not fps > 0:
        raise SystemExit(f"--cameras {count}: {clip} gives no frame rate to count cameras by")
    return math.ceil(float(count[:-1]) * capacity["total_fps"] / fps)


def _emit(args: argparse.Namespace, point: dict[str, Any]) -> None:
    line = json.dumps(point)
    print(line, flush=True)
    if args.json is not None:
        with args.json.open("a") as out:
            out.write(line + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
