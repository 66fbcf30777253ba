"""Camera drop-ins: ``cameras.d/<name>.yaml`` beside the main config file, one camera each.

The control API writes them (``vidpipe.api``); the loader reads them after the main file, so
``vidpipe run``, ``vidpipe check`` and a SIGHUP all run what the API last said. The main
file is never rewritten: its comments and layout stay the user's.
"""

from __future__ import annotations

import re
from pathlib import Path

DROPIN_DIR = "cameras.d"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def dropin_dir(config_path: Path) -> Path:
    """The drop-in directory of the config file at ``config_path``."""
    return config_path.parent / DROPIN_DIR


def dropin_path(config_path: Path, name: str) -> Path:
    """Where camera ``name``'s drop-in lives (``name`` is a validated camera name)."""
    if not _NAME.fullmatch(name):  # a name with '/' or '..' must never become a path
        raise ValueError(f"not a camera name: {name!r}")
    return dropin_dir(config_path) / f"{name}.yaml"


def _yaml_files(config_path: Path) -> list[Path]:
    """The ``*.yaml`` files of the drop-in directory. Hidden files (an atomic write's
    temporary) and other suffixes (an editor's backup, ``door.yaml~``) are not drop-ins."""
    folder = dropin_dir(config_path)
    if not folder.is_dir():
        return []
    return [f for f in folder.iterdir() if f.name.endswith(".yaml") and f.name[0] != "."]


def dropin_files(config_path: Path) -> dict[str, Path]:
    """Camera name -> drop-in file, sorted by name (see ``stray_files`` for the rest)."""
    found = {f.name.removesuffix(".yaml"): f for f in _yaml_files(config_path)}
    return dict(sorted((n, f) for n, f in found.items() if _NAME.fullmatch(n)))


def stray_files(config_path: Path) -> list[Path]:
    """``*.yaml`` files of the drop-in directory whose name is no camera's (``door cam.yaml``):
    the loader refuses them rather than leave a camera the user meant to add unread."""
    return sorted(f for f in _yaml_files(config_path) if not _NAME.fullmatch(f.name[:-5]))
