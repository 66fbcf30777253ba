"""What every benchmark point shares: the contender registry, the point's spec and result,
the meters (CPU time of the process and of the whole machine, resident memory, the machine
itself), the precision and the clips."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ContenderEntry:
    """How the harness runs one contender."""

    name: str  # in --contenders, results and reports
    # "module:callable": callable(spec) builds the contender in the worker (worker.Contender)
    factory: str
    sys_path: str | None = None  # the directory to import factory from (None: installed)
    default: bool = True  # measured when --contenders is not given


_CONTENDERS: dict[str, ContenderEntry] = {}
#: Environment variables through which the harness names a point's contender to the worker,
#: and the probes of its extensions (``harness.Extension.probes``)
FACTORY_ENV = "VIDPIPE_BENCH_FACTORY"
SYS_PATH_ENV = "VIDPIPE_BENCH_SYS_PATH"
PROBES_ENV = "VIDPIPE_BENCH_PROBES"
PROBE_PATH_ENV = "VIDPIPE_BENCH_PROBE_PATH"


def register_contender(entry: ContenderEntry) -> None:
    """Make ``entry`` runnable by the harness. Raises ValueError: another has that name."""
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
    """Every registered contender, in registration order."""
    return tuple(_CONTENDERS)


def default_contenders() -> tuple[str, ...]:
    """What a run measures unless ``--contenders`` says otherwise."""
    return tuple(n for n, e in _CONTENDERS.items() if e.default)


#: the real daemon; built by ``vidpipe_run.VidpipeRun`` (``benchmarks/`` adds its variants)
register_contender(ContenderEntry("vidpipe", "vidpipe.bench.vidpipe_run:VidpipeRun"))


@dataclass(frozen=True)
class PointSpec:
    """One measurement: a contender, a clip, a camera count, a window (JSON to the worker)."""

    contender: str  # a registered contender (``all_contenders()``)
    # the video file every camera reads, looped, or an RTSP URL where {i} is the camera index
    clip: str
    clip_name: str  # the clip's name in reports
    cameras: int  # 0: a contender that runs none, such as an inference ceiling
    seconds: float  # the measurement window
    warmup_s: float  # between start and the window
    precision: str  # OpenVINO's inference precision, explicit: f32, bf16, f16
    model: str  # ONNX, or an OpenVINO IR
    labels: str  # the class names file
    repeat: int = 0
    score_threshold: float = 0.3
    iou_threshold: float = 0.45
    detect_fps: float | None = None  # the cameras' detect_fps (density mode)
    # files read at their frame rate, as a live camera delivers them, instead of unpaced
    realtime: bool = False
    extra: dict[str, Any] = field(default_factory=dict)  # read by some contenders only

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PointSpec:
        return cls(**data)


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


def machine_info() -> dict[str, Any]:
    """CPU model, core count and library versions, for the record."""
    cpuinfo: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:  # the first CPU's lines
                key, _, value = line.partition(":")
                cpuinfo.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = cpuinfo.get("flags", "").split()
    info: dict[str, Any] = {
        "cpu_model": cpuinfo.get("model name", "unknown"),
        "cores": cores(),
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
    return info


def cores() -> int:
    return os.cpu_count() or 1


def loadavg_1m() -> float:
    return os.getloadavg()[0]


def precision_name(value: Any) -> str:
    """OpenVINO's precision property as ``f32`` / ``bf16`` / ``f16``."""
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}.get(name, name)


def default_precision(device: str = "CPU") -> str:
    """The precision OpenVINO picks on this machine when none is asked for."""
    import openvino as ov

    return precision_name(ov.Core().get_property(device, "INFERENCE_PRECISION_HINT"))


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/vidpipe/bench``: derived clips and models (never the repository)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    path = Path(base) / "vidpipe" / "bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


_DERIVED = re.compile(
    r"^(?P<stem>.+)-(?P<height>\d{3,4})p(?P<fps>\d{1,2})?(?:-g(?P<gop>\d{1,3}))?\.mp4$"
)


def resolve_clip(name: str, videos: Path, cache: Path) -> Path:
    """The file of a clip name: an asset, or ``STEM-<H>p.mp4`` made from ``STEM.mp4`` with ffmpeg
    (``STEM-<H>p<F>.mp4``: also at F frames a second, as a camera's sub-stream set to a lower
    rate sends it; from a faster source, frames are dropped, not invented; ``-g<N>`` before
    ``.mp4``: as an IP camera encodes, a keyframe every N frames and no B-frames).

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
    cmd = [ffmpeg, "-y", "-loglevel", "error", "-i", str(videos / f"{m['stem']}.mp4")]
    scale = f"scale={width}:{height}" + (f",fps={int(m['fps'])}" if m["fps"] else "")
    cmd += ["-vf", scale, "-c:v", "libx264", "-preset", "veryfast"]
    if m["gop"]:
        cmd += ["-g", m["gop"], "-keyint_min", m["gop"], "-sc_threshold", "0", "-bf", "0"]
    cmd += ["-pix_fmt", "yuv420p", "-an", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"ffmpeg failed making {name}: {proc.stderr.strip()[-500:]}")
    tmp.replace(target)
    return target


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
