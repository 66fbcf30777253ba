"""Test and demo assets: where each comes from, how it is verified, and where it is found.

The project knows every asset's public URL and sha256. A checkout that sits next to a
``shared/assets`` folder (``<project root>/../shared/assets``) uses that folder, read-only; a
user without it downloads the same files from their origin into the user cache. Every file is
checked against its sha256 before it is used, wherever it came from.

Command line (used by the Makefile; prints the resolved directory on stdout)::

    python -m vidpipe.assets [--dest DIR] [--groups model,videos,images,nanodet,reid]

``model`` is YOLOX-Nano and its class names; ``nanodet`` (NanoDet-m, ``model.type: nanodet``)
and ``reid`` (Open Model Zoo's person-reidentification-retail-0288) are fetched only when
asked for: by group, or one file at a time with ``asset_file``.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import logging
import os
import sys
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vidpipe import __version__
from vidpipe.fileio import replacing

log = logging.getLogger(__name__)

ENV_VAR = "VIDPIPE_ASSETS"
"""Environment variable naming an assets directory; it wins over every other location."""

DEFAULT_GROUPS: tuple[str, ...] = ("model", "videos")
"""What the daemon needs. ``images`` are optional test assets; ``nanodet`` and ``reid`` are
the other models, fetched on demand."""

_CHUNK_BYTES = 1 << 20


@dataclass(frozen=True)
class Asset:
    """One file the project knows how to fetch and verify.

    Attributes:
        path: POSIX path relative to the assets directory, e.g. ``models/yolox_nano.onnx``.
        url: public origin of the file.
        sha256: hex digest the file must have.
        group: ``model``, ``videos``, ``images``, ``nanodet`` or ``reid``; downloads are
            selected by group.
    """

    path: str
    url: str
    sha256: str
    group: str


class AssetError(RuntimeError):
    """An asset is missing, cannot be downloaded, or does not match its sha256."""


_YOLOX_SAMPLE = "https://github.com/Kazuhito00/YOLOX-ONNX-TFLite-Sample/raw/main/model"
_INTEL_VIDEOS = "https://github.com/intel-iot-devkit/sample-videos/raw/master"
_COCO_VAL2017 = "http://images.cocodataset.org/val2017"
# Pinned to a commit: the repository's branch may move, the digest may not.
_MOT_PIPELINE = (
    "https://github.com/Kazuhito00/MOT-Tracking-by-Detection-Pipeline/raw/"
    "e50a76b8b430b778276e7fd04fd4cafd5d45eab2"
)

# COCO val2017 images used by the tests. The golden detections for the first 12
# (images/expected.jsonl) have no public origin, so the golden test needs ../shared/assets.
_COCO_IMAGES: tuple[tuple[str, str], ...] = (
    ("000000000139.jpg", "ffe0f0cec3b2e27aab1967229cdf0a0d7751dcdd5800322f0b8ac0dffb3b8a8d"),
    ("000000000285.jpg", "f3a2974ce3686332609124c70e3e6a2e3aca43fccf1cd1bd7c5c03820977f57d"),
    ("000000000632.jpg", "a4cd7f45ac1ce27eaafb254b23af7c0b18a064be08870ceaaf03b2147f2ce550"),
    ("000000000724.jpg", "5c0e559c75d3969c8e3e297b61f61063f78045c9d4802b526ba616361f3823fd"),
    ("000000000776.jpg", "1dd31e9059c491992be2f562624eb4093e17aee08b4f7baf5ff9ea24543b0a33"),
    ("000000000785.jpg", "83981537a7baeafbeb9c8cb67b3484dc26433f574b3685d021fa537e277e4726"),
    ("000000000802.jpg", "d5b79e7fa716f85ca86f46e5f518da9b6c5e26414925624d76e6476861aec495"),
    ("000000000872.jpg", "c2aa138ee3a59b057a7ba6fc5a6a18e62af531aa7dab78a7bfd33c1cd7e55eb6"),
    ("000000000885.jpg", "1c67b783f78b18ddb5dd20aaba4d4aacaf98e5277051688a96da096afa9cdf1f"),
    ("000000001000.jpg", "24bb77a31928404e45a0454b06f6a0bd54a8db103590c9d7917288a1e0269f05"),
    ("000000001268.jpg", "8e85a2e71ee512fe748a3a3be9bb40b8591e8c501c0f3896efcb5be5999ec236"),
    ("000000001296.jpg", "34a98da7c11bc8811e6eec445145bb16f3d5f4338945ba116edcc1fe554d181b"),
    ("000000001353.jpg", "1cccef217a1e5eec2acc74d7c08a105da3ef6fdb8514e221cdea9b0b373b60ea"),
    ("000000001425.jpg", "71a37c25cdf944cf0a88b66d00a66cf899a88bd55c7ac80fcf1c76329d617e6c"),
    ("000000001490.jpg", "a044804a0b0186a1267acae34975932f14ede96c4a2b78fcee74e6c2fbd8414d"),
    ("000000001503.jpg", "06c721f0a62bcb9fcb2d2d0cc0b9edd63092084a8773a18c4b5a7bd6fb4f095d"),
    ("000000001532.jpg", "974f2af6d81f65627a680ea9f42bdee1067a0ddcdb9f8e7a945bacd21d4dc2ce"),
    ("000000001584.jpg", "77131e2f74aa7e374f951a69157cf7f51e00201f81bacfa8a9ab7309b245553f"),
    ("000000001675.jpg", "6ba641627c08ef424b7dc3e6cee069aa0dd49615a31c54ae0de1ecd1fabd9dea"),
    ("000000001761.jpg", "c06b1845c54bb886a8fb9f8a6e908b29ceb661ffda1ca8df9a27f123806de648"),
    ("000000001818.jpg", "e638b349929d13bb27e148f4303a576e0a964ef81c0907d36748e0adb822a8e6"),
    ("000000001993.jpg", "039f3bfb862023bde7f835a36c32d8f59a3e66488863c2a47b7b746e78c44186"),
    ("000000002006.jpg", "eda4af13818b566f8fa4f479e76286ad90cd5da2e8dfd530be0ab3637e1482ed"),
    ("000000002149.jpg", "3ef0da375244c3fdbb45bcfe5689e8e46fb616c00250f9dce6aa34d301801ac5"),
    ("000000002153.jpg", "8795ff243cf20405bd442631d5d1cb7e60665dd459c8d57f5764333808dd49fd"),
    ("000000002157.jpg", "1a038609e5ceb0719105b1438d257c3d588e45384cb7ffe77b137e4d7e3ed477"),
    ("000000002261.jpg", "1a0ad595a5675bdc7a5e95c04def56109c00d61168fd826158322fd538d70279"),
    ("000000002299.jpg", "d53d17dd8ecded4ae25555a0b8e193445846c7db7a6199c3ea35b09b3021f99e"),
    ("000000002431.jpg", "fa0ce7b066c2fe7bd0892aa2c6361943148db9766de60241e69d8026a18e05ad"),
    ("000000002473.jpg", "2f1bfa7634a64f7999ba5488ec904ad1f85bbc63d0fe4b9fe35f52abbf8c5f4f"),
    ("000000002532.jpg", "fc017f5308d348bdb6011f2312b10853ccd780a4a7369f48774ef67f499f2e77"),
    ("000000002587.jpg", "bc37072a4f32bc99d6b02a684dd9bc69bd63567382315e5f497c9bb4a44c7208"),
    ("000000002592.jpg", "ffa3d472d44184b1f48878f7b097189723e57a24f36c44c29e4bc561110fbf41"),
    ("000000002685.jpg", "2430b9bffb5ff52dfbaf7b922ac8018547e233a5996a6b017bd1a206a46c5bdb"),
    ("000000002923.jpg", "46d2a5feb3f953b59316daee47b45332f07ebde1f88eb361f29b35c1fbbb62e0"),
    ("000000003156.jpg", "3c929365d99581f03b70a810819df4781ac024d88dec7e592229cbea7489a779"),
    ("000000003255.jpg", "c075f51a798e65d23e1c65a3fcc7736aeae4e03fbdd126f6d6b82cb07957d28b"),
    ("000000003501.jpg", "9615e4dc9099e860748ce3f839ed077fa6a1fa39a10b909c00600bf4e2b3f392"),
    ("000000003553.jpg", "4286197d2b6fc18809a37a4ef3035109509fcf52782fb83894835faaa5743bea"),
    ("000000003661.jpg", "8746b068c166782f4b4fb7e6be9d16e5311e9c15bc867e21409b7f5d2eddefb4"),
)

REGISTRY: tuple[Asset, ...] = (
    Asset(
        "models/yolox_nano.onnx",
        f"{_YOLOX_SAMPLE}/yolox_nano.onnx",
        "695e750a5d5754bb5a8d5325643b59282191a7e7a564e435a415fd3c578eab14",
        "model",
    ),
    Asset(
        "models/coco80.txt",
        f"{_YOLOX_SAMPLE}/coco_classes.txt",
        "634a1132eb33f8091d60f2c346ababe8b905ae08387037aed883953b7329af84",
        "model",
    ),
    Asset(  # from RangiLyu/nanodet (Apache-2.0); model.type nanodet, labels coco80.txt
        "models/nanodet_m_416.onnx",
        f"{_MOT_PIPELINE}/Detector/nanodet/model/nanodet_m_416.onnx",
        "08b62b9ee4a7878e7a64d6ef4faf3074322c033a0252c83a20f41b86c76e8146",
        "nanodet",
    ),
    Asset(  # from openvinotoolkit/open_model_zoo (Apache-2.0)
        "models/person-reidentification-retail-0288.onnx",
        f"{_MOT_PIPELINE}/Tracker/person_reid/model/person-reidentification-retail-0288.onnx",
        "f3966d905e7232026aa8b814c328231a7b45c5b6b4dd32f886894223c4441b80",
        "reid",
    ),
    Asset(
        "videos/car-detection.mp4",
        f"{_INTEL_VIDEOS}/car-detection.mp4",
        "d31e0ebf194cc16e50eea784e7c3b0b1bb7976a4fb9b3fec26cb92a6704cca34",
        "videos",
    ),
    Asset(
        "videos/one-by-one-person-detection.mp4",
        f"{_INTEL_VIDEOS}/one-by-one-person-detection.mp4",
        "a5964aa259099a482a8b360ffc2c57b5a30f84d5919236a4dad01f8e929ac07c",
        "videos",
    ),
    Asset(
        "videos/bottle-detection.mp4",
        f"{_INTEL_VIDEOS}/bottle-detection.mp4",
        "d52ba94aedf8a923c342fe9ea1d2bd85f712c4cc0f49a6de1bac43eebe3a48ff",
        "videos",
    ),
    *(
        Asset(f"images/{name}", f"{_COCO_VAL2017}/{name}", sha256, "images")
        for name, sha256 in _COCO_IMAGES
    ),
)
"""Every asset the project can fetch, keyed by its path under the assets directory."""


def sha256_of(path: Path) -> str:
    """Return the hex sha256 of the file at ``path``."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def select_assets(groups: Iterable[str], registry: Sequence[Asset] = REGISTRY) -> list[Asset]:
    """Return the registry entries in ``groups``, in registry order.

    Raises:
        AssetError: a group is not in the registry; the message lists the valid groups.
    """
    wanted = set(groups)
    known = {asset.group for asset in registry}
    unknown = wanted - known
    if unknown:
        raise AssetError(f"unknown asset group(s) {sorted(unknown)}; valid groups: {sorted(known)}")
    return [asset for asset in registry if asset.group in wanted]


def verify_assets(
    root: Path, groups: Iterable[str] = DEFAULT_GROUPS, *, registry: Sequence[Asset] = REGISTRY
) -> Path:
    """Check that every asset of ``groups`` is present under ``root`` with the right sha256.

    Nothing is downloaded or written: ``root`` may be read-only (``../shared/assets``).

    Returns:
        ``root``.

    Raises:
        AssetError: listing every missing or mismatching file with its expected and actual
            sha256 and its origin URL.
    """
    problems = []
    for asset in select_assets(groups, registry):
        target = root / asset.path
        if not target.is_file():
            problems.append(f"{target}: missing (origin {asset.url})")
            continue
        actual = sha256_of(target)
        if actual != asset.sha256:
            problems.append(
                f"{target}: sha256 mismatch (origin {asset.url})\n"
                f"    expected {asset.sha256}\n    actual   {actual}"
            )
    if problems:
        raise AssetError(f"assets in {root} failed verification:\n  " + "\n  ".join(problems))
    return root


def ensure_assets(
    dest: Path,
    groups: Iterable[str] = DEFAULT_GROUPS,
    *,
    registry: Sequence[Asset] = REGISTRY,
    timeout_s: float = 60.0,
) -> Path:
    """Make ``dest`` hold every asset of ``groups``, downloading missing or wrong files.

    Each download goes to a temporary file beside its target, is checked against the
    registry's sha256 and only then renamed into place, so an interrupted or corrupted
    download never leaves a file that looks valid.

    Args:
        dest: directory to fill; created if missing.
        groups: asset groups to fetch (see ``REGISTRY``).
        registry: the assets to choose from (tests pass their own).
        timeout_s: socket timeout of each HTTP request.

    Returns:
        ``dest``.

    Raises:
        AssetError: a download failed or did not match its sha256; the message names the
            file, the URL and both digests.
    """
    for asset in select_assets(groups, registry):
        target = dest / asset.path
        if target.is_file() and sha256_of(target) == asset.sha256:
            continue
        log.info("downloading %s from %s", asset.path, asset.url)
        _download(asset, target, timeout_s)
    return dest


def _download(asset: Asset, target: Path, timeout_s: float) -> None:
    """Download ``asset`` to ``target`` atomically, verifying its sha256 first."""
    target.parent.mkdir(parents=True, exist_ok=True)
    request = urllib.request.Request(asset.url, headers={"User-Agent": f"vidpipe/{__version__}"})
    try:
        with replacing(target) as tmp:  # removed on any error: no half or wrong file is left
            digest = hashlib.sha256()
            with tmp.open("wb") as out, urllib.request.urlopen(request, timeout=timeout_s) as resp:
                while chunk := resp.read(_CHUNK_BYTES):
                    digest.update(chunk)
                    out.write(chunk)
            actual = digest.hexdigest()
            if actual != asset.sha256:
                raise AssetError(
                    f"{asset.path}: sha256 mismatch for download from {asset.url}\n"
                    f"    expected {asset.sha256}\n    actual   {actual}"
                )
            tmp.chmod(0o644)  # readable to all whatever the umask: assets are not secrets
    except (OSError, http.client.HTTPException) as exc:  # URLError and HTTPError are OSErrors
        raise AssetError(f"{asset.path}: download from {asset.url} failed: {exc}") from exc


def _project_root(start: Path) -> Path | None:
    """Return the nearest directory at or above ``start`` holding a pyproject.toml."""
    start = start.resolve()
    for candidate in (start, *start.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return None


def find_assets_dir(start: Path | None = None) -> Path | None:
    """Find an existing assets directory without downloading anything.

    Order: ``$VIDPIPE_ASSETS`` if set; then ``<project root>/../shared/assets``, where the
    project root is the nearest directory holding a pyproject.toml at or above ``start``
    (default: the current directory), then at or above this package's own location.

    Returns:
        The resolved directory, or None when no shared assets folder exists.

    Raises:
        AssetError: ``$VIDPIPE_ASSETS`` is set but is not a directory (an explicit setting
            is never silently ignored).
    """
    from_env = os.environ.get(ENV_VAR)
    if from_env:
        path = Path(from_env).expanduser()
        if not path.is_dir():
            raise AssetError(f"${ENV_VAR}={from_env!r} is not a directory")
        return path.resolve()
    starts = (Path.cwd() if start is None else start, Path(__file__).parent)
    for origin in starts:
        root = _project_root(origin)
        if root is not None and (shared := root.parent / "shared" / "assets").is_dir():
            return shared.resolve()
    return None


def cache_dir() -> Path:
    """Return the per-user download location: ``$XDG_CACHE_HOME/vidpipe/assets``.

    ``$XDG_CACHE_HOME`` defaults to ``~/.cache``.
    """
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vidpipe" / "assets"


def default_assets_dir() -> Path:
    """Return the assets directory to use: an existing one, else the user cache, filled.

    Raises:
        AssetError: see ``find_assets_dir`` and ``ensure_assets``.
    """
    return find_assets_dir() or ensure_assets(cache_dir())


def asset_file(
    path: str,
    *,
    root: Path | None = None,
    registry: Sequence[Asset] = REGISTRY,
    timeout_s: float = 60.0,
) -> Path:
    """One asset, verified, downloaded on demand: ``models/nanodet_m_416.onnx`` ...

    Args:
        path: the asset's path under the assets directory, as in ``REGISTRY``.
        root: where it is or goes. None: an existing assets directory (``find_assets_dir``),
            which is only read, never written; without one, the user cache, where a missing
            or wrong file is downloaded.
        registry: the assets to choose from (tests pass their own).
        timeout_s: socket timeout of the HTTP request.

    Returns:
        The verified file.

    Raises:
        AssetError: ``path`` is no known asset; the file in an existing directory is missing
            or wrong (the message names the file, both digests and the command that fetches
            it); the download failed or did not match its sha256.
    """
    matches = [asset for asset in registry if asset.path == path]
    if not matches:
        known = ", ".join(a.path for a in registry if not a.path.startswith("images/"))
        raise AssetError(f"unknown asset {path!r}; known: {known}, images/*.jpg")
    asset = matches[0]
    if root is None and (found := find_assets_dir()) is not None:
        try:
            return verify_assets(found, [asset.group], registry=[asset]) / asset.path
        except AssetError as exc:
            raise AssetError(
                f"{exc}\n  fetch it with: python -m vidpipe.assets --dest {found} "
                f"--groups {asset.group}"
            ) from None
    dest = cache_dir() if root is None else root
    return ensure_assets(dest, [asset.group], registry=[asset], timeout_s=timeout_s) / asset.path


def main(argv: Sequence[str] | None = None) -> int:
    """Resolve (and verify or download) the assets; print the directory on stdout.

    Without ``--dest`` an existing directory (``$VIDPIPE_ASSETS`` or ``../shared/assets``) is
    only verified, never written to; when there is none, the user cache is filled.

    Returns:
        0 on success, 1 on an AssetError (reported on stderr).
    """
    parser = argparse.ArgumentParser(
        prog="python -m vidpipe.assets",
        description="Resolve, verify and if needed download vidpipe's model, clips and images.",
    )
    parser.add_argument(
        "--dest",
        type=Path,
        help="download missing or wrong files into DIR instead of resolving a location",
    )
    parser.add_argument(
        "--groups",
        default=",".join(DEFAULT_GROUPS),
        help="comma-separated groups among model, videos, images, nanodet, reid "
        "(default: %(default)s)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="vidpipe.assets: %(message)s")
    groups = [group.strip() for group in args.groups.split(",") if group.strip()]
    try:
        if args.dest is not None:
            root = ensure_assets(args.dest, groups)
        elif (found := find_assets_dir()) is not None:
            root = verify_assets(found, groups)
        else:
            root = ensure_assets(cache_dir(), groups)
    except AssetError as exc:
        print(f"vidpipe.assets: error: {exc}", file=sys.stderr)
        return 1
    print(root.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
