"""``python -m benchmarks.gpu``: the GPU stream set against the same executor in a tight loop.

Two measurements, both in one run, reported as JSON and Markdown:

1. **Inference** (decode excluded): for each batch size B and stream count K, img/s of

   * the *tight loop*: one execution context enqueued back to back on one stream, input
     already on the device, one synchronisation at the end (the executor's own ceiling at
     batch B), and
   * the *stream set*: a synthetic camera thread filling lent rows with pictures already at
     their letterboxed size (``InputBuffer.fill``, the scheduler's call, without the resize)
     and submitting them through ``lend`` + ``submit``, with batching, copies, events,
     completion thread and per-frame routing, over K streams; each point also gives the
     cores every thread of the process kept busy (``thread_cpu``).

   The ratio of the two is the figure the design is judged by (>= 0.9). ``--outputs device``
   (the default) submits each frame as the daemon does for a model the executor postprocesses
   on the device (YOLOX, YOLOv8, SSD on torch): decode, score filter and NMS run on the GPU
   and only the kept detections come back. ``--outputs host`` asks for the raw outputs
   instead (1.2 MB a frame for YOLOX-Nano at 416x416, 77 MB a batch of 64), as a model
   without a GPU postprocessor runs. The tight loop does neither: it is the model alone.

2. **Streams** (``gpu_streams``, real CPU decode): N cameras playing a 1080p 25 fps clip in
   real time through the whole daemon (capture, letterbox, the stream set, postprocessing); a
   point is *sustained* when at least 95 % of the frames the cameras produced were inferred.
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.gpu_streams import cuda_graphs, make_clip, preprocess_cost, stream_point
from benchmarks.threads import thread_cores, thread_cpu_s
from vidpipe.infer.gpu_base import BatchExecutor
from vidpipe.types import DeviceImage

if TYPE_CHECKING:
    pass


def _executor(args: argparse.Namespace, max_batch: int) -> Any:
    from vidpipe.infer.cuda_rt import CudaRuntime
    from vidpipe.infer.gpu import GpuConfig, make_executor

    cfg = GpuConfig.model_validate(
        {
            "type": args.type,
            "devices": [args.device],
            "precision": args.precision,
            "advanced": {"max_batch": max_batch, **cuda_graphs(args)},
        }
    )
    device = args.device
    rt = CudaRuntime(device)
    return rt, make_executor(args.model, rt, cfg)


def tight_loop(rt: Any, ex: Any, batch: int, seconds: float) -> float:
    """img/s of back-to-back enqueues of one context on one stream (input on the device)."""
    io = ex.io
    stream = rt.stream_create()
    d_in = rt.device_alloc(ex.max_batch * io.input.frame_elems)
    d_outs = [rt.device_alloc(ex.max_batch * o.frame_elems * 4) for o in io.outputs]
    ev = rt.event_create()
    ctx = ex.create_context(stream, d_in, d_outs)
    try:
        for _ in range(5):
            ctx.enqueue(batch)
        rt.event_record(ev, stream)
        rt.event_wait(ev)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(10):
                ctx.enqueue(batch)
            n += 10
            rt.event_record(ev, stream)
            rt.event_wait(ev)  # bounded queue: wait per 10 enqueues, the GPU stays fed
        return n * batch / (time.perf_counter() - t0)
    finally:
        ctx.close()
        rt.event_destroy(ev)
        for p in [d_in, *d_outs]:
            rt.device_free(p)
        rt.stream_destroy(stream)


class _Lent:
    """An executor lent to one ``StreamSetBackend``, which closes what it is given: building
    an executor (a TensorRT engine, CUDA graphs) costs far more than a point, so every stream
    count of one batch size reuses it, and the owner closes it at the end."""

    def __init__(self, executor: BatchExecutor) -> None:
        self.io = executor.io
        self.max_batch = executor.max_batch
        self.info = executor.info
        self.create_context = executor.create_context
        self.device_postprocess = executor.device_postprocess

    def close(self) -> None:
        """The owner closes the executor, not the backend it was lent to."""


@dataclass(frozen=True)
class StreamSetRate:
    """What one stream-set point measured over its window.

    Attributes:
        img_s: frames completed per second.
        mean_batch: the mean batch size (the daemon exports it as ``vidpipe_batch_size``).
        thread_cores: cores each thread name kept busy (1.0 = one core), busiest first
            (``threads.thread_cores``); the feeder is the thread that called
            ``stream_set_rate``, under its Python name (``MainThread`` here).
    """

    img_s: float
    mean_batch: float
    thread_cores: dict[str, float]


def stream_set_rate(
    devices: list[tuple[Any, Any]],
    streams: int,
    seconds: float,
    frames: Sequence[np.ndarray] | Sequence[DeviceImage],
    tag: Any = None,
) -> StreamSetRate:
    """Frames through the backend from one synthetic camera thread, the calling one.

    The feeder does the scheduler's part for each frame: ``lend``, ``InputBuffer.fill``,
    ``submit`` (one thread, as ``lend`` has a single lender). ``frames`` are host pictures
    already at their letterboxed size (``_frames``), so the fill copies each into the lent
    pinned row and writes the row's pad once, as the scheduler's fill does minus the resize
    (its cost on the scheduler thread is what ``preprocess_cost`` measures); or pictures on
    the GPU (``DeviceImage``, as NVDEC decodes them), which the backend letterboxes into the
    batch on the device. ``tag`` is what every frame is submitted with: a ``SubmitTag`` asks
    for postprocessing on the device, None for the raw outputs.
    """
    from vidpipe.infer.streamset import StreamSetBackend

    backend = StreamSetBackend([(rt, _Lent(ex)) for rt, ex in devices], streams, 50.0)
    done = [0]
    lock = threading.Lock()
    batch_sizes: list[int] = []  # appended on the batcher thread; read after a drain
    backend.observe_batches(batch_sizes.append)

    def on_done(c: Any) -> None:
        if c.error is not None:
            raise RuntimeError(f"inference failed: {c.error}")
        with lock:
            done[0] += 1

    def feed(until: float) -> None:
        i = 0
        while time.perf_counter() < until:
            buf = backend.lend(0.1)
            if buf is not None:
                buf.fill(frames[i % len(frames)])
                backend.submit(buf, tag, on_done)
                i += 1

    try:
        feed(time.perf_counter() + 1.0)  # warm-up
        backend.drain(30.0)
        with lock:
            start = done[0]
        first_batch = len(batch_sizes)
        cpu0, t0 = thread_cpu_s(), time.perf_counter()
        feed(t0 + seconds)
        backend.drain(30.0)
        elapsed = time.perf_counter() - t0
        cores = thread_cores(cpu0, thread_cpu_s(), elapsed)
        with lock:
            n = done[0] - start
        window = batch_sizes[first_batch:]
        return StreamSetRate(n / elapsed, sum(window) / len(window) if window else 0.0, cores)
    finally:
        backend.close()  # closes only the _Lent wrappers: the executors serve the next point


def inference_points(
    args: argparse.Namespace, frames: Sequence[np.ndarray] | Sequence[DeviceImage]
) -> list[dict[str, Any]]:
    """Per batch size and stream count, the stream set against the tight loop.

    With ``--rounds`` R, the two are measured R times each, alternated (tight, set, set,
    tight, ...), so that a drift of the GPU's clocks over the point falls on both; the ratio is
    that of their medians, and every round is in the point.
    """
    points = []
    for batch in args.batches:
        rt, ex = _executor(args, batch)
        tag = device_tag(args, ex)
        for k in args.streams:
            tights: list[float] = []
            sets: list[StreamSetRate] = []
            for r in range(args.rounds):
                for which in ("tight", "set") if r % 2 == 0 else ("set", "tight"):
                    if which == "tight":
                        tights.append(tight_loop(rt, ex, batch, args.seconds))
                    else:
                        sets.append(stream_set_rate([(rt, ex)], k, args.seconds, frames, tag))
            tight = statistics.median(tights)
            measured = sets[len(sets) // 2]
            img_s = statistics.median(m.img_s for m in sets)
            point = {
                "batch": batch,
                "streams": k,
                "inputs": args.inputs,
                "outputs": "host" if tag is None else "device",
                "tight_loop_img_s": round(tight, 1),
                "stream_set_img_s": round(img_s, 1),
                "ratio": round(img_s / tight, 3),
                "rounds": [
                    {"tight": round(t, 1), "set": round(m.img_s, 1)}
                    for t, m in zip(tights, sets, strict=True)
                ],
                "mean_batch": round(measured.mean_batch, 2),
                "thread_cpu": {
                    name: round(cores, 3)
                    for name, cores in measured.thread_cores.items()
                    if cores > 0.01
                },
            }
            print(json.dumps(point), flush=True)
            points.append(point)
        ex.close()
    return points


def device_tag(args: argparse.Namespace, ex: Any) -> Any:
    """The tag the daemon's scheduler gives a frame of this model (``--model-type``, a
    1080p frame letterboxed into the input, threshold 0.3, NMS at 0.45), or None for
    ``--outputs host`` or when the executor cannot postprocess this model on the device."""
    from vidpipe.preprocess.letterbox import letterbox_geometry
    from vidpipe.types import Letterbox, PostprocessRequest, SubmitTag

    if args.outputs == "host" or ex.device_postprocess(args.model_type) is None:
        return None
    height, width, _ = ex.io.input.shape  # one frame, HWC u8, as the executors take it
    scale, _, _ = letterbox_geometry(1920, 1080, int(width), int(height))
    lb = Letterbox(scale=scale, src_w=1920, src_h=1080)
    return SubmitTag(PostprocessRequest(args.model_type, lb, 0.3, None, 0.45))


def run(args: argparse.Namespace) -> int:
    """Run the measurements ``args`` ask for (``parser``) and write the JSON document."""
    doc: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    frames = (
        _device_frames(args.images, args.device)
        if args.inputs == "device"
        else _frames(args.images)
    )
    if args.batches:
        doc["inference"] = inference_points(args, frames)
    if args.cameras and args.clip:
        clip = args.json.parent / "clip-1080p25.mp4"
        doc["clip"] = make_clip(args.clip, clip)
        doc["preprocess_1080p"] = preprocess_cost(clip)
        print(json.dumps(doc["preprocess_1080p"]), flush=True)
        doc["streams_1080p25"] = []
        for n in args.cameras:
            point = stream_point(args, clip, n)
            doc["streams_1080p25"].append(point)
            if not point["sustained"]:
                break
    args.json.write_text(json.dumps(doc, indent=1))
    return 0


def _images(images: Path | None) -> list[np.ndarray]:
    """Up to 16 BGR pictures from ``images`` (random 640x480 pixels without)."""
    if images is None:
        rng = np.random.default_rng(0)
        return [rng.integers(0, 255, (480, 640, 3), dtype=np.uint8) for _ in range(8)]
    import cv2

    out = []
    for path in sorted(images.glob("*.jpg"))[:16]:
        image = cv2.imread(str(path))
        if image is None:
            raise FileNotFoundError(f"cannot read {path}")
        out.append(np.asarray(image, np.uint8))
    return out


def _frames(images: Path | None) -> list[np.ndarray]:
    """The pictures as BGR u8 at the size a 1080p frame takes in a 416x416 input (416x234),
    resized as the letterbox resizes: ``fill`` then copies each into its row unscaled and
    pads the row, which is the scheduler's fill of a 1080p frame minus the resize."""
    import cv2

    from vidpipe.preprocess.letterbox import letterbox_geometry

    _, width, height = letterbox_geometry(1920, 1080, 416, 416)
    return [
        cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)
        for image in _images(images)
    ]


def _device_frames(images: Path | None, device: int) -> list[DeviceImage]:
    """The same pictures at 1920x1080 in NV12 on GPU ``device``, as NVDEC leaves a frame."""
    import cv2
    import torch

    from vidpipe.preprocess.gpu import bgr_to_nv12

    out = []
    for image in _images(images):
        bgr = cv2.resize(image, (1920, 1080))
        on_gpu = torch.from_numpy(bgr_to_nv12(bgr)).to(f"cuda:{device}")
        out.append(DeviceImage(on_gpu, device, 1920, 1080, functools.partial(np.copy, bgr)))
    return out


def _ints(text: str) -> list[int]:
    """A comma list of integers; empty text is an empty list (that measurement is skipped)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None


def parser() -> argparse.ArgumentParser:
    """The options of ``python -m benchmarks.gpu``."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.gpu",
        description="The GPU stream set against the same executor in a tight loop (inference "
        "img/s per batch and stream count), then N cameras of a 1080p clip through the whole "
        "daemon; one JSON document.",
    )
    p.add_argument("--model", type=Path, required=True, help="the ONNX model")
    p.add_argument("--labels", type=Path, required=True, help="its labels file")
    p.add_argument("--type", choices=("torch", "tensorrt"), default="torch")
    p.add_argument("--precision", choices=("f32", "tf32", "f16"), default="f32")
    p.add_argument("--device", type=int, default=0, help="CUDA device index")
    p.add_argument("--batches", type=_ints, default=[1, 8, 32, 64], help="batch sizes, or ''")
    p.add_argument("--streams", type=_ints, default=[1, 2, 4], help="streams per GPU")
    p.add_argument("--seconds", type=float, default=4.0, help="window per inference point")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="tight loop and stream set measured this many times each, alternated",
    )
    p.add_argument("--images", type=Path, help="images to letterbox as the synthetic frames")
    p.add_argument("--clip", type=Path, help="source clip for the 1080p streams test")
    p.add_argument("--cameras", type=_ints, default=[], help="camera counts of the streams test")
    p.add_argument("--stream-batch", type=int, default=32, help="max batch in the streams test")
    p.add_argument("--warmup", type=float, default=6.0, help="seconds before a streams window")
    p.add_argument("--window", type=float, default=12.0, help="streams measurement window")
    p.add_argument("--eager", action="store_true", help="torch: no CUDA graphs")
    p.add_argument(
        "--outputs",
        choices=("device", "host"),
        default="device",
        help="stream set: postprocess on the device as the daemon does (default), or bring "
        "the raw outputs to the host",
    )
    p.add_argument(
        "--inputs",
        choices=("host", "device"),
        default="host",
        help="stream set: letterboxed frames copied into its pinned batch (CPU decode, the "
        "default), or 1080p NV12 pictures already on the GPU that it letterboxes there (NVDEC)",
    )
    p.add_argument("--model-type", default="yolox", help="the model's decoder (model.type)")
    p.add_argument("--json", type=Path, required=True, help="result file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    return run(parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
