"""The re-identification model on the GPU (onnx2torch, batched) against each crop alone on the
CPU (OpenVINO where installed, else the converted model one crop a batch): crops cut on the
device from an NV12 frame embed as the host's crops of the same picture."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.gpu.test_crops_gpu import BOXES, _host_crops
from vidpipe.preprocess.crops import crop_box, nv12_crops
from vidpipe.preprocess.gpu import bgr_to_nv12

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(300)]

torch = pytest.importorskip("torch")
pytest.importorskip("onnx2torch")


def _reference(path: Path, crops: list[np.ndarray]) -> list[np.ndarray]:
    """Each host crop's embedding alone: OpenVINO where it is installed (the CPU build's run),
    else the converted model on the CPU, one crop a batch (the GPU image has no OpenVINO)."""
    try:
        import openvino as ov
    except ImportError:
        from vidpipe.infer.torch_embedder import TorchEmbedder

        cpu = TorchEmbedder(path, torch.device("cpu"))
        return [cpu.embed(torch.from_numpy(c[None]))[0] for c in crops]
    model = ov.Core().compile_model(str(path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    out = [np.asarray(model(c[None].astype(np.float32))[0]).reshape(-1) for c in crops]
    return [v / np.linalg.norm(v) for v in out]


@pytest.mark.parametrize("half", [False, True], ids=["f32", "f16"])
def test_batched_gpu_embeddings_match_openvino_gpu(
    assets_dir: Path, torch_device: Any, half: bool
) -> None:
    from vidpipe.infer.torch_embedder import TorchEmbedder

    if half and torch_device.type == "cpu":
        pytest.skip("float16 convolutions are a GPU path")
    path = assets_dir / "models" / "person-reidentification-retail-0288.onnx"
    cap = cv2.VideoCapture(str(assets_dir / "videos" / "one-by-one-person-detection.mp4"))
    cap.set(cv2.CAP_PROP_POS_FRAMES, 420)
    ok, frame = cap.read()
    assert ok
    h, w = frame.shape[:2]
    nv12 = bgr_to_nv12(frame)
    boxes = [crop_box(b, w, h) for b in BOXES]
    crops = nv12_crops(torch, torch.from_numpy(nv12).to(torch_device), boxes, 128, 256)
    got = TorchEmbedder(path, torch_device, half=half).embed(crops)  # one batch of six
    assert got.shape == (len(boxes), 256)
    host = _host_crops(cv2.cvtColor(nv12, cv2.COLOR_YUV2BGR_NV12), boxes)
    for i, ref in enumerate(_reference(path, host)):
        cos = float(got[i] @ ref)
        print(boxes[i], "cosine", cos)
        assert cos > 0.99, (boxes[i], cos)
    # different people and places are told apart: the check above can fail
    assert float(got[0] @ got[5]) < 0.9
