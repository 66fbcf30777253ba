"""``python -m benchmarks.gpu_box``: how many real-time cameras one ``vidpipe run`` holds,
as a service runs it: ``inference.processes`` (default ``auto``) under the supervisor, with
CUDA MPS as the supervisor finds or starts it, everything read from the one port's merged
``/metrics``.

The config of a point is ``benchmarks.gpu_daemon``'s (N cameras looping one clip in real
time, the same inference and NVDEC knobs), with ``inference.processes`` added. The rule is
``gpu_daemon``'s too: a count holds when every camera gets >= 99 % of its decoded frames
inferred and the p95 capture-to-result latency is <= 200 ms, over a window after a warm-up.
Host cores are the CPU time of the supervisor and its children over the window.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.gpu_daemon import (
    HOLD_P95_S,
    HOLD_SHARE,
    _add_inference_arguments,
    _add_nvdec_arguments,
    _snapshot,
    point_config,
    start_dmon,
    stop_dmon,
)
from vidpipe.quantiles import bucket_quantile


class _Scraped:
    """A scrape of the supervisor's ``/metrics`` as a registry ``_snapshot`` can read: the
    ``shard`` label dropped, so that the box's totals add up over its processes."""

    def __init__(self, port: int) -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            self.text = resp.read().decode()

    def collect(self) -> Any:
        for family in text_string_to_metric_families(self.text):
            family.samples = [
                s._replace(labels={k: v for k, v in s.labels.items() if k != "shard"})
                for s in family.samples
            ]
            yield family


def _tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of ``root`` and its children, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry.name), int(fields[1])
        if root in (pid, ppid):
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _wait_ready(port: int, proc: subprocess.Popen[bytes], timeout_s: float) -> float:
    """Seconds until the supervisor's /readyz says every process is ready."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"vidpipe run exited with {proc.returncode} before it was ready")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5):
                return time.monotonic() - t0
        except OSError:
            time.sleep(1)
    raise SystemExit(f"vidpipe run was not ready after {timeout_s:.0f} s")


def _wait_graphs(log: Path, port: int, timeout_s: float) -> float | None:
    """Seconds until every process logged that its background CUDA graphs are all captured
    (a service captures most of them while its cameras run; the window waits for them), or
    None without torch's background capture."""
    t0 = time.monotonic()
    processes = _Scraped(port).text.count("vidpipe_process_up{") or 1
    while time.monotonic() - t0 < timeout_s:
        text = log.read_text(errors="replace")
        if "graphs of batch sizes" not in text:
            return None
        if text.count("every graph size ready") >= processes:
            return round(time.monotonic() - t0, 1)
        time.sleep(1.0)
    return None


def _shares(before: dict[str, Any], after: dict[str, Any], names: list[str]) -> list[float]:
    """Per camera, the share of its captured frames inferred between two snapshots."""
    shares = []
    for name in names:
        b, a = before["cams"][name], after["cams"][name]
        captured = a["captured"] - b["captured"]
        shares.append((a["inferred"] - b["inferred"]) / captured if captured else 0.0)
    return shares


def _inferred(before: dict[str, Any], after: dict[str, Any]) -> float:
    """Frames inferred, all cameras, between two snapshots."""
    return sum(after["cams"][n]["inferred"] - b["inferred"] for n, b in before["cams"].items())


def run_point(args: argparse.Namespace, cameras: int, workdir: Path) -> dict[str, Any]:
    """One count: start the service, warm up, measure a window, stop it."""
    cfg = point_config(args, args.decoder, cameras, workdir / "results.jsonl")
    doc = cfg.model_dump(mode="json", exclude_unset=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    doc["http"] = {"host": "127.0.0.1", "port": port}
    if args.processes is not None:  # else the config's default, as a user's config has it
        doc["inference"]["processes"] = (
            args.processes if args.processes == "auto" else int(args.processes)
        )
    doc["logging"] = {"level": "INFO"}
    if args.tracking:  # every camera tracks its objects (the tracker's cost on the host)
        for cam in doc["cameras"]:
            cam["tracking"] = {"enabled": True}
    config = workdir / f"box-{cameras}.yaml"
    config.write_text(yaml.safe_dump(doc))
    with (workdir / f"box-{cameras}.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "vidpipe.cli", "run", "-c", str(config)], stderr=log, stdout=log
        )
    dmon = None
    try:
        start_s = _wait_ready(port, proc, args.ready_timeout)
        graphs_s = _wait_graphs(workdir / f"box-{cameras}.log", port, args.ready_timeout)
        time.sleep(args.warmup)
        names = [c.name for c in cfg.cameras]
        dmon = start_dmon(args.device)
        before, cpu0, t0 = _snapshot(_Scraped(port), names), _tree_cpu_s(proc.pid), time.time()
        after, periods = before, []
        for k in range(args.periods):
            time.sleep(args.window / args.periods)
            mark = _snapshot(_Scraped(port), names)
            periods.append(_period(after, mark, names))
            after = mark
            if args.periods > 1:  # a long hold shows its progress, even if it is cut short
                print(f"period {k + 1}: {periods[-1]}", flush=True)
        cpu1, t1 = _tree_cpu_s(proc.pid), time.time()
        utilisation = stop_dmon(dmon)
        processes = _Scraped(port).text.count("vidpipe_process_up{")
    finally:
        if dmon is not None and dmon.poll() is None:  # the window failed: no sampler left over
            dmon.kill()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(120)
    shares = _shares(before, after, names)
    p95 = bucket_quantile(before["buckets"], after["buckets"], 0.95)
    point = {
        "cameras": cameras,
        "decoder": args.decoder,
        "processes": processes or 1,
        "processes_setting": args.processes or "default",
        "start_s": round(start_s, 1),
        "graphs_s": graphs_s,
        "worst_share": round(min(shares), 4),
        "mean_share": round(sum(shares) / len(shares), 4),
        "total_fps": round(_inferred(before, after) / (t1 - t0), 1),
        "p50_latency_s": bucket_quantile(before["buckets"], after["buckets"], 0.5),
        "p95_latency_s": p95,
        "host_cores": round((cpu1 - cpu0) / (t1 - t0), 2),
        "gpu_util": utilisation,
        "exit_code": code,
        "mps": _mps_line(workdir / f"box-{cameras}.log"),
        "periods": periods if args.periods > 1 else [],
    }
    point["holds"] = point["worst_share"] >= HOLD_SHARE and p95 is not None and p95 <= HOLD_P95_S
    return point


def _period(before: dict[str, Any], after: dict[str, Any], names: list[str]) -> dict[str, Any]:
    return {
        "worst_share": round(min(_shares(before, after, names)), 4),
        "p95_latency_s": bucket_quantile(before["buckets"], after["buckets"], 0.95),
    }


def _mps_line(log: Path) -> str:
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if "CUDA MPS" in ln]
    return lines[0].split("CUDA MPS", 1)[1].strip(": ") if lines else "not used"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.gpu_box", description=__doc__)
    p.add_argument("--model", type=Path, required=True, help="the ONNX model (YOLOX)")
    p.add_argument("--labels", type=Path, required=True, help="its labels file")
    p.add_argument("--clip", type=Path, required=True, help="the clip every camera plays")
    p.add_argument("--cameras", default="120", help="camera counts, e.g. 80,120,160")
    p.add_argument("--decoder", default="nvdec", choices=("nvdec", "pyav"))
    p.add_argument(
        "--processes",
        default=None,
        help="inference.processes: auto or a number (default: the config's default, auto)",
    )
    _add_inference_arguments(p)
    _add_nvdec_arguments(p)
    p.add_argument("--shard-assignment", default="balanced", choices=("rendezvous", "balanced"))
    p.add_argument("--warmup", type=float, default=20.0, help="seconds after READY")
    p.add_argument("--window", type=float, default=20.0, help="measurement window, seconds")
    p.add_argument(
        "--periods", type=int, default=1, help="the window in this many parts, each reported"
    )
    p.add_argument("--tracking", action="store_true", help="tracking on every camera")
    p.add_argument("--ready-timeout", type=float, default=300.0, help="seconds to READY")
    p.add_argument("--json", type=Path, required=True, help="result file (JSON lines)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vidpipe-gpu-box-") as tmp, args.json.open("a") as out:
        for n in (int(c) for c in args.cameras.split(",") if c):
            point = run_point(args, n, Path(tmp))
            print(json.dumps(point), flush=True)
            out.write(json.dumps(point) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
