"""A camera's inputs (``inputs:``): its streams and what each is used for (``detect``,
``record``), and the URL rules they share with a camera's ``url:``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from vidpipe.config.base import ConfigModel

InputRole = Literal["detect", "record"]
"""What a camera's input is used for: ``detect`` is decoded for detection, ``record`` is only
demuxed, its packets kept for event clips."""


def check_scheme(url: str) -> str:
    if "://" in url and not url.lower().startswith(("rtsp://", "rtsps://", "file://")):
        scheme = url.split("://", 1)[0]
        raise ValueError(f"unsupported URL scheme {scheme!r}: use rtsp://, rtsps:// or a file")
    return url


def is_stream(url: str) -> bool:
    return url.lower().startswith(("rtsp://", "rtsps://"))


class InputConfig(ConfigModel):
    """One stream of a camera that has several (``inputs:``), and what it is used for."""

    url: str = Field(min_length=1, description="rtsp://, rtsps://, or (detect only) a video file")
    roles: list[InputRole] = Field(
        min_length=1,
        description="detect: decoded and run through detection (exactly one input); record: "
        "demuxed only, never decoded, its packets cut into event clips (at most one input, a "
        "live stream; without one, clips come from the detect input)",
    )

    @field_validator("url")
    @classmethod
    def _url_kind(cls, v: str) -> str:
        return check_scheme(v)

    @field_validator("roles")
    @classmethod
    def _roles_once(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"a role is listed twice: {v}")
        return v

    @property
    def is_stream(self) -> bool:
        return is_stream(self.url)


def detect_urls(inputs: Any) -> list[Any]:
    """The URLs of the inputs whose roles include ``detect`` (raw YAML data)."""
    return [
        i.get("url")
        for i in (inputs if isinstance(inputs, list) else ())
        if isinstance(i, dict) and isinstance(i.get("roles"), list) and "detect" in i["roles"]
    ]
