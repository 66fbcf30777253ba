"""``python -m vidpipe.bench.gpu_daemon``: how many real-time cameras the daemon itself holds.

Unlike ``gpu_pipeline`` (the GPU path alone), this runs the real ``Daemon`` with a real config:
N cameras reading one clip, each looping and paced in real time (``realtime: true``: a live
camera's ``newest`` mailbox, overwritten frames counted as dropped), decoded with the given
decoder (``nvdec`` or ``pyav``) and inferred by the configured backend (``torch`` on a GPU,
with GPU letterbox and postprocessing; ``openvino`` on the CPU to check the bench itself).

A count *holds* when every camera gets >= 99 % of its decoded frames inferred and the p95
capture-to-result latency is <= 200 ms (the issue's rule). Per point, measured over a window
after a warm-up, from the daemon's own metrics registry: each camera's inferred share,
p95 latency (from the histogram's buckets), host cores used (process CPU time over wall
time), mean batch size, and, for GPU runs, the GPU memory in use. Decoders alternate per count
so that both see the same machine state.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from vidpipe.config import Config

HOLD_SHARE = 0.99
HOLD_P95_S = 0.200


def point_config(args: argparse.Namespace, decoder: str, cameras: int, jsonl: Path) -> Config:
    """The daemon config of one point."""
    if args.inference == "torch":
        inference: dict[str, Any] = {
            "type": "torch",
            "devices": [args.device],
            "streams": args.streams,
            "max_batch": args.max_batch,
            "batch_timeout_ms": args.batch_timeout_ms,
            "precision": args.precision,
        }
    else:
        inference = {"type": "openvino", "device": "CPU"}
    camera: dict[str, Any] = {"url": str(args.clip), "loop": True, "realtime": True}
    if decoder == "nvdec":
        camera["gpu"] = args.device
    return Config.model_validate(
        {
            "model": {"path": str(args.model), "labels": str(args.labels)},
            "inference": inference,
            "capture": {"decoder": decoder},
            "http": {"enabled": True, "host": "127.0.0.1", "port": 0},
            "logging": {"level": "WARNING"},
            "sinks": [{"type": "jsonl", "path": str(jsonl), "only_with_detections": True}],
            "cameras": [{"name": f"cam{i}", **camera} for i in range(cameras)],
        }
    )


def _snapshot(registry: Any, cameras: int) -> dict[str, Any]:
    """Counters and latency buckets of every camera, and the batch histogram."""
    cams = []
    for i in range(cameras):
        labels = {"camera": f"cam{i}"}
        cams.append(
            {
                "captured": registry.get_sample_value("vidpipe_frames_captured_total", labels)
                or 0.0,
                "inferred": registry.get_sample_value("vidpipe_frames_inferred_total", labels)
                or 0.0,
            }
        )
    buckets: dict[float, float] = {}
    for metric in registry.collect():
        for s in metric.samples:
            if s.name == "vidpipe_end_to_end_latency_seconds_bucket":
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
    batches = registry.get_sample_value("vidpipe_batch_size_count") or 0.0
    frames = registry.get_sample_value("vidpipe_batch_size_sum") or 0.0
    infer_s = registry.get_sample_value("vidpipe_inference_latency_seconds_sum") or 0.0
    infers = registry.get_sample_value("vidpipe_inference_latency_seconds_count") or 0.0
    return {
        "cams": cams,
        "buckets": buckets,
        "batches": batches,
        "frames": frames,
        "infer_s": infer_s,
        "infers": infers,
    }


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
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the thread ended between listdir and read
        name = names.get(int(tid), "native")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def quantile(before: dict[float, float], after: dict[float, float], q: float) -> float | None:
    """The ``q`` quantile of the observations between two snapshots of cumulative buckets
    (the upper bound of the bucket it falls in; None without observations)."""
    edges = sorted(after)
    counts = [after[e] - before.get(e, 0.0) for e in edges]
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return None
    for edge, cumulative in zip(edges, counts, strict=True):
        if cumulative >= q * total:
            return edge
    return edges[-1]


def run_point(args: argparse.Namespace, decoder: str, cameras: int) -> dict[str, Any]:
    """One daemon with ``cameras`` cameras: warm up, measure a window, shut down."""
    from vidpipe.daemon import Daemon

    with tempfile.TemporaryDirectory(prefix="vidpipe-gpu-daemon-") as tmp:
        cfg = point_config(args, decoder, cameras, Path(tmp) / "results.jsonl")
        daemon = Daemon(cfg)
        daemon.start()
        try:
            time.sleep(args.warmup)
            registry = daemon.metrics.registry
            before, cpu0, t0 = _snapshot(registry, cameras), time.process_time(), time.time()
            threads0 = thread_cpu()
            dmon = start_dmon(args.device) if args.inference == "torch" else None
            time.sleep(args.window)
            after, cpu1, t1 = _snapshot(registry, cameras), time.process_time(), time.time()
            threads1 = thread_cpu()
            utilisation = stop_dmon(dmon)
            memory = registry.get_sample_value(
                "vidpipe_gpu_memory_used_bytes", {"gpu": str(args.device)}
            )
        finally:
            daemon.shutdown()
    shares = []
    for b, a in zip(before["cams"], after["cams"], strict=True):
        captured = a["captured"] - b["captured"]
        shares.append((a["inferred"] - b["inferred"]) / captured if captured else 0.0)
    p95 = quantile(before["buckets"], after["buckets"], 0.95)
    batches = after["batches"] - before["batches"]
    worst = min(shares)
    point: dict[str, Any] = {
        "decoder": decoder,
        "cameras": cameras,
        "worst_share": round(worst, 4),
        "mean_share": round(sum(shares) / len(shares), 4),
        "p95_latency_s": p95,
        "host_cores": round((cpu1 - cpu0) / (t1 - t0), 2),
        "mean_batch": round((after["frames"] - before["frames"]) / batches, 2) if batches else 0,
        "gpu_memory_mib": None if memory is None else round(memory / 2**20),
        "infer_ms": round(1000 * (after["infer_s"] - before["infer_s"]) / infers, 2)
        if (infers := after["infers"] - before["infers"])
        else None,
        "gpu_util": utilisation,
        "thread_cores": {
            name: round((cpu - threads0.get(name, 0.0)) / (t1 - t0), 3)
            for name, cpu in sorted(threads1.items(), key=lambda kv: -kv[1])
            if cpu - threads0.get(name, 0.0) > 0.01 * (t1 - t0)
        },
    }
    point["holds"] = worst >= HOLD_SHARE and p95 is not None and p95 <= HOLD_P95_S
    return point


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vidpipe.bench.gpu_daemon", description=__doc__)
    p.add_argument("--model", type=Path, required=True, help="the ONNX model (YOLOX)")
    p.add_argument("--labels", type=Path, required=True, help="its labels file")
    p.add_argument("--clip", type=Path, required=True, help="the clip every camera plays")
    p.add_argument("--cameras", default="8,16", help="camera counts, e.g. 16,32,64,128")
    p.add_argument("--decoders", default="nvdec,pyav", help="decoders to compare")
    p.add_argument("--inference", choices=("torch", "openvino"), default="torch")
    p.add_argument("--device", type=int, default=0, help="CUDA device (torch)")
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--batch-timeout-ms", type=float, default=20.0)
    p.add_argument("--precision", choices=("f32", "tf32", "f16"), default="f16")
    p.add_argument("--warmup", type=float, default=8.0, help="seconds before the window")
    p.add_argument("--window", type=float, default=15.0, help="measurement window, seconds")
    p.add_argument("--json", type=Path, required=True, help="result file (JSON lines)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    counts = [int(c) for c in args.cameras.split(",") if c]
    decoders = [d for d in args.decoders.split(",") if d]
    with args.json.open("a") as out:
        for n in counts:
            for decoder in decoders:
                point = run_point(args, decoder, n)
                print(json.dumps(point), flush=True)
                out.write(json.dumps(point) + "\n")
            decoders.reverse()  # alternate which decoder goes first
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
