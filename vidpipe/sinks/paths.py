"""File names built from untrusted strings (camera names) that cannot leave their directory.

Camera names come from the config and end up in file names of the snapshot sink. ``safe_name``
turns any string into one path component; ``safe_join`` is the second line of defence and
refuses any join that would land outside its base directory.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: Longest component ``safe_name`` returns; leaves room for ``-<seq>.jpg`` under NAME_MAX.
MAX_NAME_LEN = 64
_HASH_LEN = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(name: str) -> str:
    """Turn ``name`` into a single, harmless file-name component.

    Every character outside ``[A-Za-z0-9._-]`` (separators, NUL, spaces, non-ASCII) becomes
    ``_``; leading dots are removed (no ``.``, ``..`` or hidden files); the result is capped at
    ``MAX_NAME_LEN`` characters. Whenever the result differs from ``name``, ``-`` and a short
    hash of the original are appended, so that ``"a/b"`` and ``"a_b"`` do not collide. A name
    that is already safe is returned unchanged.

    Args:
        name: any string, e.g. a camera name.

    Returns:
        A non-empty component of at most ``MAX_NAME_LEN`` characters, matching
        ``[A-Za-z0-9_-][A-Za-z0-9._-]*``.
    """
    cleaned = _UNSAFE.sub("_", name).lstrip(".")
    if cleaned == name and 0 < len(cleaned) <= MAX_NAME_LEN:
        return cleaned
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]
    stem = cleaned[: MAX_NAME_LEN - _HASH_LEN - 1] or "_"
    return f"{stem}-{digest}"


def safe_join(base: Path, *parts: str) -> Path:
    """Join ``parts`` onto ``base`` and refuse results outside ``base``.

    Symbolic links are resolved on both sides, so a link inside ``base`` that points elsewhere
    is refused too.

    Args:
        base: the directory everything must stay in (need not exist yet).
        *parts: path components, normally from ``safe_name``.

    Returns:
        The resolved, absolute joined path.

    Raises:
        ValueError: the result is not ``base`` or below it, or a part contains a NUL byte.
    """
    for part in parts:
        if "\0" in part:
            raise ValueError(f"path component contains a NUL byte: {part!r}")
    root = base.resolve()
    target = root.joinpath(*parts).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"path {target} escapes its base directory {root}")
    return target
