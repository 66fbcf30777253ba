"""The stream set with the real PyTorch executor on a real GPU."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
from pathlib import Path

import cv2
import numpy as np
import pytest
import yaml

from tests.golden import F32_MARGINS, load_expected, match_golden
from tests.gpu.conftest import DEVICES
from tests.lending import lend_and_submit
from vidpipe.config import GpuAdvanced
from vidpipe.infer.cuda_rt import CudaRuntime
from vidpipe.infer.gpu import GpuConfig, build_gpu_backend
from vidpipe.infer.streamset import StreamSetBackend
from vidpipe.preprocess.letterbox import letterbox
from vidpipe.types import Completion

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]


def letterboxed(assets_dir: Path) -> dict[str, np.ndarray]:
    images = sorted((assets_dir / "images").glob("*.jpg"))[:12]
    return {p.name: letterbox(cv2.imread(str(p)), 416, 416)[0][None] for p in images}


def test_detect_matches_golden_torch_gpu(assets_dir: Path, tmp_path: Path) -> None:
    """`vidpipe detect` through the stream set: the golden rule at f32 (TF32 off)."""
    models = assets_dir / "models"
    cfg = {
        "model": {
            "path": str(models / "yolox_nano.onnx"),
            "labels": str(models / "coco80.txt"),
            "score_threshold": 0.30,
            "iou_threshold": 0.45,
        },
        "inference": {
            "type": "torch",
            "precision": "f32",
            "advanced": {"streams": 2, "max_batch": 4},
        },
        "http": {"enabled": False},
    }
    path = tmp_path / "gpu.yaml"
    path.write_text(yaml.safe_dump(cfg))
    expected = load_expected(assets_dir / "images" / "expected.jsonl")
    names = sorted(expected)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "vidpipe.cli",
            "detect",
            "--config",
            str(path),
            *[str(assets_dir / "images" / n) for n in names],
        ],
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [g["camera"] for g in got] == names
    problems = [p for g in got for p in match_golden(expected[g["camera"]], g, **F32_MARGINS)]
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
def backend(model_path: Path) -> StreamSetBackend:
    b = build_gpu_backend(
        model_path,
        GpuConfig(type="torch", advanced=GpuAdvanced(streams=4, max_batch=8, batch_timeout_ms=2)),
    )
    yield b
    b.close()


def test_enqueue_never_synchronises_the_stream_gpu(backend: StreamSetBackend) -> None:
    """Shape buffers stay on the host: no device-to-host sync inside the enqueue."""
    import torch

    ctx = backend.sets[0].slots[0].ctx
    assert ctx is not None
    torch.cuda.set_sync_debug_mode("error")
    try:
        ctx.enqueue(3)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()


def test_results_route_to_their_frames_under_concurrency_gpu(
    backend: StreamSetBackend, assets_dir: Path
) -> None:
    frames = letterboxed(assets_dir)
    reference: dict[str, np.ndarray] = {}
    lock = threading.Lock()
    got: list[Completion] = []
    done = threading.Event()

    def collect(c: Completion) -> None:
        with lock:
            got.append(c)
            if len(got) == total:
                done.set()

    total = len(frames)
    for name, x in frames.items():  # references: one frame at a time
        lend_and_submit(backend, x, name, collect)
        backend.drain(30)
    for c in got:
        assert c.error is None and c.outputs is not None
        reference[c.tag] = c.outputs[0]
    got.clear()
    done.clear()
    tags = [(name, i) for i in range(50) for name in frames]
    random.Random(0).shuffle(tags)
    total = len(tags)
    for tag in tags:
        lend_and_submit(backend, frames[tag[0]], tag, collect)
    assert done.wait(120)
    assert sorted(c.tag for c in got) == sorted(tags)
    worst = 0.0
    for c in got:
        assert c.error is None and c.outputs is not None
        diff = float(np.abs(c.outputs[0] - reference[c.tag[0]]).max())
        worst = max(worst, diff)
    # Batched kernels may round differently from batch 1; another frame's output differs by
    # orders of magnitude more (scores in 0..1, boxes in pixels).
    assert worst < 1e-2, worst
    assert sum(s.frames for s in backend.sets) > 1.5 * sum(s.batches for s in backend.sets)


def test_no_device_memory_growth_over_10k_batches_gpu(model_path: Path) -> None:
    import time

    backend = build_gpu_backend(
        model_path,
        GpuConfig(
            type="torch", advanced=GpuAdvanced(streams=2, max_batch=2, batch_timeout_ms=1000)
        ),
    )
    rt = backend.sets[0].runtime
    contexts = backend.sets[0].executor.contexts  # type: ignore[attr-defined]
    x = np.full((1, 416, 416, 3), 114, np.uint8)
    count, sent = [0], [0]

    def on_done(c: Completion) -> None:
        assert c.error is None
        count[0] += 1

    def run(batches: int) -> None:
        for _ in range(batches * 2):
            lend_and_submit(backend, x, None, on_done)
        sent[0] += batches * 2
        assert backend.drain(60)

    try:
        run(200)
        # The service's background thread adds the other graph sizes to each stream while
        # batches run, and a capture allocates once in the graphs' memory pool. So the
        # readings start once every size is captured: begun before, on an H100, they grew
        # 4 MiB twice within 2k batches and then not at all over 8k, as the captures of two
        # streams would.
        deadline = time.monotonic() + 240
        while any(sorted(ctx._graphs) != [1, 2] for ctx in contexts):
            assert time.monotonic() < deadline, [sorted(c._graphs) for c in contexts]
            run(10)
        before = rt.mem_used()
        readings = []  # every 1k batches: a leak grows in steps, a one-off allocation once
        for _ in range(10):
            run(1_000)
            readings.append(rt.mem_used())
        after = readings[-1]
        print(
            f"device memory in use: {before >> 20} MiB before, then every 1k batches (MiB): "
            f"{[r >> 20 for r in readings]}"
        )
        assert count[0] == sent[0]
        # the whole GPU's memory
        assert after - before <= 2 << 20, (before, readings)
    finally:
        backend.close()


@pytest.mark.skipif(DEVICES < 2, reason="needs two GPUs (nvidia-h200-x2)")
def test_two_gpus_share_the_batches_gpu(model_path: Path, assets_dir: Path) -> None:
    backend = build_gpu_backend(
        model_path,
        GpuConfig(
            type="torch",
            devices=[0, 1],
            advanced=GpuAdvanced(streams=2, max_batch=8, batch_timeout_ms=2),
        ),
    )
    frames = list(letterboxed(assets_dir).values())
    try:
        results: list[Completion] = []
        for i in range(2000):
            lend_and_submit(backend, frames[i % len(frames)], i, results.append)
        assert backend.drain(60)
        assert len(results) == 2000 and all(c.error is None for c in results)
        frames = [s.frames for s in backend.sets]
        print(frames)
        assert frames[0] > 200 and frames[1] > 200
        assert "cuda:1" in backend.info.device
    finally:
        backend.close()


def test_cuda_runtime_reports_the_device_gpu() -> None:
    rt = CudaRuntime(0)
    assert rt.compute_capability[0] >= 5
    assert rt.name


def test_cuda_graphs_match_eager_execution_gpu(model_path: Path, assets_dir: Path) -> None:
    """Graph replay (padded to a captured size) gives the eager module's outputs."""
    frames = list(letterboxed(assets_dir).values())[:5]
    outs = {}
    for graphs in (False, True):
        backend = build_gpu_backend(
            model_path,
            GpuConfig(
                type="torch",
                advanced=GpuAdvanced(
                    streams=1, max_batch=8, batch_timeout_ms=1000, cuda_graphs=graphs
                ),
            ),
        )
        got: list[Completion] = []
        try:
            for i, x in enumerate(frames):  # 5 frames: replays the graph of 8
                lend_and_submit(backend, x, i, got.append)
            assert backend.drain(30)
        finally:
            backend.close()
        assert all(c.error is None and c.outputs is not None for c in got)
        outs[graphs] = {c.tag: c.outputs[0] for c in got}  # type: ignore[index]
    for i in range(len(frames)):
        assert float(np.abs(outs[True][i] - outs[False][i]).max()) < 1e-3


def test_a_service_start_serves_at_once_and_fills_in_the_graphs_while_batches_run_gpu(
    model_path: Path, assets_dir: Path
) -> None:
    """``build_gpu_backend`` (a service's start) returns with the graph of ``max_batch`` on
    every stream; its background thread adds every other size while batches keep running
    (each capture pauses the process's GPU work, ``GPU_GATE``), no batch fails meanwhile, and
    each size's replay then gives the eager module's outputs."""
    import time

    frames = list(letterboxed(assets_dir).values())[:8]

    def backend_of(graphs: bool) -> StreamSetBackend:
        adv = GpuAdvanced(streams=2, max_batch=8, batch_timeout_ms=2, cuda_graphs=graphs)
        return build_gpu_backend(model_path, GpuConfig(type="torch", advanced=adv))

    backend = backend_of(True)
    ex = backend.sets[0].executor
    got: list[Completion] = []
    try:
        contexts = ex.contexts  # type: ignore[attr-defined]
        assert len(contexts) == 2
        assert all(8 in ctx._graphs for ctx in contexts)  # served from the start
        deadline, i = time.monotonic() + 240, 0
        while any(sorted(ctx._graphs) != [1, 2, 4, 8] for ctx in contexts):
            assert time.monotonic() < deadline, [sorted(c._graphs) for c in contexts]
            lend_and_submit(backend, frames[i % len(frames)], i, got.append)
            i += 1
        assert backend.drain(30)
        assert got and all(c.error is None for c in got), [c.error for c in got if c.error]
        replayed: dict[int, np.ndarray] = {}
        for i, x in enumerate(frames[:3]):  # one at a time: batches of 1, the graph of 1
            lend_and_submit(backend, x, i, lambda c: replayed.__setitem__(c.tag, c.outputs[0]))
            assert backend.drain(30)
    finally:
        backend.close()
    eager = backend_of(False)
    try:
        expected: dict[int, np.ndarray] = {}
        for i, x in enumerate(frames[:3]):
            lend_and_submit(eager, x, i, lambda c: expected.__setitem__(c.tag, c.outputs[0]))
            assert eager.drain(30)
    finally:
        eager.close()
    for i in range(3):
        assert float(np.abs(replayed[i] - expected[i]).max()) < 1e-3
