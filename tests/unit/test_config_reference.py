"""docs/configuration.md is what scripts/config_reference.py makes of the schema today.

The reference is generated from the pydantic models of ``vidpipe.config``; a key added,
removed or described anew without regenerating it fails here. The tiny models below show
that the comparison can fail, and what the generator makes of nested sections, lists and
unions of ``type``s.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Annotated, Literal, Union

from pydantic import BaseModel, Field

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "config_reference", ROOT / "scripts" / "config_reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gen = _generator()


def test_checked_in_reference_is_current() -> None:
    from vidpipe.config import Config

    expected = gen.render(Config)
    current = (ROOT / "docs" / "configuration.md").read_text()
    assert current == expected, (
        "docs/configuration.md is stale: run .venv/bin/python scripts/config_reference.py"
    )


class _Inner(BaseModel):
    """An inner section."""

    depth: int = Field(3, ge=1, description="how deep")


class _A(BaseModel):
    """Kind a."""

    type: Literal["a"] = "a"
    size: float = Field(1.5, description="the size")


class _B(BaseModel):
    """Kind b."""

    type: Literal["b"] = "b"
    name: str = Field(description="a name")


class _Tiny(BaseModel):
    """A tiny root."""

    inner: _Inner = Field(default_factory=_Inner)
    items: list[Annotated[Union[_A, _B], Field(discriminator="type")]] = Field(  # noqa: UP007
        default_factory=list
    )
    level: Literal["low", "high"] = Field("low", description="a level")


def test_tiny_model_is_walked_into_every_section() -> None:
    text = gen.render(_Tiny, header="# Tiny\n")
    assert "## `inner`" in text and "| `inner.depth` | integer (>= 1) | `3` | how deep |" in text
    assert "## `items[]` (type `a`)" in text and "## `items[]` (type `b`)" in text
    assert "| `items[].size` | number | `1.5` | the size |" in text
    assert "| `items[].name` | string | *required* | a name |" in text
    assert "| `level` | low \\| high | `low` | a level |" in text
    assert "Kind b." in text
    assert gen.render(_Tiny, header="# Tiny\n") == text  # deterministic


def test_check_fails_on_a_stale_file_and_passes_on_a_fresh_one(tmp_path: Path) -> None:
    out = tmp_path / "configuration.md"
    assert gen.main(["--output", str(out)], root=_Tiny) == 0
    assert gen.main(["--check", "--output", str(out)], root=_Tiny) == 0
    out.write_text(out.read_text().replace("how deep", "how shallow"))
    assert gen.main(["--check", "--output", str(out)], root=_Tiny) == 1
    out.unlink()
    assert gen.main(["--check", "--output", str(out)], root=_Tiny) == 1
