"""The inference backend interface stays small, and every backend implements exactly it.

Every public member of ``InferenceBackend`` counts, attributes as much as methods: what the
scheduler needs to know about a backend goes into its ``SchedulingHints`` and its
``BackendInfo``, not into a growing list of attributes.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fake_gpu import FakeExecutor, FakeGpuRuntime
from tests.precision import openvino_kwargs
from vidpipe.config import OpenVINOConfig
from vidpipe.infer.base import BackendInfo, InferenceBackend, SchedulingHints
from vidpipe.types import TensorSpec

#: input_spec, output_shapes, hints, info; lend, submit, observe_batches, drain, close.
MAX_MEMBERS = 9

#: what each attribute of the interface holds
ATTRIBUTE_TYPES: dict[str, type] = {
    "input_spec": TensorSpec,
    "output_shapes": list,
    "hints": SchedulingHints,
    "info": BackendInfo,
}


def interface_methods(protocol: type) -> dict[str, inspect.Signature]:
    """The public methods a Protocol declares, with their signatures."""
    return {
        name: inspect.signature(value)
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def interface_attributes(protocol: type) -> set[str]:
    """The public attributes a Protocol declares."""
    return {name for name in vars(protocol).get("__annotations__", {}) if not name.startswith("_")}


def test_the_backend_interface_is_small() -> None:
    methods = interface_methods(InferenceBackend)
    attributes = interface_attributes(InferenceBackend)
    assert "submit" in methods and "hints" in attributes  # the count counts the real thing
    members = sorted({*methods, *attributes})
    assert len(members) <= MAX_MEMBERS, (
        f"InferenceBackend has {len(members)} public members ({', '.join(members)}); keep it "
        f"at {MAX_MEMBERS} or fewer (SchedulingHints and BackendInfo can carry more)"
    )
    assert attributes == set(ATTRIBUTE_TYPES)


@pytest.fixture(params=["OpenVINOBackend", "StreamSetBackend"])
def backend(request: pytest.FixtureRequest, assets_dir: Path) -> Iterator[Any]:
    """Each backend, built: OpenVINO on the real model, the stream set on the fake GPU."""
    if request.param == "OpenVINOBackend":
        from vidpipe.infer.openvino import OpenVINOBackend

        made: Any = OpenVINOBackend(
            assets_dir / "models" / "yolox_nano.onnx", OpenVINOConfig(**openvino_kwargs())
        )
    else:
        from vidpipe.infer.streamset import StreamSetBackend

        rt = FakeGpuRuntime(0)
        made = StreamSetBackend([(rt, FakeExecutor(rt, 4))], 2, 1000.0)
    yield made
    made.close()


@pytest.mark.timeout(60)
def test_every_backend_has_the_interface_with_its_parameters_and_types(backend: Any) -> None:
    name = type(backend).__name__
    for method, signature in interface_methods(InferenceBackend).items():
        implemented = getattr(type(backend), method, None)
        assert implemented is not None, f"{name} lacks {method}()"
        assert list(inspect.signature(implemented).parameters) == list(signature.parameters), (
            f"{name}.{method}{inspect.signature(implemented)} differs from the "
            f"interface's {method}{signature}"
        )
    for attribute, kind in ATTRIBUTE_TYPES.items():
        value = getattr(backend, attribute, None)
        assert isinstance(value, kind), f"{name}.{attribute} is {value!r}, not a {kind.__name__}"
    assert backend.hints.capacity == backend.info.requests > 0


@pytest.mark.timeout(60)
def test_the_hints_say_how_each_backend_is_driven(backend: Any) -> None:
    """A request pool has its decodes timed and its completions postprocessed between
    submissions; a batching backend keeps every frame it can get in flight and hands its
    completions to a thread of their own."""
    pool = type(backend).__name__ == "OpenVINOBackend"
    hints = backend.hints
    assert hints.time_turns is pool and hints.completions_on_scheduler is pool
    assert (hints.in_flight_floor is None) is not pool
    if not pool:
        assert not hints.uses_every_core
        assert backend.info.backend == "fake-gpu" and backend.info.hint.startswith("max_batch 4")
