"""The vidpipe contender: the real ``Daemon`` with a real config, as a user would run it
(``vidpipe run``'s malloc settings included).

N looping file cameras (unpaced: files use the ``block`` mailbox policy), metrics served on
127.0.0.1 with a free port, one JSONL sink to a temporary file. Frames inferred come from the
scheduler's ``completed``; per-camera counts from the metrics registry; capture-to-result
latency from the JSONL lines (``latency_ms``) whose timestamp falls in the window.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from vidpipe.bench.common import PointSpec
from vidpipe.preprocess import buffers


def merged(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in: mappings key by key, any other value replaced."""
    out = dict(base)
    for key, value in changes.items():
        old = out.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            value = merged(old, value)
        out[key] = value
    return out


def bench_config(
    spec: PointSpec,
    jsonl: Path,
    overrides: Mapping[str, Any] | None = None,
    camera: Mapping[str, Any] | None = None,
    odd_camera: Mapping[str, Any] | None = None,
    dual_stream: bool = False,
) -> Any:
    """The daemon config of one point, validated like a YAML file would be: results to
    ``jsonl``; a variant's ``overrides`` merged into the sections, its ``camera`` settings
    into every camera and its ``odd_camera`` settings into every other one (``merged``).
    With ``dual_stream`` every camera detects on its sub-stream (``spec.extra["sub_url"]``)
    and records clips from the main stream (``spec.clip``).

    Raises:
        ValueError: ``dual_stream`` without a sub-stream (``--density-sub-clip``).
    """
    from vidpipe.config import Config

    is_stream = spec.clip.lower().startswith(("rtsp://", "rtsps://"))
    sub_url = spec.extra.get("sub_url")
    if dual_stream and not sub_url:
        raise ValueError(f"{spec.contender} detects on a sub-stream: run with --density-sub-clip")

    def source(i: int) -> dict[str, Any]:
        url = spec.clip.replace("{i}", str(i))  # density: one RTSP mount each
        if not dual_stream:
            return {"url": url}
        sub = str(sub_url).replace("{i}", str(i))
        return {"inputs": [{"url": sub, "roles": ["detect"]}, {"url": url, "roles": ["record"]}]}

    data: dict[str, Any] = {
        "model": {
            "path": spec.model,
            "labels": spec.labels,
            "type": "yolox",
            "score_threshold": spec.score_threshold,
            "iou_threshold": spec.iou_threshold,
        },
        "inference": {"type": "openvino", "device": "CPU", "precision": spec.precision},
        "http": {"enabled": True, "host": "127.0.0.1", "port": 0},
        "logging": {"level": "WARNING"},
        "sinks": [{"type": "jsonl", "path": str(jsonl)}],
        "cameras": [
            merged(
                {
                    "name": f"cam{i}",
                    **source(i),
                    "loop": not is_stream,
                    **({"realtime": True} if spec.realtime and not is_stream else {}),
                    **({"detect_fps": spec.detect_fps} if spec.detect_fps else {}),
                },
                merged(camera or {}, (odd_camera or {}) if i % 2 else {}),
            )
            for i in range(spec.cameras)
        ],
    }
    return Config.model_validate(merged(data, overrides or {}))


#: sample name -> ``camera_counters`` key (dropped frames by reason are split further)
_COUNTER_KEYS = {
    "vidpipe_frames_captured_total": "captured",
    "vidpipe_frames_inferred_total": "inferred",
    "vidpipe_frames_dropped_total": "dropped",
    "vidpipe_camera_errors_total": "errors",
    "vidpipe_camera_lag_seconds": "lag_s",
}


class VidpipeRun:
    """``Daemon(cfg).start()`` ... ``shutdown()``, measured from outside; ``overrides`` and
    ``camera``: a variant's settings (``bench_config``)."""

    name = "vidpipe"

    def __init__(
        self,
        spec: PointSpec,
        overrides: Mapping[str, Any] | None = None,
        camera: Mapping[str, Any] | None = None,
        odd_camera: Mapping[str, Any] | None = None,
        dual_stream: bool = False,
    ) -> None:
        from vidpipe.cli import tune_process
        from vidpipe.daemon import Daemon

        # As ``vidpipe run`` does: without it 1080p frames were page-faulted in anew (decode
        # 5.0 ms of CPU a frame against 3.9: ``python -m benchmarks.decode_cost [--tune-malloc]``)
        tune_process()
        self.spec = spec
        self._tmp = tempfile.TemporaryDirectory(prefix="vidpipe-bench-")
        self.jsonl = Path(self._tmp.name) / "results.jsonl"
        if camera is not None and "clips" in camera:  # this point's clips go with it
            camera = merged(camera, {"clips": {"dir": str(Path(self._tmp.name) / "clips")}})
        self.cfg = bench_config(spec, self.jsonl, overrides, camera, odd_camera, dual_stream)
        self.detect_stream = "sub" if dual_stream else "main"
        self.daemon = Daemon(self.cfg)
        self.errors: list[str] = []
        self.precision = spec.precision
        self.details: dict[str, Any] = {}

    def start(self) -> None:
        if self.spec.realtime:
            # paced cameras in step, on the same clock grid as the other designs' readers
            self.daemon.pipeline.capture_phase = "aligned"
        self.daemon.start()
        scheduler = self.daemon.scheduler
        assert scheduler is not None
        info, spec = scheduler.backend.info, scheduler.backend.input_spec
        self.precision = info.precision
        self.details = {
            "precision": self.precision,
            "hint": info.hint,
            "requests": info.requests,
            "optimal_requests": info.optimal_requests or 0,
            "streams": info.streams,
            "input": f"{spec.dtype} {spec.layout} {list(spec.shape)}",
            "pipeline_depth": scheduler.pipeline_depth,
            "buffers": scheduler.capacity,  # one lent input buffer per frame in flight
            "http_port": self.daemon.http_port,
            "detect_stream": self.detect_stream,  # the density judge's rate to read at
        }

    def frames(self) -> int:
        scheduler = self.daemon.scheduler
        return scheduler.completed if scheduler is not None else 0

    def per_camera(self) -> list[int]:
        counters = self.camera_counters()
        return [int(counters[c.name]["inferred"]) for c in self.cfg.cameras]

    def ready(self) -> bool:
        """Every camera has delivered a frame (the window must not include connecting)."""
        return all(c["captured"] > 0 for c in self.camera_counters().values())

    def camera_counters(self) -> dict[str, dict[str, float]]:
        """Per camera: frames captured, inferred, decimated, skipped as still (``no_motion``)
        and dropped otherwise; reconnects (``errors``); the reader's lag. One pass over the
        registry: a ``get_sample_value`` per counter took seconds at 28 cameras, holding the
        GIL inside the measured daemon while the window's edges were read."""
        keys = ("captured", "inferred", "decimated", "no_motion", "dropped", "lag_s", "errors")
        out = {c.name: dict.fromkeys(keys, 0.0) for c in self.cfg.cameras}
        for metric in self.daemon.metrics.registry.collect():
            for sample in metric.samples:
                row = out.get(sample.labels.get("camera", ""))
                key = _COUNTER_KEYS.get(sample.name)
                if row is None or key is None:
                    continue
                if key == "dropped" and sample.labels["reason"] in ("decimated", "no_motion"):
                    key = sample.labels["reason"]
                row[key] += sample.value
        return out

    def allocations(self) -> int | None:
        return buffers.allocations() if self.daemon.scheduler is not None else None

    def latencies_ms(self, _t0: float, _t1: float, t0_wall: float, t1_wall: float) -> list[float]:
        """``latency_ms`` of the JSONL lines written for frames finished in the window."""
        out = []
        with self.jsonl.open() as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line cut short at shutdown
                if "latency_ms" not in rec:
                    continue  # a zone or line event (tracking variants), not a frame
                ts = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00")).timestamp()
                if t0_wall <= ts <= t1_wall:
                    out.append(float(rec["latency_ms"]))
        return sorted(out)

    def info(self) -> dict[str, Any]:
        drops: dict[str, float] = {}
        sink_dropped = 0.0
        for s in (s for m in self.daemon.metrics.registry.collect() for s in m.samples):
            if s.name == "vidpipe_frames_dropped_total" and s.value:
                drops[s.labels["reason"]] = drops.get(s.labels["reason"], 0.0) + s.value
            elif s.name == "vidpipe_sink_dropped_total":
                sink_dropped += s.value
        return {**self.details, "drops": drops, "sink_dropped": sink_dropped}

    def stop(self, timeout_s: float = 10.0) -> None:
        del timeout_s  # the config's shutdown_timeout_s applies
        if not self.daemon.shutdown():
            self.errors.append("daemon shutdown was not clean")

    def close(self) -> None:
        self._tmp.cleanup()
