"""The process lifecycle: start, signals, SIGHUP reload, shutdown, systemd notifications.

The pipeline itself is assembled in ``vidpipe.assemble``; the daemon decides when: it plans
and starts it, applies a reload's difference (everything that can reject the new config
happens before anything running is touched), and stops it within ``shutdown_timeout_s``.
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

from vidpipe import redact
from vidpipe.api import ApiRoutes, CameraControl
from vidpipe.assemble import Pipeline
from vidpipe.capture.native_stderr import route_stdout
from vidpipe.capture.worker import CaptureWorker
from vidpipe.config import Config, ConfigError, GpuConfig, load_config
from vidpipe.health import Health
from vidpipe.infer.base import BackendError
from vidpipe.metrics import Metrics
from vidpipe.model import log_model
from vidpipe.notify import Notifier, Reporter, watchdog_interval_s
from vidpipe.plan import capture_plan, plan_inference
from vidpipe.reload import ConfigDiff, diff_configs, effective_config, on_gpu, with_http_port
from vidpipe.schedule.scheduler import Scheduler
from vidpipe.shard import Shard
from vidpipe.supervisor.plan import outgrown
from vidpipe.types import CameraState

log = logging.getLogger(__name__)


class Daemon:
    """A running vidpipe pipeline."""

    def __init__(
        self,
        cfg: Config,
        metrics: Metrics | None = None,
        shard: Shard | None = None,
        http_port: int | None = None,
        config_path: Path | None = None,
        gpu: int | None = None,
    ) -> None:
        self.http_port_override = http_port  # `run --http-port`, kept across reloads
        self.gpu = gpu  # a process of a box of several GPUs runs on this one (reload.on_gpu)
        self.cfg = self._own(cfg)
        # the file SIGHUP and the control API re-read; None: the API cannot keep a change
        self.config_path = config_path
        # one change at a time: a SIGHUP reload and the control API's requests
        self.reload_lock = threading.Lock()
        self.shard = shard  # None: every camera; else only the cameras this shard owns
        self.metrics = metrics or Metrics()
        self.stop_event = threading.Event()
        self.health = Health(stall_after_s=max(30.0, 4 * cfg.capture.stall_timeout_s))
        self.pipeline = Pipeline(self.cfg, self.metrics, self.health, shard, self._device_lost)
        if self.cfg.http.enabled:
            self.pipeline.web_installers.append(ApiRoutes(CameraControl(self)).install)
        self._signals = 0
        self.reload_requested = threading.Event()  # SIGHUP; handled on the main thread
        self._rate = _RateMeter()
        self.fatal: BaseException | None = None  # set when the inference device is lost

    @property
    def scheduler(self) -> Scheduler | None:
        return self.pipeline.scheduler

    @property
    def workers(self) -> dict[str, CaptureWorker]:
        return self.pipeline.workers

    @property
    def http_port(self) -> int | None:
        return self.pipeline.http_port

    # ------------------------------------------------------------------ start-up

    def start(self, on_serving: Callable[[], object] | None = None) -> None:
        """Open the models, start the HTTP server and the cameras, then the sinks and
        inference; with ``inference.stream_while_loading`` the server and the cameras start
        first. ``on_serving`` is called
        once the HTTP port answers and the cameras stream. A start that fails stops what it
        started."""
        # a GPU model takes seconds to load and warm up: its cameras may stream meanwhile
        # (their decoding slows the load); else a bad model is refused before anything starts
        inference = self.cfg.inference
        early = isinstance(inference, GpuConfig) and inference.stream_while_loading
        try:
            with self.reload_lock:  # a control API change waits for the models
                cameras = capture_plan(self.cfg, self.shard)
                if early:
                    self._start_capture(cameras, on_serving)
                plan = plan_inference(self.cfg, self.metrics, shard=self.shard)
                for detector in plan.detectors.values():
                    log_model(detector.name, detector.loaded)
                if not early:
                    self._start_capture(cameras, on_serving)
                self.pipeline.start(plan)
        except BaseException:
            self.stop_event.set()
            self.shutdown()
            raise
        log.info(
            "started %d camera(s)%s",
            len(self.workers),
            f" (shard {self.shard}, of {len(self.cfg.cameras)} configured)" if self.shard else "",
        )
        self.health.set_ready()

    def _start_capture(
        self, cameras: dict[str, str], on_serving: Callable[[], object] | None
    ) -> None:
        self.pipeline.start_capture(cameras)
        if on_serving is not None:
            on_serving()

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
        diff = diff_configs(self.cfg, new_cfg, self.shard)
        keep = {
            name: model
            for name, model in self.pipeline.models.items()
            if not diff.rebuild_all and name not in diff.changed_detectors
        }
        plan = plan_inference(new_cfg, self.metrics, keep, self.shard)
        before = len(self.workers)
        self.cfg = effective_config(self.cfg, new_cfg)
        self.pipeline.apply(self.cfg, diff, plan)
        if warning := outgrown(self.cfg, before, len(self.workers)):
            log.warning("%s", warning)
        return diff

    def load(self, dropins: dict[str, str | None] | None = None) -> Config:
        """The config file and its drop-ins as they are now (``dropins`` replaced, see
        ``load_config``), with ``--http-port`` applied. Raises ConfigError."""
        if self.config_path is None:
            raise ConfigError(["no config file to re-read"])
        return self._own(load_config(self.config_path, dropins=dropins))

    def _own(self, cfg: Config) -> Config:
        """``cfg`` with what is this process's own: its HTTP port and its GPU."""
        return on_gpu(with_http_port(cfg, self.http_port_override), self.gpu)

    def capture_stats(self) -> dict[str, dict[str, Any]]:
        """The running and paused cameras' capture figures (``Pipeline.capture_stats``)."""
        return self.pipeline.capture_stats()

    def reload_from(self, path: Path) -> bool:
        """Re-read ``path`` and apply it; on any problem log it and keep the old config."""
        try:
            with self.reload_lock:
                diff = self.reload(self._own(load_config(path)))
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

    def status_line(self) -> str:
        """One line for systemd's STATUS: "7/8 cameras streaming, 96 fps"."""
        workers = list(self.workers.values())
        streaming = sum(1 for w in workers if w.state is CameraState.STREAMING)
        fps = self._rate.rate(self.pipeline.totals()[1])
        prefix = f"shard {self.shard}: " if self.shard is not None else ""
        return f"{prefix}{streaming}/{len(workers)} cameras streaming, {fps:.0f} fps"

    # ------------------------------------------------------------------ shutdown

    def shutdown(self) -> bool:
        """Stop in pipeline order within ``shutdown_timeout_s``. True if nothing was lost."""
        deadline = time.monotonic() + self.cfg.shutdown_timeout_s
        self.health.set_stopping()
        clean = self.pipeline.stop(deadline)
        self._log_summary()
        self.pipeline.stop_web()
        log.info("stopped%s", "" if clean else " (some results were not written)")
        return clean

    def _log_summary(self) -> None:
        """One line that accounts for every frame that entered inference."""
        sinks = self.pipeline.sinks
        if self.scheduler is None or sinks is None:
            return
        submitted, completed, delivered = self.pipeline.totals()  # across pool rebuilds
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
    gpu: int | None = None,
) -> int:
    """Run the daemon in the foreground until SIGTERM/SIGINT. Returns the exit code.

    Speaks systemd's notify protocol when ``$NOTIFY_SOCKET`` is set (see vidpipe.notify):
    READY=1 after start-up, watchdog pings while inference progresses, RELOADING=1 around a
    SIGHUP reload of ``config_path``, STOPPING=1 on SIGTERM.
    """
    # Nothing of the daemon's own goes to stdout, but PyNvVideoCodec prints its error lines
    # there: routed through the redacting reader too once nvdec cameras load it.
    route_stdout()
    daemon = Daemon(cfg, shard=shard, http_port=http_port, config_path=config_path, gpu=gpu)
    notifier = Notifier.from_env()
    daemon.install_signal_handlers()

    def serving() -> None:
        # the cameras stream while the models load; a supervisor merges this process's
        # /metrics and pages from now on (vidpipe.supervisor)
        port = [f"X_VIDPIPE_HTTP_PORT={daemon.http_port}"] if daemon.http_port else []
        notifier.status("starting: cameras streaming, models loading", *port)

    try:
        daemon.start(on_serving=serving)
    except BaseException as exc:
        # no READY=1: systemd fails the start; the reason shows in `systemctl status`
        notifier.status(f"start-up failed: {redact.redact_text(str(exc)) or type(exc).__name__}")
        raise
    log.info("vidpipe running (config %s)", config_path or "<memory>")
    reporter = Reporter(notifier, daemon.health, daemon.status_line, watchdog_interval_s())
    # the port too: a supervisor (vidpipe.supervisor) reaches its children's servers there
    port = [f"X_VIDPIPE_HTTP_PORT={daemon.http_port}"] if daemon.http_port else []
    notifier.ready(daemon.status_line(), *port)
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
