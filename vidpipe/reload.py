"""What a live reload (SIGHUP) has to change: the difference between two configs.

Only the difference is applied, so that cameras the edit did not touch keep streaming without
a gap in their frame sequence:

* a camera that is new (or newly enabled, or newly assigned to this shard) starts;
* a camera that is gone (or disabled, or paused) stops; its frames already in inference
  finish; a paused camera stays listed, in state ``paused``, and starts again on resume;
* a camera whose settings changed restarts alone; so does every camera when the shared
  ``capture:`` defaults change;
* a change to a camera's ``tracking``, ``zones`` or ``lines`` alone restarts nothing: the
  camera's tracking scene is replaced (its tracks start afresh);
* a change to ``inference:`` or ``scheduler:`` rebuilds every inference pool (the old one
  drains while the new one takes over); a change to one detector (``model:`` or an entry of
  ``models:``) rebuilds that detector's pool alone; a camera whose detector changed restarts;
* ``secondary:`` and ``reid:`` apply at the next start;
* ``shutdown_timeout_s`` applies at once;
* ``http:``, ``sinks:`` and ``logging:`` apply only at the next start: the reload logs that.
"""

from __future__ import annotations

from dataclasses import dataclass

from vidpipe.config import (
    CameraConfig,
    Config,
    ConfigError,
    GpuConfig,
    InferenceConfig,
    OpenVINOConfig,
)
from vidpipe.shard import Shard

# Sections kept from the running config until the next start (listening socket, open files).
RESTART_ONLY_SECTIONS = ("http", "sinks", "logging", "events", "secondary", "reid")


def owned_cameras(cfg: Config, shard: Shard | None) -> dict[str, CameraConfig]:
    """The enabled cameras this process owns, running or paused, by name, in config order.

    Paused cameras count in the shard assignment: pausing one moves no other camera."""
    enabled = {c.name: c for c in cfg.cameras if c.enabled}
    if shard is None:
        return enabled
    balanced = cfg.sharding.assignment == "balanced"
    return {name: enabled[name] for name in shard.select(list(enabled), balanced)}


def active_cameras(cfg: Config, shard: Shard | None) -> dict[str, CameraConfig]:
    """The cameras this process runs (owned and not paused), by name, in config order."""
    return {n: c for n, c in owned_cameras(cfg, shard).items() if not c.paused}


def paused_cameras(cfg: Config, shard: Shard | None) -> tuple[str, ...]:
    """The cameras this process owns but does not run: shown as ``paused``."""
    return tuple(n for n, c in owned_cameras(cfg, shard).items() if c.paused)


def running_inference(cfg: Config, shard: Shard | None) -> InferenceConfig:
    """The ``inference`` section as this process compiles it (``hint: auto`` resolved by the
    number of cameras it runs)."""
    inference = cfg.inference
    # how many processes run the cameras is the supervisor's, read at its start: changing it
    # must not rebuild every process's inference pool at a reload
    fields = type(inference).model_fields
    start_only = ("processes", "start_timeout_s", "stream_while_loading")
    inference = inference.model_copy(
        update={k: fields[k].default for k in start_only if k in fields}
    )
    if isinstance(inference, OpenVINOConfig):
        return inference.for_cameras(len(active_cameras(cfg, shard)))
    return inference


def _restart_part(cam: CameraConfig) -> CameraConfig:
    """The camera without tracking, zones and lines: changing those needs no restart."""
    return cam.model_copy(update={"tracking": None, "zones": [], "lines": [], "secondary": None})


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    """The changes a reload applies, by camera name and section."""

    start: tuple[str, ...]
    stop: tuple[str, ...]
    restart: tuple[str, ...]
    keep: tuple[str, ...]
    rebuild_inference: bool
    restart_only: tuple[str, ...]
    changed_detectors: tuple[str, ...] = ()
    """Detectors added, removed or changed (``rebuild_inference`` is then True too)."""
    rebuild_all: bool = False
    """``inference:`` or ``scheduler:`` changed: every detector's pool is rebuilt."""

    @property
    def empty(self) -> bool:
        """True if nothing running changes."""
        return not (self.start or self.stop or self.restart or self.rebuild_inference)

    def summary(self) -> str:
        """One log line: what starts, stops, restarts, and what waits for a restart."""
        parts = [
            f"{label} {', '.join(names)}"
            for label, names in (
                ("start", self.start),
                ("stop", self.stop),
                ("restart", self.restart),
            )
            if names
        ]
        if self.rebuild_all:
            parts.append("rebuild the inference pool")
        elif self.rebuild_inference:
            parts.append(f"rebuild the inference pool of {', '.join(self.changed_detectors)}")
        parts.append(f"{len(self.keep)} camera(s) untouched")
        if self.restart_only:
            parts.append(f"{', '.join(self.restart_only)} changed: applies at the next start")
        return "; ".join(parts)


def diff_configs(old: Config, new: Config, shard: Shard | None = None) -> ConfigDiff:
    """What changes when the running ``old`` config is replaced by ``new``."""
    before, after = active_cameras(old, shard), active_cameras(new, shard)
    capture_changed = old.capture != new.capture
    restart = tuple(
        n
        for n in after
        if n in before
        and (
            capture_changed
            or _restart_part(before[n]) != _restart_part(after[n])
            or old.detector_of(before[n]) != new.detector_of(after[n])
        )
    )
    old_detectors, new_detectors = old.detectors(), new.detectors()
    changed_detectors = tuple(
        n
        for n in dict.fromkeys([*old_detectors, *new_detectors])
        if old_detectors.get(n) != new_detectors.get(n)
    )
    # an edit from one camera to two changes the hint ``auto`` picks: a rebuild too
    rebuild_all = (
        running_inference(old, shard) != running_inference(new, shard)
        or old.scheduler != new.scheduler
    )
    return ConfigDiff(
        start=tuple(n for n in after if n not in before),
        stop=tuple(n for n in before if n not in after),
        restart=restart,
        keep=tuple(n for n in after if n in before and n not in restart),
        rebuild_inference=rebuild_all or bool(changed_detectors),
        restart_only=tuple(s for s in RESTART_ONLY_SECTIONS if getattr(old, s) != getattr(new, s)),
        changed_detectors=changed_detectors,
        rebuild_all=rebuild_all,
    )


def effective_config(old: Config, new: Config) -> Config:
    """``new`` with the restart-only sections of ``old``: what actually runs after a reload."""
    return new.model_copy(update={s: getattr(old, s) for s in RESTART_ONLY_SECTIONS})


def with_http_port(cfg: Config, port: int | None) -> Config:
    """``cfg`` with ``http.port`` replaced (``vidpipe run --http-port``); None: unchanged."""
    if port is None:
        return cfg
    if not 0 <= port <= 65535:
        raise ConfigError([f"--http-port: {port} is not a TCP port (0..65535)"])
    return cfg.model_copy(update={"http": cfg.http.model_copy(update={"port": port})})


def on_gpu(cfg: Config, gpu: int | None) -> Config:
    """``cfg`` as one process placed on ``gpu`` runs it: inference on that device alone, its
    NVDEC cameras decoding there (None: unchanged)."""
    if gpu is None or not isinstance(cfg.inference, GpuConfig):
        return cfg

    def placed(cam: CameraConfig) -> CameraConfig:
        return cam.model_copy(update={"gpu": gpu}) if cfg.decoder_of(cam) == "nvdec" else cam

    inference = cfg.inference.model_copy(update={"devices": [gpu]})
    return cfg.model_copy(
        update={"inference": inference, "cameras": [placed(c) for c in cfg.cameras]}
    )
