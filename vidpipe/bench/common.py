"""What every benchmark point shares: the contender registry, the point's spec and result,
the precision and the clips."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
    """Make ``entry`` runnable by the harness (``benchmarks/`` registers the other designs
    and vidpipe's variants).

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
    return references() + pipelines()


def pipelines() -> tuple[str, ...]:
    """Registered contenders measured per camera count."""
    return tuple(n for n, e in _CONTENDERS.items() if not e.reference)


def references() -> tuple[str, ...]:
    """Registered contenders measured once per clip (no cameras)."""
    return tuple(n for n, e in _CONTENDERS.items() if e.reference)


def default_contenders() -> tuple[str, ...]:
    """What a run measures unless ``--contenders`` says otherwise."""
    return tuple(n for n in all_contenders() if _CONTENDERS[n].default)


#: the real daemon; built by ``vidpipe_run.VidpipeRun`` (``benchmarks/`` adds its variants)
register_contender(ContenderEntry("vidpipe", "vidpipe.bench.vidpipe_run:VidpipeRun"))


@dataclass(frozen=True)
class PointSpec:
    """One measurement: a contender, a clip, a camera count, a window.

    Attributes:
        contender: a registered contender (``all_contenders()``).
        clip: path of the video file every camera reads (looped; unpaced unless ``realtime``),
            or an RTSP URL where ``{i}`` stands for the camera's index.
        clip_name: the clip's name in reports.
        cameras: number of cameras (ignored by references).
        seconds: measurement window.
        warmup_s: time between start and the window.
        precision: OpenVINO inference precision, explicit (``f32``, ``bf16``, ``f16``).
        model: the model every contender uses (ONNX, or an OpenVINO IR).
        labels: class names file.
        repeat: repeat index (for the record).
        score_threshold: minimum detection score, every contender.
        iou_threshold: NMS IoU threshold, every contender.
        detect_fps: the cameras' ``detect_fps`` (vidpipe only; density mode).
        realtime: every camera reads its file at the file's frame rate, as a live camera
            delivers it (latency at a load every contender sustains), instead of unpaced.
        extra: settings that only some registered contenders read (``harness.Extension``).
    """

    contender: str
    clip: str
    clip_name: str
    cameras: int
    seconds: float
    warmup_s: float
    precision: str
    model: str
    labels: str
    repeat: int = 0
    score_threshold: float = 0.3
    iou_threshold: float = 0.45
    detect_fps: float | None = None
    realtime: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

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


_DERIVED = re.compile(r"^(?P<stem>.+)-(?P<height>\d{3,4})p\.mp4$")


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
    cmd = [ffmpeg, "-y", "-loglevel", "error", "-i", str(videos / f"{m['stem']}.mp4")]
    cmd += ["-vf", f"scale={width}:{height}", "-c:v", "libx264", "-preset", "veryfast"]
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
