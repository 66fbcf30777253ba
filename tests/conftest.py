"""Fixtures shared by every test layer (unit, component, integration)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import precision
from vidpipe.assets import find_assets_dir


def pytest_configure(config: pytest.Config) -> None:
    """Refuse ``VIDPIPE_TEST_PRECISION`` values this CPU cannot run (see tests/precision.py)."""
    try:
        forced = precision.forced_precision()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    problem = precision.check_supported(forced)
    if problem is not None:
        raise pytest.UsageError(problem)


def pytest_report_header(config: pytest.Config) -> str:
    forced = precision.forced_precision()
    how = f"forced by {precision.ENV}" if forced else f"OpenVINO's default; set {precision.ENV}"
    try:
        import openvino  # noqa: F401  # the GPU machine's image has none
    except ImportError:
        return "inference precision: no OpenVINO here (GPU tests only)"
    return f"inference precision: {precision.effective_precision()} ({how})"


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
