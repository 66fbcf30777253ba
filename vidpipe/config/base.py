"""What every config model shares, and the one error config problems are reported with."""

from __future__ import annotations

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


class ConfigModel(BaseModel):
    """Every config section: unknown keys refused, values frozen."""

    # inf/nan are never a sensible rate, timeout or threshold ("timeout_s: .inf" would hang)
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
