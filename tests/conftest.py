"""Fixtures shared by every test layer (unit, component, integration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidpipe.assets import find_assets_dir


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The project root (the directory holding pyproject.toml)."""
    return Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def assets_dir(repo_root: Path) -> Path:
    """The test and demo assets: ``$VIDPIPE_ASSETS`` or ``<project root>/../shared/assets``.

    The suite needs real assets; it fails (it does not skip) when there are none.
    """
    found = find_assets_dir(repo_root)
    if found is None:
        pytest.fail(
            "no assets directory: set VIDPIPE_ASSETS, provide ../shared/assets next to the "
            "project, or run `python -m vidpipe.assets` (make setup does) and export the "
            "directory it prints as VIDPIPE_ASSETS"
        )
    return found
