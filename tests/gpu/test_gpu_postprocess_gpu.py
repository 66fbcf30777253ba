"""GPU decode + score filter + class-aware NMS against the CPU postprocessing.

Synthetic outputs of every registered model type (YOLOX, YOLOv8, SSD) check the function on
any input (fresh random tensors, overlapping boxes, tied scores, several thresholds, class
masks, the host fallback); real frames check the YOLOX path on what the model says about the
golden images.

The synthetic tests take ``torch_device``: ``VIDPIPE_TORCH_DEVICE=cpu`` runs them on a CPU
build of PyTorch (tests/gpu/conftest.py); the result must be the same on either device.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.golden import F32_MARGINS, load_expected, match_golden
from vidpipe.postprocess import gpu as gpu_post
from vidpipe.postprocess.decode import DECODERS, DecodeParams, num_anchors
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.letterbox import letterbox
from vidpipe.types import Detections, Letterbox

pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]

torch = pytest.importorskip("torch")
C = 80
W = H = 416
A = num_anchors(W, H)
SSD_ROWS = 200
SSD_LABELS = 91  # COCO SSD: background 0, labels up to 90
#: One frame's output per model type, as an executor reports it.
FRAME_SHAPES = {"yolox": (A, 5 + C), "yolov8": (4 + C, A), "ssd": (1, SSD_ROWS, 7)}


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


def synthetic_yolov8(rng: np.random.Generator, b: int, hot: float) -> np.ndarray:
    """YOLOv8-like ``(B, 4 + C, A)`` outputs: boxes in input pixels, a ``hot`` share of
    anchors scoring high around a few objects per image, a third of all class scores on a
    coarse grid (so that equal scores meet in NMS and their order must follow the rows)."""
    out = np.empty((b, 4 + C, A), np.float32)
    out[:, 0:2] = rng.uniform(0, W, (b, 2, A))
    out[:, 2:4] = rng.uniform(4, 200, (b, 2, A))
    cls = (rng.random((b, C, A)) ** 6) * 0.2
    cls[:, [0, 2]] += rng.uniform(0, 0.1, (b, 2, A))  # person and car compete
    for i in range(b):
        rows = np.flatnonzero(rng.random(A) < hot)
        centre, size = rng.uniform(20, 396, (6, 2)), rng.uniform(15, 200, (6, 2))
        label, which = rng.integers(0, 8, 6), rng.integers(0, 6, rows.size)
        o = out[i]
        o[0:2, rows] = (centre[which] + rng.normal(0, 3, (rows.size, 2))).T
        o[2:4, rows] = (size[which] * np.exp(rng.normal(0, 0.15, (rows.size, 2)))).T
        klass = np.where(rng.random(rows.size) < 0.85, label[which], rng.integers(0, 8, rows.size))
        cls[i, klass, rows] = rng.uniform(0.3, 1.0, rows.size)
    coarse = rng.random(cls.shape) < 0.33
    cls[coarse] = np.round(cls[coarse] * 32) / 32
    out[:, 4:] = cls
    return out


def synthetic_ssd(rng: np.random.Generator, b: int, hot: float) -> np.ndarray:
    """SSD-like ``(B, 1, N, 7)`` outputs: a list of rows per image ended by ``image_id -1``
    and followed by high-scoring junk (which must be ignored), confidences on a 0.01 grid
    (ties), boxes clustered on a few objects, labels 0..90."""
    del hot
    out = np.zeros((b, 1, SSD_ROWS, 7), np.float32)
    for i in range(b):
        n = int(rng.integers(1, SSD_ROWS - 10))
        rows = out[i, 0]
        centre, size = rng.uniform(0.05, 0.95, (6, 2)), rng.uniform(0.03, 0.4, (6, 2))
        label, which = rng.integers(1, 9, 6), rng.integers(0, 6, n)
        rows[:n, 1] = np.where(rng.random(n) < 0.85, label[which], rng.integers(0, SSD_LABELS, n))
        rows[:n, 2] = np.round(rng.beta(1.2, 2.0, n), 2)
        c = centre[which] + rng.normal(0, 0.01, (n, 2))
        half = size[which] * np.exp(rng.normal(0, 0.1, (n, 2))) / 2
        rows[:n, 3:5], rows[:n, 5:7] = c - half, c + half
        rows[n, 0] = -1
        rows[n + 1 :, 1:] = [3, 0.99, 0.1, 0.1, 0.6, 0.6]  # junk past the end of the list
    return out


def synthetic_yolox(rng: np.random.Generator, b: int, hot: float) -> np.ndarray:
    return synthetic(rng, b, hot)


SYNTHETIC = {"yolox": synthetic_yolox, "yolov8": synthetic_yolov8, "ssd": synthetic_ssd}
#: Classes a class-filtered camera keeps, per model type (SSD numbers from 1).
FILTERED = {"yolox": {0, 2, 7}, "yolov8": {0, 2, 7}, "ssd": {1, 3, 8}}


def make_post(model: str, device: object, iou: float) -> gpu_post.GpuPostprocess:
    kind = gpu_post.GPU_POSTPROCESSORS[model]
    return kind(torch, device, W, H, kind.classes_in(FRAME_SHAPES[model]), iou)


def cpu_reference(
    out: np.ndarray,
    lb: Letterbox,
    thr: float,
    iou: float,
    classes: frozenset[int] | None,
    model: str = "yolox",
) -> Detections:
    return postprocess([out], lb, DECODERS[model], DecodeParams(W, H, thr), iou, classes)


def rng_salt() -> int:
    """Fresh inputs on every run (the seed is printed by a failing assertion's message)."""
    salt = int.from_bytes(np.random.default_rng().bytes(2), "little")
    print("synthetic salt", salt)
    return salt


@pytest.mark.parametrize("model", sorted(SYNTHETIC))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_synthetic_outputs_match_cpu_gpu(model: str, seed: int, torch_device: object) -> None:
    salt = rng_salt()
    rng = np.random.default_rng(seed * 7919 + salt)
    b = 12
    out = SYNTHETIC[model](rng, b, 0.03)
    lbs = [Letterbox(scale=float(rng.uniform(0.2, 1.0)), src_w=1920, src_h=1080) for _ in range(b)]
    thr = [float(t) for t in rng.choice([0.25, 0.3, 0.5], b)]
    wanted = [frozenset(FILTERED[model]) if i % 3 == 0 else None for i in range(b)]
    iou = float(rng.choice([0.45, 0.65]))
    post = make_post(model, torch_device, iou)
    # Rows past B are a CUDA graph's stale rows: poison them, they must not matter.
    padded = np.concatenate([out, np.full((4, *out.shape[1:]), 0.99, np.float32)])
    got = post(torch.from_numpy(padded).to(torch_device), lbs, thr, post.masks_for(wanted))
    assert len(got) == b
    kept_total = 0
    for i in range(b):
        ref = cpu_reference(out[i], lbs[i], thr[i], iou, wanted[i], model)
        assert_same(got[i], ref, f"{model} seed {seed} salt {salt} image {i}")
        kept_total += len(ref)
    assert kept_total > 3 * b, "the synthetic batch should keep many boxes"
    assert post.stats.nms_passes >= 2 and post.stats.host_fallbacks == 0
    print(model, "candidates", post.stats.candidates, "kept", kept_total)


@pytest.mark.parametrize("model", sorted(SYNTHETIC))
def test_host_fallback_for_crowded_image_gpu(model: str, torch_device: object) -> None:
    """An image with more candidates than one IoU matrix takes the CPU path, counted."""
    rng = np.random.default_rng(rng_salt())
    if model == "ssd":
        out = np.concatenate([synthetic_ssd(rng, 3, 0.0)] * 12, axis=2)  # 2,400 rows each
        out[1, 0, :, 0] = 0  # image 1 lists every row, most of them of its classes
        out[1, 0, :, 1] = rng.choice([1, 3, 8, 5], out.shape[2], p=[0.3, 0.3, 0.3, 0.1])
        out[1, 0, :, 2] = rng.uniform(0.5, 1.0, out.shape[2])
    else:
        out = SYNTHETIC[model](rng, 3, 0.02)
        if model == "yolox":
            out[1, :, 4] = rng.uniform(0.5, 1.0, A)  # every row is a candidate ...
            out[1, :, 5 + 2] = 1.0  # ... of a class it keeps
        else:
            out[1, 4, :] = rng.uniform(0.5, 1.0, A)  # class 0 (kept) is every row's best
    frame = out.shape[1:]
    kind = gpu_post.GPU_POSTPROCESSORS[model]
    post = kind(torch, torch_device, W, H, kind.classes_in(frame), 0.45)
    lbs = [Letterbox(scale=0.5, src_w=832, src_h=832)] * 3
    thr = [0.3, 0.05, 0.3]
    wanted = [None, frozenset(FILTERED[model]), None]
    got = post(torch.from_numpy(out).to(torch_device), lbs, thr, post.masks_for(wanted))
    assert post.stats.host_fallbacks == 1
    for i in range(3):
        ref = cpu_reference(out[i], lbs[i], thr[i], 0.45, wanted[i], model)
        assert_same(got[i], ref, f"{model} image {i}")


@pytest.mark.parametrize("model", sorted(SYNTHETIC))
def test_empty_batch_no_candidates_and_bad_shapes_gpu(model: str, torch_device: object) -> None:
    post = make_post(model, torch_device, 0.45)
    frame = FRAME_SHAPES[model]
    assert post(torch.zeros((1, *frame), device=torch_device), [], []) == []
    none = post(
        torch.zeros((2, *frame), device=torch_device), [Letterbox(1.0, 416, 416)] * 2, [0.3, 0.3]
    )
    assert [len(d) for d in none] == [0, 0]
    bad = {"yolox": (10, 85), "yolov8": (10, A), "ssd": (1, 10, 6)}[model]
    with pytest.raises(ValueError, match="output has shape"):
        post(torch.zeros((1, *bad), device=torch_device), [Letterbox(1.0, 416, 416)], [0.3])


@pytest.mark.parametrize("model", sorted(SYNTHETIC))
def test_the_torch_executor_postprocesses_each_model_type_on_the_device_gpu(model: str) -> None:
    """``TorchExecutor.device_postprocess``'s postprocessor, over synthetic outputs in device
    memory (the assets hold no YOLOv8 or SSD model): the registered one is picked by model
    type, and the stream set's requests (per-camera thresholds and classes) give the CPU
    path's detections."""
    from types import SimpleNamespace

    from vidpipe.infer.torch_executor import TorchDevicePostprocess
    from vidpipe.types import PostprocessRequest

    salt = rng_salt()
    rng = np.random.default_rng(salt)
    b = 6
    out = SYNTHETIC[model](rng, b, 0.03)
    dev = torch.device("cuda", 0)
    d_out = torch.from_numpy(out).to(dev).contiguous()
    io = SimpleNamespace(
        input=SimpleNamespace(shape=(H, W, 3)), outputs=(SimpleNamespace(shape=out.shape[1:]),)
    )
    ex = SimpleNamespace(torch=torch, device=dev, io=io)
    post = TorchDevicePostprocess(ex, gpu_post.GPU_POSTPROCESSORS[model])  # type: ignore[arg-type]
    lbs = [Letterbox(scale=float(rng.uniform(0.2, 1.0)), src_w=1920, src_h=1080) for _ in range(b)]
    requests = [
        PostprocessRequest(
            model, lbs[i], (0.25, 0.4)[i % 2], frozenset(FILTERED[model]) if i % 3 else None, 0.5
        )
        for i in range(b)
    ]
    got = post([d_out.data_ptr()], b, requests)
    for i, r in enumerate(requests):
        ref = cpu_reference(out[i], r.letterbox, r.score_threshold, 0.5, r.class_ids, model)
        assert_same(got[i], ref, f"{model} salt {salt} image {i}")


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
