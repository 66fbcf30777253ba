"""The tracking step: per-camera tracker, zones and lines, the first result stage after
inference (``vidpipe.stages``).

``TrackingStage`` is called with every ``FrameResult`` on the thread that postprocesses (the
scheduler's on OpenVINO, else the postprocessing thread; one at a time, results of a camera in
capture order: ``vidpipe.schedule.completions``), so per-camera state needs no lock. A camera
without tracking passes straight through. A failure in this step never loses the result: it
is passed on without track ids and counted in ``vidpipe_tracking_errors_total``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
from prometheus_client import Counter, Gauge

from vidpipe.config import CameraConfig, Config, ConfigError
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.track.draw import draw_scene
from vidpipe.track.geometry import Scene, resolve_scene
from vidpipe.track.tracker import CameraTracker
from vidpipe.track.zones import FrameInfo, LineWatch, ZoneWatch
from vidpipe.types import FrameResult, TrackEvent

log = logging.getLogger(__name__)

_ERROR_LOG_INTERVAL_S = 10.0


def resolve_classes(
    items: Sequence[str | int] | None,
    path: str,
    camera: str,
    labels: Labels,
    camera_ids: frozenset[int] | None,
) -> frozenset[int] | None:
    """A zone's or line's class filter as ids; ConfigError naming ``path`` for bad entries.

    A class that the camera's own ``classes`` filter removes can never be seen: that is an
    error too.
    """
    ids = labels.ids(items, where=path, camera=camera)
    if ids is None or camera_ids is None:
        return ids
    problems = [
        f"{path} ({camera}): class {labels.name(cid)!r} is never reported on this "
        "camera (its classes filter leaves it out)"
        for cid in sorted(ids - camera_ids)
    ]
    if problems:
        raise ConfigError(problems)
    return ids


class CameraScene:
    """Tracking, zones and lines of one camera.

    Args:
        camera: the camera's config.
        zone_classes: per zone, its resolved class filter.
        line_classes: per line, its resolved class filter.
        labels: class names of the model.
        metrics: where zone gauges and line counters go.
    """

    def __init__(
        self,
        camera: CameraConfig,
        zone_classes: Sequence[frozenset[int] | None],
        line_classes: Sequence[frozenset[int] | None],
        labels: Labels,
        metrics: Metrics,
    ) -> None:
        self.camera = camera
        self.tracker = CameraTracker(camera.tracking)
        self._zone_classes = tuple(zone_classes)
        self._line_classes = tuple(line_classes)
        self._labels = Labels.of(labels)
        self._metrics = metrics
        self.scene: Scene | None = None
        self.zones: list[ZoneWatch] = []
        self.lines: list[LineWatch] = []
        self._zone_series: set[tuple[str, str]] = set()  # (zone, class) gauges set so far

    def same_setup(self, other: CameraScene) -> bool:
        """Whether ``other`` tracks with the same settings, zones, lines and classes."""
        mine, theirs = self.camera, other.camera
        return (mine.tracking, mine.zones, mine.lines, self._zone_classes, self._line_classes) == (
            theirs.tracking,
            theirs.zones,
            theirs.lines,
            other._zone_classes,
            other._line_classes,
        ) and self._labels == other._labels

    def activate(self) -> None:
        """Create the series of the classes known in advance (``rate()`` needs the zero)."""
        for zone, ids in zip(self.camera.zones, self._zone_classes, strict=True):
            for cid in sorted(ids or ()):
                self._zone_gauge(zone.name, cid).set(0)
        for line, ids in zip(self.camera.lines, self._line_classes, strict=True):
            for cid in sorted(ids or ()):
                for direction in ("in", "out"):
                    self._crossings(line.name, cid, direction)

    def retire(self) -> None:
        """Remove this scene's zone gauges (a reload replaced it); counters stay."""
        for zone, label in list(self._zone_series):
            with contextlib.suppress(KeyError):
                self._metrics.zone_objects.remove(self.camera.name, zone, label)
        self._zone_series.clear()

    def process(self, result: FrameResult) -> FrameResult:
        """Track ids for the result's detections, and its zone and line events."""
        frame = FrameInfo(result.camera, result.seq, result.wall_time, result.t_capture)
        update = self.tracker.update(
            result.detections, result.seq, result.epoch, result.still_frames
        )
        events: list[TrackEvent] = []
        if update.reset:
            self._metrics.tracker_resets.labels(camera=result.camera).inc()
            events += self._reset(frame)
        if self.scene is None or (self.scene.width, self.scene.height) != (
            result.width,
            result.height,
        ):
            events += self._reset(frame)
            self._build(result.width, result.height)
        for zone in self.zones:
            before = zone.counts()
            zone_events = zone.update(frame, update.observed, update.ended)
            if zone_events:
                self._set_zone_gauges(zone, before)
            events += zone_events
        for line in self.lines:
            crossed = line.update(frame, update.observed, update.ended)
            for e in crossed:
                self._crossings(line.name, e.class_id, e.direction or "").inc()
            events += crossed
        return dataclasses.replace(
            result,
            detections=result.detections.with_tracker_ids(update.tracker_id),
            events=tuple(events),
            ended_tracks=update.ended,
        )

    def draw(self, image: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        """Zones and lines with their current counts on a copy of ``image`` (this camera's).

        Before the first frame, the scene is resolved for ``image``'s size.
        """
        scene = self.scene
        height, width = image.shape[:2]
        if scene is None or (scene.width, scene.height) != (width, height):
            scene = resolve_scene(self.camera.zones, self.camera.lines, width, height)
        return draw_scene(
            image,
            scene,
            zone_counts={z.name: sum(z.counts().values()) for z in self.zones},
            line_counts={ln.name: dict(ln.crossings) for ln in self.lines},
        )

    def _build(self, width: int, height: int) -> None:
        cam = self.camera
        self.scene = scene = resolve_scene(cam.zones, cam.lines, width, height)
        shapes = [("zone", n, p) for n, p in scene.zones]
        shapes += [("line", n, np.stack([a, b])) for n, a, b in scene.lines]
        for kind, name, points in shapes:
            if (points[:, 0] > width).any() or (points[:, 1] > height).any():
                # pixel coordinates written for another resolution: say so, once per size
                log.warning(
                    "camera %s: %s %r reaches outside the %dx%d frame (pixel coordinates for "
                    "another resolution? coords: normalized avoids that)",
                    cam.name,
                    kind,
                    name,
                    width,
                    height,
                )
        self.zones = [
            ZoneWatch(
                self._labels,
                name,
                polygon,
                ids,
                cfg.anchor,
                cfg.min_frames,
                frame_size=(width, height),
            )
            for (name, polygon), ids, cfg in zip(
                scene.zones, self._zone_classes, cam.zones, strict=True
            )
        ]
        self.lines = [
            LineWatch(self._labels, name, a, b, ids, cfg.anchor, cfg.min_distance_px)
            for (name, a, b), ids, cfg in zip(
                scene.lines, self._line_classes, cam.lines, strict=True
            )
        ]

    def _reset(self, frame: FrameInfo) -> list[TrackEvent]:
        events: list[TrackEvent] = []
        for zone in self.zones:
            before = zone.counts()
            events += zone.reset(frame)
            self._set_zone_gauges(zone, before)
        for line in self.lines:
            line.reset()
        return events

    def _zone_gauge(self, zone: str, cid: int) -> Gauge:
        label = self._labels.name(cid)
        self._zone_series.add((zone, label))
        return self._metrics.zone_objects.labels(
            camera=self.camera.name, zone=zone, **{"class": label}
        )

    def _crossings(self, line: str, cid: int, direction: str) -> Counter:
        return self._metrics.line_crossings.labels(
            camera=self.camera.name,
            line=line,
            direction=direction,
            **{"class": self._labels.name(cid)},
        )

    def _set_zone_gauges(self, zone: ZoneWatch, before: dict[int, int]) -> None:
        now = zone.counts()
        for cid in before.keys() | now.keys():
            self._zone_gauge(zone.name, cid).set(now.get(cid, 0))


class TrackingStage:
    """A result stage (``vidpipe.stages``): runs each tracking camera's ``CameraScene`` on its
    results and returns them, with track ids and events, for the next stage.

    Args:
        scenes: per camera name; cameras not in it pass straight through.
        metrics: for ``vidpipe_tracking_errors_total``.
    """

    def __init__(self, scenes: dict[str, CameraScene], metrics: Metrics) -> None:
        self.scenes = scenes
        self._metrics = metrics
        self._last_error_log: dict[str, float] = {}
        for scene in scenes.values():
            scene.activate()

    def replace_scenes(self, scenes: dict[str, CameraScene]) -> list[str]:
        """Switch to a reloaded config's scenes (from another thread than ``__call__``).

        A camera whose tracking, zones, lines and classes did not change keeps its scene, and so
        its tracks and zone occupants; the others start afresh (tracks inside a replaced zone
        get no ``leave``). The dict is swapped in one assignment, so the postprocessing thread
        sees either the old or the new set.

        Returns:
            The cameras whose scene was added, replaced or removed.
        """
        merged: dict[str, CameraScene] = {}
        for name, scene in scenes.items():
            old = self.scenes.get(name)
            merged[name] = old if old is not None and old.same_setup(scene) else scene
        for name, old in self.scenes.items():
            if merged.get(name) is not old:
                old.retire()  # first: a new scene may reuse the same series
        changed = [n for n in self.scenes if merged.get(n) is not self.scenes[n]]
        for name, scene in merged.items():
            if self.scenes.get(name) is not scene:
                scene.activate()
                if name not in changed:
                    changed.append(name)
        self.scenes = merged
        return changed

    def __call__(self, result: FrameResult) -> FrameResult:
        scene = self.scenes.get(result.camera)
        if scene is None:
            return result
        try:
            return scene.process(result)
        except Exception:
            self._metrics.tracking_errors.labels(camera=result.camera).inc()
            now = time.monotonic()
            if now - self._last_error_log.get(result.camera, -1e9) >= _ERROR_LOG_INTERVAL_S:
                self._last_error_log[result.camera] = now
                log.exception("camera %s: tracking failed; result passed on", result.camera)
            return result


def build_scenes(
    cfg: Config,
    labels_of: Callable[[str], Labels],
    camera_class_ids: dict[str, frozenset[int] | None],
    metrics: Metrics,
) -> dict[str, CameraScene]:
    """A ``CameraScene`` per enabled camera that tracks (no metric is touched yet).

    Args:
        cfg: the whole config.
        labels_of: a camera's detector's class names, by camera name.
        camera_class_ids: each camera's own resolved class filter (``CameraRules.class_ids``).
        metrics: the daemon's metrics.

    Raises:
        ConfigError: listing every bad class name of every zone and line, with its YAML path.
    """
    problems: list[str] = []
    plans: list[tuple[CameraConfig, dict[str, list[frozenset[int] | None]]]] = []
    for i, cam in enumerate(cfg.cameras):
        if not cam.enabled or not cam.tracks:
            continue
        own = camera_class_ids.get(cam.name)
        labels = labels_of(cam.name)
        resolved: dict[str, list[frozenset[int] | None]] = {"zones": [], "lines": []}
        filters: tuple[tuple[str, list[list[str | int] | None]], ...] = (
            ("zones", [z.classes for z in cam.zones]),
            ("lines", [ln.classes for ln in cam.lines]),
        )
        for kind, class_lists in filters:
            for j, classes in enumerate(class_lists):
                path = f"cameras[{i}].{kind}[{j}].classes"
                try:
                    resolved[kind].append(resolve_classes(classes, path, cam.name, labels, own))
                except ConfigError as exc:
                    problems += exc.problems
        plans.append((cam, resolved))
    if problems:
        raise ConfigError(problems)
    return {
        cam.name: CameraScene(cam, r["zones"], r["lines"], labels_of(cam.name), metrics)
        for cam, r in plans
    }
