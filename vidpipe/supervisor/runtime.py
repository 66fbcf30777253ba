"""The control API's view of a supervised box (``vidpipe.api.Runtime``).

Writes go through the supervisor's own ``CameraControl``: it validates the change with every
file, writes the drop-in and calls ``reload``, which forwards SIGHUP to every child; each
child re-reads the same files and starts or stops only the cameras of its own shard. Reads
of camera state merge the children's answers: each child reports the cameras it runs (or
holds paused) and says "other shard" of the rest.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from pathlib import Path
from typing import Any

from vidpipe import redact
from vidpipe.config import Config, ConfigError, load_config
from vidpipe.reload import ConfigDiff, diff_configs, effective_config, owned_cameras, with_http_port
from vidpipe.shard import Shard
from vidpipe.supervisor.children import Children
from vidpipe.supervisor.merge import scrape_json
from vidpipe.supervisor.plan import placement_problems

log = logging.getLogger(__name__)

#: What a child's ``/api/v1/cameras`` says of a camera another child runs.
_NOT_MINE = ("other shard", "disabled")


class SupervisorRuntime:
    """The running config of the box and the children that run it."""

    def __init__(
        self,
        cfg: Config,
        config_path: Path,
        children: Children,
        token: str | None,
        http_port: int | None = None,
    ) -> None:
        self.cfg = with_http_port(cfg, http_port)
        self.config_path: Path | None = config_path
        self.reload_lock = threading.Lock()
        self.children = children
        self.token = token
        self._http_port = http_port

    @property
    def count(self) -> int:
        return len(self.children.slots)

    def owner(self, camera: str) -> int | None:
        """The shard that runs (or holds paused) ``camera`` under the running config."""
        for i in range(self.count):
            if camera in owned_cameras(self.cfg, Shard(i, self.count) if self.count > 1 else None):
                return i
        return None

    def load(self, dropins: dict[str, str | None] | None = None) -> Config:
        """The config file and its drop-ins as they are now. Raises ConfigError."""
        assert self.config_path is not None
        cfg = with_http_port(load_config(self.config_path, dropins=dropins), self._http_port)
        if problems := placement_problems(cfg, self.children.gpus):
            raise ConfigError(problems)
        return cfg

    def reload(self, new_cfg: Config) -> ConfigDiff:
        """Take ``new_cfg`` as the running config and have every child apply its share."""
        diff = diff_configs(self.cfg, new_cfg, None)
        self.cfg = effective_config(self.cfg, new_cfg)
        self.children.forward(signal.SIGHUP)
        return diff

    def reload_from_file(self) -> bool:
        """SIGHUP: re-read the files; if they load, forward the reload to every child."""
        try:
            with self.reload_lock:
                diff = self.reload(self.load())
        except ConfigError as exc:
            log.error(
                "reload rejected, the processes keep the previous config: %s",
                redact.redact_text(str(exc)),
            )
            return False
        log.info("reload forwarded to %d process(es): %s", self.count, diff.summary())
        return True

    def capture_stats(self) -> dict[str, dict[str, Any]]:
        """Each running or paused camera's state and input rate, from the child that owns it;
        ``starting`` for one whose child has not answered (starting, or restarting)."""
        answers = scrape_json(self.children, "/api/v1/cameras", self.token, json.loads)
        stats: dict[str, dict[str, Any]] = {}
        for answer in answers.values():
            for view in answer.get("cameras", []) if isinstance(answer, dict) else []:
                if view.get("state") not in _NOT_MINE:
                    stats[view["name"]] = {"state": view["state"], "fps_in": view.get("fps", 0.0)}
        for name, cam in owned_cameras(self.cfg, None).items():
            stats.setdefault(name, {"state": "paused" if cam.paused else "starting", "fps_in": 0.0})
        return stats
