"""Atomic file writes: the one way the daemon replaces a file that others may be reading.

A reader (a web server, the clip store, a user's script) never sees half a file: the data goes
to a temporary file in the same directory, then ``os.replace`` swaps it in.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

#: Every temporary name starts so: a directory's owner (the clip store) recognizes and removes
#: what a crash left, and never lists or serves it.
TMP_PREFIX = ".tmp-"


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path``, unique per process and thread: ``.tmp-<name>.<pid>.<tid>``."""
    return path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}.{threading.get_ident()}")


def is_temporary(name: str) -> bool:
    """Whether a file name is a temporary one (``temporary_name``), finished or not."""
    return name.startswith(TMP_PREFIX)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``, on error it is
    removed and the error goes on."""
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_atomic(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Write ``data`` to ``path`` atomically.

    The file gets ``mode & ~umask`` (0666 by default: ``mkstemp`` would make it 0600,
    unreadable to a web server).
    """
    with replacing(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
