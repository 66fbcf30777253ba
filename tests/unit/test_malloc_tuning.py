"""``vidpipe run`` tunes glibc malloc before any thread starts (``cli.tune_malloc``).

Each case runs in a fresh interpreter (mallopt settings are per process, and must be set
before other threads allocate). The observable effect of the mmap threshold: an 8 MB block
(a 1080p frame is 6 MB) comes from the heap instead of its own anonymous mapping.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc")

_PROBE = """
import ctypes, json, sys
from vidpipe.cli import tune_malloc
applied = tune_malloc() if sys.argv[1] == "tune" else {}
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
addr = libc.malloc(8 * 1024 * 1024)
region = "?"
for line in open("/proc/self/maps"):
    span, rest = line.split(" ", 1)
    lo, hi = (int(x, 16) for x in span.split("-"))
    if lo <= addr < hi:
        region = "heap" if rest.rstrip().endswith("[heap]") else "mapping"
print(json.dumps({"applied": applied, "region": region}))
"""


def _probe(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tuned_malloc_serves_frame_sized_blocks_from_the_heap() -> None:
    tuned = _probe("tune")
    assert tuned["applied"] == {
        "MALLOC_ARENA_MAX": True,
        "MALLOC_MMAP_THRESHOLD_": True,
        "MALLOC_TRIM_THRESHOLD_": True,
    }
    assert tuned["region"] == "heap"


def test_untuned_malloc_maps_frame_sized_blocks() -> None:
    """The control: without the tuning the same block gets a mapping of its own."""
    assert _probe("plain")["region"] == "mapping"


def test_a_setting_from_the_environment_wins() -> None:
    got = _probe("tune", MALLOC_MMAP_THRESHOLD_="131072")
    assert got["applied"]["MALLOC_MMAP_THRESHOLD_"] is False
    assert got["applied"]["MALLOC_TRIM_THRESHOLD_"] is True
    assert got["region"] == "mapping"  # glibc took the environment's 128 KiB threshold
