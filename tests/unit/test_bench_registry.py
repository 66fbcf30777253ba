"""The benchmark's contenders: the product measures vidpipe; ``benchmarks/`` adds the other
designs and vidpipe's variants."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from vidpipe.bench import common
from vidpipe.bench.common import ContenderEntry, PointSpec, contender, register_contender
from vidpipe.bench.worker import make_contender
from vidpipe.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
PEERS = {"ceiling", "naive", "single", "model_api"}


def registered(*imports: str) -> set[str]:
    """The contenders registered in a fresh interpreter after ``imports``."""
    code = "; ".join(
        [*(f"import {m}" for m in imports), "from vidpipe.bench.common import all_contenders"]
    )
    out = subprocess.run(
        [sys.executable, "-c", f"{code}; print(','.join(all_contenders()))"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
        timeout=60,
    )
    return set(out.stdout.strip().split(","))


def test_the_product_registers_only_vidpipe() -> None:
    from benchmarks.variants import VARIANTS

    assert registered("vidpipe.bench.cli") == {"vidpipe"}
    assert registered("benchmarks") == {"vidpipe"} | PEERS | set(VARIANTS)


def test_vidpipe_bench_refuses_a_peer_without_benchmarks(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "bench", "--contenders", "naive,vidpipe"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "unknown naive; choose from" in proc.stderr


def test_the_worker_builds_a_contender_from_its_registered_factory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(common, "_CONTENDERS", dict(common._CONTENDERS))  # undone after
    pkg = tmp_path / "extra_contenders.py"
    pkg.write_text("class Probe:\n    def __init__(self, spec):\n        self.spec = spec\n")
    entry = ContenderEntry("probe", "extra_contenders:Probe", str(tmp_path), default=False)
    register_contender(entry)
    assert contender("probe") is entry
    spec = PointSpec("probe", "/c.mp4", "c.mp4", 1, 1, 1, "f32", "/m.onnx", "/l.txt")
    built = make_contender(spec, entry.factory, entry.sys_path)
    assert built.spec is spec  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="registered twice"):
        register_contender(ContenderEntry("probe", "elsewhere:Other"))
    with pytest.raises(ValueError, match="unknown contender 'nope'; registered: vidpipe"):
        contender("nope")


def test_the_gpu_bench_parses_its_options() -> None:
    from benchmarks.gpu import parser

    required = ["--model", "m.onnx", "--labels", "l.txt", "--json", "o.json"]
    args = parser().parse_args([*required, "--batches", "8,32", "--streams", "", "--eager"])
    assert (args.batches, args.streams, args.eager, args.type) == ([8, 32], [], True, "torch")
    with pytest.raises(SystemExit) as err:
        parser().parse_args(["--model", "m.onnx", "--batches", "8,x"])
    assert err.value.code == 2
    with pytest.raises(SystemExit):  # no longer a subcommand of the product
        build_parser().parse_args(["bench-gpu", *required])


def test_bench_gpu_lends_the_executor_to_each_point_fake_gpu() -> None:
    """Every stream count of a batch size reuses one executor; a backend must not close it."""
    from benchmarks.gpu import stream_set_rate
    from tests.fake_gpu import FakeExecutor, FakeGpuRuntime, tagged_frame

    rt = FakeGpuRuntime(0, 0.0)
    ex = FakeExecutor(rt, 4)
    frames = [tagged_frame(1, i)[0] for i in range(4)]  # at the fake model's input size
    for streams in (1, 2):
        measured = stream_set_rate([(rt, ex)], streams, 0.3, frames)
        assert measured.img_s > 0 and 1.0 <= measured.mean_batch <= 4.0
        assert not ex.closed


def test_bench_gpu_feeds_pictures_already_on_the_gpu_fake_gpu() -> None:
    """``--inputs device``: NVDEC-like pictures reach the backend's GPU letterbox, not the
    pinned rows; every frame lent is submitted and completed."""
    from benchmarks.gpu import stream_set_rate
    from tests.fake_gpu import FakeExecutor, FakeGpuRuntime, device_frame

    rt = FakeGpuRuntime(0, 0.0)
    ex = FakeExecutor(rt, 4)
    rate = stream_set_rate([(rt, ex)], 2, 0.3, [device_frame(1, i) for i in range(4)]).img_s
    assert rate > 0
    letterboxed = sum(len(rows) for ctx in ex.contexts for rows in ctx.letterboxed)
    assert letterboxed >= 0.3 * rate  # every frame of the window went through it
