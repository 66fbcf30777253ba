"""The two-camera re-identification scene, offline: camera A is the walkway clip, camera B the
same clip 30 s later, mirrored, cropped to 80 % and colour-shifted (made here with ffmpeg).

Shared by ``tests/integration/test_reid_scene_offline.py`` and ``benchmarks/reid_scene.py``.
Nothing here runs the daemon: the real detector (``vidpipe.plan.detector``) and the real
tracker (``CameraTracker``, default ``TrackingConfig``) make each camera's person tracks, each
track gets crops as the secondary stage takes them (one a second of video time at most, at
most 8, boxes of at least 32x64), the reid model embeds them through OpenVINO, and a track is
the mean of its normalised embeddings. :func:`assign_global_ids` then plays the cross-camera
matching in the order tracks end, as the daemon does.

Camera B, and why it is made this way:

- **Mirrored** (``hflip``): people walk the other way, the usual stand-in for another view.
- **Cropped to 80 %**: the centre 80 % of width and height, scaled back to the clip's size: a
  second camera of the same resolution with a narrower field of view (1.25x zoom). Scaling back
  resamples every person (softer, larger), which a crop kept at its own size would not; the
  detector sees the same frame size on both cameras. The crop cuts the tops of heads off: the
  people stand near the top of the frame.
- **Colour-shifted**: hue turned 20 degrees, saturation x1.2, and a warmer white balance
  (``colorbalance``): another sensor, another white point.
- **30 s later**: 30 s of the first frame (no one in it) before the clip (``tpad``), so B's
  frame at time t is A's frame at t - 30 s. One file does it both ways a daemon runs files:
  paced (``realtime: true``) the people reach B 30 s of wall time after A; unpaced, 300
  frames after, and since both cameras infer at about the same rate each person still ends
  on B after ending on A. The still start costs a daemon little: the motion gate skips it.

The clip's people come one at a time, so who is who is their order: :func:`people_by_time`
groups a camera's tracks into visits (tracks apart by more than ``gap_s`` are different
people). Everything is derived from tracks, no boxes are written down here.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import numpy.typing as npt

DELAY_S = 30.0
CROP = 0.8
HUE_DEG = 20
SATURATION = 1.2
PEOPLE = 6
CLIP = "one-by-one-person-detection.mp4"
REID_MODEL = "person-reidentification-retail-0288.onnx"
PERSON = 0  # COCO class id

# The secondary stage's defaults (vidpipe.config.models.SecondaryConfig)
EVERY_S = 1.0
MAX_PER_TRACK = 8
MIN_BOX = (32, 64)

Vector = npt.NDArray[np.float32]


def _even(x: float) -> int:
    return int(x) // 2 * 2


def video_size(path: Path) -> tuple[int, int, float]:
    """Width, height and frame rate of a video file."""
    cap = cv2.VideoCapture(str(path))
    try:
        w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        fps = float(cap.get(cv2.CAP_PROP_FPS))
    finally:
        cap.release()
    if w <= 0 or h <= 0 or fps <= 0:
        raise ValueError(f"{path}: not a readable video")
    return w, h, fps


def camera_b_filter(width: int, height: int, delay_s: float = DELAY_S) -> str:
    """The ffmpeg filter chain that turns camera A's picture into camera B's."""
    return ",".join(
        (
            "hflip",
            f"crop={_even(width * CROP)}:{_even(height * CROP)}",  # centred by default
            f"scale={width}:{height}",
            f"hue=h={HUE_DEG}:s={SATURATION}",
            "colorbalance=rs=0.06:bs=-0.06:rm=0.06:bm=-0.06",
            f"tpad=start_duration={delay_s:g}:start_mode=clone",
        )
    )


def make_camera_b(src: Path, dst: Path, delay_s: float = DELAY_S) -> Path:
    """Camera B from camera A's clip ``src``, written to ``dst`` (H.264 mp4).

    Raises:
        RuntimeError: ffmpeg is not installed.
        subprocess.CalledProcessError: ffmpeg failed.
    """
    if shutil.which("ffmpeg") is None:
        raise RuntimeError("ffmpeg is required (scripts/setup-system.sh installs it)")
    w, h, _ = video_size(src)
    subprocess.run(
        ["ffmpeg", "-v", "error", "-y", "-i", str(src), "-vf", camera_b_filter(w, h, delay_s),
         "-an", "-c:v", "libx264", "-preset", "veryfast", "-crf", "20", "-pix_fmt", "yuv420p",
         str(dst)],
        check=True,
    )  # fmt: skip
    return dst


# ------------------------------------------------------------------------------ tracks and crops


@dataclass
class SceneTrack:
    """One confirmed person track of a camera, with the crops the secondary stage took.

    Attributes:
        camera: ``"A"`` or ``"B"``.
        track_id: the tracker's id.
        t_first_s: video time of its first observation (B's clock includes the delay).
        t_last_s: video time of its last observation: when it ends, near enough.
        crops: BGR crops, one a second at most, at most 8.
        crop_s: video time of each crop.
        embeddings: ``(K, 256)`` normalised embeddings of ``crops`` (after :func:`embed_tracks`).
    """

    camera: str
    track_id: int
    t_first_s: float
    t_last_s: float
    crops: list[np.ndarray] = field(default_factory=list)
    crop_s: list[float] = field(default_factory=list)
    embeddings: Vector = field(default_factory=lambda: np.zeros((0, 256), np.float32))
    _last_crop_s: float | None = None

    @property
    def mean(self) -> Vector:
        """The normalised mean of the normalised embeddings (the secondary stage's vector)."""
        m = self.embeddings.mean(axis=0)
        return (m / np.linalg.norm(m)).astype(np.float32)

    @property
    def name(self) -> str:
        return f"{self.camera}{self.track_id}"

    def offer(self, t_s: float, frame: np.ndarray, box: Sequence[float]) -> None:
        """A frame where the track is seen at ``box``: crop it if one is due."""
        self.t_last_s = t_s
        if len(self.crops) >= MAX_PER_TRACK:
            return
        if self._last_crop_s is not None and t_s - self._last_crop_s < EVERY_S:
            return
        h, w = frame.shape[:2]
        x1, y1 = max(0, round(box[0])), max(0, round(box[1]))
        x2, y2 = min(w, round(box[2])), min(h, round(box[3]))
        if x2 - x1 < MIN_BOX[0] or y2 - y1 < MIN_BOX[1]:
            return
        self.crops.append(frame[y1:y2, x1:x2].copy())
        self.crop_s.append(t_s)
        self._last_crop_s = t_s


def _frames(video: Path, every: int) -> Iterator[tuple[int, np.ndarray]]:
    """Every ``every``-th decoded frame of ``video`` with its index."""
    cap = cv2.VideoCapture(str(video))
    try:
        index = 0
        while True:
            ok, frame = cap.read()
            if not ok:
                return
            if index % every == 0:
                yield index, frame
            index += 1
    finally:
        cap.release()


def detector_config(assets_dir: Path, precision: str | None) -> Any:
    """The daemon's default YOLOX detector config, at ``precision`` (None: the CPU's own)."""
    from vidpipe.config import Config, ModelConfig, OpenVINOConfig

    models = assets_dir / "models"
    model = ModelConfig(path=models / "yolox_nano.onnx", labels=models / "coco80.txt")
    inference = OpenVINOConfig(precision=precision or "auto")
    return Config(model=model, inference=inference)


def camera_tracks(
    video: Path, camera: str, assets_dir: Path, every: int = 1, precision: str | None = None
) -> list[SceneTrack]:
    """Confirmed person tracks of one camera's file with their crops (no embeddings yet).

    Args:
        video: the camera's file.
        camera: its name in the scene (``"A"``, ``"B"``).
        assets_dir: the assets directory (the detector).
        every: detect on every ``every``-th frame (``detect_fps`` decimation; the tracker is
            told the gaps).
        precision: the detector's OpenVINO precision, None for the CPU's default.
    """
    from vidpipe.config import TrackingConfig
    from vidpipe.plan import detector
    from vidpipe.track.tracker import CameraTracker
    from vidpipe.types import Frame, FrameResult

    _, _, fps = video_size(video)
    tracker = CameraTracker(TrackingConfig())
    tracks: dict[int, SceneTrack] = {}
    done: dict[int, FrameResult] = {}
    waiting: dict[int, np.ndarray] = {}  # frames in flight (results carry no image here)

    def track(result: FrameResult) -> None:
        obs = tracker.update(result.detections, result.seq, epoch=0).observed
        t_s = result.seq / fps
        image = waiting.pop(result.seq)
        for tid, cid, box in zip(
            obs.tracker_id.tolist(), obs.class_id.tolist(), obs.xyxy, strict=True
        ):
            if cid == PERSON:
                tracks.setdefault(tid, SceneTrack(camera, tid, t_s, t_s)).offer(t_s, image, box)

    def drain() -> None:  # results in frame order: the tracker needs them so
        while waiting and (first := next(iter(waiting))) in done:
            track(done.pop(first))

    scheduler = detector(detector_config(assets_dir, precision), lambda r: done.update({r.seq: r}))
    try:
        for seq, image in _frames(video, every):
            waiting[seq] = image
            scheduler.submit(Frame(camera=camera, seq=seq, t_capture=0.0, image=image))
            drain()
        scheduler.stop(60.0)
        drain()
    finally:
        scheduler.close()
    if waiting:
        raise RuntimeError(f"{camera}: {len(waiting)} frames got no result")
    return sorted((t for t in tracks.values() if t.crops), key=lambda t: t.t_first_s)


def reid_embedder(assets_dir: Path, precision: str | None) -> Callable[[np.ndarray], Vector]:
    """BGR crop -> normalised embedding, by the reid model compiled with OpenVINO on the CPU
    (``precision`` f32 or bf16 forced, None for the CPU's default)."""
    import openvino as ov

    config = {} if precision is None else {"INFERENCE_PRECISION_HINT": precision}
    model = ov.Core().compile_model(str(assets_dir / "models" / REID_MODEL), "CPU", config)

    def embed(crop: np.ndarray) -> Vector:
        x = cv2.resize(crop, (128, 256)).astype(np.float32)[None]  # NHWC, BGR, 0-255
        v = np.asarray(model(x)[0], np.float32).reshape(-1)
        return (v / np.linalg.norm(v)).astype(np.float32)

    return embed


def embed_tracks(tracks: Sequence[SceneTrack], embed: Callable[[np.ndarray], Vector]) -> None:
    for t in tracks:
        t.embeddings = np.stack([embed(c) for c in t.crops])


# ------------------------------------------------------------------------------ who is who


def people_by_time(tracks: Sequence[SceneTrack], gap_s: float = 3.0) -> list[list[SceneTrack]]:
    """A camera's tracks grouped into people, in time order: the clip's people come one at a
    time, so a track that starts more than ``gap_s`` after every earlier track has ended is the
    next person; one that starts sooner is the same person again (an id switch)."""
    people: list[list[SceneTrack]] = []
    end = -np.inf
    for t in sorted(tracks, key=lambda t: t.t_first_s):
        if t.t_first_s > end + gap_s:
            people.append([])
        people[-1].append(t)
        end = max(end, t.t_last_s)
    return people


def assign_global_ids(
    tracks: Sequence[SceneTrack], threshold: float, window_s: float = 600.0
) -> dict[str, int]:
    """Global ids as the daemon gives them: as each track ends, it is compared with the tracks
    of other cameras that ended before it within ``window_s``; the best one at ``threshold``
    or above gives its global id, otherwise the track gets a new one. Keyed by track name."""
    gid: dict[str, int] = {}
    ended: list[SceneTrack] = []
    for t in sorted(tracks, key=lambda t: t.t_last_s):
        others = [o for o in ended if o.camera != t.camera and o.t_last_s >= t.t_last_s - window_s]
        sims = [float(t.mean @ o.mean) for o in others]
        if sims and max(sims) >= threshold:
            gid[t.name] = gid[others[int(np.argmax(sims))].name]
        else:
            gid[t.name] = len(gid) + 1
        ended.append(t)
    return gid


@dataclass(frozen=True)
class SceneScore:
    """How camera B's people fared.

    Attributes:
        right: per B person (time order): every track of theirs got a global id of the same
            person's tracks on A.
        merged: pairs of different people (by their time-order number, 1-based) that share a
            global id, on either camera.
    """

    right: tuple[bool, ...]
    merged: tuple[tuple[int, int], ...]

    @property
    def n_right(self) -> int:
        return sum(self.right)


def score_scene(
    people_a: Sequence[Sequence[SceneTrack]],
    people_b: Sequence[Sequence[SceneTrack]],
    gid: dict[str, int],
) -> SceneScore:
    """Score global ids against the time-order truth (person k on B is person k on A)."""
    owner: dict[int, set[int]] = {}
    for people in (people_a, people_b):
        for k, tracks in enumerate(people, start=1):
            for t in tracks:
                owner.setdefault(gid[t.name], set()).add(k)
    right = []
    for k, tracks in enumerate(people_b):
        ids_a = {gid[t.name] for t in people_a[k]} if k < len(people_a) else set()
        right.append(all(gid[t.name] in ids_a for t in tracks))
    merged = {(a, b) for ks in owner.values() for a in ks for b in ks if a < b}
    return SceneScore(tuple(right), tuple(sorted(merged)))


def cross_similarities(
    people_a: Sequence[Sequence[SceneTrack]], people_b: Sequence[Sequence[SceneTrack]]
) -> tuple[list[float], list[float]]:
    """Track-mean cosine similarities of every B track with every A track: same person, and
    different people."""
    same: list[float] = []
    diff: list[float] = []
    for i, tb in enumerate(people_b):
        for j, ta in enumerate(people_a):
            sims = [float(b.mean @ a.mean) for b in tb for a in ta]
            (same if i == j else diff).extend(sims)
    return same, diff
