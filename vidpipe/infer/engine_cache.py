"""On-disk cache of serialized TensorRT engines.

An engine only runs on the TensorRT version and GPU it was built for, with the profile it was
built with. The key holds all of it: the model's sha256, the TensorRT version, the GPU's name
and compute capability, the precision and the batch profile (and the input rewrite version).
Files are written atomically (``vidpipe.fileio``) with a JSON sidecar that states the key in
words. A file the runtime refuses (it returns None) is rebuilt by the caller.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path

from vidpipe.fileio import write_atomic

log = logging.getLogger(__name__)

# Bump when onnx_prep changes the graph that TensorRT sees.
PREP_VERSION = 1


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class EngineKey:
    """Everything an engine depends on."""

    model_sha256: str
    tensorrt_version: str
    gpu_name: str
    compute_capability: str
    precision: str
    min_batch: int
    opt_batch: int
    max_batch: int
    workspace_mib: int
    prep_version: int = PREP_VERSION

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


class EngineCache:
    """Engine files in one directory, named ``<model stem>-<key digest 16>.engine``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory.expanduser()

    def path_for(self, model_stem: str, key: EngineKey) -> Path:
        return self.directory / f"{model_stem}-{key.digest()[:16]}.engine"

    def load(self, model_stem: str, key: EngineKey) -> bytes | None:
        """The cached engine's bytes, or None when absent or its sidecar disagrees."""
        path = self.path_for(model_stem, key)
        try:
            data = path.read_bytes()
            meta = json.loads(path.with_suffix(".json").read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("engine cache: cannot read %s (%s); rebuilding", path, exc)
            return None
        if meta.get("key") != asdict(key) or meta.get("size") != len(data):
            log.warning("engine cache: %s does not match its key; rebuilding", path)
            return None
        return data

    def store(self, model_stem: str, key: EngineKey, data: bytes) -> Path:
        """Write an engine and its sidecar atomically; returns the engine's path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path_for(model_stem, key)
        meta = {"key": asdict(key), "size": len(data)}
        write_atomic(path, data)
        write_atomic(path.with_suffix(".json"), json.dumps(meta, indent=1).encode())
        return path

    def discard(self, model_stem: str, key: EngineKey) -> None:
        """Remove a stale or foreign engine so that it is rebuilt."""
        path = self.path_for(model_stem, key)
        for p in (path, path.with_suffix(".json")):
            p.unlink(missing_ok=True)
