"""What every config model shares, and the one error config problems are reported with."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from vidpipe import redact


class ConfigError(Exception):
    """An invalid configuration. ``problems`` lists every error found, each with its path."""

    def __init__(self, problems: list[str], source: str = "config") -> None:
        self.problems = [redact.redact_text(p) for p in problems]
        self.source = source
        super().__init__(f"{source}: " + "; ".join(self.problems))

    def __str__(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


SECRET: dict[str, Any] = {"secret": True}
"""``Field(json_schema_extra=SECRET)`` marks a field whose value (or values) is a secret."""


class ConfigModel(BaseModel):
    """Every config section: unknown keys refused, values frozen."""

    # inf/nan are never a sensible rate, timeout or threshold ("timeout_s: .inf" would hang)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    retired_keys: ClassVar[dict[str, str]] = {}
    """Keys this section had once, each with what became of it: the loader reports an old
    config's key with this text ("moved to ...", "was removed: ...") instead of "unknown key"."""

    def secrets(self) -> set[str]:
        """Every secret in this section and below: the values of fields marked ``SECRET``
        and the passwords of URLs. Parsing registers none; whoever loads a config passes
        these to ``redact.register_secret`` (the loader and the assembly do)."""
        found: set[str] = set()
        for name, field in type(self).model_fields.items():
            extra = field.json_schema_extra
            _collect(
                getattr(self, name), isinstance(extra, dict) and extra.get("secret") is True, found
            )
        return found


def _collect(value: Any, marked: bool, found: set[str]) -> None:
    if isinstance(value, ConfigModel):
        found |= value.secrets()
    elif isinstance(value, str):
        password = redact.url_password(value) if "://" in value else None
        found.update(v for v in (value if marked else None, password) if v)
    elif isinstance(value, dict):
        for item in value.values():
            _collect(item, marked, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, marked, found)
