"""CPU per frame by thread, the naive loop against vidpipe, on the same clip and cameras.

Each contender runs in a fresh process (alternated, repeated) on looping, unpaced file
cameras, as in ``python -m benchmarks``; over the window, each thread's CPU time
is divided by the frames finished. Python threads are grouped by name with digits folded;
every other thread is ``native (...)``: OpenVINO's inference threads (both contenders decode on
their own Python threads, FFmpeg with one thread). So the split says whether a difference in
CPU per frame lies in inference or in the Python pipeline around it. Beside it, each group's
context switches per frame, voluntary (a thread going to sleep: a wait, a lock, the GIL) and
involuntary (a thread preempted, mostly by one that woke): every hand-off between threads costs
some, and on a busy box each wake-up preempts an inference thread::

    python -m benchmarks.thread_split --clip car-detection.mp4 --cameras 4 --seconds 10
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.contenders import NaiveRun
from benchmarks.threads import group_deltas, thread_cpu_percent, thread_cpu_s, thread_switches
from benchmarks.variants import VARIANTS, variant_run
from vidpipe.assets import default_assets_dir
from vidpipe.bench.common import PointSpec
from vidpipe.bench.vidpipe_run import VidpipeRun

#: the naive loop, vidpipe, and vidpipe's A/B variants (``vidpipe-nopin``, ...)
CONTENDERS: dict[str, Any] = {
    "naive": NaiveRun,
    "vidpipe": VidpipeRun,
    **dict.fromkeys(VARIANTS, variant_run),
}


Switches = dict[str, tuple[float, float]]


def split_ms_per_frame(
    spec: PointSpec, warmup_s: float
) -> tuple[float, dict[str, float], Switches]:
    """fps, CPU ms per finished frame by thread group, and context switches per finished
    frame by thread group (voluntary, involuntary), of one run of ``spec``."""
    run = CONTENDERS[spec.contender](spec)
    run.start()
    try:
        time.sleep(warmup_s)
        s0, before, f0, t0 = thread_switches(), thread_cpu_s(), run.frames(), time.monotonic()
        time.sleep(spec.seconds)
        after, frames, window = thread_cpu_s(), run.frames() - f0, time.monotonic() - t0
        s1 = thread_switches()
        voluntary, involuntary = (group_deltas(b, a) for b, a in zip(s0, s1, strict=True))
        percent = thread_cpu_percent(before, after, window)  # % of one core, busiest first
    finally:  # the names above were read while the threads were alive
        run.stop()
        getattr(run, "close", lambda: None)()
    n = max(1, frames)
    ms_per_frame = 10.0 * window / n  # 1 % of one core over the window
    split = {k: v * ms_per_frame for k, v in percent.items() if v > 0}
    switches = {
        k: (v / n, involuntary.get(k, 0.0) / n)
        for k, v in voluntary.items()
        if v + involuntary.get(k, 0.0) >= 0.01 * n
    }
    return frames / window, split, switches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--clip", default="car-detection.mp4", help="a clip of the assets, or a path"
    )
    parser.add_argument("--cameras", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precision", default="bf16", help="OpenVINO inference precision")
    parser.add_argument(
        "--contenders",
        default="naive,vidpipe",
        help=f"comma-separated, run alternated; of {', '.join(CONTENDERS)}",
    )
    parser.add_argument("--only", choices=sorted(CONTENDERS), help="run one, in this process")
    parser.add_argument("--repeat", type=int, default=0, help="with --only: the repeat's index")
    args = parser.parse_args()
    if args.only is None:  # each run in a fresh process, as the harness runs its points
        contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
        unknown = [c for c in contenders if c not in CONTENDERS]
        if unknown or not contenders:
            parser.error(f"--contenders: unknown {unknown or 'none given'}; of {list(CONTENDERS)}")
        for r in range(args.repeats):
            for contender in contenders:
                cmd = [sys.executable, "-m", "benchmarks.thread_split", *sys.argv[1:]]
                subprocess.run([*cmd, "--only", contender, "--repeat", str(r)], check=True)
        return
    assets = default_assets_dir()
    clip = Path(args.clip) if Path(args.clip).is_file() else assets / "videos" / args.clip
    spec = PointSpec(
        contender=args.only,
        clip=str(clip),
        clip_name=clip.name,
        cameras=args.cameras,
        seconds=args.seconds,
        warmup_s=args.warmup,
        precision=args.precision,
        model=str(assets / "models" / "yolox_nano.onnx"),
        labels=str(assets / "models" / "coco80.txt"),
        repeat=args.repeat,
    )
    fps, split, switches = split_ms_per_frame(spec, args.warmup)
    parts = ", ".join(f"{k} {v:.2f}" for k, v in split.items() if v >= 0.005)
    total_v, total_i = (sum(vi[j] for vi in switches.values()) for j in (0, 1))
    per_group = ", ".join(f"{k} {v:.2f}/{i:.2f}" for k, (v, i) in switches.items())
    print(
        f"repeat {spec.repeat} {spec.contender}: {fps:.1f} fps; CPU ms per frame "
        f"{sum(split.values()):.2f} = {parts}; load average {os.getloadavg()[0]:.1f}\n"
        f"    context switches per frame, voluntary/involuntary: {total_v:.1f}/{total_i:.1f} "
        f"= {per_group}",
        flush=True,
    )
    os._exit(0)  # the daemon's and OpenVINO's threads need not be waited for again


if __name__ == "__main__":
    main()
