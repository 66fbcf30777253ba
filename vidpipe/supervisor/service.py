"""``vidpipe run`` with ``inference.processes`` above 1: one service for the whole box.

The supervisor starts one child process per shard (``vidpipe.supervisor.child``), restarts a
child that dies or hangs (``children``), serves the box's one HTTP port (``/metrics`` merged
from the children, ``/api/v1`` through its own control API, the page passed through), starts
or finds CUDA MPS on a GPU config (``mps``), forwards SIGHUP, and stops every child on
SIGTERM. To systemd it is the one main process: READY=1 once every child is ready, STATUS=
with the children's lines, WATCHDOG=1 while its loop runs (a child that stops pinging is
restarted by the supervisor itself).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from types import FrameType

from vidpipe.api import ApiRoutes, CameraControl
from vidpipe.config import Config
from vidpipe.health import Health
from vidpipe.notify import Notifier, watchdog_interval_s
from vidpipe.supervisor.children import Children
from vidpipe.supervisor.merge import MergedMetrics
from vidpipe.supervisor.mps import MpsDaemon, plan_mps
from vidpipe.supervisor.plan import ProcessPlan
from vidpipe.supervisor.proxy import ProxyRoutes
from vidpipe.supervisor.runtime import SupervisorRuntime
from vidpipe.web.server import WebServer, build_app, is_loopback

log = logging.getLogger(__name__)

_TICK_S = 0.5
_STATUS_PERIOD_S = 5.0
#: Beyond ``shutdown_timeout_s``: the children's interpreters and model teardown.
_STOP_MARGIN_S = 15.0


class _Signals:
    """Flags set by the signal handlers; the main loop acts on them."""

    def __init__(self) -> None:
        self.stop = 0
        self.reload = False

    def install(self, children: Children) -> None:
        def on_stop(signum: int, _frame: FrameType | None) -> None:
            self.stop += 1
            if self.stop > 1:  # as the daemon does: a second one ends everything at once
                log.warning("second %s: stopping every process now", signal.Signals(signum).name)
                children.forward(signal.SIGTERM)
                logging.shutdown()
                os._exit(1)
            log.info("%s received: stopping every process", signal.Signals(signum).name)

        def on_reload(_signum: int, _frame: FrameType | None) -> None:
            self.reload = True

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGHUP, on_reload)


def _start_web(cfg: Config, runtime: SupervisorRuntime, health: Health) -> WebServer:
    http = cfg.http
    children = runtime.children
    proxy = ProxyRoutes(children, runtime.owner, lambda: [c.name for c in runtime.cfg.cameras])
    installers = [ApiRoutes(CameraControl(runtime)).install]
    if http.live.enabled:
        installers.append(proxy.install)
    app = build_app(
        MergedMetrics(children, http.admin_token or http.token),
        health,
        http.token,
        installers,
        admin_token=http.admin_token,
        loopback=is_loopback(http.host),
    )
    web = WebServer(app, http.host, http.port)
    port = web.start()
    log.info("HTTP on http://%s:%d for %d processes", http.host, port, len(children.slots))
    return web


def run_supervisor(
    cfg: Config, config_path: Path, plan: ProcessPlan, http_port: int | None = None
) -> int:
    """Run ``plan.processes`` children under supervision until SIGTERM. Returns the exit code:
    0 when every child stopped cleanly."""
    run_dir = Path(tempfile.mkdtemp(prefix="vidpipe-", dir=os.environ.get("RUNTIME_DIRECTORY")))
    notifier = Notifier.from_env()
    watchdog_s = watchdog_interval_s()
    signals = _Signals()
    mps = MpsDaemon(plan_mps(plan.gpu, plan.processes), run_dir)
    children = Children(
        config_path,
        plan.processes,
        run_dir,
        mps.start(),
        cfg.inference.start_timeout_s,
        watchdog_s,
        plan.gpus,
    )
    signals.install(children)
    for i, names in enumerate(plan.shards):
        on = f" on GPU {plan.gpus[i]}" if plan.gpus else ""
        log.info(
            "shard %d/%d%s: %d camera(s): %s", i, plan.processes, on, len(names), ", ".join(names)
        )
    runtime = SupervisorRuntime(
        cfg, config_path, children, cfg.http.admin_token or cfg.http.token, http_port
    )
    health = Health()
    web = None
    clean = False
    try:
        if cfg.http.enabled:
            web = _start_web(runtime.cfg, runtime, health)
        children.start_all()
        _loop(children, runtime, signals, notifier, health, watchdog_s)
        notifier.stopping()
        health.set_stopping()
        clean = children.stop(cfg.shutdown_timeout_s + _STOP_MARGIN_S)
    finally:
        if not children.stopping:  # an error above: the children must not outlive us
            children.stop(cfg.shutdown_timeout_s + _STOP_MARGIN_S)
        if web is not None:
            web.stop()
        mps.stop()
        notifier.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    log.info("stopped %d process(es)%s", plan.processes, "" if clean else " (not all cleanly)")
    return 0 if clean else 1


def _loop(
    children: Children,
    runtime: SupervisorRuntime,
    signals: _Signals,
    notifier: Notifier,
    health: Health,
    watchdog_s: float | None,
) -> None:
    """Until a stop: handle the children, forward reloads, talk to the service manager."""
    announced = False
    next_status = next_ping = 0.0
    while not signals.stop:
        children.poll(_TICK_S)
        if signals.reload:
            signals.reload = False
            notifier.reloading()
            runtime.reload_from_file()
            notifier.ready(children.status_line())
        now = time.monotonic()
        if not announced and children.all_ready():
            announced = True
            health.set_ready()
            log.info("all %d processes ready", len(children.slots))
            notifier.ready(children.status_line())
        if now >= next_status:
            notifier.status(children.status_line())
            next_status = now + _STATUS_PERIOD_S
        if watchdog_s is not None and now >= next_ping:
            notifier.watchdog()  # the children's own pings are checked in children.poll
            next_ping = now + watchdog_s
