"""The pluggable kinds: sinks, inference backends and model decoders, keyed by ``type``.

A type is declared once here, in the config package (its config class, or for decoders just
its name), and the config's discriminated unions and ``Literal`` types are built from the
declarations. The stage that implements a type registers its factory against the same name
in one line (``@register_sink("jsonl")``, ``@register_backend("openvino")``,
``register_decoder("yolox", ...)``); the assembly looks factories up here. This module
imports no stage, so the factories are typed loosely (``Any``); each stage's ``register_...``
wrapper gives them their real type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar, Union

from pydantic import BaseModel, Field

_M = TypeVar("_M", bound=type[BaseModel])
_F = TypeVar("_F")


class Kind:
    """The types of one kind: the config class of each, and the factory a stage registered."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._configs: dict[str, type[BaseModel] | None] = {}
        self._factories: dict[str, Any] = {}

    # ------------------------------------------------------------------ config side

    def declare(self, *tags: str, config: type[BaseModel] | None = None) -> None:
        """Declare types by name (``config``: the model of their section, if they have one)."""
        for tag in tags:
            if tag in self._configs:
                raise ValueError(f"{self.what} type {tag!r} is declared twice")
            self._configs[tag] = config

    def config(self, *tags: str) -> Callable[[_M], _M]:
        """Class decorator: declare ``tags`` with the decorated class as their config."""

        def decorate(cls: _M) -> _M:
            self.declare(*tags, config=cls)
            return cls

        return decorate

    @property
    def tags(self) -> tuple[str, ...]:
        """Every declared type, in declaration order."""
        return tuple(self._configs)

    def models(self) -> dict[str, type[BaseModel]]:
        """Type name -> config class (types without a config class are left out)."""
        return {tag: cls for tag, cls in self._configs.items() if cls is not None}

    def union(self) -> Any:
        """The discriminated union (on ``type``) of every declared config class."""
        classes = tuple(dict.fromkeys(self.models().values()))
        if len(classes) == 1:
            return classes[0]
        return Annotated[Union[classes], Field(discriminator="type")]  # noqa: UP007

    def literal(self) -> Any:
        """``Literal[...]`` of every declared type name."""
        return Literal[self.tags]

    # ------------------------------------------------------------------ stage side

    def register(self, *tags: str) -> Callable[[_F], _F]:
        """Decorator: ``factory`` implements ``tags`` (each declared, each registered once)."""

        def decorate(factory: _F) -> _F:
            for tag in tags:
                if tag not in self._configs:
                    raise ValueError(f"{self.what} type {tag!r} is not declared in vidpipe.config")
                if tag in self._factories and self._factories[tag] is not factory:
                    raise ValueError(f"{self.what} type {tag!r} is registered twice")
                self._factories[tag] = factory
            return factory

        return decorate

    def factory(self, tag: str) -> Any:
        """The factory registered for ``tag``; LookupError if its stage registered none."""
        try:
            return self._factories[tag]
        except KeyError:
            raise LookupError(
                f"no implementation registered for {self.what} type {tag!r}"
            ) from None

    @property
    def factories(self) -> dict[str, Any]:
        """Type name -> registered factory: the registry itself (tests put fakes in it)."""
        return self._factories

    def unimplemented(self) -> list[str]:
        """Declared types with no registered factory (after the stages were imported)."""
        return [tag for tag in self._configs if tag not in self._factories]


SINKS = Kind("sink")
"""``sinks[].type``: config classes in ``vidpipe.config.sinks``, factories in ``vidpipe.sinks``."""
BACKENDS = Kind("inference")
"""``inference.type``: configs in ``vidpipe.config.inference``, factories in ``vidpipe.infer``."""
MODEL_TYPES = Kind("model")
"""``model.type``: names in ``vidpipe.config.inference``, decoders in ``vidpipe.postprocess``."""
EMBEDDER_TYPES = Kind("embedder model")
"""``models.<name>.type`` of models run on crops: names in ``vidpipe.config.models``, embedders
in ``vidpipe.secondary``."""
CAPTURE_DECODERS = Kind("capture decoder")
"""``capture.decoder``: names in ``vidpipe.config.schema``, sources in ``vidpipe.capture``."""
