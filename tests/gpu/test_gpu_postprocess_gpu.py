"""GPU YOLOX decode + score filter + class-aware NMS against the CPU postprocessing.

Synthetic outputs check the function on any input (fresh random tensors, overlapping boxes,
several thresholds, class masks, the host fallback); real frames check it on what the model
says about the golden images.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.golden import F32_MARGINS, load_expected, match_golden
from vidpipe.postprocess import gpu as gpu_post
from vidpipe.postprocess.decode import DecodeParams, decode_yolox, num_anchors
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.letterbox import letterbox
from vidpipe.types import Detections, Letterbox

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

torch = pytest.importorskip("torch")
C = 80
W = H = 416


def synthetic(rng: np.random.Generator, b: int, hot: float) -> np.ndarray:
    """YOLOX-like outputs: a ``hot`` share of rows with high objectness, most of them pointing
    at a few objects per image (so that same-class boxes overlap and NMS has work to do), the
    rest at random boxes, class mass on a few classes so that overlapping classes compete."""
    a = num_anchors(W, H)
    grid = np.concatenate(
        [
            np.stack(np.meshgrid(np.arange(W // s), np.arange(H // s)), -1).reshape(-1, 2)
            for s in (8, 16, 32)
        ]
    ).astype(np.float32)
    stride = np.concatenate([np.full((W // s) * (H // s), s) for s in (8, 16, 32)]).astype(
        np.float32
    )
    out = np.empty((b, a, 5 + C), np.float32)
    out[..., 0:2] = rng.uniform(-0.5, 1.5, (b, a, 2))
    out[..., 2:4] = rng.uniform(-1.0, 3.0, (b, a, 2))
    out[..., 4] = rng.beta(0.5, 8.0, (b, a))
    cls = rng.random((b, a, C)) ** 6
    cls[..., [0, 2]] += rng.uniform(0, 0.6, (b, a, 2))  # person and car compete
    for i in range(b):
        hot_rows = np.flatnonzero(rng.random(a) < hot)
        out[i, hot_rows, 4] = rng.uniform(0.3, 1.0, hot_rows.size)
        objects = rng.uniform(20, 396, (6, 2)), rng.uniform(15, 200, (6, 2)), rng.integers(0, 8, 6)
        which = rng.integers(0, 6, hot_rows.size)
        clustered = rng.random(hot_rows.size) < 0.8
        for r, k in zip(hot_rows[clustered], which[clustered], strict=True):
            s = stride[r]
            centre = objects[0][k] + rng.normal(0, 3, 2)
            size = objects[1][k] * np.exp(rng.normal(0, 0.15, 2))
            out[i, r, 0:2] = centre / s - grid[r]
            out[i, r, 2:4] = np.log(size / s)
            cls[i, r, objects[2][k] if rng.random() < 0.85 else rng.integers(0, 8)] = rng.uniform(
                0.5, 1.0
            )
    out[..., 5:] = np.minimum(cls, 1.0)
    return out


def assert_same(gpu: Detections, cpu: Detections, where: str) -> None:
    assert len(gpu) == len(cpu), f"{where}: {len(gpu)} kept on the GPU, {len(cpu)} on the CPU"
    np.testing.assert_array_equal(gpu.class_id, cpu.class_id, err_msg=where)
    np.testing.assert_allclose(gpu.score, cpu.score, rtol=1e-6, atol=1e-7, err_msg=where)
    np.testing.assert_allclose(gpu.xyxy, cpu.xyxy, rtol=1e-5, atol=1e-3, err_msg=where)


def cpu_reference(
    out: np.ndarray, lb: Letterbox, thr: float, iou: float, classes: frozenset[int] | None
) -> Detections:
    return postprocess([out], lb, decode_yolox, DecodeParams(W, H, thr), iou, classes)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_synthetic_outputs_match_cpu_gpu(seed: int) -> None:
    rng = np.random.default_rng(seed * 7919 + int(rng_salt()))
    b = 12
    out = synthetic(rng, b, hot=0.03)
    lbs = [Letterbox(scale=float(rng.uniform(0.2, 1.0)), src_w=1920, src_h=1080) for _ in range(b)]
    thr = [float(t) for t in rng.choice([0.25, 0.3, 0.5], b)]
    masks = np.ones((b, C), bool)
    masks[::3] = False
    masks[::3, [0, 2, 7]] = True  # every third camera keeps person, car, truck only
    iou = float(rng.choice([0.45, 0.65]))
    dev = torch.device("cuda", 0)
    post = gpu_post.YoloxGpuPostprocess(torch, dev, W, H, C, iou)
    # Rows past B are a CUDA graph's stale rows: poison them, they must not matter.
    padded = np.concatenate([out, np.full((4, *out.shape[1:]), 0.99, np.float32)])
    got = post(torch.from_numpy(padded).to(dev), lbs, thr, torch.from_numpy(masks).to(dev))
    assert len(got) == b
    kept_total = 0
    for i in range(b):
        classes = frozenset(np.flatnonzero(masks[i]).tolist())
        ref = cpu_reference(out[i], lbs[i], thr[i], iou, classes)
        assert_same(got[i], ref, f"seed {seed} image {i}")
        kept_total += len(ref)
    assert kept_total > 10 * b, "the synthetic batch should keep many boxes"
    assert post.stats.nms_passes >= 2


def rng_salt() -> int:
    """Fresh inputs on every run (the seed is printed by a failing assertion's message)."""
    salt = int.from_bytes(np.random.default_rng().bytes(2), "little")
    print("synthetic salt", salt)
    return salt


def test_host_fallback_for_crowded_image_gpu() -> None:
    """An image with more candidates than one IoU matrix takes the CPU path, counted."""
    rng = np.random.default_rng(rng_salt())
    out = synthetic(rng, 3, hot=0.02)
    out[1, :, 4] = rng.uniform(0.5, 1.0, out.shape[1])  # every row is a candidate
    lbs = [Letterbox(scale=0.5, src_w=832, src_h=832)] * 3
    thr = [0.3, 0.05, 0.3]
    dev = torch.device("cuda", 0)
    post = gpu_post.YoloxGpuPostprocess(torch, dev, W, H, C, 0.45)
    got = post(torch.from_numpy(out).to(dev), lbs, thr)
    assert post.stats.host_fallbacks == 1
    for i in range(3):
        assert_same(got[i], cpu_reference(out[i], lbs[i], thr[i], 0.45, None), f"image {i}")


def test_empty_batch_and_no_candidates_gpu() -> None:
    dev = torch.device("cuda", 0)
    post = gpu_post.YoloxGpuPostprocess(torch, dev, W, H, C, 0.45)
    assert post(torch.zeros((1, num_anchors(W, H), 5 + C), device=dev), [], []) == []
    none = post(
        torch.zeros((2, num_anchors(W, H), 5 + C), device=dev),
        [Letterbox(1.0, 416, 416)] * 2,
        [0.3, 0.3],
    )
    assert [len(d) for d in none] == [0, 0]
    with pytest.raises(ValueError, match="YOLOX output has shape"):
        post(torch.zeros((1, 10, 85), device=dev), [Letterbox(1.0, 416, 416)], [0.3])


@pytest.fixture(scope="module")
def executor(model_path: Path):  # type: ignore[no-untyped-def]
    from vidpipe.infer.torch_executor import TorchExecutor

    ex = TorchExecutor(model_path, 0, 16, "f32", cuda_graphs=False)
    yield ex
    ex.close()


def test_real_frames_match_cpu_postprocess_gpu(executor, assets_dir: Path) -> None:  # type: ignore[no-untyped-def]
    """The golden images through the model once: the GPU postprocess of those outputs equals
    the CPU postprocess of the same outputs, and passes the golden rule."""
    expected = load_expected(assets_dir / "images" / "expected.jsonl")
    names = sorted(expected)[:16]
    images = [cv2.imread(str(assets_dir / "images" / n)) for n in names]
    boxed = [letterbox(im, W, H) for im in images]
    x = torch.from_numpy(np.stack([b for b, _ in boxed])).cuda()
    with torch.inference_mode():
        out = executor.module(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    lbs = [lb for _, lb in boxed]
    post = gpu_post.YoloxGpuPostprocess(torch, x.device, W, H, C, 0.45)
    got = post(out.float(), lbs, [0.30] * len(names))
    host = out.float().cpu().numpy()
    labels = (assets_dir / "models" / "coco80.txt").read_text().split("\n")
    problems: list[str] = []
    for i, name in enumerate(names):
        assert_same(got[i], cpu_reference(host[i], lbs[i], 0.30, 0.45, None), name)
        record = {
            "source": name,
            "width": images[i].shape[1],
            "height": images[i].shape[0],
            "detections": [
                {
                    "class_id": int(c),
                    "label": labels[int(c)],
                    "score": float(s),
                    "box": list(map(float, b)),
                }
                for b, s, c in zip(got[i].xyxy, got[i].score, got[i].class_id, strict=True)
            ],
        }
        problems += match_golden(expected[name], record, 0.30, **F32_MARGINS)
    assert not problems, "\n".join(problems)
    assert sum(len(d) for d in got) > len(names)
