"""Wire the stages together and own the process lifecycle.

This is the only module that knows the order of the stages:
capture workers -> FrameHub -> Engine (preprocess, infer, postprocess) -> SinkPool.

Shutdown runs in pipeline order, every step with a deadline: stop capture, let the engine
finish every frame already submitted, flush the sinks, close the backend.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from vidpipe.capture.worker import CaptureWorker, configure_ffmpeg_env
from vidpipe.config import Config
from vidpipe.engine import CameraRules, Engine
from vidpipe.handoff import FrameHub
from vidpipe.health import Health
from vidpipe.metrics import Metrics
from vidpipe.model import camera_rules, open_model
from vidpipe.postprocess.decode import DecodeParams
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks import SinkPool, build_sinks
from vidpipe.types import Frame
from vidpipe.web import RouteInstaller, WebServer, build_app

log = logging.getLogger(__name__)


class Daemon:
    """A running vidpipe pipeline."""

    def __init__(self, cfg: Config, metrics: Metrics | None = None) -> None:
        self.cfg = cfg
        self.metrics = metrics or Metrics()
        self.stop_event = threading.Event()
        self.hub = FrameHub()
        self.workers: dict[str, CaptureWorker] = {}
        self.engine: Engine | None = None
        self.sinks: SinkPool | None = None
        self.health = Health(stall_after_s=max(30.0, 4 * cfg.capture.stall_timeout_s))
        # features (live view, ...) append route installers before start()
        self.web_installers: list[RouteInstaller] = []
        self.http_port: int | None = None
        self._web: WebServer | None = None
        self._signals = 0
        self.fatal: BaseException | None = None

    # ------------------------------------------------------------------ start-up

    def start(self) -> None:
        """Compile the model, bind metrics, start sinks, the engine and the cameras."""
        cfg = self.cfg
        loaded = open_model(cfg.model, cfg.inference)
        rules = camera_rules(cfg, loaded)
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
        if cfg.http.enabled:
            app = build_app(self.metrics, self.health, cfg.http.token, self.web_installers)
            self._web = WebServer(app, cfg.http.host, cfg.http.port)
            self.http_port = self._web.start()
            log.info(
                "HTTP on http://%s:%d (/metrics, /healthz, /readyz)%s",
                cfg.http.host,
                self.http_port,
                ", bearer token required" if cfg.http.token else "",
            )
        self.sinks = SinkPool(build_sinks(cfg.sinks, draw=draw_detections), self.metrics)
        self.sinks.start()
        spec = loaded.backend.input_spec
        self.engine = Engine(
            loaded.backend,
            loaded.decoder,
            loaded.labels,
            self.metrics,
            self.sinks.submit,
            default_rules=CameraRules(
                DecodeParams(spec.width, spec.height, cfg.model.score_threshold), None
            ),
            iou_threshold=cfg.model.iou_threshold,
            max_frame_age_s=cfg.scheduler.max_frame_age_ms / 1000.0,
            keep_images=self.sinks.wants_images,
            on_fatal=self._device_lost,
        )
        for name, r in rules.items():
            self.engine.set_rules(name, r)
        self.health.attach(self._progress)
        self.engine.start(self.hub)
        configure_ffmpeg_env(cfg.capture.analyze_duration_ms)
        for cam in cfg.cameras:
            if cam.enabled:
                self._start_camera(cam.name)
        log.info("started %d camera(s)", len(self.workers))
        self.health.set_ready()

    def _start_camera(self, name: str) -> None:
        cam = next(c for c in self.cfg.cameras if c.name == name)
        cm = self.metrics.camera(name)

        def dropped(_frame: Frame) -> None:
            cm.drop("overwritten")

        live = cam.is_stream or cam.realtime  # live: keep the newest frame; files: backpressure
        box = self.hub.add(name, "newest" if live else "block", dropped)
        worker = CaptureWorker(cam, self.cfg.capture, box, cm)
        self.workers[name] = worker
        worker.start()

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
        """SIGTERM/SIGINT: stop gracefully; a second one exits at once."""

        def handler(signum: int, _frame: FrameType | None) -> None:
            self._signals += 1
            if self._signals > 1:
                log.warning("second %s: exiting now", signal.Signals(signum).name)
                logging.shutdown()
                os._exit(1)
            log.info("%s received: shutting down", signal.Signals(signum).name)
            self.stop_event.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def wait(self) -> None:
        """Block the main thread (never in a read) until a stop is requested."""
        while not self.stop_event.wait(0.5):
            pass

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
        per_sink = ", ".join(
            f"{name}: {c['written']} written, {c['errors']} failed, {c['dropped']} dropped"
            for name, c in sinks.counts().items()
        )
        log.info(
            "accounting: %d frame(s) entered inference, %d finished, %d result(s) handed to "
            "sinks (%s)",
            engine.submitted,
            engine.completed,
            engine.delivered,
            per_sink or "no sinks",
        )


def run(cfg: Config, config_path: Path | None = None) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT. Returns the exit code."""
    daemon = Daemon(cfg)
    daemon.install_signal_handlers()
    try:
        daemon.start()
    except BaseException:
        daemon.stop_event.set()
        daemon.shutdown()
        raise
    log.info("vidpipe running (config %s)", config_path or "<memory>")
    daemon.wait()
    clean = daemon.shutdown()
    return 0 if clean and daemon.fatal is None else 1
