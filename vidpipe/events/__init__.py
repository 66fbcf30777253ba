"""The event store: every zone enter and leave, line crossing and clip as a row of one SQLite
file, written by one thread (``store``), read by ``/api/v1/events`` and ``vidpipe events``
(``query``). ``db`` holds the file's schema and its migrations."""

from vidpipe.events.db import SCHEMA_VERSION, StoreError
from vidpipe.events.store import EventStore

__all__ = ["SCHEMA_VERSION", "EventStore", "StoreError"]
