"""What every benchmark point shares: its spec, the machine, the clips and the meters."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vidpipe.bench.variants import CAMERA_VARIANTS

#: vidpipe with one setting changed, for A/B runs of a default (never in the default suite):
#: contender name -> ``inference`` section overrides.
VIDPIPE_VARIANTS: dict[str, dict[str, Any]] = {
    "vidpipe-2req": {"num_requests": 2},  # OPTIMAL_NUMBER_OF_INFER_REQUESTS on 2 cores
    # 2 x OPTIMAL on 2 cores, given explicitly: the whole pool in flight whatever the number
    # of cameras (the default caps requests in flight by the cameras with frames)
    "vidpipe-4req": {"num_requests": 4},
    "vidpipe-f32nchw": {"preprocess_in_graph": False},  # numpy u8 -> f32 NCHW, no PPP
    "vidpipe-ingraph": {"preprocess_in_graph": True},  # u8 NHWC, converted by OpenVINO
    "vidpipe-norewrite": {"graph_rewrites": False},  # the model as given (Focus slices kept)
    "vidpipe-latency": {"hint": "latency"},  # one stream on every core, one request in flight
    "vidpipe-throughput": {"hint": "throughput"},  # the hint auto picks for 2+ cameras, always
    "vidpipe-eager": {"decode_just_in_time": False},  # file cameras decode when their turn frees
    # postprocessing on a thread of its own, not the scheduler's (with the gate: density)
    "vidpipe-ppthread": {"postprocess_on_scheduler": False},
    "vidpipe-motion-ppthread": {"postprocess_on_scheduler": False},
    # the INT8 IR of ``--int8-model`` instead of the model (with the gate: the density)
    "vidpipe-int8": {},
    "vidpipe-motion-int8": {},
    # OpenVINO's stream threads free to run on any core (they are pinned one to a core)
    "vidpipe-nopin": {"cpu_pinning": False},
    "vidpipe-motion-nopin": {"cpu_pinning": False},
    "vidpipe-nolive": {},  # the live view (default on, no viewer) switched off: see below
    "vidpipe-wholeframe": {},  # whole-frame conversion: see below
}
#: contenders that run ``PointSpec.int8_model``, not ``PointSpec.model``
INT8_CONTENDERS = frozenset({"vidpipe-int8", "vidpipe-motion-int8"})
#: contender name -> ``capture`` section overrides.
VIDPIPE_CAPTURE_VARIANTS: dict[str, dict[str, Any]] = {
    # every inferred frame converted whole, then resized by OpenCV (as before stop 30)
    "vidpipe-wholeframe": {"convert_at_model_size": False},
}
#: contender name -> ``http.live`` section overrides.
VIDPIPE_LIVE_VARIANTS: dict[str, dict[str, Any]] = {"vidpipe-nolive": {"enabled": False}}
#: vidpipe with a feature on in every camera (``variants.CAMERA_VARIANTS``), for A/B runs.
VIDPIPE_CAMERA_VARIANTS: dict[str, dict[str, Any]] = CAMERA_VARIANTS


@dataclass(frozen=True)
class ContenderEntry:
    """How the harness runs one contender.

    Attributes:
        name: the contender's name in ``--contenders``, results and reports.
        factory: ``"module:callable"``; ``callable(spec)`` builds the contender in the worker
            process (``worker.Contender``). Imported there, by name.
        sys_path: a directory the worker process needs on ``sys.path`` to import ``factory``
            (None: importable as installed).
        reference: measured once per clip with no cameras (an inference ceiling), not per
            camera count.
        default: measured when ``--contenders`` is not given.
        unavailable: returns why the contender cannot run on this machine, or None.
    """

    name: str
    factory: str
    sys_path: str | None = None
    reference: bool = False
    default: bool = True
    unavailable: Callable[[], str | None] | None = None


_CONTENDERS: dict[str, ContenderEntry] = {}
#: Environment variables through which the harness names a point's contender to the worker.
FACTORY_ENV = "VIDPIPE_BENCH_FACTORY"
SYS_PATH_ENV = "VIDPIPE_BENCH_SYS_PATH"


def register_contender(entry: ContenderEntry) -> None:
    """Make ``entry`` runnable by the harness (``benchmarks/`` registers the peer designs).

    Raises:
        ValueError: another contender has that name.
    """
    if entry.name in _CONTENDERS and _CONTENDERS[entry.name] != entry:
        raise ValueError(f"benchmark contender {entry.name!r} is registered twice")
    _CONTENDERS[entry.name] = entry


def contender(name: str) -> ContenderEntry:
    """The registered contender ``name``. Raises ValueError listing the known ones."""
    try:
        return _CONTENDERS[name]
    except KeyError:
        raise ValueError(
            f"unknown contender {name!r}; registered: {', '.join(_CONTENDERS)}"
        ) from None


def all_contenders() -> tuple[str, ...]:
    """Every registered contender, references first, in registration order."""
    refs = tuple(n for n, e in _CONTENDERS.items() if e.reference)
    return refs + tuple(n for n, e in _CONTENDERS.items() if not e.reference)


def pipelines() -> tuple[str, ...]:
    """Registered contenders measured per camera count."""
    return tuple(n for n, e in _CONTENDERS.items() if not e.reference)


def references() -> tuple[str, ...]:
    """Registered contenders measured once per clip (no cameras)."""
    return tuple(n for n, e in _CONTENDERS.items() if e.reference)


def default_contenders() -> tuple[str, ...]:
    """What a run measures unless ``--contenders`` says otherwise."""
    return tuple(n for n in all_contenders() if _CONTENDERS[n].default)


_VIDPIPE_FACTORY = "vidpipe.bench.vidpipe_run:VidpipeRun"
register_contender(ContenderEntry("vidpipe", _VIDPIPE_FACTORY))
for _name in (*VIDPIPE_VARIANTS, *VIDPIPE_CAMERA_VARIANTS):
    register_contender(ContenderEntry(_name, _VIDPIPE_FACTORY, default=False))

_DERIVED = re.compile(r"^(?P<stem>.+)-(?P<height>\d{3,4})p\.mp4$")


@dataclass(frozen=True)
class PointSpec:
    """One measurement: a contender, a clip, a camera count, a window.

    Attributes:
        contender: a registered contender (``all_contenders()``).
        clip: path of the video file every camera reads (looped; unpaced unless ``realtime``).
        clip_name: the clip's name in reports.
        cameras: number of cameras (ignored by references).
        seconds: measurement window.
        warmup_s: time between start and the window.
        precision: OpenVINO inference precision, explicit (``f32``, ``bf16``, ``f16``).
        model: the ONNX model every contender uses.
        model_ir: the same model saved as OpenVINO IR (model_api cannot read ONNX without the
            ``onnx`` package).
        int8_model: the INT8 IR the ``INT8_CONTENDERS`` run instead of ``model`` (``vidpipe
            bench --int8-model``), so that INT8 and the default are measured in one run.
        labels: class names file.
        repeat: repeat index (for the record).
        score_threshold: minimum detection score, every contender.
        iou_threshold: NMS IoU threshold, every contender.
        stage_frames: frames timed per stage by a reference that measures stage costs.
        detect_fps: the cameras' ``detect_fps`` (vidpipe only; density mode).
        realtime: every camera reads its file at the file's frame rate, as a live camera
            delivers it (latency at a load both designs sustain), instead of unpaced.
    """

    contender: str
    clip: str
    clip_name: str
    cameras: int
    seconds: float
    warmup_s: float
    precision: str
    model: str
    model_ir: str
    labels: str
    repeat: int = 0
    int8_model: str | None = None
    score_threshold: float = 0.3
    iou_threshold: float = 0.45
    stage_frames: int = 300
    detect_fps: float | None = None
    realtime: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PointSpec:
        return cls(**data)


# ------------------------------------------------------------------------------ measuring


def rss_bytes() -> int:
    """Resident set size of this process (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def cpu_s() -> float:
    """User + system CPU time of this process, all threads."""
    t = os.times()
    return t.user + t.system


def machine_busy_s() -> float:
    """CPU seconds every process on the machine has spent busy (``/proc/stat``, all cores).

    Busy = user + nice + system + irq + softirq + steal. Minus this process's own CPU time over
    a window, it shows how much the rest of the machine competed with the point.
    """
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Snapshot:
    """Counters at one instant of a run."""

    t_mono: float
    t_wall: float
    cpu_s: float
    machine_busy_s: float
    frames: int
    rss: int

    @classmethod
    def take(cls, frames: int) -> Snapshot:
        return cls(time.monotonic(), time.time(), cpu_s(), machine_busy_s(), frames, rss_bytes())


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0-1) of already sorted values, nearest-rank; None when empty."""
    if not sorted_values:
        return None
    rank = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return float(sorted_values[rank])


@dataclass
class PointResult:
    """What a worker reports for one point (JSON-ready)."""

    spec: dict[str, Any]
    fps: float = 0.0
    frames: int = 0
    window_s: float = 0.0
    cpu_percent: float = 0.0
    others_cpu_percent: float = 0.0
    cpu_ms_per_frame: float | None = None
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    per_camera_fps: list[float] = field(default_factory=list)
    precision: str = ""
    rss_mb: dict[str, float] = field(default_factory=dict)
    allocations: dict[str, int] | None = None
    startup_s: float = 0.0
    loadavg_start: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------ machine


def machine_info() -> dict[str, Any]:
    """CPU model, core count and library versions, for the record."""
    model = "unknown"
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model == "unknown":
                    model = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu_model": model,
        "cores": os.cpu_count() or 1,
        "cores_available": len(os.sched_getaffinity(0)),
        "isa": sorted(f for f in flags if f.startswith(("avx", "amx")) or "vnni" in f),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
    for mod in ("openvino", "cv2", "numpy"):
        try:
            info[mod] = __import__(mod).__version__
        except (ImportError, AttributeError):
            info[mod] = None
    try:
        from importlib.metadata import version

        info["openvino_model_api"] = version("openvino-model-api")
    except Exception:  # absent or broken metadata: recorded as not installed
        info["openvino_model_api"] = None
    return info


def cores() -> int:
    return os.cpu_count() or 1


def loadavg_1m() -> float:
    return os.getloadavg()[0]


# ------------------------------------------------------------------------------ precision


def precision_name(value: Any) -> str:
    """OpenVINO's precision property as ``f32`` / ``bf16`` / ``f16``."""
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(name, name)


def default_precision(device: str = "CPU") -> str:
    """The precision OpenVINO picks on this machine when none is asked for."""
    import openvino as ov

    return precision_name(ov.Core().get_property(device, "INFERENCE_PRECISION_HINT"))


# ------------------------------------------------------------------------------ files


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vidpipe/bench``: derived clips and the IR model (never the repo)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    path = Path(base) / "vidpipe" / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolve_clip(name: str, videos: Path, cache: Path) -> Path:
    """The file of a clip name: an asset, or ``STEM-<H>p.mp4`` made from ``STEM.mp4`` with ffmpeg.

    Raises:
        FileNotFoundError: no such asset and nothing to derive it from.
        RuntimeError: ffmpeg is missing or failed.
    """
    direct = Path(name)
    if direct.is_file():
        return direct
    if (videos / name).is_file():
        return videos / name
    m = _DERIVED.match(name)
    if not m or not (videos / f"{m['stem']}.mp4").is_file():
        raise FileNotFoundError(f"clip {name!r} is neither in {videos} nor derivable")
    target = cache / name
    if target.is_file() and target.stat().st_size > 0:
        return target
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        raise RuntimeError(f"clip {name} must be made with ffmpeg, which is not installed")
    height = int(m["height"])
    width = (height * 16 // 9) // 2 * 2
    tmp = target.with_suffix(".part.mp4")
    cmd = [
        ffmpeg,
        "-y",
        "-loglevel",
        "error",
        "-i",
        str(videos / f"{m['stem']}.mp4"),
        "-vf",
        f"scale={width}:{height}",
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-pix_fmt",
        "yuv420p",
        "-an",
        str(tmp),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"ffmpeg failed making {name}: {proc.stderr.strip()[-500:]}")
    tmp.replace(target)
    return target


def ensure_ir(model: Path, cache: Path) -> Path:
    """The ONNX model saved as OpenVINO IR (f32 weights) in the cache, made once; an IR is
    used as it is."""
    import openvino as ov

    if model.suffix.lower() == ".xml":
        return model
    xml = cache / f"{model.stem}.xml"
    if xml.is_file() and xml.stat().st_mtime >= model.stat().st_mtime:
        return xml
    ov.save_model(ov.Core().read_model(str(model)), str(xml), compress_to_fp16=False)
    return xml


def clip_geometry(path: Path) -> tuple[int, int, float, int]:
    """``(width, height, fps, frame_count)`` of a video file."""
    import cv2

    cap = cv2.VideoCapture(str(path), cv2.CAP_FFMPEG)
    try:
        return (
            int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)),
            int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT)),
            float(cap.get(cv2.CAP_PROP_FPS)),
            int(cap.get(cv2.CAP_PROP_FRAME_COUNT)),
        )
    finally:
        cap.release()
