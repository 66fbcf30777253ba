"""How long `vidpipe run` takes until its cameras stream, as a user starts it.

Starts ``python -m vidpipe run --config`` in a child process on a generated config (file
cameras playing ``--clip`` in real time, in a loop), scrapes its ``/metrics`` every 0.2 s and
reports, from the moment the process was started:

* ``http_s``: the first answer of ``/metrics`` (the model is loaded, the pipeline built);
* ``first_streaming_s`` / ``all_streaming_s``: the first camera, and every camera, in
  ``vidpipe_camera_state{state="streaming"}``;
* ``first_inferred_s``: the first frame counted in ``vidpipe_frames_inferred_total``;
* ``graphs_s``: the log line saying the GPU backend's CUDA graphs were captured (torch).

    python -m benchmarks.startup --inference torch --decoder nvdec --cameras 32 \\
        --clip car-1080p25.mp4 --model yolox_nano.onnx --labels coco80.txt

A GPU config streams while its model loads (``inference.stream_while_loading``, on by
default); ``--model-first`` sets it false, so that the model opens before the cameras. It works
on the CPU as well (``--inference openvino --decoder pyav``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml


def parse_samples(text: str) -> dict[str, float]:
    """``{'name{label="v",...}': value}``, labels in name order, from an exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            out[f"{s.name}{{{labels}}}" if labels else s.name] = float(s.value)
    return out


def config(args: argparse.Namespace, port: int) -> dict[str, Any]:
    inference: dict[str, Any] = {"type": "openvino", "device": "CPU"}
    if args.inference == "torch":
        inference = {
            "type": "torch",
            "precision": args.precision,
            "advanced": {"streams": args.streams, "max_batch": args.max_batch},
        }
        if args.model_first:
            inference["stream_while_loading"] = False
    camera: dict[str, Any] = {"url": str(args.clip), "loop": True, "realtime": True}
    if args.decoder == "nvdec":
        camera["decoder"] = "nvdec"
    return {
        "model": {"path": str(args.model), "labels": str(args.labels)},
        "inference": inference,
        "http": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "INFO"},
        "cameras": [{"name": f"cam{i}", **camera} for i in range(args.cameras)],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> dict[str, float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            return parse_samples(r.read().decode())
    except OSError:
        return None


def measure(args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    names = [f"cam{i}" for i in range(args.cameras)]
    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="vidpipe-startup-") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_text(yaml.safe_dump(config(args, port)))
        log = Path(tmp) / "daemon.log"
        with log.open("w") as out:
            t0 = time.monotonic()
            cmd = [sys.executable, "-m", "vidpipe.cli", "run", "--config", str(path)]
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
            try:
                while time.monotonic() - t0 < args.seconds and proc.poll() is None:
                    _mark(marks, scrape(port), names, time.monotonic() - t0)
                    if "graphs_s" not in marks and "graphs of batch sizes" in log.read_text():
                        marks["graphs_s"] = time.monotonic() - t0
                    # the cameras may stream before the model is loaded: wait for both
                    if {"all_streaming_s", "first_inferred_s"} <= marks.keys() and (
                        "graphs_s" in marks or args.inference != "torch"
                    ):
                        break
                    time.sleep(0.2)
            finally:
                proc.terminate()
                proc.wait(60)
        tail = log.read_text()[-2000:] if proc.returncode not in (0, -15) else ""
        if args.log_dir:
            args.log_dir.mkdir(parents=True, exist_ok=True)
            (args.log_dir / f"startup-{args.cameras}.log").write_text(log.read_text())
    return {"cameras": args.cameras, **{k: round(v, 2) for k, v in marks.items()}, "log": tail}


def _mark(
    marks: dict[str, float], samples: dict[str, float] | None, names: list[str], t: float
) -> None:
    if samples is None:
        return
    marks.setdefault("http_s", t)
    # a supervisor's merged /metrics adds a shard label: match the camera and state only
    streaming = sum(
        v == 1.0
        for k, v in samples.items()
        if k.startswith("vidpipe_camera_state{") and 'state="streaming"' in k
    )
    if streaming:
        marks.setdefault("first_streaming_s", t)
    if streaming == len(names):
        marks.setdefault("all_streaming_s", t)
    if any(v > 0 for k, v in samples.items() if k.startswith("vidpipe_frames_inferred_total")):
        marks.setdefault("first_inferred_s", t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--inference", choices=("torch", "openvino"), default="openvino")
    p.add_argument("--decoder", choices=("pyav", "nvdec"), default="pyav")
    p.add_argument("--cameras", type=int, nargs="+", default=[4])
    p.add_argument("--clip", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--labels", type=Path, required=True)
    p.add_argument("--precision", default="f16")
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument(
        "--model-first",
        action="store_true",
        help="torch: inference.stream_while_loading false (the model opens before the cameras)",
    )
    p.add_argument("--seconds", type=float, default=120.0, help="give up after this long")
    p.add_argument("--log-dir", type=Path, help="keep each run's daemon log here")
    args = p.parse_args()
    for n in args.cameras:
        print(json.dumps(measure(argparse.Namespace(**{**vars(args), "cameras": n}))), flush=True)


if __name__ == "__main__":
    main()
