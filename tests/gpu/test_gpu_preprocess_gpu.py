"""NV12 -> letterboxed BGR on the GPU, against OpenCV's conversion and letterbox on the CPU,
and golden detections through GPU preprocessing and GPU postprocessing."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.golden import load_expected, match_golden
from tests.integration.test_cli import MARGINS
from vidpipe.postprocess.gpu import YoloxGpuPostprocess
from vidpipe.preprocess.gpu import bgr_to_nv12, nv12_letterbox_into
from vidpipe.preprocess.letterbox import letterbox

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

torch = pytest.importorskip("torch")


def even(image: np.ndarray) -> np.ndarray:
    h, w = image.shape[:2]
    return image[: h - h % 2, : w - w % 2]


def cpu_path(nv12: np.ndarray, w: int, h: int) -> np.ndarray:
    """What the CPU capture does with the same picture: BGR from NV12, then letterbox."""
    return letterbox(cv2.cvtColor(nv12, cv2.COLOR_YUV2BGR_NV12), w, h)[0]


@pytest.mark.parametrize("size", [(1920, 1080), (1280, 720), (640, 480), (416, 416)])
def test_nv12_letterbox_matches_cpu_gpu(size: tuple[int, int], assets_dir: Path) -> None:
    src = cv2.imread(str(sorted((assets_dir / "images").glob("*.jpg"))[3]))
    nv12 = bgr_to_nv12(cv2.resize(src, size, interpolation=cv2.INTER_AREA))
    dst = torch.full((2, 416, 416, 3), 7, dtype=torch.uint8, device="cuda")  # poisoned
    lb = nv12_letterbox_into(torch, torch.from_numpy(nv12).cuda(), dst[1])
    got = dst[1].cpu().numpy()
    ref = cpu_path(nv12, 416, 416)
    diff = np.abs(got.astype(np.int16) - ref.astype(np.int16))
    print(size, "mean abs diff", diff.mean(), "p99", np.percentile(diff, 99), "max", diff.max())
    assert lb.src_w == size[0] and lb.src_h == size[1]
    assert diff.mean() < 2.0 and np.percentile(diff, 99) < 16
    assert (dst[0] == 7).all(), "wrote outside its own row of the batch"
    new_h = int(size[1] * lb.scale)
    if new_h < 416:
        assert (got[new_h + 1 :] == 114).all()


def test_shapes_are_checked_gpu() -> None:
    dst = torch.empty((416, 416, 3), dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="NV12 frame"):
        nv12_letterbox_into(torch, torch.empty((1081, 1920), dtype=torch.uint8, device="cuda"), dst)
    with pytest.raises(ValueError, match="destination"):
        nv12_letterbox_into(
            torch, torch.empty((1620, 1920), dtype=torch.uint8, device="cuda"), dst[0]
        )


def test_golden_through_gpu_pre_and_postprocess_gpu(model_path: Path, assets_dir: Path) -> None:
    """The golden images as NV12 on the device -> GPU letterbox into a batch -> model -> GPU
    NMS: the golden rule against expected.jsonl, as the CPU path is held to it."""
    from vidpipe.infer.torch_executor import TorchExecutor

    ex = TorchExecutor(model_path, 0, 16, "f32", cuda_graphs=False)
    expected = load_expected(assets_dir / "images" / "expected.jsonl")
    names = sorted(expected)[-16:]
    batch = torch.empty((16, 416, 416, 3), dtype=torch.uint8, device="cuda")
    lbs, sizes = [], []
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i, name in enumerate(names):
            image = even(cv2.imread(str(assets_dir / "images" / name)))
            sizes.append(image.shape[:2])
            nv12 = torch.from_numpy(bgr_to_nv12(image)).cuda(non_blocking=False)
            lbs.append(nv12_letterbox_into(torch, nv12, batch[i]))
        with torch.inference_mode():
            out = ex.module(batch)
        out = out[0] if isinstance(out, (tuple, list)) else out
        post = YoloxGpuPostprocess(torch, batch.device, 416, 416, 80, 0.45)
        got = post(out.float(), lbs, [0.30] * len(names))
    problems: list[str] = []
    for i, name in enumerate(names):
        record = {
            "source": name,
            "width": expected[name]["width"],
            "height": expected[name]["height"],
            "detections": [
                {"class_id": int(c), "score": float(s), "box": [float(v) for v in b]}
                for b, s, c in zip(got[i].xyxy, got[i].score, got[i].class_id, strict=True)
            ],
        }
        problems += match_golden(expected[name], record, 0.30, **MARGINS["f32"])
    ex.close()
    assert not problems, "\n".join(problems)
    assert sum(len(d) for d in got) > len(names)
