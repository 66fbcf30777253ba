"""Config of the event store (``events:``): every zone, line and clip event in one SQLite file."""

from __future__ import annotations

from pydantic import Field

from vidpipe.config.base import ConfigModel


class EventsConfig(ConfigModel):
    """The embedded event store, queried through ``/api/v1/events`` and ``vidpipe events``."""

    enabled: bool | None = Field(
        None,
        description="keep every zone, line and clip event; null: on when a camera has zones, "
        "lines or clips (nothing else makes events)",
    )
    path: str = Field(
        "var/events.db",
        min_length=1,
        description="the SQLite file (WAL mode); a relative path is under the working "
        "directory, /var/lib/vidpipe with the systemd unit",
    )
    max_age_days: float = Field(30.0, gt=0, description="events older than this are deleted")
    queue_size: int = Field(
        4096,
        ge=1,
        le=1_000_000,
        description="events waiting for the writer; when full, new events are dropped and "
        'counted (vidpipe_events_dropped_total{reason="queue_full"})',
    )
