"""Asset registry, download verification and directory resolution.

Downloads are served by a real http.server on 127.0.0.1 (CI has no internet).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from vidpipe import assets
from vidpipe.assets import REGISTRY, Asset, AssetError

GOOD = b"the real model bytes\n" * 100
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A directory served over HTTP on 127.0.0.1: (directory, base URL)."""
    root = tmp_path / "served"
    root.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="test-http", daemon=True
    )
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _registry(base_url: str, sha256: str = GOOD_SHA) -> tuple[Asset, ...]:
    return (Asset("models/thing.onnx", f"{base_url}/thing.onnx", sha256, "model"),)


def test_good_download_is_verified_and_installed(served: tuple[Path, str], tmp_path: Path) -> None:
    root, url = served
    (root / "thing.onnx").write_bytes(GOOD)
    dest = tmp_path / "dest"

    assert assets.ensure_assets(dest, ["model"], registry=_registry(url)) == dest

    assert (dest / "models/thing.onnx").read_bytes() == GOOD
    assert sorted(p.name for p in (dest / "models").iterdir()) == ["thing.onnx"]


def test_corrupted_download_is_rejected_and_not_installed(
    served: tuple[Path, str], tmp_path: Path
) -> None:
    root, url = served
    corrupted = GOOD[:-1] + b"X"
    (root / "thing.onnx").write_bytes(corrupted)
    dest = tmp_path / "dest"

    with pytest.raises(AssetError) as info:
        assets.ensure_assets(dest, ["model"], registry=_registry(url))

    message = str(info.value)
    assert "models/thing.onnx" in message
    assert f"{url}/thing.onnx" in message
    assert GOOD_SHA in message
    assert hashlib.sha256(corrupted).hexdigest() in message
    assert list((dest / "models").iterdir()) == []  # no target, no leftover temp file


def test_wrong_local_file_is_replaced(served: tuple[Path, str], tmp_path: Path) -> None:
    root, url = served
    (root / "thing.onnx").write_bytes(GOOD)
    target = tmp_path / "dest/models/thing.onnx"
    target.parent.mkdir(parents=True)
    target.write_bytes(b"truncated")

    assets.ensure_assets(tmp_path / "dest", ["model"], registry=_registry(url))

    assert target.read_bytes() == GOOD


def test_verified_local_file_is_not_downloaded_again(tmp_path: Path) -> None:
    target = tmp_path / "models/thing.onnx"
    target.parent.mkdir(parents=True)
    target.write_bytes(GOOD)
    # Port 9 (discard) on localhost: any download attempt would fail.
    assets.ensure_assets(tmp_path, ["model"], registry=_registry("http://127.0.0.1:9"))
    assert target.read_bytes() == GOOD


def test_http_error_names_the_url(served: tuple[Path, str], tmp_path: Path) -> None:
    _, url = served
    with pytest.raises(AssetError, match=rf"models/thing\.onnx: download from {url}/thing\.onnx"):
        assets.ensure_assets(tmp_path, ["model"], registry=_registry(url))


def test_unknown_group_lists_valid_groups(tmp_path: Path) -> None:
    with pytest.raises(
        AssetError,
        match=r"'weights'.*valid groups: \['images', 'model', 'nanodet', 'reid', 'videos'\]",
    ):
        assets.ensure_assets(tmp_path, ["weights"])


def test_verify_reports_missing_and_mismatching_files(tmp_path: Path) -> None:
    registry = (
        Asset("models/a.bin", "http://example.invalid/a.bin", GOOD_SHA, "model"),
        Asset("models/b.bin", "http://example.invalid/b.bin", GOOD_SHA, "model"),
    )
    (tmp_path / "models").mkdir()
    (tmp_path / "models/b.bin").write_bytes(b"other")

    with pytest.raises(AssetError) as info:
        assets.verify_assets(tmp_path, ["model"], registry=registry)

    message = str(info.value)
    assert "a.bin: missing (origin http://example.invalid/a.bin)" in message
    assert "b.bin: sha256 mismatch" in message
    assert hashlib.sha256(b"other").hexdigest() in message


def test_find_assets_dir_respects_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path))
    assert assets.find_assets_dir() == tmp_path.resolve()


def test_find_assets_dir_rejects_env_that_is_not_a_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path / "nope"))
    with pytest.raises(AssetError, match="VIDPIPE_ASSETS"):
        assets.find_assets_dir()


def test_find_assets_dir_walks_up_to_project_root(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(assets.ENV_VAR, raising=False)
    project = tmp_path / "project"
    (project / "deep/er").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\n")
    (tmp_path / "shared/assets").mkdir(parents=True)

    assert assets.find_assets_dir(project / "deep/er") == (tmp_path / "shared/assets").resolve()


def test_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert assets.cache_dir() == tmp_path / "vidpipe/assets"


def test_registry_paths_are_unique_and_digests_well_formed() -> None:
    paths = [asset.path for asset in REGISTRY]
    assert len(paths) == len(set(paths))
    for asset in REGISTRY:
        # hashlib's hexdigest form: 64 lowercase hex digits, which is what sha256_of returns
        assert re.fullmatch(r"[0-9a-f]{64}", asset.sha256), (asset.path, asset.sha256)
        assert asset.group in {"model", "videos", "images", "nanodet", "reid"}


@pytest.mark.parametrize("asset", REGISTRY, ids=lambda asset: asset.path)
def test_shared_file_matches_registry(assets_dir: Path, asset: Asset) -> None:
    """The pinned digest is the file's: computed here with hashlib, not with the code under
    test, and through ``sha256_of`` as the downloader does."""
    data = (assets_dir / asset.path).read_bytes()
    assert hashlib.sha256(data).hexdigest() == asset.sha256, asset.path
    assert assets.sha256_of(assets_dir / asset.path) == asset.sha256


def test_cli_verifies_and_prints_existing_dir(
    assets_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(assets.ENV_VAR, str(assets_dir))
    assert assets.main(["--groups", "model,videos,images,nanodet,reid"]) == 0
    assert capsys.readouterr().out == f"{assets_dir.resolve()}\n"


def test_cli_fails_on_a_corrupted_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models/coco80.txt").write_text("person\n")
    monkeypatch.setenv(assets.ENV_VAR, str(tmp_path))

    assert assets.main(["--groups", "model"]) == 1

    captured = capsys.readouterr()
    assert captured.out == ""
    assert "coco80.txt: sha256 mismatch" in captured.err
    assert "yolox_nano.onnx: missing" in captured.err


# --- the other models: NanoDet-m and the person re-identification model ---------------------

NEW_MODELS = ("models/nanodet_m_416.onnx", "models/person-reidentification-retail-0288.onnx")


def _entry(path: str) -> Asset:
    (asset,) = [a for a in REGISTRY if a.path == path]
    return asset


@pytest.fixture
def assets_served(assets_dir: Path) -> Iterator[str]:
    """The assets directory itself served over HTTP on 127.0.0.1: its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(assets_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="test-http", daemon=True
    )
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _served_from(base_url: str, paths: tuple[str, ...] = NEW_MODELS) -> list[Asset]:
    """The real registry entries of ``paths``, their origin moved to the local server (no
    internet here); digests and groups as pinned."""
    return [dataclasses.replace(_entry(p), url=f"{base_url}/{p}") for p in paths]


def _readme(assets_dir: Path) -> str:
    return (assets_dir / "README.md").read_text()


@pytest.mark.parametrize("path", NEW_MODELS)
def test_new_models_are_pinned_as_the_assets_readme_says(assets_dir: Path, path: str) -> None:
    """Origin and sha256 as the assets README gives them (read here, not copied)."""
    readme = _readme(assets_dir)
    asset = _entry(path)
    (row,) = [line for line in readme.splitlines() if line.startswith(f"| {path} |")]
    assert f"| {asset.url} " in row, (asset.url, row)
    assert "/raw/e50a76b8b430b778276e7fd04fd4cafd5d45eab2/" in asset.url  # a commit, not a branch
    assert f"- {path}: {asset.sha256}" in readme
    assert asset.group == ("nanodet" if "nanodet" in path else "reid")
    assert asset.group not in assets.DEFAULT_GROUPS  # fetched on demand, not for every user


def test_new_models_download_and_verify(
    assets_served: str, assets_dir: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "cache"
    registry = _served_from(assets_served)
    assert assets.ensure_assets(dest, ["nanodet", "reid"], registry=registry) == dest
    for path in NEW_MODELS:
        got = (dest / path).read_bytes()
        assert got == (assets_dir / path).read_bytes()
        assert hashlib.sha256(got).hexdigest() == _entry(path).sha256
    assert sorted(p.name for p in (dest / "models").iterdir()) == sorted(
        Path(p).name for p in NEW_MODELS
    )
    # what verify_assets (the read-only check of a shared directory) accepts
    assert assets.verify_assets(dest, ["nanodet", "reid"], registry=registry) == dest


def test_a_group_downloads_only_its_model(assets_served: str, tmp_path: Path) -> None:
    dest = tmp_path / "cache"
    assets.ensure_assets(dest, ["nanodet"], registry=_served_from(assets_served))
    assert [p.name for p in (dest / "models").iterdir()] == ["nanodet_m_416.onnx"]


def test_a_wrong_model_download_names_the_file_and_both_digests(
    assets_served: str, assets_dir: Path, tmp_path: Path
) -> None:
    """The origin serves other bytes (here: the re-id model under NanoDet's name)."""
    nanodet, reid = NEW_MODELS
    wrong = dataclasses.replace(_entry(nanodet), url=f"{assets_served}/{reid}")
    dest = tmp_path / "cache"
    with pytest.raises(AssetError) as info:
        assets.ensure_assets(dest, ["nanodet"], registry=[wrong])
    message = str(info.value)
    assert message.startswith(f"{nanodet}: sha256 mismatch for download from {wrong.url}")
    assert f"expected {_entry(nanodet).sha256}" in message
    assert f"actual   {_entry(reid).sha256}" in message
    assert hashlib.sha256((assets_dir / reid).read_bytes()).hexdigest() == _entry(reid).sha256
    assert list((dest / "models").iterdir()) == []  # nothing that looks valid is left


def test_asset_file_downloads_on_demand_into_the_cache(
    assets_served: str, assets_dir: Path, tmp_path: Path
) -> None:
    nanodet = NEW_MODELS[0]
    dest = tmp_path / "cache"
    got = assets.asset_file(nanodet, root=dest, registry=_served_from(assets_served))
    assert got == dest / nanodet and got.read_bytes() == (assets_dir / nanodet).read_bytes()
    assert [p.name for p in (dest / "models").iterdir()] == ["nanodet_m_416.onnx"]
    # there now: verified, not fetched again (a registry whose origin is unreachable)
    offline = [dataclasses.replace(_entry(nanodet), url="http://127.0.0.1:9/gone")]
    assert assets.asset_file(nanodet, root=dest, registry=offline) == got


def test_asset_file_reads_an_existing_directory_without_writing(
    monkeypatch: pytest.MonkeyPatch, assets_dir: Path, tmp_path: Path
) -> None:
    monkeypatch.setenv(assets.ENV_VAR, str(assets_dir))
    reid = NEW_MODELS[1]
    assert assets.asset_file(reid) == assets_dir.resolve() / reid
    # a directory that lacks it: an error naming the file and how to fetch it, no download
    empty = tmp_path / "mine"
    empty.mkdir()
    monkeypatch.setenv(assets.ENV_VAR, str(empty))
    with pytest.raises(AssetError) as info:
        assets.asset_file(reid)
    assert f"{empty.resolve() / reid}: missing" in str(info.value)
    assert f"--dest {empty.resolve()} --groups reid" in str(info.value)
    assert list(empty.iterdir()) == []
    with pytest.raises(AssetError, match=r"unknown asset 'models/nope\.onnx'"):
        assets.asset_file("models/nope.onnx")
