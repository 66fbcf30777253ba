"""``VIDPIPE_TEST_PRECISION`` (tests/precision.py): parsed strictly, applied to OpenVINO only,
refused where the CPU cannot run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import precision
from vidpipe.config import Config


@pytest.mark.parametrize(
    ("value", "want"),
    [("", None), ("f32", "f32"), ("bf16", "bf16"), (" BF16 ", "bf16")],
)
def test_forced_precision_values(monkeypatch: pytest.MonkeyPatch, value: str, want: str) -> None:
    monkeypatch.setenv(precision.ENV, value)
    assert precision.forced_precision() == want


@pytest.mark.parametrize("value", ["fp32", "f16", "auto", "int8"])
def test_other_values_are_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(precision.ENV, value)
    with pytest.raises(ValueError, match=f"{precision.ENV}='{value}': expected one of f32, bf16"):
        precision.forced_precision()


def test_with_precision_sets_openvino_and_copies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(precision.ENV, "f32")
    plain = {"model": {"path": "m.onnx"}}
    tuned = {"model": {"path": "m.onnx"}, "inference": {"type": "openvino", "hint": "latency"}}
    gpu = {"model": {"path": "m.onnx"}, "inference": {"type": "torch"}}
    assert precision.with_precision(plain)["inference"] == {"precision": "f32"}
    assert precision.with_precision(tuned)["inference"] == {
        "type": "openvino",
        "hint": "latency",
        "precision": "f32",
    }
    assert precision.with_precision(gpu) == gpu  # GPU backends have precisions of their own
    assert "inference" not in plain and "precision" not in tuned["inference"]  # not modified
    cfg = Config.model_validate(precision.with_precision(plain))
    assert cfg.inference.precision == "f32"  # what the schema calls it


def test_unset_leaves_configs_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(precision.ENV, raising=False)
    plain = {"model": {"path": "m.onnx"}}
    assert precision.with_precision(plain) is plain
    assert precision.openvino_kwargs() == {}


def test_bf16_refused_on_fake_avx2_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """An AVX2-only CPU (like the CI machine) reports no BF16: faked, this one may have it."""
    monkeypatch.setattr(precision, "cpu_capabilities", lambda: ("WINOGRAD", "FP32", "INT8"))
    problem = precision.check_supported("bf16")
    assert problem and "no BF16 on this CPU" in problem and f"{precision.ENV}=f32" in problem
    assert precision.check_supported("f32") is None
    assert precision.check_supported(None) is None


def test_bad_value_stops_pytest_with_a_usage_error(repo_root: Path) -> None:
    """The whole run stops before running anything, naming the variable."""
    probe = f"{Path(__file__).relative_to(repo_root)}::test_unset_leaves_configs_alone"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", probe],
        capture_output=True,
        text=True,
        cwd=repo_root,
        env={**os.environ, precision.ENV: "f16"},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr  # pytest's usage error
    assert f"{precision.ENV}='f16'" in proc.stderr, proc.stderr
