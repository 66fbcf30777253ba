"""NV12 -> letterboxed BGR on the GPU, against OpenCV's conversion and letterbox on the CPU,
and detections through GPU preprocessing and GPU postprocessing against the CPU path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from tests.golden import F32_MARGINS, match_golden
from vidpipe.postprocess.decode import DecodeParams, decode_yolox
from vidpipe.postprocess.gpu import YoloxGpuPostprocess
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.gpu import bgr_to_nv12, nv12_letterbox_batch_into, nv12_letterbox_into
from vidpipe.preprocess.letterbox import letterbox, letterbox_geometry

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


def _whole_frame_reference(nv12: Any, new_h: int, new_w: int) -> Any:
    """The former GPU path: convert the whole frame in float, round, then ``interpolate``."""
    src_h, src_w = nv12.shape[1] * 2 // 3, nv12.shape[2]
    y = (nv12[:, :src_h].float() - 16.0) * (255.0 / 219.0)
    uv = nv12[:, src_h:].reshape(len(nv12), src_h // 2, src_w // 2, 2).float() - 128.0
    uv = uv.repeat_interleave(2, dim=1).repeat_interleave(2, dim=2)
    u, v = uv[..., 0], uv[..., 1]
    gains = ((2.017232, 0.0), (-0.391762, -0.812968), (0.0, 1.596027))
    planes = torch.stack([y + cu * u + cv * v for cu, cv in gains], dim=1).round().clamp(0, 255)
    planes = torch.nn.functional.interpolate(
        planes, size=(new_h, new_w), mode="bilinear", align_corners=False, antialias=False
    )
    return planes.round().clamp(0, 255).permute(0, 2, 3, 1).to(torch.uint8)


@pytest.mark.parametrize("size", [(1920, 1080), (1280, 720), (640, 480), (320, 240), (416, 416)])
def test_converting_only_the_sampled_pixels_equals_converting_the_whole_frame(
    size: tuple[int, int], assets_dir: Path, torch_device: Any
) -> None:
    """The letterbox converts only the four source pixels each output pixel reads; that must
    give what converting every pixel and then resizing gives (float rounding aside)."""
    images = sorted((assets_dir / "images").glob("*.jpg"))[:3]
    pictures = [bgr_to_nv12(cv2.resize(cv2.imread(str(p)), size)) for p in images]
    nv12 = torch.from_numpy(np.stack(pictures)).to(torch_device)
    dst = torch.full((3, 416, 416, 3), 7, dtype=torch.uint8, device=torch_device)
    lb = nv12_letterbox_batch_into(torch, nv12, dst)
    _, new_w, new_h = letterbox_geometry(size[0], size[1], 416, 416)
    assert lb.scale == min(416 / size[0], 416 / size[1])
    ref = _whole_frame_reference(nv12, new_h, new_w).cpu().numpy().astype(np.int16)
    got = dst[:, :new_h, :new_w].cpu().numpy().astype(np.int16)
    diff = np.abs(got - ref)
    print(size, "pixels that differ", float((diff > 0).mean()), "max", int(diff.max()))
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-3
    assert (dst[:, new_h:] == 114).all() and (dst[:, :, new_w:] == 114).all()


def test_shapes_are_checked_gpu() -> None:
    dst = torch.empty((416, 416, 3), dtype=torch.uint8, device="cuda")
    with pytest.raises(ValueError, match="NV12 frame"):
        nv12_letterbox_into(torch, torch.empty((1081, 1920), dtype=torch.uint8, device="cuda"), dst)
    with pytest.raises(ValueError, match="destination"):
        nv12_letterbox_into(
            torch, torch.empty((1620, 1920), dtype=torch.uint8, device="cuda"), dst[0]
        )


def test_gpu_path_matches_cpu_path_on_nv12_images_gpu(model_path: Path, assets_dir: Path) -> None:
    """The golden images as NV12 (what a decoder gives): GPU letterbox into a batch -> model
    -> GPU NMS, against OpenCV's NV12 -> BGR -> CPU letterbox -> model -> CPU NMS on the same
    NV12 pictures, by the golden rule (the CPU path as the golden side). The NV12 round trip
    itself (4:2:0 chroma) moves scores by more than the rule allows against expected.jsonl,
    so both sides start from the same NV12 picture."""
    from vidpipe.infer.torch_executor import TorchExecutor

    ex = TorchExecutor(model_path, 0, 16, "f32", cuda_graphs=False)
    names = sorted(p.name for p in (assets_dir / "images").glob("*.jpg"))[-16:]
    pictures = [bgr_to_nv12(even(cv2.imread(str(assets_dir / "images" / n)))) for n in names]
    gpu_in = torch.empty((16, 416, 416, 3), dtype=torch.uint8, device="cuda")
    lbs = [
        nv12_letterbox_into(torch, torch.from_numpy(nv12).cuda(), gpu_in[i])
        for i, nv12 in enumerate(pictures)
    ]
    cpu_in = torch.from_numpy(np.stack([cpu_path(nv12, 416, 416) for nv12 in pictures])).cuda()
    with torch.inference_mode():
        out_gpu, out_cpu = (first(ex.module(x)) for x in (gpu_in, cpu_in))
    got = YoloxGpuPostprocess(torch, gpu_in.device, 416, 416, 80, 0.45)(
        out_gpu.float(), lbs, [0.30] * len(names)
    )
    host = out_cpu.float().cpu().numpy()
    problems: list[list[str]] = []
    for i, name in enumerate(names):
        ref = postprocess([host[i]], lbs[i], decode_yolox, DecodeParams(416, 416, 0.30), 0.45)
        records = [
            {
                "source": name,
                "detections": [
                    {"class_id": int(c), "score": float(s), "box": [float(v) for v in b]}
                    for b, s, c in zip(d.xyxy, d.score, d.class_id, strict=True)
                ],
            }
            for d in (ref, got[i])
        ]
        problems.append(match_golden(records[0], records[1], 0.30, **F32_MARGINS))
    ex.close()
    print("\n".join(p for image in problems for p in image))
    # The two pictures differ by at most 2 levels (p99: 1; test above). Measured on the H200:
    # on 000000003501.jpg that moved one score near the threshold from under 0.34 to 0.39
    # (YOLOX-Nano's scores there move that much with one level of input noise). So one
    # image of the 16 may break the rule, by one detection; more fail.
    broken = [image for image in problems if image]
    assert len(broken) <= 1 and all(len(image) == 1 for image in broken), broken
    assert sum(len(d) for d in got) > len(names)


def first(out: object) -> torch.Tensor:
    return out[0] if isinstance(out, (tuple, list)) else out


@pytest.mark.parametrize(
    "size", [(1920, 1080), (1280, 720), (768, 432), (640, 480), (416, 416), (320, 240)]
)
def test_fused_kernel_equals_the_pytorch_form_gpu(size: tuple[int, int]) -> None:
    """The one-kernel letterbox that the torch executor uses for NVDEC pictures writes what
    the PyTorch form writes, into the listed rows only (out of order, one picture not
    contiguous), pad included; 416x416 is the no-resize case, 320x240 an enlargement."""
    from vidpipe.preprocess.gpu_kernel import compile_letterbox, letterbox_rows

    kernel, how = compile_letterbox(torch, torch.device("cuda", 0))
    assert kernel is not None, how
    w, h = size
    gen = torch.Generator(device="cuda").manual_seed(w * h)
    wide = torch.randint(0, 256, (5, h * 3 // 2, w + 64), generator=gen, device="cuda")
    pictures = [p[:, :w] for p in wide.to(torch.uint8)]  # row pitch w + 64: not contiguous
    pictures[1:] = [p.contiguous() for p in pictures[1:]]
    rows = [6, 1, 3, 0, 4]
    dst = torch.full((8, 416, 416, 3), 7, dtype=torch.uint8, device="cuda")  # poisoned
    letterbox_rows(torch, kernel, pictures, rows, dst)
    ref = torch.empty((5, 416, 416, 3), dtype=torch.uint8, device="cuda")
    nv12_letterbox_batch_into(torch, torch.stack([p.contiguous() for p in pictures]), ref)
    torch.cuda.synchronize()
    got = dst[rows].cpu().numpy().astype(np.int16)
    diff = np.abs(got - ref.cpu().numpy().astype(np.int16))
    print(size, how, "values that differ", int((diff > 0).sum()), "of", diff.size)
    # The same arithmetic in the same order: on the H200 (torch 2.11, CUDA 13) no value of
    # the six sizes differed. A fused multiply-add that another compiler placed differently
    # in PyTorch's lerp could move a value lying exactly between two levels, by one.
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-5
    assert (dst[[2, 5, 7]] == 7).all(), "wrote outside the listed rows"


def test_the_kernel_path_checks_shapes_as_the_pytorch_form_does(torch_device: Any) -> None:
    """Refused before any launch (so this runs on CPU tensors too)."""
    from vidpipe.preprocess.gpu_kernel import letterbox_rows

    def frame(h: int, w: int) -> Any:
        return torch.zeros((h, w), dtype=torch.uint8, device=torch_device)

    dst = torch.zeros((2, 416, 416, 3), dtype=torch.uint8, device=torch_device)
    with pytest.raises(ValueError, match="NV12 frame"):
        letterbox_rows(torch, None, [frame(1081, 1920)], [0], dst)
    with pytest.raises(ValueError, match="one size"):
        letterbox_rows(torch, None, [frame(1620, 1920), frame(1080, 1280)], [0, 1], dst)
    with pytest.raises(ValueError, match="destination"):
        letterbox_rows(torch, None, [frame(1620, 1920)], [0], dst[:, :, :200])
