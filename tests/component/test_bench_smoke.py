"""``python -m benchmarks --suite smoke`` (``vidpipe bench`` with the peer contenders of
``benchmarks/`` registered) end to end: real contenders, real model, a real subprocess.

Only the shape of what it writes is checked (keys, types, positive fps, the Markdown and the
PNG); timings are never asserted, the machine may be busy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.precision import effective_precision, forced_precision

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory: pytest.TempPathFactory, assets_dir: Path) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("bench")
    result_json = out / "smoke.json"
    env = {**os.environ, "VIDPIPE_ASSETS": str(assets_dir)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--suite",
            "smoke",
            "--contenders",
            "ceiling,naive,vidpipe",
            "--cameras",
            "1",
            "--seconds",
            "2",
            "--warmup",
            "1",
            "--json",
            str(result_json),
            "--out",
            str(out),
            *(["--precision", forced] if (forced := forced_precision()) else []),
        ],
        capture_output=True,
        text=True,
        timeout=110,
        env=env,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return result_json, proc.stdout


def test_json_has_every_section(smoke_run: tuple[Path, str]) -> None:
    doc = json.loads(smoke_run[0].read_text())
    for key in (
        "schema",
        "machine",
        "precision",
        "clips",
        "summary",
        "references",
        "points",
        "targets",
        "options",
        "command",
        "unavailable",
    ):
        assert key in doc, key
    assert doc["precision"] == effective_precision()
    assert isinstance(doc["machine"]["cores"], int) and doc["machine"]["cores"] >= 1
    assert isinstance(doc["machine"]["cpu_model"], str)
    assert doc["clips"]["car-detection.mp4"]["width"] == 768


def test_every_point_ran_with_positive_fps(smoke_run: tuple[Path, str]) -> None:
    doc = json.loads(smoke_run[0].read_text())
    contenders = {p["spec"]["contender"] for p in doc["points"]}
    assert contenders == {"ceiling", "naive", "vidpipe"}
    for point in doc["points"]:
        assert point["error"] is None, point
        assert isinstance(point["fps"], float) and point["fps"] > 0
        assert point["frames"] > 0
        assert 0 < point["cpu_percent"] <= 100 * 1.05
        assert point["precision"] == doc["precision"]
        assert isinstance(point["latency_ms"]["p50"], float)
        assert point["latency_ms"]["p95"] >= point["latency_ms"]["p50"]
        assert point["rss_mb"]["end"] > 0


def test_vidpipe_point_checks_steady_state(smoke_run: tuple[Path, str]) -> None:
    doc = json.loads(smoke_run[0].read_text())
    (point,) = [p for p in doc["points"] if p["spec"]["contender"] == "vidpipe"]
    assert set(point["allocations"]) == {"before", "after"}
    assert point["info"]["metrics_scrape_ok"] is True
    assert point["per_camera_fps"] and point["per_camera_fps"][0] > 0


def test_references_give_stage_costs(smoke_run: tuple[Path, str]) -> None:
    doc = json.loads(smoke_run[0].read_text())
    ref = doc["references"]["car-detection.mp4"]
    assert ref["ceiling_fps"] > 0
    stages = ref["stages"]
    for key in ("decode_ms", "preprocess_ms", "infer_ms", "postprocess_ms", "stage_bound_fps"):
        assert isinstance(stages[key], float) and stages[key] > 0, key


def test_markdown_and_png_are_written(smoke_run: tuple[Path, str]) -> None:
    result_json, stdout = smoke_run
    md = result_json.with_suffix(".md")
    png = result_json.with_suffix(".png")
    assert f"markdown: {md}" in stdout
    text = md.read_text()
    assert "| vidpipe |" in text and "| naive |" in text
    assert "Stage costs" in text
    pytest.importorskip("matplotlib", reason="the bench extra (matplotlib) is not installed")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
