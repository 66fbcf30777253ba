"""The secondary stage with its real threads and the real reid model (OpenVINO), on real
results: the walkway clip's frames, the real detector's boxes and the real tracker's tracks.

Camera ``a`` is the clip's first 44 s (two people, one after the other), detected on every
other frame; camera ``b`` is the same frames mirrored, a minute later (the usual stand-in for
the same people seen by another camera). No assertion holds the model's output at one
precision: embeddings are compared with the same model's offline output on the same crops.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.precision import forced_precision, with_precision
from vidpipe.config import Config, ConfigError
from vidpipe.infer.base import BackendError
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.secondary import SecondaryStage, build_secondary, crop_rules
from vidpipe.secondary.embedder import OnEmbedded, ReidEmbedder
from vidpipe.secondary.metrics import secondary_metrics
from vidpipe.sinks.record import event_record, frame_record
from vidpipe.track.stage import TrackingStage, build_scenes
from vidpipe.types import Detections, FrameResult, ReidEvent, TrackSummary

pytestmark = pytest.mark.timeout(300)

LAST_FRAME = 440  # two visits: frames 90-180 and 250-430
EVERY = 2  # detect on every other frame (5 fps)
FPS = 10.0
T0 = 1_800_000_000.0
B_LATER_S = 60.0
CLIP = "one-by-one-person-detection.mp4"
REID = "person-reidentification-retail-0288.onnx"


def config(assets_dir: Path, **secondary: Any) -> Config:
    models = assets_dir / "models"
    clip = assets_dir / "videos" / CLIP
    doc = {
        "model": {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")},
        "models": {"reid": {"path": str(models / REID), "type": "reid"}},
        "secondary": [{"model": "reid", **secondary}],
        "cameras": [
            {"name": name, "url": f"file://{clip}", "tracking": {"enabled": True}}
            for name in ("a", "b")
        ],
    }
    return Config.model_validate(with_precision(doc))


@pytest.fixture(scope="module")
def labels(assets_dir: Path) -> Labels:
    return Labels.load(assets_dir / "models" / "coco80.txt")


def frames(assets_dir: Path) -> Iterator[tuple[int, np.ndarray]]:
    cap = cv2.VideoCapture(str(assets_dir / "videos" / CLIP))
    try:
        for seq in range(LAST_FRAME + 1):
            ok, frame = cap.read()
            assert ok, f"{CLIP}: frame {seq}"
            if seq % EVERY == 0:
                yield seq, frame
    finally:
        cap.release()


@pytest.fixture(scope="module")
def detections(assets_dir: Path) -> dict[int, Detections]:
    """The real detector's boxes of each frame used (camera a's)."""
    from vidpipe.plan import detector
    from vidpipe.types import Frame

    found: dict[int, Detections] = {}
    scheduler = detector(config(assets_dir), lambda r: found.update({r.seq: r.detections}))
    try:
        for seq, image in frames(assets_dir):
            scheduler.submit(Frame(camera="a", seq=seq, t_capture=0.0, image=image))
        assert scheduler.stop(60.0)
    finally:
        scheduler.close()
    assert len(found) == LAST_FRAME // EVERY + 1
    return found


def mirrored(det: Detections, width: int) -> Detections:
    xyxy = det.xyxy.copy()
    xyxy[:, [0, 2]] = width - det.xyxy[:, [2, 0]]
    return Detections(xyxy, det.score, det.class_id)


def results(
    cfg: Config, assets_dir: Path, labels: Labels, detections: dict[int, Detections], camera: str
) -> Iterator[FrameResult]:
    """Camera ``camera``'s results as the tracking stage hands them on (``b``: mirrored, a
    minute later). Capture and wall times follow the video's clock."""
    tracking = TrackingStage(build_scenes(cfg, lambda _: labels, {}, Metrics()), Metrics())
    later = B_LATER_S if camera == "b" else 0.0
    for seq, image in frames(assets_dir):
        det = detections[seq]
        if camera == "b":
            image, det = np.ascontiguousarray(image[:, ::-1]), mirrored(det, image.shape[1])
        t = seq / FPS + later
        out = tracking(FrameResult(camera, seq, t, t + 0.05, T0 + t, image.shape[1],
                                   image.shape[0], det, labels, image))  # fmt: skip
        yield out
    # the clip goes on, nobody stays: every track ends (a reconnect ends them all)
    yield tracking(empty_result(camera, LAST_FRAME + EVERY, labels))


def empty_result(camera: str, seq: int, labels: Labels) -> FrameResult:
    """Frame ``seq`` of ``camera`` after the clip: nobody in it, a new stream epoch."""
    t = seq / FPS + (B_LATER_S if camera == "b" else 0.0)
    return FrameResult(camera, seq, t, t, T0 + t, 768, 432, Detections.empty(), labels,
                       np.zeros((432, 768, 3), np.uint8), epoch=1)  # fmt: skip


class Recorder:
    """The real embedder, with every submission and answer kept; ``gate`` (when given) holds
    the model's feeder until it is set: a model busy for as long as the test wants."""

    def __init__(self, inner: ReidEmbedder, gate: threading.Event | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.gate = gate
        self.submitted: list[tuple[str, int, float, np.ndarray]] = []  # camera, track, wall, crop
        self.answers: list[tuple[np.ndarray, np.ndarray]] = []  # crop, vector

    def submit(self, crop_bgr: np.ndarray, tag: Any, on_done: OnEmbedded) -> None:
        if self.gate is not None:
            assert self.gate.wait(60)
        self.submitted.append((tag.camera, tag.track_id, tag.wall_time, crop_bgr))

        def done(t: Any, vector: Any) -> None:
            self.answers.append((crop_bgr, vector))
            on_done(t, vector)

        self.inner.submit(crop_bgr, tag, done)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def recorded_stage(
    cfg: Config, labels: Labels, metrics: Metrics, gate: threading.Event | None = None
) -> tuple[SecondaryStage, Recorder]:
    """The stage ``build_secondary`` would make of ``cfg``, over a ``Recorder``."""
    embedder = ReidEmbedder("reid", cfg.models["reid"].path, forced_precision() or "auto")
    recorder = Recorder(embedder, gate)
    stage = SecondaryStage(
        crop_rules(cfg, lambda _: labels),
        {"reid": recorder},
        cfg.reid,
        secondary_metrics(metrics),
        {"reid": cfg.secondary[0].queue_size},
    )
    return stage, recorder


def count(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, {"model": "reid", **labels}) or 0.0


def offline(assets_dir: Path) -> Callable[[np.ndarray], np.ndarray]:
    """The same model, compiled here, run on one crop as the model card says."""
    import openvino as ov

    props = {} if forced_precision() is None else {"INFERENCE_PRECISION_HINT": forced_precision()}
    model = ov.Core().compile_model(str(assets_dir / "models" / REID), "CPU", props)

    def embed(crop: np.ndarray) -> np.ndarray:
        v = np.asarray(model(cv2.resize(crop, (128, 256)).astype(np.float32)[None])[0])
        return (v / np.linalg.norm(v)).reshape(-1)

    return embed


def run(
    stage: SecondaryStage, source: Iterator[FrameResult]
) -> list[tuple[FrameResult, FrameResult]]:
    """Each result in, and what the stage handed on."""
    pairs = []
    for result in source:
        out = stage(result)
        assert out is not None
        pairs.append((result, out))
    return pairs


def test_crops_per_track_keep_every_s_and_max_per_track(
    assets_dir: Path, labels: Labels, detections: dict[int, Detections]
) -> None:
    cfg = config(assets_dir, every_s=1.5, max_per_track=4)
    metrics = Metrics()
    stage, recorder = recorded_stage(cfg, labels, metrics)
    try:
        run(stage, results(cfg, assets_dir, labels, detections, "a"))
    finally:
        assert stage.close(30.0)
    per_track: dict[int, list[float]] = {}
    for _, tid, wall, crop in recorder.submitted:
        per_track.setdefault(tid, []).append(wall)
        assert crop.shape[0] >= 64 and crop.shape[1] >= 32  # min_box
    assert per_track, "no track was cropped"
    assert max(len(w) for w in per_track.values()) == 4  # the cap was reached, and held
    for walls in per_track.values():
        assert np.diff(walls).min(initial=99) >= 1.5 - 1e-6
    assert count(metrics, "vidpipe_secondary_crops_submitted_total") == len(recorder.submitted)
    assert count(metrics, "vidpipe_secondary_crops_embedded_total") == len(recorder.submitted)


def test_embeddings_are_the_models_own_on_the_same_crops(
    assets_dir: Path, labels: Labels, detections: dict[int, Detections]
) -> None:
    cfg = config(assets_dir)
    stage, recorder = recorded_stage(cfg, labels, Metrics())
    try:
        pairs = run(stage, results(cfg, assets_dir, labels, detections, "a"))
    finally:
        assert stage.close(30.0)
    embed = offline(assets_dir)
    assert recorder.answers
    for crop, vector in recorder.answers:
        assert float(vector @ embed(crop)) > 0.99
    # a track's summary is the normalised mean of its crops' embeddings
    summaries = [e for _, out in pairs for e in out.events if isinstance(e, TrackSummary)]
    assert summaries
    crops_of: dict[int, list[np.ndarray]] = {}
    for _, tid, _, crop in recorder.submitted:
        crops_of.setdefault(tid, []).append(crop)
    for s in summaries:
        assert s.crops == len(crops_of[s.track_id])
        mean = np.mean([embed(c) for c in crops_of[s.track_id]], axis=0)
        assert float(s.embedding @ mean / np.linalg.norm(mean)) > 0.99
        assert s.label == "person" and s.model == "reid"
        assert s.first_seen <= s.last_seen


def test_a_full_queue_drops_and_counts_while_every_result_passes_at_once_held_model(
    assets_dir: Path, labels: Labels, detections: dict[int, Detections]
) -> None:
    cfg = config(assets_dir, every_s=0.1, max_per_track=1000, queue_size=2)
    metrics = Metrics()
    gate = threading.Event()  # the model is busy until the whole clip has passed
    stage, recorder = recorded_stage(cfg, labels, metrics, gate)
    try:
        pairs = run(stage, results(cfg, assets_dir, labels, detections, "a"))
        gate.set()
    finally:
        gate.set()
        assert stage.close(30.0)
    assert len(pairs) == LAST_FRAME // EVERY + 2  # every result came out, in the same call
    for before, after in pairs:
        assert after.detections is before.detections
        assert (after.camera, after.seq, after.image) == (before.camera, before.seq, before.image)
    busy = count(metrics, "vidpipe_secondary_dropped_total", reason="secondary_busy")
    submitted = count(metrics, "vidpipe_secondary_crops_submitted_total")
    assert busy > 50
    # two waited in the queue and one was in the feeder's hands when the model was freed
    assert submitted <= 3 == len(recorder.submitted)
    assert count(metrics, "vidpipe_secondary_crops_embedded_total") == submitted


def test_close_leaves_nothing_in_flight_and_counts_what_it_abandons(
    assets_dir: Path, labels: Labels, detections: dict[int, Detections]
) -> None:
    cfg = config(assets_dir, every_s=0.1, max_per_track=1000, queue_size=16)
    metrics = Metrics()
    gate = threading.Event()
    stage, recorder = recorded_stage(cfg, labels, metrics, gate)
    run(stage, results(cfg, assets_dir, labels, detections, "a"))
    threading.Timer(0.5, gate.set).start()  # the model frees up after close() gave up
    assert not stage.close(0.2)
    assert recorder.inner.in_flight == 0
    assert stage.lanes["reid"].depth == 0
    submitted = count(metrics, "vidpipe_secondary_crops_submitted_total")
    embedded = count(metrics, "vidpipe_secondary_crops_embedded_total")
    abandoned = count(metrics, "vidpipe_secondary_dropped_total", reason="shutdown")
    assert submitted == 16 + 1 == embedded + abandoned
    assert abandoned >= 15


def settled(
    stage: SecondaryStage, metrics: Metrics, labels: Labels, camera: str
) -> list[tuple[FrameResult, FrameResult]]:
    """Once every crop submitted so far is embedded, one more (empty) result of ``camera``:
    a track that ended with crops still in flight is summarised at the camera's next result,
    which a live camera always sends and the clip's end does not."""
    deadline = time.monotonic() + 60
    while count(metrics, "vidpipe_secondary_crops_embedded_total") < count(
        metrics, "vidpipe_secondary_crops_submitted_total"
    ):
        assert time.monotonic() < deadline, "the model never answered every crop"
        time.sleep(0.05)
    return run(stage, iter([empty_result(camera, LAST_FRAME + 2 * EVERY, labels)]))


def test_two_cameras_share_global_ids_and_the_records_carry_them(
    assets_dir: Path, labels: Labels, detections: dict[int, Detections]
) -> None:
    cfg = config(assets_dir, include_embeddings=True)
    metrics = Metrics()
    stage = build_secondary(cfg, lambda _: labels, metrics)
    assert stage is not None
    try:
        pairs = run(stage, results(cfg, assets_dir, labels, detections, "a"))
        pairs += settled(stage, metrics, labels, "a")
        pairs += run(stage, results(cfg, assets_dir, labels, detections, "b"))
        pairs += settled(stage, metrics, labels, "b")
    finally:
        assert stage.close(30.0)
    outs = [out for _, out in pairs]
    events = [e for out in outs for e in out.events]
    summaries = {(s.camera, s.track_id): s for s in events if isinstance(s, TrackSummary)}
    matches = [e for e in events if isinstance(e, ReidEvent)]
    assert matches, "no track of b matched a track of a"
    for m in matches:
        assert (m.camera, m.matched_camera) == ("b", "a")
        mine, theirs = summaries[("b", m.track_id)], summaries[("a", m.matched_track_id)]
        # the same person: b's track lies in a's visit, a minute later
        overlap = min(mine.last_seen - B_LATER_S, theirs.last_seen) - max(
            mine.first_seen - B_LATER_S, theirs.first_seen
        )
        assert overlap > 0, (m, mine, theirs)
        assert mine.global_id == theirs.global_id == m.global_id
        record = event_record(m)
        assert record["event"] == "reid" and record["global_id"] == m.global_id
    # frame records name the global id of every track that has one
    with_gid = [d for out in outs for d in frame_record(out)["detections"] if "global_id" in d]
    assert with_gid
    by_track = {(out.camera, t): g for out in outs for t, g in out.global_ids.items()}
    for (camera, tid), s in summaries.items():
        assert by_track.get((camera, tid), s.global_id) == s.global_id
        record = event_record(s)
        assert record["event"] == "track" and record["global_id"] == s.global_id
        vector = np.frombuffer(base64.b64decode(record["embedding"]), "<f2").astype(np.float32)
        assert vector.shape == (256,) and float(vector @ s.embedding) > 0.999


@pytest.mark.parametrize(
    ("secondary", "camera_secondary", "expected"),
    [
        ({"on": ["person", "persn"]}, None, "secondary[0].on[1] (a): unknown class 'persn'"),
        (None, {"on": [95]}, "cameras[1].secondary[0].on[0] (b): class id 95 out of range"),
    ],
)
def test_classes_a_detector_lacks_are_config_errors_with_their_path(
    assets_dir: Path,
    labels: Labels,
    secondary: dict[str, Any] | None,
    camera_secondary: dict[str, Any] | None,
    expected: str,
) -> None:
    cfg = config(assets_dir, **(secondary or {}))
    if camera_secondary is not None:
        cam = cfg.cameras[1].model_copy(
            update={"secondary": [cfg.secondary[0].model_copy(update=camera_secondary)]}
        )
        cfg = cfg.model_copy(update={"cameras": [cfg.cameras[0], cam]})
    with pytest.raises(ConfigError) as err:
        build_secondary(cfg, lambda _: labels, Metrics())
    assert any(p.startswith(expected) for p in err.value.problems), err.value.problems


def test_a_detector_given_as_reid_is_refused_naming_the_file(
    assets_dir: Path, labels: Labels
) -> None:
    cfg = config(assets_dir)
    yolox = assets_dir / "models" / "yolox_nano.onnx"
    models = {"reid": cfg.models["reid"].model_copy(update={"path": yolox})}
    with pytest.raises(BackendError, match=r"models\.reid: .*yolox_nano\.onnx does not fit .*reid"):
        build_secondary(cfg.model_copy(update={"models": models}), lambda _: labels, Metrics())


def test_search_by_picture_embeds_like_the_stage(assets_dir: Path, labels: Labels) -> None:
    stage = build_secondary(config(assets_dir), lambda _: labels, Metrics())
    assert stage is not None
    try:
        frame = next(frames(assets_dir))[1]
        crop = frame[0:400, 380:550]
        vector = stage.embed().embed(crop)
        assert vector.shape == (256,) and abs(float(np.linalg.norm(vector)) - 1) < 1e-4
        assert float(vector @ offline(assets_dir)(crop)) > 0.99
    finally:
        stage.close()
