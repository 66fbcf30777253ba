"""On-disk cache of ONNX models converted to PyTorch modules (the torch backend).

onnx2torch takes about 5 s for YOLOX-Nano on the H200's host, a fifth of a start before the
first camera; a pickled module loads in a fraction of that. The key holds what the module
depends on: the ONNX file's sha256, the precision the graph was prepared for, the PyTorch and
onnx2torch versions and the ``onnx_prep`` rewrite version. Files sit beside the TensorRT
engines (``inference.advanced.engine_cache_dir``) and are written atomically. The cache holds
pickles, which run code when loaded: it must be writable only by the service's user, as the
default (under its home) is.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vidpipe.fileio import write_atomic
from vidpipe.infer.engine_cache import PREP_VERSION, file_sha256

log = logging.getLogger(__name__)


def module_key(model_path: Path, precision: str, torch: Any, onnx2torch: Any) -> dict[str, Any]:
    """Everything a converted module depends on, in words."""
    return {
        "model_sha256": file_sha256(model_path),
        "precision": precision,
        "torch": str(torch.__version__),
        "onnx2torch": str(getattr(onnx2torch, "__version__", "?")),
        "prep_version": PREP_VERSION,
    }


def cached_module(
    directory: Path | None,
    model_path: Path,
    key: dict[str, Any],
    torch: Any,
    convert: Callable[[], Any],
) -> tuple[Any, bool]:
    """The converted module from ``directory``, or ``convert()``'s, stored there for the next
    start. Returns the module and whether it came from the cache. A cache that cannot be read
    or written is logged and skipped: it only saves time."""
    if directory is None:
        return convert(), False
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = directory.expanduser() / f"{model_path.stem}-{digest}.torch.pt"
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
        if meta.get("key") == key:
            return torch.load(path, map_location="cpu", weights_only=False), True
        log.warning("converted-model cache: %s does not match its key; converting", path)
    except FileNotFoundError:
        pass
    except Exception as exc:  # a truncated or foreign file: convert again
        log.warning("converted-model cache: cannot load %s (%s); converting", path, exc)
    module = convert()
    try:
        buf = io.BytesIO()
        torch.save(module, buf)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, buf.getvalue())
        write_atomic(path.with_suffix(".json"), json.dumps({"key": key}, indent=1).encode())
    except Exception as exc:
        log.warning("converted-model cache: cannot write %s (%s)", path, exc)
    return module, False
