"""Wire the stages together and own the process lifecycle.

This is the only module that knows the order of the stages:
capture workers -> FrameHub -> Scheduler (preprocess, infer, postprocess) -> SinkPool.

Shutdown runs in pipeline order, every step with a deadline: stop capture, let the engine
finish every frame already submitted, flush the sinks, close the backend.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np

from vidpipe import redact
from vidpipe.capture.worker import CaptureWorker, configure_ffmpeg_env
from vidpipe.config import Config, ConfigError, load_config
from vidpipe.handoff import FrameHub, Mailbox
from vidpipe.health import Health
from vidpipe.infer.base import BackendError
from vidpipe.metrics import Metrics
from vidpipe.model import LoadedModel, camera_rules, open_model
from vidpipe.notify import Notifier, Reporter, watchdog_interval_s
from vidpipe.postprocess.decode import DecodeParams
from vidpipe.postprocess.draw import draw_detections
from vidpipe.reload import (
    ConfigDiff,
    active_cameras,
    diff_configs,
    effective_config,
    with_http_port,
)
from vidpipe.scheduler import CameraRules, Scheduler
from vidpipe.shard import Shard
from vidpipe.sinks import MqttSink, Sink, SinkPool, build_sinks
from vidpipe.sinks.live import LiveView
from vidpipe.track.stage import TrackingStage, build_scenes
from vidpipe.types import CameraState, Frame
from vidpipe.web import RouteInstaller, WebServer, build_app
from vidpipe.web.live import LiveRoutes

log = logging.getLogger(__name__)


class Daemon:
    """A running vidpipe pipeline."""

    def __init__(
        self,
        cfg: Config,
        metrics: Metrics | None = None,
        shard: Shard | None = None,
        http_port: int | None = None,
    ) -> None:
        self.http_port_override = http_port  # `run --http-port`, kept across reloads
        self.cfg = with_http_port(cfg, http_port)
        self.shard = shard  # None: every camera; else only the cameras this shard owns
        self.metrics = metrics or Metrics()
        self.stop_event = threading.Event()
        self.hub = FrameHub()
        self.workers: dict[str, CaptureWorker] = {}
        self.engine: Scheduler | None = None
        self.sinks: SinkPool | None = None
        self.tracking: TrackingStage | None = None
        self.health = Health(stall_after_s=max(30.0, 4 * cfg.capture.stall_timeout_s))
        # features (live view, ...) append route installers before start()
        self.web_installers: list[RouteInstaller] = []
        self.http_port: int | None = None
        self._web: WebServer | None = None
        self._signals = 0
        self.reload_requested = threading.Event()  # SIGHUP; handled on the main thread
        self._boxes: dict[str, Mailbox] = {}
        self._loaded: LoadedModel | None = None
        self._rate = _RateMeter()
        # frames counted by engines that a reload replaced: (submitted, completed, delivered)
        self._retired = (0, 0, 0)
        self._state_listeners: list[Callable[[str, CameraState], None]] = []
        self.fatal: BaseException | None = None  # set when the inference device is lost

    # ------------------------------------------------------------------ start-up

    def start(self) -> None:
        """Compile the model, bind metrics, start sinks, the engine and the cameras."""
        cfg = self.cfg
        loaded = open_model(cfg.model, cfg.inference)
        rules = camera_rules(cfg, loaded)
        scenes = build_scenes(
            cfg, loaded.labels, {n: r.class_ids for n, r in rules.items()}, self.metrics
        )
        desc = loaded.backend.description
        log.info(
            "model %s on %s: precision %s, hint %s, %s requests (optimal %s), input %s",
            desc["model"],
            desc["device"],
            desc["precision"],
            desc["hint"],
            desc["requests"],
            desc.get("optimal_requests", "?"),
            desc.get("input", "?"),
        )
        extra_sinks: list[Sink] = []
        if cfg.http.enabled and cfg.http.live.enabled:
            live = LiveView(
                draw_detections,
                self.metrics,
                jpeg_quality=cfg.http.live.jpeg_quality,
                overlay=self._draw_scene,
            )
            extra_sinks.append(live)
            routes = LiveRoutes(
                live,
                lambda: list(self.workers),  # the running cameras: shards and reloads change them
                self._capture_stats,
                self.metrics,
                cfg.http.live,
                cfg.http.token,
            )
            self.web_installers.append(routes.install)
        if cfg.http.enabled:
            app = build_app(self.metrics, self.health, cfg.http.token, self.web_installers)
            self._web = WebServer(app, cfg.http.host, cfg.http.port)
            self.http_port = self._web.start()
            log.info(
                "HTTP on http://%s:%d (%s/metrics, /healthz, /readyz)%s",
                cfg.http.host,
                self.http_port,
                "live view /, /api, " if cfg.http.live.enabled else "",
                ", bearer token required" if cfg.http.token else "",
            )
        sinks = [*build_sinks(cfg.sinks, draw=draw_detections, metrics=self.metrics), *extra_sinks]
        self._state_listeners = [s.camera_state for s in sinks if isinstance(s, MqttSink)]
        self.sinks = SinkPool(sinks, self.metrics)
        self.sinks.start()
        # a stateful step between the engine and the sinks: tracking, zones and lines
        self.tracking = TrackingStage(scenes, self.sinks.submit, self.metrics)
        self.engine = self._new_engine(cfg, loaded, rules)
        self.health.attach(self._progress)
        self.engine.start(self.hub)
        configure_ffmpeg_env(cfg.capture.analyze_duration_ms)
        for name in active_cameras(cfg, self.shard):
            self._start_camera(name)
        log.info(
            "started %d camera(s)%s",
            len(self.workers),
            f" (shard {self.shard}, of {len(cfg.cameras)} configured)" if self.shard else "",
        )
        self.health.set_ready()

    def _draw_scene(self, camera: str, image: np.ndarray) -> np.ndarray:
        """The camera's zones and lines with their counts on ``image`` (the live view)."""
        scene = self.tracking.scenes.get(camera) if self.tracking is not None else None
        return image if scene is None else scene.draw(image)

    def _new_engine(
        self, cfg: Config, loaded: LoadedModel, rules: dict[str, CameraRules]
    ) -> Scheduler:
        """An engine (not started) over ``loaded`` with every camera's rules."""
        assert self.sinks is not None and self.tracking is not None
        self._loaded = loaded
        spec = loaded.backend.input_spec
        engine = Scheduler(
            loaded.backend,
            loaded.decoder,
            loaded.labels,
            self.metrics,
            self.tracking,  # cameras without tracking pass straight through to the sinks
            default_rules=CameraRules(
                DecodeParams(spec.width, spec.height, cfg.model.score_threshold), None
            ),
            iou_threshold=cfg.model.iou_threshold,
            max_frame_age_s=cfg.scheduler.max_frame_age_ms / 1000.0,
            keep_images=self.sinks.wants_images,
            on_fatal=self._device_lost,
        )
        for name, r in rules.items():
            engine.set_rules(name, r)
        return engine

    def _start_camera(self, name: str) -> None:
        cam = next(c for c in self.cfg.cameras if c.name == name)
        cm = self.metrics.camera(name)

        def dropped(_frame: Frame) -> None:
            cm.drop("overwritten")

        live = cam.is_stream or cam.realtime  # live: keep the newest frame; files: backpressure
        box = self.hub.add(name, "newest" if live else "block", dropped)
        self._boxes[name] = box
        worker = CaptureWorker(cam, self.cfg.capture, box, cm, on_state=self._camera_state)
        self.workers[name] = worker
        worker.start()

    def _camera_state(self, name: str, state: CameraState) -> None:
        """A capture worker changed state (its supervisor thread): tell the MQTT sinks."""
        for listener in self._state_listeners:
            listener(name, state)

    def _capture_stats(self) -> dict[str, dict[str, Any]]:
        """``CaptureWorker.stats()`` of every running camera (for the live view)."""
        return {name: w.stats() for name, w in list(self.workers.items())}

    def _progress(self) -> tuple[float, int]:
        """Health probe: last completion time, frames in flight or waiting in mailboxes."""
        assert self.engine is not None
        last, unfinished = self.engine.progress()
        return last, unfinished + self.hub.pending()

    def _device_lost(self, exc: BaseException) -> None:
        """The inference device is unusable: unhealthy at once (watchdog pings end), stop,
        exit non-zero so that the service manager restarts the process."""
        log.critical("inference device lost, stopping so that the service is restarted: %s", exc)
        self.fatal = exc
        self.health.fail(f"inference device lost: {exc}")
        self.stop_event.set()

    # ------------------------------------------------------------------ running

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop gracefully; a second one exits at once. SIGHUP: reload."""

        def handler(signum: int, _frame: FrameType | None) -> None:
            self._signals += 1
            if self._signals > 1:
                log.warning("second %s: exiting now", signal.Signals(signum).name)
                logging.shutdown()
                os._exit(1)
            log.info("%s received: shutting down", signal.Signals(signum).name)
            self.stop_event.set()

        def reload_handler(_signum: int, _frame: FrameType | None) -> None:
            self.reload_requested.set()  # applied by wait() on the main thread, not in here

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGHUP, reload_handler)

    def wait(self, on_reload: Callable[[], object] | None = None) -> None:
        """Block the main thread (never in a read) until a stop is requested; run
        ``on_reload`` there whenever a reload was requested (SIGHUP)."""
        while not self.stop_event.wait(0.5):
            if self.reload_requested.is_set():
                self.reload_requested.clear()
                if on_reload is not None:
                    on_reload()

    # ------------------------------------------------------------------ live reload

    def reload(self, new_cfg: Config) -> ConfigDiff:
        """Apply only the difference between the running config and ``new_cfg``.

        Everything that can fail (compiling a new model, resolving class filters) happens
        before anything running is touched, so a rejected config leaves the old one running.

        Raises:
            ConfigError, BackendError: the new config was rejected; nothing changed.
        """
        old = self.cfg
        diff = diff_configs(old, new_cfg, self.shard)
        assert self._loaded is not None and self.engine is not None
        loaded = open_model(new_cfg.model, new_cfg.inference) if diff.rebuild_engine else None
        try:
            rules = camera_rules(new_cfg, loaded or self._loaded)
            labels = (loaded or self._loaded).labels
            scenes = build_scenes(
                new_cfg, labels, {n: r.class_ids for n, r in rules.items()}, self.metrics
            )
        except ConfigError:
            if loaded is not None:
                loaded.backend.close()
            raise
        self.cfg = effective_config(old, new_cfg)
        assert self.tracking is not None
        changed = self.tracking.replace_scenes(scenes)  # unchanged cameras keep their tracks
        if changed:
            log.info("tracking, zones or lines replaced on: %s", ", ".join(changed))
        if loaded is not None:
            self._swap_engine(loaded, rules)
        else:
            for name, r in rules.items():
                self.engine.set_rules(name, r)
        timeout_s = self.cfg.shutdown_timeout_s
        for name in diff.stop + diff.restart:
            self._stop_camera(name, timeout_s, forget=name in diff.stop)
        for name in diff.restart + diff.start:
            self._start_camera(name)
        return diff

    def _swap_engine(self, loaded: LoadedModel, rules: dict[str, CameraRules]) -> None:
        """Start a new engine on the hub, then drain and close the old one.

        Both schedulers take from the same hub for a moment; each submits only to its own
        request pool, so no pool has two submitting threads.
        """
        old = self.engine
        assert old is not None
        self.metrics.inference_info.clear()  # the new engine sets its own series
        engine = self._new_engine(self.cfg, loaded, rules)
        self.engine = engine
        engine.start(self.hub)
        if not old.stop_taking(self.cfg.shutdown_timeout_s):
            log.error("the previous scheduler did not stop; its frame in hand may be dropped")
        if not old.close(self.cfg.shutdown_timeout_s):
            log.error(
                "the previous inference pool did not drain in %.0f s", self.cfg.shutdown_timeout_s
            )
        r = self._retired
        self._retired = (r[0] + old.submitted, r[1] + old.completed, r[2] + old.delivered)
        log.info("inference pool rebuilt: %s", loaded.backend.description.get("model", "?"))

    def _stop_camera(self, name: str, timeout_s: float, forget: bool) -> None:
        """Stop one camera; frames it already handed to inference finish normally."""
        worker = self.workers.pop(name)
        worker.stop()
        if not worker.join(timeout_s):
            log.warning("camera %s: capture thread still alive after %.0f s", name, timeout_s)
        box = self._boxes.pop(name)
        if box.clear() is not None:  # decoded but never taken by inference: count it
            self.metrics.camera(name).drop("shutdown")
        self.hub.remove(box)
        if forget:  # no stale "camera down" series for a camera that was removed
            self.metrics.forget_camera(name)

    def reload_from(self, path: Path) -> bool:
        """Re-read ``path`` and apply it; on any problem log it and keep the old config."""
        try:
            diff = self.reload(with_http_port(load_config(path), self.http_port_override))
        except (ConfigError, BackendError) as exc:
            log.error(
                "reload rejected, still running the previous config: %s",
                redact.redact_text(str(exc)),
            )
            return False
        except Exception:  # a bug must not take the running pipeline down with it
            log.exception("reload failed part-way; cameras that were not touched keep running")
            return False
        log.info("reload applied: %s", diff.summary())
        return True

    def _engine_totals(self) -> tuple[int, int, int]:
        """Frames submitted, completed, delivered: every engine of this run, summed."""
        e = self.engine
        now = (e.submitted, e.completed, e.delivered) if e is not None else (0, 0, 0)
        return (
            self._retired[0] + now[0],
            self._retired[1] + now[1],
            self._retired[2] + now[2],
        )

    def status_line(self) -> str:
        """One line for systemd's STATUS: "7/8 cameras streaming, 96 fps"."""
        workers = list(self.workers.values())
        streaming = sum(1 for w in workers if w.state is CameraState.STREAMING)
        fps = self._rate.rate(self._engine_totals()[1])
        prefix = f"shard {self.shard}: " if self.shard is not None else ""
        return f"{prefix}{streaming}/{len(workers)} cameras streaming, {fps:.0f} fps"

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> bool:
        """Stop in pipeline order within ``shutdown_timeout_s``. True if nothing was lost."""
        deadline = time.monotonic() + self.cfg.shutdown_timeout_s
        clean = True
        self.health.set_stopping()
        for w in self.workers.values():
            w.stop()
        for name, w in self.workers.items():
            if not w.join(max(0.1, deadline - time.monotonic())):
                log.warning("camera %s: capture thread still alive at shutdown", name)
        if self.engine is not None:
            self.engine.stop_scheduler()
            # frames still waiting in mailboxes never entered inference: count, don't hide
            for frame in self.hub.clear_all():
                self.metrics.camera(frame.camera).drop("shutdown")
            clean = self.engine.close(max(0.1, deadline - time.monotonic())) and clean
            if not clean:
                log.error("inference did not drain before the shutdown timeout")
        if self.sinks is not None:
            left = self.sinks.close(max(0.1, deadline - time.monotonic()))
            if any(left.values()):
                clean = False
        self._log_summary()
        if self._web is not None:
            self._web.stop()
        log.info("stopped%s", "" if clean else " (some results were not written)")
        return clean

    def _log_summary(self) -> None:
        """One line that accounts for every frame that entered inference."""
        engine, sinks = self.engine, self.sinks
        if engine is None or sinks is None:
            return
        submitted, completed, delivered = self._engine_totals()  # across pool rebuilds
        per_sink = ", ".join(
            f"{name}: {c['written']} written, {c['errors']} failed, {c['dropped']} dropped"
            for name, c in sinks.counts().items()
        )
        log.info(
            "accounting: %d frame(s) entered inference, %d finished, %d result(s) handed to "
            "sinks (%s)",
            submitted,
            completed,
            delivered,
            per_sink or "no sinks",
        )


class _RateMeter:
    """Completions per second between two calls."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), 0)

    def rate(self, total: int) -> float:
        now = time.monotonic()
        then, before = self._last
        self._last = (now, total)
        return (total - before) / (now - then) if now > then else 0.0


def run(
    cfg: Config,
    config_path: Path | None = None,
    shard: Shard | None = None,
    http_port: int | None = None,
) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT. Returns the exit code.

    Speaks systemd's notify protocol when ``$NOTIFY_SOCKET`` is set (see vidpipe.notify):
    READY=1 after start-up, watchdog pings while inference progresses, RELOADING=1 around a
    SIGHUP reload of ``config_path``, STOPPING=1 on SIGTERM.
    """
    daemon = Daemon(cfg, shard=shard, http_port=http_port)
    notifier = Notifier.from_env()
    daemon.install_signal_handlers()
    try:
        daemon.start()
    except BaseException as exc:
        # no READY=1: systemd fails the start; the reason shows in `systemctl status`
        notifier.status(f"start-up failed: {redact.redact_text(str(exc)) or type(exc).__name__}")
        daemon.stop_event.set()
        daemon.shutdown()
        raise
    log.info("vidpipe running (config %s)", config_path or "<memory>")
    reporter = Reporter(notifier, daemon.health, daemon.status_line, watchdog_interval_s())
    notifier.ready(daemon.status_line())
    reporter.start()

    def reload() -> None:
        if config_path is None:
            log.warning("SIGHUP ignored: no config file to re-read")
            return
        reporter.pause()
        notifier.reloading()
        ok = daemon.reload_from(config_path)
        notifier.ready(daemon.status_line() if ok else "reload rejected, previous config runs")
        reporter.resume()

    daemon.wait(reload)
    reporter.pause()
    notifier.stopping()
    clean = daemon.shutdown()
    code = 0 if clean and daemon.fatal is None else 1
    reporter.stop()
    notifier.close()
    return code
