"""The inference backend interface stays small, and every backend implements exactly it."""

from __future__ import annotations

import inspect

import pytest

from vidpipe.infer.base import InferenceBackend

#: The issue's bound (issue 13, item 4): a backend is at most this many methods.
MAX_METHODS = 5


def interface_methods(protocol: type) -> dict[str, inspect.Signature]:
    """The public methods a Protocol declares, with their signatures."""
    return {
        name: inspect.signature(value)
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def test_the_backend_interface_has_at_most_five_methods() -> None:
    methods = interface_methods(InferenceBackend)
    assert "submit" in methods  # the count below counts the real thing
    assert len(methods) <= MAX_METHODS, (
        f"InferenceBackend has {len(methods)} methods ({', '.join(sorted(methods))}); "
        f"keep it at {MAX_METHODS} or fewer (a hook attribute or the constructor can carry more)"
    )


def _backends() -> list[type]:
    from vidpipe.infer.openvino import OpenVINOBackend
    from vidpipe.infer.streamset import StreamSetBackend

    return [OpenVINOBackend, StreamSetBackend]


@pytest.mark.parametrize("backend", _backends(), ids=lambda b: b.__name__)
def test_every_backend_has_the_interface_methods_with_their_parameters(backend: type) -> None:
    for name, signature in interface_methods(InferenceBackend).items():
        method = getattr(backend, name, None)
        assert method is not None, f"{backend.__name__} lacks {name}()"
        assert list(inspect.signature(method).parameters) == list(signature.parameters), (
            f"{backend.__name__}.{name}{inspect.signature(method)} differs from the "
            f"interface's {name}{signature}"
        )
