"""One inference precision for the whole suite: ``VIDPIPE_TEST_PRECISION=f32|bf16``.

The model's output differs between precisions (about 7% of detections flip across a hard 0.3
cut-off between f32 and bf16), and OpenVINO picks the precision from the CPU: bf16 where the
CPU has AVX-512 BF16 or AMX, f32 on an AVX2-only CPU such as the CI machine's. Setting the
variable makes every config the tests build ask for that precision explicitly, so that one
machine can run the suite the way another CPU would. Unset, configs say nothing and OpenVINO
chooses (``auto``), which is what users get.

Tests that compare the daemon with an offline run make both at the same precision, through
:func:`with_precision`; ``tests/conftest.py`` refuses the run when the CPU cannot honour the
request.
"""

from __future__ import annotations

import copy
import functools
import os
from typing import Any

ENV = "VIDPIPE_TEST_PRECISION"
CHOICES = ("f32", "bf16")


def forced_precision() -> str | None:
    """The precision the suite must run at, or None (OpenVINO's default for this CPU).

    Raises:
        ValueError: the variable holds something other than ``f32`` or ``bf16``.
    """
    value = os.environ.get(ENV, "").strip().lower()
    if not value:
        return None
    if value not in CHOICES:
        raise ValueError(f"{ENV}={value!r}: expected one of {', '.join(CHOICES)} (or unset)")
    return value


@functools.cache
def cpu_capabilities() -> tuple[str, ...]:
    """OpenVINO's ``OPTIMIZATION_CAPABILITIES`` of the CPU device (``BF16`` among them or not)."""
    import openvino as ov

    return tuple(str(c) for c in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"))


def check_supported(precision: str | None) -> str | None:
    """Why ``precision`` cannot run on this CPU, or None when it can."""
    if precision == "bf16" and "BF16" not in cpu_capabilities():
        return (
            f"{ENV}=bf16, but OpenVINO reports no BF16 on this CPU (capabilities: "
            f"{', '.join(cpu_capabilities())}); it would run f32 instead. Use {ENV}=f32 or "
            "leave it unset here."
        )
    return None


@functools.cache
def effective_precision() -> str:
    """The precision OpenVINO's CPU plugin runs the suite's model at: the forced one, or its
    default on this CPU (``f32`` or ``bf16``)."""
    forced = forced_precision()
    if forced is not None:
        return forced
    import openvino as ov

    hint = ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT")
    name = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
    return {"f32": "f32", "float32": "f32", "bf16": "bf16", "bfloat16": "bf16"}.get(name, name)


def with_precision(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` (a config document as a dict) asking for the forced precision, if any.

    Only the OpenVINO backend (the default ``inference.type``) is changed; GPU backends have
    their own precisions and are left alone. Returns a copy; ``config`` is not modified.
    """
    forced = forced_precision()
    inference = config.get("inference") or {}
    if forced is None or inference.get("type", "openvino") != "openvino":
        return config
    out = copy.deepcopy(config)
    out["inference"] = {**inference, "precision": forced}
    return out


def openvino_kwargs() -> dict[str, str]:
    """Keyword arguments for ``OpenVINOConfig`` that force the suite's precision, if any."""
    forced = forced_precision()
    return {} if forced is None else {"precision": forced}
