"""OpenVINO's ``benchmark_app`` on the benchmark model: a cross-check of the inference rate.

``vidpipe bench --benchmark-app`` records its throughput beside the points, measured by a tool
that is not vidpipe's (``benchmarks/reference.py``'s ceiling is the harness's own).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

_THROUGHPUT = re.compile(r"Throughput:\s*([0-9.]+)\s*FPS")


def run_benchmark_app(model: str, precision: str, seconds: float) -> dict[str, Any]:
    """OpenVINO's ``benchmark_app`` (THROUGHPUT hint) as a cross-check of the ceiling.

    Returns:
        ``{"fps": float | None, "command": [...], "error": str | None}``.
    """
    exe = shutil.which("benchmark_app")
    if exe is None:
        candidate = Path(sys.executable).parent / "benchmark_app"
        exe = str(candidate) if candidate.is_file() else None
    if exe is None:
        return {"fps": None, "command": None, "error": "benchmark_app is not installed"}
    cmd = [
        exe,
        "-m",
        model,
        "-d",
        "CPU",
        "-hint",
        "throughput",
        "-infer_precision",
        precision,
        "-t",
        str(max(1, round(seconds))),
    ]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=seconds + 120, check=False
        )
    except subprocess.TimeoutExpired:
        return {"fps": None, "command": cmd, "error": "timed out"}
    match = _THROUGHPUT.search(proc.stdout)
    if proc.returncode != 0 or match is None:
        tail = (proc.stdout + proc.stderr).strip()[-400:]
        return {"fps": None, "command": cmd, "error": f"exit {proc.returncode}: {tail}"}
    return {"fps": float(match.group(1)), "command": cmd, "error": None}
