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
from typing import Any

from vidpipe.capture.worker import CaptureWorker, configure_ffmpeg_env
from vidpipe.config import Config
from vidpipe.engine import CameraRules, Engine
from vidpipe.handoff import FrameHub
from vidpipe.metrics import Metrics
from vidpipe.model import camera_rules, open_model
from vidpipe.postprocess.decode import DecodeParams
from vidpipe.postprocess.draw import draw_detections
from vidpipe.sinks import SinkPool, build_sinks
from vidpipe.types import Frame

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
        self.metrics_port: int | None = None
        self._metrics_server: Any = None
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
        if cfg.metrics.enabled:
            self._metrics_server, self.metrics_port = self.metrics.serve(
                cfg.metrics.host, cfg.metrics.port
            )
            log.info("metrics on http://%s:%d/metrics", cfg.metrics.host, self.metrics_port)
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
        self.engine.start(self.hub)
        configure_ffmpeg_env()
        for cam in cfg.cameras:
            if cam.enabled:
                self._start_camera(cam.name)
        log.info("started %d camera(s)", len(self.workers))

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

    def _device_lost(self, exc: BaseException) -> None:
        """The inference device is unusable: stop (watchdog pings end), exit non-zero."""
        log.critical("inference device lost, stopping so that the service is restarted: %s", exc)
        self.fatal = exc
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
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
        log.info("stopped%s", "" if clean else " (some results were not written)")
        return clean


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
