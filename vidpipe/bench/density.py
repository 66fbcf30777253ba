"""Stream density: how many live cameras vidpipe keeps up with, with latency to spare.

A local GStreamer RTSP server (``tests/rtsp.py``) serves the clip at its native rate, looped,
one mount per camera, camera k starting at ``frac(k x 0.618)`` of the clip (staggered: real
cameras are not in step, and streams all starting at the first frame made the motion gate's
bursts, not its average, set the latency; ``--density-start same`` puts them in step). A
trial of N cameras (the real daemon in a fresh ``worker``) passes when over the window every
camera was read in real time (captured >= ``CAPTURE_SHARE`` x stream fps), >= 99 % of its
frames due for detection were inferred (``SLACK_FRAMES`` cover those in flight at the window's
edges), and the p95 capture-to-result latency over all cameras is <= 200 ms. The largest
passing N is searched by doubling, then bisecting, once per ``detect_fps`` (the stream's rate
and 5, or ``--density-detect-fps``) and per vidpipe contender of ``--contenders``.

Dual-stream cameras (``--density-sub-clip``): each camera ``k`` also has a sub-stream mount
``sub-camk`` serving the sub clip, started at the same point as its main stream ``camk``; a
contender that detects on the sub-stream and records from the main one (a camera with
``inputs:``) reads it from ``PointSpec.extra["sub_url"]``, the others never open it.
``--density-repeats`` runs every search again, the contenders' order reversed on every other
repeat (ABBA), so that a drift of the machine's speed during the run falls on both alike.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

import vidpipe
from vidpipe.bench.common import PointSpec, cores

MIN_INFERRED_SHARE = 0.99
MAX_P95_MS = 200.0
CAPTURE_SHARE = 0.97  # one frame of slack per ~3 s window edge at 12.5 fps
SLACK_FRAMES = 3
MAX_CAMERAS = 96  # above twice the 2-core bf16 box's ungated 35 (vidpipe bench --mode density)
CRITERIA = {
    "min_inferred_share": MIN_INFERRED_SHARE,
    "max_p95_ms": MAX_P95_MS,
    "min_capture_share": CAPTURE_SHARE,
    "slack_frames": SLACK_FRAMES,
}


def load_rtsp_module() -> ModuleType:
    """``tests/rtsp.py`` of this checkout (the server is a test fixture, not package code).

    Raises:
        RuntimeError: not running from a repository checkout.
    """
    path = Path(vidpipe.__file__).resolve().parent.parent / "tests" / "rtsp.py"
    if not path.is_file():
        raise RuntimeError(f"density mode needs the repository checkout: {path} is missing")
    spec = importlib.util.spec_from_file_location("vidpipe_bench_rtsp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _proc_cpu_s(pid: int | None) -> float | None:
    """CPU seconds process ``pid`` has used (None: no such process)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def judge(
    result: dict[str, Any], stream_fps: float, sub_fps: float | None = None
) -> dict[str, Any]:
    """Whether one trial passes, and why not; a camera detecting on its sub-stream is read in
    real time at the sub-stream's rate ``sub_fps``."""
    reasons: list[str] = []
    if sub_fps is not None and result.get("info", {}).get("detect_stream") == "sub":
        stream_fps = sub_fps
    if result.get("error"):
        reasons.append(f"error: {result['error']}")
    counters = result.get("info", {}).get("camera_counters")
    window = result.get("window_s") or 0.0
    worst_share, worst_capture, worst_lag = 1.0, float("inf"), 0.0
    if not counters or window <= 0:
        reasons.append("no camera counters")
    else:
        for name, after in counters["after"].items():
            before = counters["before"][name]
            d = {k: after[k] - before.get(k, 0.0) for k in after}
            capture_fps = d["captured"] / window
            worst_lag = max(worst_lag, after.get("lag_s", 0.0))  # behind the stream at the end
            worst_capture = min(worst_capture, capture_fps)
            due = d["captured"] - d["decimated"] - d.get("no_motion", 0.0)  # skipped on purpose
            share = min(1.0, (d["inferred"] + SLACK_FRAMES) / due) if due > 0 else 0.0
            worst_share = min(worst_share, share)
            if capture_fps < CAPTURE_SHARE * stream_fps:
                lost = f" ({d['errors']:g} reconnects)" if d.get("errors") else ""
                reasons.append(
                    f"{name} captured {capture_fps:.1f} fps < stream {stream_fps:g}{lost}"
                )
            if share < MIN_INFERRED_SHARE:
                reasons.append(f"{name} inferred {100 * share:.1f}% of due frames")
    p95 = (result.get("latency_ms") or {}).get("p95")
    if p95 is None or p95 > MAX_P95_MS:
        reasons.append(f"p95 {p95 if p95 is None else round(p95)} ms > {MAX_P95_MS:g}")
    return {
        "cameras": result["spec"]["cameras"],
        "passes": not reasons,
        "reasons": reasons[:4],
        "fps": result.get("fps"),
        "cpu_percent": result.get("cpu_percent"),
        "others_cpu_percent": result.get("others_cpu_percent"),
        "p50_ms": (result.get("latency_ms") or {}).get("p50"),
        "p95_ms": p95,
        "worst_inferred_share": worst_share,
        "worst_capture_fps": None if worst_capture == float("inf") else worst_capture,
        "worst_lag_s": worst_lag,
        "server_cpu_percent": result.get("server_cpu_percent"),
        "drops": result.get("info", {}).get("drops"),
        # where the CPU went, by thread group, where a probe of benchmarks/ measured it
        "thread_cpu_percent": result.get("info", {}).get("thread_cpu_percent"),
        "latency_split_ms": result.get("info", {}).get("latency_split_ms"),
        "frame_waits": result.get("info", {}).get("frame_waits"),  # with --frame-waits
    }


def search(trial: Callable[[int], dict[str, Any]], max_cameras: int = MAX_CAMERAS) -> int:
    """Largest N in 1..max_cameras for which ``trial(N)["passes"]``; 0 if even 1 fails.

    Assumes that passing is monotonic in N (more cameras never make it easier).
    """
    good, bad = 0, max_cameras + 1
    n = 1
    while n < bad and n <= max_cameras:  # doubling, the last step capped at max_cameras
        if trial(n)["passes"]:
            good = n
            n = max_cameras + 1 if n == max_cameras else min(2 * n, max_cameras)
        else:
            bad = n
    while bad - good > 1:  # bisection
        mid = (good + bad) // 2
        if trial(mid)["passes"]:
            good = mid
        else:
            bad = mid
    return good


def fixed_counts(
    trial: Callable[[int], dict[str, Any]], counts: Iterable[int], ascending: bool = True
) -> int:
    """The largest of ``counts`` that passes (0 if none): each count tried once, ascending,
    or (``ascending=False``) in the order given, a count given twice tried twice."""
    order = sorted(set(counts)) if ascending else list(counts)
    passed = [n for n in order if trial(n)["passes"]]
    return max(passed, default=0)


def run_density(
    ctx: Any,
    clip: str,
    run_point: Callable[[PointSpec, Path, float], dict[str, Any]],
    say: Callable[[str], None],
    detect_rates: tuple[float | None, ...] = (None, 5.0),
) -> dict[str, Any]:
    """Search the largest camera count for each contender and ``detect_fps`` (None: the
    stream's rate)."""
    o = ctx.options
    rtsp = load_rtsp_module()
    if reason := rtsp.gst_rtsp_available():
        return {"clip": clip, "error": reason, "results": []}
    stream_fps = float(ctx.clip_info[clip]["fps"])
    start = "staggered" if o.density_staggered else "same"
    out = {"clip": clip, "stream_fps": stream_fps, "start": start, "criteria": CRITERIA}
    sub = o.density_sub_clip
    sub_fps = None if sub is None else float(ctx.clip_info[sub]["fps"])
    if sub is not None:
        out["sub_clip"] = sub
        out["sub_stream_fps"] = sub_fps
    with tempfile.TemporaryDirectory(prefix="vidpipe-density-") as tmp:
        served = _one_mount_per_camera(Path(tmp), ctx.clips[clip])
        if sub is not None:
            _one_mount_per_camera(Path(tmp), ctx.clips[sub], prefix="sub-")
        with rtsp.RtspServer(served, loop=True, stagger=o.density_staggered) as server:
            runs = partial(_run_with_server_cpu, run_point=run_point, tmp=Path(tmp),
                           server_pid=server.pid)  # fmt: skip
            extra = {"sub_url": server.url("sub-cam{i}")} if sub is not None else {}
            main_url = server.url("cam{i}")
            contenders = [c for c in o.contenders or ("vidpipe",) if c.startswith("vidpipe")]
            out["results"] = [
                {
                    **_search(ctx, clip, c, rate, main_url, stream_fps, runs, say, extra, sub_fps),
                    "repeat": r,
                }
                for r in range(o.density_repeats)
                for c in (contenders if r % 2 == 0 else contenders[::-1])
                for rate in o.density_detect_fps or detect_rates
            ]
    return out


def _search(
    ctx: Any,
    clip: str,
    contender: str,
    rate: float | None,
    url: str,
    stream_fps: float,
    run: Callable[..., dict[str, Any]],
    say: Callable[[str], None],
    extra: dict[str, Any],
    sub_fps: float | None = None,
) -> dict[str, Any]:
    """The largest passing camera count of ``contender`` at ``detect_fps`` ``rate``, and
    every trial's verdict; ``extra`` goes into every point's ``PointSpec.extra``; ``sub_fps``:
    the sub-stream's rate (``judge``)."""
    o = ctx.options
    trials: list[dict[str, Any]] = []
    fields = ctx.spec_fields()
    fields["extra"] = {**fields["extra"], **extra}

    def trial(n: int) -> dict[str, Any]:
        spec = PointSpec(contender, url, clip, n, o.seconds, max(3.0, o.warmup_s),
                         detect_fps=rate, **fields)  # fmt: skip
        result = run(spec, timeout_s=o.warmup_s + o.seconds + 240)
        verdict = judge(result, stream_fps, sub_fps)
        trials.append(verdict)
        say(
            f"density {contender} detect_fps={rate or stream_fps:g} N={n}: "
            f"{'pass' if verdict['passes'] else 'FAIL'} p95 {verdict['p95_ms'] or 0:.0f} ms, "
            f"inferred {100 * verdict['worst_inferred_share']:.1f}% "
            + "; ".join(verdict["reasons"])
        )
        return verdict

    fixed = o.density_cameras
    best = fixed_counts(trial, fixed, o.density_ascending) if fixed else search(trial)
    if not fixed or o.density_ascending:  # counts given in an order are reported in it
        trials.sort(key=lambda t: t["cameras"])
    return {"contender": contender, "detect_fps": rate or stream_fps, "max_cameras": best,
            "trials": trials}  # fmt: skip


def _one_mount_per_camera(tmp: Path, clip_path: Path, prefix: str = "") -> Path:
    """A ``videos`` directory under ``tmp`` with ``{prefix}cam0.mp4`` ... linked to the clip
    (the server starts a staggered mount by the number its name ends in: ``cam3`` and
    ``sub-cam3`` start at the same point)."""
    served = tmp / "videos"
    served.mkdir(exist_ok=True)
    # One mount per camera: two clients connecting at once to the same looped mount of
    # the test server are not reliable (the second opened after 7 s and got no frame).
    for i in range(MAX_CAMERAS):
        (served / f"{prefix}cam{i}.mp4").symlink_to(clip_path)
    return served


def _run_with_server_cpu(
    spec: PointSpec,
    run_point: Callable[[PointSpec, Path, float], dict[str, Any]],
    tmp: Path,
    timeout_s: float,
    server_pid: int | None,
) -> dict[str, Any]:
    """Run one point and add the RTSP server's CPU share over it (``server_cpu_percent``)."""
    cpu0 = _proc_cpu_s(server_pid)
    result = run_point(spec, tmp, timeout_s)
    cpu1 = _proc_cpu_s(server_pid)
    if cpu0 is not None and cpu1 is not None and result.get("window_s"):
        wall = result["window_s"] + spec.warmup_s + result.get("startup_s", 0)
        result["server_cpu_percent"] = 100.0 * (cpu1 - cpu0) / wall / cores()
    return result
