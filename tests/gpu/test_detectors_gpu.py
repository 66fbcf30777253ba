"""Two detectors in one daemon on the GPU: each has its own CUDA stream set (batches form per
model), and each camera's records and metrics name its own.

Both detectors load the same YOLOX-Nano file under two names, so that what each camera
reports can be held against the other's by the golden rule (a CPU-decoded and an
NVDEC-decoded camera of one clip, as in test_nvdec_daemon_gpu.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.golden import F32_MARGINS, match_golden
from tests.integration.conftest import DaemonProcess, free_port, metric, wait_files_played

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]


def test_two_detectors_each_with_its_own_stream_set_gpu(
    clip: Path, assets_dir: Path, tmp_path: Path
) -> None:
    models = assets_dir / "models"
    yolox = {"path": str(models / "yolox_nano.onnx"), "labels": str(models / "coco80.txt")}
    port = free_port()
    results = tmp_path / "results.jsonl"
    config = {
        "models": {"host-frames": yolox, "device-frames": yolox},
        "inference": {"type": "torch", "precision": "f32", "advanced": {"max_batch": 8}},
        "http": {"port": port},
        "sinks": [{"type": "jsonl", "path": str(results)}],
        "cameras": [
            {"name": "cpu", "url": str(clip), "detector": "host-frames"},
            {"name": "gpu", "url": str(clip), "decoder": "nvdec", "detector": "device-frames"},
        ],
    }
    daemon = DaemonProcess(config, tmp_path)
    try:
        text = wait_files_played(port, ("cpu", "gpu"), 200, daemon)
    finally:
        assert daemon.terminate(60) == 0, daemon.log()[-3000:]
    for name in ("host-frames", "device-frames"):
        assert metric(text, "vidpipe_inference_info", model=name, backend="torch") == 1, text
        assert metric(text, "vidpipe_batch_size_count", model=name) > 0
        assert metric(text, "vidpipe_pool_size", model=name) >= 1
    got: dict[str, dict[int, dict]] = {"cpu": {}, "gpu": {}}
    for line in results.read_text().splitlines():
        r = json.loads(line)
        got[r["camera"]][r["frame"]] = r
    assert {r["model"]["name"] for r in got["cpu"].values()} == {"host-frames"}
    assert {r["model"]["name"] for r in got["gpu"].values()} == {"device-frames"}
    assert set(got["cpu"]) == set(got["gpu"]) and got["cpu"]
    flipped = 0
    for seq in sorted(got["cpu"]):
        cpu = {"source": f"frame {seq}", "detections": got["cpu"][seq]["detections"]}
        gpu = {"source": f"frame {seq}", "detections": got["gpu"][seq]["detections"]}
        flipped += bool(match_golden(cpu, gpu, 0.30, **F32_MARGINS))
    print(f"{len(got['cpu'])} frames per camera; {flipped} differ by the golden rule")
    # NVDEC and libav round chroma differently (test_nvdec_daemon_gpu.py): a few may flip
    assert flipped <= max(1, len(got["cpu"]) // 16)
