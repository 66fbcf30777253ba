"""Every metric name (and grouping label) used by deploy/prometheus/alerts.yml and the Grafana
dashboard exists in a real scrape of a running daemon; the image's HEALTHCHECK passes on it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.deploy.test_observability import all_queries
from tests.integration.conftest import free_port, scrape, wait_for
from tests.integration.test_daemon_e2e import sample
from tests.rtsp import RtspServer

METRIC = re.compile(r"\bvidpipe_[a-z0-9_]+")
BY = re.compile(r"\bby\s*\(([^)]*)\)")
PROMETHEUS_LABELS = {"instance", "job"}  # added by Prometheus at scrape time


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_every_metric_in_rules_and_dashboard_is_scraped(
    repo_root: Path, assets_dir: Path, tmp_path: Path, run_daemon: Any
) -> None:
    used = {m for q in all_queries(repo_root) for m in METRIC.findall(q)}
    assert len(used) >= 10, used  # the check is only worth something if the files use metrics
    port = free_port()
    with RtspServer(assets_dir / "videos", loop=True) as server:
        daemon = run_daemon(
            {
                "model": {
                    "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                    "labels": str(assets_dir / "models" / "coco80.txt"),
                },
                "http": {"port": port},
                "sinks": [{"type": "jsonl", "path": str(tmp_path / "out.jsonl")}],
                "cameras": [
                    {"name": "belt", "url": server.url("bottle-detection"), "detect_fps": 5}
                ],
            }
        )

        def belt_inferred_and_dropped() -> bool:
            try:
                text = scrape(port)
            except OSError:  # not listening yet
                return False
            return (sample(text, "vidpipe_detections_total", camera="belt") or 0) > 0 and (
                sample(text, "vidpipe_frames_dropped_total", camera="belt") is not None
            )

        wait_for(belt_inferred_and_dropped, 120, "detections and drops from the belt camera")
        text = scrape(port)
        healthcheck = dockerfile_healthcheck(repo_root).replace(":9108/", f":{port}/")
        probe = subprocess.run(
            [sys.executable, "-c", healthcheck], capture_output=True, text=True, timeout=30
        )
        daemon.terminate(60)
    names: set[str] = set()
    labels: set[str] = set(PROMETHEUS_LABELS)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            names.add(s.name)
            labels.update(s.labels)
    missing = sorted(used - names)
    assert not missing, f"used in deploy/ but not exported by the daemon: {missing}"
    grouped = {
        lbl.strip() for q in all_queries(repo_root) for g in BY.findall(q) for lbl in g.split(",")
    }
    assert grouped <= labels, f"grouped by labels the daemon does not export: {grouped - labels}"
    assert probe.returncode == 0, probe.stderr  # the image's HEALTHCHECK passes on a live daemon


def dockerfile_healthcheck(repo_root: Path) -> str:
    """The Python code of the runtime stage's HEALTHCHECK."""
    text = (repo_root / "Dockerfile").read_text()
    cmd = re.findall(r"HEALTHCHECK .*?CMD (\[.*?\])\n", text, re.S)[-1]
    argv = json.loads(cmd)
    assert argv[1] == "-c"
    return str(argv[2])
