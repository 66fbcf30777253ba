"""``python -m benchmarks.gpu_daemon``: how many real-time cameras the daemon itself holds.

It runs the real ``Daemon`` with a real config:
N cameras reading one clip, each looping and paced in real time (``realtime: true``: a live
camera's ``newest`` mailbox, overwritten frames counted as dropped), decoded with the given
decoder (``nvdec`` or ``pyav``) and inferred by the configured backend (``torch`` on a GPU,
with GPU letterbox and postprocessing; ``openvino`` on the CPU to check the bench itself).

With ``--processes n`` the cameras are split over ``n`` daemons on the same GPU, each
running its shard (rendezvous hashing of the camera names, as ``vidpipe run --shard i/n``
does under ``vidpipe@.service``): one process's Python holds one GIL, so a machine with the
cores to spare runs several. The shards start together and measure the same window; their
figures are pooled (the worst camera of all, one latency histogram, host cores summed).

A count *holds* when every camera gets >= 99 % of its decoded frames inferred and the p95
capture-to-result latency is <= 200 ms (the rule of ``vidpipe bench --mode density``). Per
point, measured over a window after a warm-up, from the daemon's own metrics registry: each
camera's inferred share, p95 latency (from the histogram's buckets), host cores used (process
CPU time over wall time), mean batch size, and, for GPU runs, the GPU memory in use. Decoders
alternate per count so that both see the same machine state.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, get_args

from benchmarks.threads import thread_cpu_s
from vidpipe.config import CaptureConfig, Config, ShardingConfig
from vidpipe.quantiles import bucket_quantile
from vidpipe.reload import active_cameras
from vidpipe.shard import Shard

HOLD_SHARE = 0.99
HOLD_P95_S = 0.200


def point_config(args: argparse.Namespace, decoder: str, cameras: int, jsonl: Path) -> Config:
    """The daemon config of one point."""
    if args.inference == "torch":
        inference: dict[str, Any] = {
            "type": "torch",
            "devices": [args.device],
            "precision": args.precision,
            "advanced": {
                "streams": args.streams,
                "max_batch": args.max_batch,
                "batch_timeout_ms": args.batch_timeout_ms,
            },
        }
    else:
        inference = {"type": "openvino", "device": "CPU"}
    camera: dict[str, Any] = {"url": str(args.clip), "loop": True, "realtime": True}
    if decoder == "nvdec":
        camera["gpu"] = args.device
    capture: dict[str, Any] = {
        "decoder": decoder,
        "nvdec_group_size": args.nvdec_group_size,
        "nvdec_prefetch": args.nvdec_prefetch,
        "nvdec_open_concurrency": args.nvdec_open_concurrency,
        "nvdec_processes": args.nvdec_processes,
    }
    for key in ("shed_gops", "skip_unused_frames"):  # a bench that varies them; the others
        if hasattr(args, key):  # keep the product's defaults
            capture[key] = getattr(args, key)
    return Config.model_validate(
        {
            "model": {"path": str(args.model), "labels": str(args.labels)},
            "inference": inference,
            "capture": capture,
            "sharding": {"assignment": args.shard_assignment},
            "http": {"enabled": True, "host": "127.0.0.1", "port": 0},
            "logging": {"level": "WARNING"},
            "sinks": [{"type": "jsonl", "path": str(jsonl), "only_with_detections": True}],
            "cameras": [{"name": f"cam{i}", **camera} for i in range(cameras)],
        }
    )


_TOTALS = {
    "vidpipe_batch_size_count": "batches",
    "vidpipe_batch_size_sum": "frames",
    "vidpipe_inference_latency_seconds_sum": "infer_s",
    "vidpipe_inference_latency_seconds_count": "infers",
}
_PER_CAMERA = {
    "vidpipe_frames_captured_total": "captured",
    "vidpipe_frames_inferred_total": "inferred",
}


def _snapshot(registry: Any, cameras: Iterable[str]) -> dict[str, Any]:
    """Counters of every camera, the latency buckets, drops by reason and the batch and
    inference histograms' sums, in one pass over the registry.

    One pass: ``get_sample_value`` collects the whole registry per call, and two calls per
    camera meant 240 collects at 120 cameras, with the GIL held inside the measured daemon at
    both edges of the window (the CPU density bench had the same flaw: its readers stalled,
    then handed over frames in bursts that overwrote each other).
    """
    cams = {name: {"captured": 0.0, "inferred": 0.0} for name in cameras}
    out: dict[str, Any] = {"cams": cams, "buckets": {}, "drops": {}, "lag_max_s": None}
    out.update(dict.fromkeys(_TOTALS.values(), 0.0))
    for metric in registry.collect():
        for s in metric.samples:
            if s.name in _PER_CAMERA:
                row = cams.get(s.labels.get("camera", ""))
                if row is not None:
                    row[_PER_CAMERA[s.name]] += s.value
            elif s.name == "vidpipe_end_to_end_latency_seconds_bucket":
                le = float(s.labels["le"])
                out["buckets"][le] = out["buckets"].get(le, 0.0) + s.value
            elif s.name == "vidpipe_camera_lag_seconds" and s.labels.get("camera") in cams:
                out["lag_max_s"] = max(out["lag_max_s"] or 0.0, round(s.value, 2))
            elif s.name == "vidpipe_frames_dropped_total":
                reason = s.labels.get("reason", "?")
                out["drops"][reason] = out["drops"].get(reason, 0.0) + s.value
            elif s.name in _TOTALS and set(s.labels) <= {"model"}:  # summed over models
                out[_TOTALS[s.name]] += s.value
    return out


def start_dmon(device: int) -> subprocess.Popen[str] | None:
    """``nvidia-smi dmon`` sampling SM and NVDEC utilisation every second (None without it)."""
    if shutil.which("nvidia-smi") is None:
        return None
    cmd = ["nvidia-smi", "dmon", "-s", "u", "-d", "1", "-i", str(device)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def stop_dmon(proc: subprocess.Popen[str] | None) -> dict[str, float]:
    """Mean utilisation (percent) per dmon column over the samples taken."""
    if proc is None:
        return {}
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    header: list[str] = []
    sums: dict[str, list[float]] = {}
    for line in out.splitlines():
        if line.startswith("# gpu"):
            header = line[1:].split()
        elif header and not line.startswith("#"):
            for name, value in zip(header[1:], line.split()[1:], strict=False):
                if value.replace(".", "", 1).isdigit():
                    sums.setdefault(name, []).append(float(value))
    return {name: round(sum(v) / len(v), 1) for name, v in sums.items() if v}


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads, summed by thread name without its digits
    ("cam12-reader" and "cam3-reader" count together; native threads fall under "native").
    This is the evidence for what limits the count: per-thread CPU shows whether the camera
    threads, the batcher or the completion threads are the ones near one core."""
    names = {t.native_id: re.sub(r"\d+", "#", t.name) for t in threading.enumerate()}
    out: dict[str, float] = {}
    for tid, cpu in thread_cpu_s().items():
        name = names.get(tid, "native")
        out[name] = out.get(name, 0.0) + cpu
    return out


def measure(
    args: argparse.Namespace, decoder: str, cameras: int, shard: Shard | None, barrier: Any
) -> dict[str, Any]:
    """One daemon (of one shard, or of every camera): start, wait for the other shards at
    ``barrier``, warm up, measure a window, shut down. Returns the window's raw figures."""
    from vidpipe.daemon import Daemon

    sample_gpu = args.inference == "torch" and (shard is None or shard.index == 0)
    with tempfile.TemporaryDirectory(prefix="vidpipe-gpu-daemon-") as tmp:
        cfg = point_config(args, decoder, cameras, Path(tmp) / "results.jsonl")
        mine = list(active_cameras(cfg, shard))  # as the daemon picks them
        daemon = Daemon(cfg, shard=shard)
        daemon.start()
        try:
            if barrier is not None:
                barrier.wait(timeout=300)  # every shard's model is loaded: warm up together
            time.sleep(args.warmup)
            registry = daemon.metrics.registry
            before, cpu0, t0 = _snapshot(registry, mine), time.process_time(), time.time()
            threads0 = thread_cpu()
            # dmon samples the whole GPU: the first shard's window speaks for every shard's
            dmon = start_dmon(args.device) if sample_gpu else None
            time.sleep(args.window)
            after, cpu1, t1 = _snapshot(registry, mine), time.process_time(), time.time()
            threads1 = thread_cpu()
            utilisation = stop_dmon(dmon)
            memory = registry.get_sample_value(
                "vidpipe_gpu_memory_used_bytes", {"gpu": str(args.device)}
            )
        finally:
            daemon.shutdown()
    shares = []
    for name in mine:
        b, a = before["cams"][name], after["cams"][name]
        captured = a["captured"] - b["captured"]
        shares.append((a["inferred"] - b["inferred"]) / captured if captured else 0.0)
    return {
        "shares": shares,
        "buckets": {le: n - before["buckets"].get(le, 0.0) for le, n in after["buckets"].items()},
        "drops": {r: n - before["drops"].get(r, 0.0) for r, n in after["drops"].items()},
        "batches": after["batches"] - before["batches"],
        "frames": after["frames"] - before["frames"],
        "infer_s": after["infer_s"] - before["infer_s"],
        "infers": after["infers"] - before["infers"],
        "cores": (cpu1 - cpu0) / (t1 - t0),
        "memory": memory,
        "gpu_util": utilisation,
        "threads": {
            name: (cpu - threads0.get(name, 0.0)) / (t1 - t0) for name, cpu in threads1.items()
        },
    }


def _shard_main(
    args: argparse.Namespace, decoder: str, cameras: int, shard: Shard, barrier: Any, out: Any
) -> None:
    """A shard's process: measure, put the raw figures (or the error) on ``out``."""
    logging.basicConfig(level=logging.WARNING)
    try:
        out.put((shard.index, measure(args, decoder, cameras, shard, barrier)))
    except BaseException as exc:  # the parent reports it
        out.put((shard.index, {"error": f"{type(exc).__name__}: {exc}"}))


def run_point(args: argparse.Namespace, decoder: str, cameras: int) -> dict[str, Any]:
    """``cameras`` cameras in ``args.processes`` daemons (shards, as ``vidpipe run --shard
    i/n`` splits them), one point: each shard's raw figures, merged."""
    if args.processes == 1:
        return summarise(decoder, cameras, [measure(args, decoder, cameras, None, None)])
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    n = args.processes
    barrier, out = ctx.Barrier(n), ctx.Queue()
    procs = [
        ctx.Process(target=_shard_main, args=(args, decoder, cameras, Shard(i, n), barrier, out))
        for i in range(n)
    ]
    for proc in procs:
        proc.start()
    try:
        results = dict(out.get(timeout=args.warmup + args.window + 600) for _ in procs)
    finally:
        for proc in procs:
            proc.join(timeout=60)
            if proc.is_alive():
                proc.kill()
    errors = [f"shard {i}: {r['error']}" for i, r in sorted(results.items()) if "error" in r]
    if errors:
        raise RuntimeError("; ".join(errors))
    return summarise(decoder, cameras, [results[i] for i in range(n)])


def summarise(decoder: str, cameras: int, raws: list[dict[str, Any]]) -> dict[str, Any]:
    """One point from the shards' raw figures: the worst camera, the pooled latency
    histogram, host cores summed over the processes."""
    shares = [s for r in raws for s in r["shares"]]
    buckets: dict[float, float] = {}
    threads: dict[str, float] = {}
    drops: dict[str, float] = {}
    for r in raws:
        for reason, n in r.get("drops", {}).items():
            drops[reason] = drops.get(reason, 0.0) + n
        for le, count in r["buckets"].items():
            buckets[le] = buckets.get(le, 0.0) + count
        for name, cores in r["threads"].items():
            threads[name] = threads.get(name, 0.0) + cores
    p95 = bucket_quantile({}, buckets, 0.95)
    batches, frames = sum(r["batches"] for r in raws), sum(r["frames"] for r in raws)
    infers, infer_s = sum(r["infers"] for r in raws), sum(r["infer_s"] for r in raws)
    memory = max((r["memory"] for r in raws if r["memory"] is not None), default=None)
    worst = min(shares)
    point: dict[str, Any] = {
        "decoder": decoder,
        "cameras": cameras,
        "processes": len(raws),
        "cameras_per_process": [len(r["shares"]) for r in raws],
        "worst_share_per_process": [round(min(r["shares"], default=1.0), 4) for r in raws],
        "worst_share": round(worst, 4),
        "mean_share": round(sum(shares) / len(shares), 4),
        "p95_latency_s": p95,
        "host_cores": round(sum(r["cores"] for r in raws), 2),
        "mean_batch": round(frames / batches, 2) if batches else 0,
        "gpu_memory_mib": None if memory is None else round(memory / 2**20),
        "infer_ms": round(1000 * infer_s / infers, 2) if infers else None,
        "gpu_util": raws[0]["gpu_util"],
        "drops": {reason: int(n) for reason, n in sorted(drops.items()) if n},
        "thread_cores": {
            name: round(cores, 3)
            for name, cores in sorted(threads.items(), key=lambda kv: -kv[1])
            if cores > 0.01
        },
    }
    point["holds"] = worst >= HOLD_SHARE and p95 is not None and p95 <= HOLD_P95_S
    return point


MPS_CONTROL = "nvidia-cuda-mps-control"


@contextlib.contextmanager
def mps_for_the_run(enabled: bool) -> Iterator[None]:
    """NVIDIA's Multi-Process Service for the run's daemons (``--mps``), then stopped.

    Without it, each shard's process has a CUDA context of its own and the GPU time-slices
    between them: 4 shards of 120 NVDEC cameras on the H200 kept the SMs 81 % busy and used
    7.1 host cores; under MPS, where their kernels share one context, 55 % and 4.0 cores
    (one run each). The control daemon's pipe and log directories are private to the run
    (``CUDA_MPS_PIPE_DIRECTORY``, which the shards inherit), so a system-wide MPS, if any, is
    left alone. CUDA reads the variables when it initialises: this runs before any daemon.
    """
    if not enabled:
        yield
        return
    control = shutil.which(MPS_CONTROL)
    if control is None:
        raise SystemExit(f"--mps: {MPS_CONTROL} is not on PATH (it comes with the NVIDIA driver)")
    with tempfile.TemporaryDirectory(prefix="vidpipe-mps-") as tmp:
        env = {"CUDA_MPS_PIPE_DIRECTORY": f"{tmp}/pipe", "CUDA_MPS_LOG_DIRECTORY": f"{tmp}/log"}
        for path in env.values():
            os.makedirs(path)
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        try:
            subprocess.run([control, "-d"], check=True, timeout=30)
            try:
                yield
            finally:
                subprocess.run([control], input="quit\n", text=True, timeout=30, check=False)
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


def _parser() -> argparse.ArgumentParser:
    """The command line; ``--help`` lists the options in the order they are added."""
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_daemon", description=__doc__)
    p.add_argument("--model", type=Path, required=True, help="the ONNX model (YOLOX)")
    p.add_argument("--labels", type=Path, required=True, help="its labels file")
    p.add_argument("--clip", type=Path, required=True, help="the clip every camera plays")
    p.add_argument("--cameras", default="8,16", help="camera counts, e.g. 16,32,64,128")
    p.add_argument("--decoders", default="nvdec,pyav", help="decoders to compare")
    _add_inference_arguments(p)
    _add_nvdec_arguments(p)
    p.add_argument("--warmup", type=float, default=8.0, help="seconds before the window")
    p.add_argument("--window", type=float, default=15.0, help="measurement window, seconds")
    _add_process_arguments(p)
    p.add_argument("--json", type=Path, required=True, help="result file (JSON lines)")
    return p


def _add_inference_arguments(p: argparse.ArgumentParser) -> None:
    """The inference section of every point's config."""
    p.add_argument("--inference", choices=("torch", "openvino"), default="torch")
    p.add_argument("--device", type=int, default=0, help="CUDA device (torch)")
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--batch-timeout-ms", type=float, default=20.0)
    p.add_argument("--precision", choices=("f32", "tf32", "f16"), default="f16")


def _add_nvdec_arguments(p: argparse.ArgumentParser) -> None:
    """The capture section's NVDEC knobs."""
    p.add_argument(
        "--nvdec-group-size",
        type=int,
        default=1,
        help="capture.nvdec_group_size: nvdec cameras read per thread (1: a thread each)",
    )
    p.add_argument(
        "--nvdec-prefetch",
        type=int,
        default=0,
        help="capture.nvdec_prefetch: frames decoded ahead on PyNvVideoCodec's own thread "
        "(0: decode on the camera's thread)",
    )
    p.add_argument(
        "--nvdec-open-concurrency",
        type=int,
        default=CaptureConfig.model_fields["nvdec_open_concurrency"].default,
        help="capture.nvdec_open_concurrency: nvdec cameras of a daemon starting at once",
    )
    p.add_argument(
        "--nvdec-processes",
        type=int,
        default=0,
        help="capture.nvdec_processes: decode processes of a daemon's nvdec cameras (0: "
        "decode on the camera threads)",
    )


def _add_process_arguments(p: argparse.ArgumentParser) -> None:
    """How the daemons run: how many shards, how cameras are assigned, MPS or not."""
    p.add_argument(
        "--processes",
        type=int,
        default=1,
        help="daemons sharing the GPU, each running its shard of the cameras (as "
        "`vidpipe run --shard i/n` under vidpipe@.service)",
    )
    p.add_argument(
        "--shard-assignment",
        choices=get_args(ShardingConfig.model_fields["assignment"].annotation),
        default=ShardingConfig().assignment,
        help="sharding.assignment of the daemons (balanced: shards differ by one camera)",
    )
    p.add_argument(
        "--mps",
        action="store_true",
        help="run the daemons under NVIDIA's Multi-Process Service (started for the run)",
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    counts = [int(c) for c in args.cameras.split(",") if c]
    decoders = [d for d in args.decoders.split(",") if d]
    with args.json.open("a") as out, mps_for_the_run(args.mps):
        for n in counts:
            for decoder in decoders:
                point = run_point(args, decoder, n)
                point["nvdec_group_size"] = args.nvdec_group_size  # 1: a thread per camera
                point["nvdec_prefetch"] = args.nvdec_prefetch
                point["nvdec_open_concurrency"] = args.nvdec_open_concurrency
                point["nvdec_processes"] = args.nvdec_processes
                point["mps"] = args.mps
                print(json.dumps(point), flush=True)
                out.write(json.dumps(point) + "\n")
            decoders.reverse()  # alternate which decoder goes first
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
