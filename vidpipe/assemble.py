"""Build the pipeline from a ``Config``, in one place.

``vidpipe run`` (the daemon) and a SIGHUP reload assemble here, from a plan
(``vidpipe.plan``, which ``vidpipe detect`` and ``vidpipe check`` use too). This is the only
module that knows the order of the stages::

    capture workers -> FrameHub -> Scheduler (preprocess, infer, postprocess)   one per detector
                    -> TrackingStage -> SecondaryStage -> ClipRecorder -> SinkPool (JSONL, ...)
    capture workers -(packet tap)-> the ClipRecorder's per-camera ring (cameras with clips)
    SecondaryStage -(crops of tracked objects)-> its embedders' lanes (re-identification)

Each detector has its hub (its cameras' mailboxes) and its scheduler; their results join one
chain of result stages (``vidpipe.stages``), chained once at start.

``Pipeline`` starts the stages from a plan, applies a reload's difference, and stops them in
pipeline order, every step with a deadline.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import numpy as np

from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.source import PacketTap
from vidpipe.capture.worker import CaptureWorker
from vidpipe.clips import ClipRecorder
from vidpipe.config import Config
from vidpipe.events import EventStore
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.model import LoadedModel, log_model
from vidpipe.plan import DetectorPlan, InferencePlan, build_scheduler
from vidpipe.postprocess.draw import draw_detections
from vidpipe.reload import ConfigDiff, active_cameras, paused_cameras
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.schedule.scheduler import Scheduler
from vidpipe.secondary import SecondaryStage, build_secondary
from vidpipe.shard import Shard
from vidpipe.sinks import CameraStateListener, Sink, SinkPool, build_sinks
from vidpipe.sinks.live import LiveView
from vidpipe.stages import chain
from vidpipe.track.stage import TrackingStage
from vidpipe.types import CameraState
from vidpipe.web.clips import ClipRoutes
from vidpipe.web.events import EventRoutes
from vidpipe.web.live import LiveRoutes
from vidpipe.web.search import Embed, SearchRoutes
from vidpipe.web.server import RouteInstaller, WebServer, build_app, is_loopback
from vidpipe.wiring import CameraInputs, capture_worker

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------- running


class Pipeline:
    """The running stages of one config: built in pipeline order, stopped in it.

    Args:
        cfg: the config to run (``apply`` replaces it on a reload).
        metrics: the process's metrics.
        health: the probes' state; the pipeline reports its progress to it.
        shard: None runs every enabled camera; else only the cameras this shard owns.
        on_fatal: called once when the inference device is lost.

    Attributes:
        capture: what the capture workers share (decoder state, read groups); kept across
            reloads, so a restarted camera rejoins the same gate and groups.
        capture_phase: ``realtime`` file cameras play from when they opened (``free``) or on
            one clock grid (``aligned``: ``vidpipe bench --realtime``); set before ``start``.
    """

    def __init__(
        self,
        cfg: Config,
        metrics: Metrics,
        health: Health,
        shard: Shard | None = None,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.metrics = metrics
        self.health = health
        self.shard = shard
        self._on_fatal = on_fatal
        self.hubs: dict[str, FrameHub] = {}  # by detector: its cameras' mailboxes
        self.schedulers: dict[str, Scheduler] = {}  # by detector
        self.capture = CaptureContext()
        self.capture_phase: Literal["free", "aligned"] = "free"
        self.workers: dict[str, CaptureWorker] = {}
        self.paused: set[str] = set()  # owned cameras with no worker, shown as paused
        self._boxes: dict[str, tuple[str, Mailbox]] = {}  # camera -> (detector, mailbox)
        self.inputs = CameraInputs(metrics)  # cameras with inputs: (a record input, ...)
        self.camera_detector: dict[str, str] = {}
        self.sinks: SinkPool | None = None
        self.tracking: TrackingStage | None = None
        self.secondary: SecondaryStage | None = None
        # the ring keeps what a trigger handled this late still needs for its pre-roll
        self.clips = ClipRecorder(metrics, max_latency_s=cfg.scheduler.max_frame_age_ms / 1000.0)
        self._clip_classes: dict[str, frozenset[int]] = {}
        self.models: dict[str, LoadedModel] = {}  # the open detectors, by name
        # features append route installers before start(); the live view does
        self.web_installers: list[RouteInstaller] = []
        self.http_port: int | None = None
        self._web: WebServer | None = None
        self._listeners: list[CameraStateListener] = []
        self._state_lock = threading.Lock()
        self._extra: list[Sink] = []  # the live view's and the event store's sinks
        self._search: SearchRoutes | None = None
        # frames counted by schedulers that a reload replaced: (submitted, completed, delivered)
        self._retired = (0, 0, 0)

    @property
    def scheduler(self) -> Scheduler | None:
        """The first detector's scheduler (the only one, in a config with one detector)."""
        return next(iter(self.schedulers.values()), None)

    @property
    def loaded(self) -> LoadedModel | None:
        """The first detector's model (the only one, in a config with one detector)."""
        return next(iter(self.models.values()), None)

    # ------------------------------------------------------------------ start-up

    def start_capture(self, camera_detector: dict[str, str]) -> None:
        """Start the HTTP server and the cameras (``camera_detector``: each owned camera's
        detector). The page, ``/metrics`` and the clip rings need no model: with
        ``inference.stream_while_loading`` this runs before the models load (``Daemon.start``)."""
        cfg = self.cfg
        self._extra = self._live_view() if cfg.http.enabled and cfg.http.live.enabled else []
        self._extra += self._event_store() if cfg.events_enabled() else []
        if cfg.http.enabled:
            self.web_installers.append(ClipRoutes(self.clips.camera_dirs).install)
            self._start_web()
        self.camera_detector = dict(camera_detector)
        self.capture.bind_metrics(self.metrics, cfg)
        for name in active_cameras(cfg, self.shard):
            self.start_camera(name)
        self._set_paused(set(paused_cameras(cfg, self.shard)))

    def start(self, plan: InferencePlan) -> None:
        """Start the sinks and inference on the cameras ``start_capture`` started: the
        secondary stage, tracking, and each detector's scheduler on its cameras' hub."""
        sinks = [*build_sinks(self.cfg.sinks, draw=draw_detections, metrics=self.metrics)]
        sinks += self._extra
        self.sinks = SinkPool(sinks, self.metrics)
        self.sinks.start()
        self._listen([s for s in sinks if isinstance(s, CameraStateListener)])
        self.secondary = build_secondary(self._owned(self.cfg, plan), plan.labels_of, self.metrics)
        if self._search is not None:
            self._search.set_embedder(*self._embedder())
        self.tracking = TrackingStage(plan.scenes, self.metrics)
        # every result's way after inference, in order; the secondary stage may add reid and
        # track events, clips clip events
        secondary = [] if self.secondary is None else [self.secondary]
        self._results = chain([self.tracking, *secondary, self.clips.observe, self.sinks.submit])
        self.clips.send_late_events(self.sinks.submit)
        self.camera_detector = dict(plan.camera_detector)
        self._clip_classes = plan.clip_classes
        self.clips.set_classes(plan.clip_classes)
        for detector in plan.detectors.values():
            self._start_scheduler(detector)
        self.health.attach(self._progress)

    def _listen(self, listeners: list[CameraStateListener]) -> None:
        """From now on tell ``listeners`` every camera's state change, starting with each
        camera's state now (the cameras started before the sinks)."""
        with self._state_lock:  # no change is told before the state it replaced
            self._listeners = listeners
            states = dict.fromkeys(self.paused, CameraState.PAUSED)
            states.update({n: w.state for n, w in self.workers.items()})
            for name, state in states.items():
                for listener in listeners:
                    listener.camera_state(name, state)

    def _event_store(self) -> list[Sink]:
        """The event store: a sink of zone, line and clip events, and its query route."""
        ev = self.cfg.events
        store = EventStore(
            Path(ev.path),
            self.metrics,
            max_age_days=ev.max_age_days,
            queue_size=ev.queue_size,
            clip_dirs=self.clips.camera_dirs,
        )
        log.info("event store: %s", store.path)
        if self.cfg.http.enabled:
            self.web_installers.append(EventRoutes(store.path).install)
            # its embedder is known once the secondary models are open (``start``)
            self._search = SearchRoutes(store.path, pending=True)
            self.web_installers.append(self._search.install)
        return [store]

    def _embedder(self) -> tuple[Embed | None, str | None]:
        """Search by picture: the first secondary model's embedder, where one runs."""
        if self.secondary is None:
            return None, None
        model = next(iter(self.secondary.embedders))
        return self.secondary.embed(model).embed, model

    @staticmethod
    def _owned(cfg: Config, plan: InferencePlan) -> Config:
        """``cfg`` with only the cameras this process runs or holds paused."""
        mine = [c for c in cfg.cameras if c.name in plan.camera_detector]
        return cfg.model_copy(update={"cameras": mine})

    def _live_view(self) -> list[Sink]:
        """The live view: a sink of annotated frames and its HTTP routes."""
        live_cfg = self.cfg.http.live
        live = LiveView(
            draw_detections,
            self.metrics,
            jpeg_quality=live_cfg.jpeg_quality,
            overlay=self._draw_scene,
        )
        routes = LiveRoutes(
            live,
            self.listed_cameras,  # shards, reloads and the API change them
            self.capture_stats,
            self.metrics,
            live_cfg,
            self.cfg.http.token,
        )
        self.web_installers.append(routes.install)
        return [live]

    def _start_web(self) -> None:
        http = self.cfg.http
        app = build_app(
            self.metrics,
            self.health,
            http.token,
            self.web_installers,
            admin_token=http.admin_token,
            loopback=is_loopback(http.host),
        )
        self._web = WebServer(app, http.host, http.port)
        self.http_port = self._web.start()
        log.info(
            "HTTP on http://%s:%d (%s/metrics, /healthz, /readyz)%s",
            http.host,
            self.http_port,
            "live view /, /api, " if http.live.enabled else "",
            ", bearer token required" if http.token else "",
        )

    def _start_scheduler(self, detector: DetectorPlan) -> Scheduler:
        """A detector's scheduler, started on its hub (made on first use)."""
        scheduler = self._new_scheduler(detector)
        self.schedulers[detector.name] = scheduler
        self.models[detector.name] = detector.loaded
        scheduler.start(self.hubs.setdefault(detector.name, FrameHub(starting=True)))
        return scheduler

    def _new_scheduler(self, detector: DetectorPlan) -> Scheduler:
        assert self.sinks is not None
        return build_scheduler(
            self.cfg,
            detector,
            self.metrics,
            self._results,
            # crops need the frames of cameras that record clips, and the secondary stage's
            keep_images=self.sinks.wants_images
            or self.secondary is not None
            or any(c.clips.enabled and c.clips.crop.enabled for c in self.cfg.cameras),
            on_fatal=self._on_fatal,
        )

    def _draw_scene(self, camera: str, image: np.ndarray) -> np.ndarray:
        """The camera's zones and lines with their counts on ``image`` (the live view)."""
        scene = self.tracking.scenes.get(camera) if self.tracking is not None else None
        return image if scene is None else scene.draw(image)

    # ------------------------------------------------------------------ cameras

    def start_camera(self, name: str) -> None:
        cam = next(c for c in self.cfg.cameras if c.name == name)
        self.capture.bind_camera_metrics(self.metrics, self.cfg, cam)
        detector = self.camera_detector[name]
        box, worker = capture_worker(
            cam,
            self.cfg.capture,
            self.hubs.setdefault(detector, FrameHub(starting=True)),
            self.metrics,
            self.capture,
            self._camera_state,
            self.capture_phase,
        )
        self._boxes[name] = (detector, box)
        ring = None
        if cam.clips.enabled:  # no tap, no copied packet, for cameras without clips
            ring = self.clips.add_camera(cam, self._clip_classes.get(name, frozenset()))
        # a record input feeds the ring itself, and the detect worker only times its pictures
        # against it; else (url: alone) the detect worker feeds the ring
        tap: PacketTap | None = ring
        if self.inputs.start(cam, self.cfg.capture, ring):  # only live inputs carry sender times
            tap = self.clips.detect_clock(name) if cam.is_stream else None
        if tap is not None:
            worker.set_packet_tap(tap)
        self.workers[name] = worker
        worker.start()

    def stop_camera(self, name: str, timeout_s: float, forget: bool) -> None:
        """Stop one camera; frames it already handed to inference finish normally."""
        worker = self.workers.pop(name)
        worker.stop()
        record = self.inputs.stop(name)
        if not worker.join(timeout_s):
            log.warning("camera %s: capture thread still alive after %.0f s", name, timeout_s)
        if record is not None:
            record.join(timeout_s)
        self.clips.remove_camera(name)
        detector, box = self._boxes.pop(name)
        if box.clear() is not None:  # decoded but never taken by inference: count it
            self.metrics.camera(name).drop("shutdown")
        self.hubs[detector].remove(box)
        if forget:  # no stale "camera down" series for a camera that was removed
            self.metrics.forget_camera(name)
            self.metrics.forget_inputs(name)

    def listed_cameras(self) -> list[str]:
        """The cameras this process shows: running or paused, in config order."""
        shown = {*self.workers, *self.paused}
        return [c.name for c in self.cfg.cameras if c.name in shown]

    def _set_paused(self, paused: set[str]) -> None:
        """Report ``paused`` for the newly paused cameras; forget the series of cameras
        that were paused and are now gone (a resumed one reports its worker's state)."""
        for name in self.paused - paused - set(self.workers):
            self.metrics.forget_camera(name)
        for name in sorted(paused - self.paused):
            self.metrics.camera(name).set_state(CameraState.PAUSED)
            self._camera_state(name, CameraState.PAUSED)
        self.paused = paused

    def _camera_state(self, name: str, state: CameraState) -> None:
        """A capture worker changed state (on a capture thread): tell the sinks that listen."""
        with self._state_lock:
            self.inputs.detect_state(name, state)
            for listener in self._listeners:
                listener.camera_state(name, state)

    def capture_stats(self) -> dict[str, dict[str, Any]]:
        """``CaptureWorker.stats()`` of every running camera, ``{"state": "paused"}`` of
        every paused one (for the live view and the control API)."""
        stats: dict[str, dict[str, Any]] = {n: {"state": "paused"} for n in list(self.paused)}
        running = {
            name: self.inputs.stats(name, w.stats()) for name, w in list(self.workers.items())
        }
        return {**stats, **running}

    def _progress(self) -> tuple[float, int]:
        """Health probe: last completion time, frames in flight or waiting in mailboxes."""
        progress = [s.progress() for s in list(self.schedulers.values())]
        last = max((p[0] for p in progress), default=time.monotonic())
        waiting = sum(hub.pending() for hub in list(self.hubs.values()))
        return last, sum(p[1] for p in progress) + waiting

    # ------------------------------------------------------------------ live reload

    def apply(self, cfg: Config, diff: ConfigDiff, plan: InferencePlan) -> None:
        """Run ``cfg`` from now on, changing only what ``diff`` names; ``plan`` was made from
        ``cfg`` (with a new model when ``diff.rebuild_inference``)."""
        assert self.tracking is not None
        self.cfg = cfg
        self._clip_classes = plan.clip_classes
        changed = self.tracking.replace_scenes(plan.scenes)  # unchanged cameras keep tracks
        if changed:
            log.info("tracking, zones or lines replaced on: %s", ", ".join(changed))
        for detector in plan.detectors.values():
            running = self.schedulers.get(detector.name)
            if running is None:
                self._start_scheduler(detector)
            elif detector.loaded is not self.models[detector.name]:
                self._swap_scheduler(detector)
            else:
                for name, rules in detector.rules.items():
                    running.set_rules(name, rules)
        timeout_s = cfg.shutdown_timeout_s
        paused = set(paused_cameras(cfg, self.shard))
        for name in diff.stop + diff.restart:
            # a paused camera keeps its series: its state gauge says paused
            self.stop_camera(name, timeout_s, forget=name in diff.stop and name not in paused)
        for name in set(self.schedulers) - set(plan.detectors):  # no camera runs it now
            old = self.schedulers.pop(name)
            self._retire_scheduler(name, old)
            self.metrics.forget_model(old.model.name)
            self.models.pop(name)
            self.hubs.pop(name)
        self.camera_detector = dict(plan.camera_detector)
        for name in diff.restart + diff.start:
            self.start_camera(name)
        self._set_paused(paused)

    def _swap_scheduler(self, detector: DetectorPlan) -> None:
        """Start a detector's new scheduler on its hub, then stop and close the old one.

        Both take from the same hub for a moment; each submits only to its own request pool,
        so no pool has two submitting threads.
        """
        old = self.schedulers[detector.name]
        self.metrics.forget_model(old.model.name)  # the new scheduler sets its own series
        self._start_scheduler(detector)
        self._retire_scheduler(detector.name, old)
        log_model(detector.name, detector.loaded)  # what the new pool runs (a new input_size)
        log.info("inference pool rebuilt: %s", detector.loaded.backend.info.model)

    def _retire_scheduler(self, name: str, old: Scheduler) -> None:
        """Close a scheduler a reload replaced or left without cameras; keep its counts."""
        timeout_s = self.cfg.shutdown_timeout_s
        if not old.close(timeout_s):
            log.error(
                "the inference pool of %s did not finish its frames in %.0f s", name, timeout_s
            )
        r = self._retired
        self._retired = (r[0] + old.submitted, r[1] + old.completed, r[2] + old.delivered)

    # ------------------------------------------------------------------ shutdown

    def totals(self) -> tuple[int, int, int]:
        """Frames submitted, completed, delivered: every scheduler of this run, summed."""
        r = list(self._retired)
        for s in list(self.schedulers.values()):
            r = [r[0] + s.submitted, r[1] + s.completed, r[2] + s.delivered]
        return (r[0], r[1], r[2])

    def stop(self, deadline: float) -> bool:
        """Stop in pipeline order by ``deadline`` (monotonic). True if nothing was lost."""
        clean = True
        for w in self.workers.values():
            w.stop()
        records = [self.inputs.stop(name) for name in list(self.inputs.record)]
        for name, w in self.workers.items():
            if not w.join(max(0.1, deadline - time.monotonic())):
                log.warning("camera %s: capture thread still alive at shutdown", name)
        for record in records:
            if record is not None:
                record.join(max(0.1, deadline - time.monotonic()))
        for name, scheduler in self.schedulers.items():
            if not scheduler.close(max(0.1, deadline - time.monotonic())):
                clean = False
                log.error("inference (%s) did not drain before the shutdown timeout", name)
        # frames still waiting in mailboxes never entered inference: count, don't hide (a
        # start that failed while the models loaded left its hubs without a scheduler)
        for hub in self.hubs.values():
            for frame in hub.clear_all():
                self.metrics.camera(frame.camera).drop("shutdown")
        # crops queued and in flight: embedded, or counted as given up
        secondary = self.secondary
        if secondary is not None and not secondary.close(max(0.1, deadline - time.monotonic())):
            log.warning("the secondary stage gave up crops at shutdown (counted)")
        # open clips are written with what their rings hold (a clean close, still playable)
        self.clips.close(max(0.1, deadline - time.monotonic()))
        if self.sinks is not None:
            left = self.sinks.close(max(0.1, deadline - time.monotonic()))
            if any(left.values()):
                clean = False
        # Last: a decode process ends once no frame of its rings is held here any more
        # (PyTorch warns when a CUDA IPC producer exits before its consumer let go).
        self.capture.close()
        return clean

    def stop_web(self) -> None:
        if self._web is not None:
            self._web.stop()
