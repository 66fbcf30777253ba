"""``python -m vidpipe.bench.gpu_pipeline``: how many real-time 1080p cameras one GPU sustains
with frames that stay on the GPU, against CPU decode, in the same run.

Each camera is a thread playing the clip in real time (25 fps, paced on its own schedule,
looping). Per frame:

* ``nvdec``: NVDEC decode (:class:`vidpipe.capture.nvdec.NvdecReader`) -> NV12 to letterboxed
  BGR on the GPU, straight into a row of the open batch's device input, on the slot's stream;
* ``cpu``: OpenCV decode on the CPU -> CPU letterbox -> upload into that row.

A batch is dispatched when full or ``--batch-timeout-ms`` after its first frame: the model
(TorchExecutor, CUDA graphs) on the slot's stream, then YOLOX decode + NMS on the GPU
(:class:`vidpipe.postprocess.gpu.YoloxGpuPostprocess`); only kept detections come back. K
slots (``--streams``) run side by side, each with its own stream and completion thread.

A camera late by more than one frame period skips the frames it missed (a live camera's
mailbox would replace them): those count as produced and not inferred. A point *holds* when
every camera gets >= 99 % of its produced frames inferred and the p95 capture-to-result
latency is <= 200 ms. Reported per point: cameras, the worst camera's inferred share, p50/p95
latency, host cores used (process CPU time over wall time), GPU and NVDEC utilisation
(NVML, sampled), mean batch.

This bench is not the daemon: capture workers, the scheduler, tracking and sinks are left
out (the daemon does not take NVDEC frames yet). It measures what the GPU path itself allows.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FPS = 25.0
OWN_DECODER_STREAM = [False]  # --decoder-stream: each NVDEC decoder on its camera's stream


@dataclass(eq=False)
class _Slot:
    index: int
    stream: Any
    input: Any
    output: Any
    ctx: Any
    event: Any
    free: threading.Event = field(default_factory=threading.Event)
    entries: list[tuple[int, float, Any]] = field(default_factory=list)


class _Pipeline:
    """Open batch + K slots; cameras call ``add``; one completion thread per slot."""

    def __init__(self, torch: Any, ex: Any, post: Any, streams: int, timeout_s: float) -> None:
        self.torch, self.ex, self.post = torch, ex, post
        self.max_batch = ex.max_batch
        self.timeout_s = timeout_s
        self.lock = threading.Condition()
        self.slots: list[_Slot] = []
        a, c = ex.io.outputs[0].shape
        for i in range(streams):
            stream = torch.cuda.Stream()
            inp = torch.full(
                (ex.max_batch, *ex.io.input.shape), 114, dtype=torch.uint8, device="cuda"
            )
            out = torch.empty((ex.max_batch, a, c), dtype=torch.float32, device="cuda")
            ctx = ex.create_context(stream.cuda_stream, inp.data_ptr(), [out.data_ptr()])
            slot = _Slot(i, stream, inp, out, ctx, torch.cuda.Event())
            slot.free.set()
            self.slots.append(slot)
        self.open: _Slot | None = None
        self.t_open = 0.0
        self.done: list[tuple[int, float]] = []  # (camera, latency s)
        self.batches = 0
        self.frames = 0
        self.t_wait = self.t_post = 0.0
        self.stop = False
        self._queue: list[_Slot] = []
        self._threads = [threading.Thread(target=self._complete, daemon=True) for _ in self.slots]
        self._flusher = threading.Thread(target=self._flush, daemon=True)
        for t in [*self._threads, self._flusher]:
            t.start()

    def _take_slot(self) -> _Slot:
        while True:
            for s in self.slots:
                if s.free.is_set():
                    s.free.clear()
                    return s
            self.lock.wait(0.005)

    def add(self, cam: int, t_capture: float, fill: Any, stream: Any) -> Any:
        """``fill(dst_row)`` writes the frame into a row of the open batch on the camera's
        ``stream``; the slot's stream waits for it. Returns the event the camera must see done
        before it reads the next frame (the decoder reuses its surfaces)."""
        torch = self.torch
        done = torch.cuda.Event()
        with self.lock:
            if self.open is None:
                self.open, self.t_open = self._take_slot(), time.perf_counter()
                self.lock.notify_all()
            slot = self.open
            row = len(slot.entries)
            with torch.cuda.stream(stream):
                lb = fill(slot.input[row])
                done.record(stream)
            slot.stream.wait_event(done)
            slot.entries.append((cam, t_capture, lb))
            if len(slot.entries) >= self.max_batch:
                self._dispatch()
        return done

    def _dispatch(self) -> None:
        slot, self.open = self.open, None
        assert slot is not None
        slot.ctx.enqueue(len(slot.entries))
        slot.event.record(slot.stream)
        self.batches += 1
        self.frames += len(slot.entries)
        self._queue.append(slot)
        self.lock.notify_all()

    def _flush(self) -> None:
        with self.lock:
            while not self.stop:
                if self.open is not None and time.perf_counter() - self.t_open >= self.timeout_s:
                    self._dispatch()
                self.lock.wait(self.timeout_s / 4)

    def _complete(self) -> None:
        torch = self.torch
        while True:
            with self.lock:
                while not self._queue and not self.stop:
                    self.lock.wait(0.05)
                if self.stop:
                    return
                slot = self._queue.pop(0)
            t = time.perf_counter()
            slot.event.synchronize()
            t_ready = time.perf_counter()
            with torch.cuda.stream(slot.stream):
                n = len(slot.entries)
                dets = self.post(slot.output, [lb for _, _, lb in slot.entries], [0.3] * n)
            now = time.perf_counter()
            self.t_wait += t_ready - t
            self.t_post += now - t_ready
            with self.lock:
                self.done.extend((cam, now - t) for cam, t, _ in slot.entries)
                slot.entries.clear()
                slot.free.set()
                self.lock.notify_all()
            del dets

    def close(self) -> None:
        with self.lock:
            self.stop = True
            self.lock.notify_all()
        for t in [*self._threads, self._flusher]:
            t.join(2.0)


def _nvdec_camera(clip: Path, stream: Any = None) -> tuple[Any, Any]:
    import torch

    from vidpipe.capture.nvdec import NvdecReader
    from vidpipe.preprocess.gpu import nv12_letterbox_into

    if stream is not None and OWN_DECODER_STREAM[0]:
        from cuda.bindings import driver

        _, ctx = driver.cuCtxGetCurrent()
        reader = NvdecReader(str(clip), 0, cuda_context=int(ctx), cuda_stream=stream.cuda_stream)
    else:
        reader = NvdecReader(str(clip), 0)
    reader.open()

    def read() -> Any:
        frame = reader.read()
        if frame is None:
            reader.open()
            frame = reader.read()
        return frame

    def fill(frame: Any) -> Any:
        return lambda dst: nv12_letterbox_into(torch, frame, dst)

    return read, fill


def _cpu_camera(clip: Path, stream: Any = None) -> tuple[Any, Any]:
    import cv2
    import torch

    from vidpipe.preprocess.letterbox import letterbox

    cap = cv2.VideoCapture(str(clip), cv2.CAP_FFMPEG, [cv2.CAP_PROP_N_THREADS, 1])

    def read() -> Any:
        ok, frame = cap.read()
        if not ok:
            cap.open(str(clip), cv2.CAP_FFMPEG, [cv2.CAP_PROP_N_THREADS, 1])
            ok, frame = cap.read()
        return letterbox(
            np.asarray(frame, np.uint8), 416, 416
        )  # the CPU path letterboxes on the capture thread

    def fill(boxed: Any) -> Any:
        image, lb = boxed

        def write(dst: Any) -> Any:
            dst.copy_(torch.from_numpy(image), non_blocking=False)
            return lb

        return write

    return read, fill


def _camera_safe(*args: Any) -> None:
    try:
        _camera(*args)
    except Exception as exc:
        print(f"camera {args[1]} stopped: {type(exc).__name__}: {exc}", flush=True)


def _camera(
    pipe: _Pipeline, cam: int, make: Any, clip: Path, until: list[float], stats: Any
) -> None:
    import torch

    stream = torch.cuda.Stream()
    read, fill = make(clip, stream)
    pending: Any = None
    period = 1.0 / FPS
    t0 = time.perf_counter()
    k = 0
    while not pipe.stop:
        due = t0 + k * period
        if pending is not None:
            t = time.perf_counter()
            pending.synchronize()  # the decoder may reuse the surface the last fill read
            stats[cam]["sync_s"] += time.perf_counter() - t
            pending = None
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        elif now - due > period:
            # Late: a live camera's frames still have to be decoded (the next ones depend on
            # them), but this one is dropped, as the mailbox replaces a frame not taken.
            read()
            k += 1
            stats[cam]["skipped"] += 1
            continue
        t = time.perf_counter()
        frame = read()
        t_cap = time.perf_counter()
        k += 1
        in_window = until[0] <= t_cap < until[1]
        stats[cam]["produced"] += in_window
        stats[cam]["read_s"] += t_cap - t
        pending = pipe.add(cam if in_window else -1, t_cap, fill(frame), stream)
        stats[cam]["add_s"] += time.perf_counter() - t_cap


def _nvml() -> Any:
    try:
        pynvml = importlib.import_module("pynvml")  # nvidia-ml-py, where installed
        pynvml.nvmlInit()
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
    except Exception:
        return None, None


def run_point(
    torch: Any, ex: Any, post: Any, args: argparse.Namespace, decoder: str, cameras: int
) -> dict[str, Any]:
    """One point: ``cameras`` real-time cameras for warm-up + window seconds."""
    pipe = _Pipeline(torch, ex, post, args.streams, args.batch_timeout_ms / 1000.0)
    make = _nvdec_camera if decoder == "nvdec" else _cpu_camera
    start = time.perf_counter() + args.warmup
    until = [start, start + args.window]
    stats = [
        {"produced": 0, "skipped": 0, "read_s": 0.0, "add_s": 0.0, "sync_s": 0.0}
        for _ in range(cameras)
    ]
    threads = [
        threading.Thread(
            target=_camera_safe, args=(pipe, i, make, args.clip, until, stats), daemon=True
        )
        for i in range(cameras)
    ]
    for t in threads:
        t.start()
    usage, w1 = _sample_usage(start, until[1])
    time.sleep(1.0)  # frames captured in the window may still complete
    pipe.close()
    deadline = time.perf_counter() + 5.0
    for t in threads:
        t.join(max(0.0, deadline - time.perf_counter()))
    share, p95, inferred = _inferred(pipe, cameras, args.window)
    return {
        "decoder": decoder,
        "cameras": cameras,
        **inferred,
        **usage,
        "mean_batch": round(pipe.frames / max(pipe.batches, 1), 1),
        "frames_skipped_late": int(sum(st["skipped"] for st in stats)),
        # Where the camera threads spend their time, share of wall time summed over cameras
        # (the whole run, warm-up included), and per batch on the completion threads.
        **{
            f"camera_{key}_share": round(
                sum(st[f"{key}_s"] for st in stats) / (w1 - start + args.warmup) / cameras, 3
            )
            for key in ("read", "add", "sync")
        },
        "batch_wait_ms": round(1000 * pipe.t_wait / max(pipe.batches, 1), 2),
        "batch_post_ms": round(1000 * pipe.t_post / max(pipe.batches, 1), 2),
        "holds": share >= 0.99 and p95 <= 200.0,
    }


def _sample_usage(start: float, end: float) -> tuple[dict[str, Any], float]:
    """Host cores, GPU and NVDEC utilisation (NVML, where installed) from ``start`` to ``end``
    (``perf_counter`` times), and the time the window actually ended."""
    nvml, handle = _nvml()
    gpu_util, dec_util = [], []
    while time.perf_counter() < start:
        time.sleep(0.1)
    cpu0, w0 = os.times(), time.perf_counter()
    while time.perf_counter() < end:
        time.sleep(0.5)
        if nvml is not None:
            gpu_util.append(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            dec_util.append(nvml.nvmlDeviceGetDecoderUtilization(handle)[0])
    cpu1, w1 = os.times(), time.perf_counter()
    cores = ((cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)) / (w1 - w0)
    usage = {
        "host_cores": round(cores, 2),
        "gpu_util_pct": round(float(np.mean(gpu_util)), 1) if gpu_util else None,
        "nvdec_util_pct": round(float(np.mean(dec_util)), 1) if dec_util else None,
    }
    return usage, w1


def _inferred(
    pipe: _Pipeline, cameras: int, window_s: float
) -> tuple[float, float, dict[str, Any]]:
    """The worst camera's inferred share and the p95 latency in ms (unrounded, for the
    verdict), and the point's inference figures, from the frames captured in the window."""
    lat = np.array([s for c, s in pipe.done if c >= 0]) * 1000.0
    per_cam = np.bincount([c for c, _ in pipe.done if c >= 0], minlength=cameras)
    expected = window_s * FPS
    share = float(per_cam.min() / expected) if cameras else 0.0
    p95 = float(np.percentile(lat, 95)) if lat.size else float("inf")
    figures = {
        "worst_camera_inferred": round(share, 4),
        "inferred_fps": round(float(per_cam.sum()) / window_s, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 1) if lat.size else None,
        "p95_ms": round(p95, 1),
    }
    return share, p95, figures


def decode_only(clip: Path, decoder: str, threads: int, seconds: float) -> dict[str, Any]:
    """Unpaced decode on ``threads`` threads of this process: aggregate fps and host cores.
    Tells whether decoding scales over threads (the decoder releases the GIL) or not."""
    counts = [0] * threads
    stop = threading.Event()

    def work(i: int) -> None:
        read, _ = (_nvdec_camera if decoder == "nvdec" else _cpu_camera)(clip)
        read()
        while not stop.is_set():
            read()
            counts[i] += 1

    pool = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    time.sleep(2.0)  # opens and first frames
    c0, n0, t0 = os.times(), sum(counts), time.perf_counter()
    time.sleep(seconds)
    c1, n1, t1 = os.times(), sum(counts), time.perf_counter()
    stop.set()
    for t in pool:
        t.join(5.0)
    cores = (c1.user - c0.user + c1.system - c0.system) / (t1 - t0)
    return {
        "decode_only": decoder,
        "threads": threads,
        "fps": round((n1 - n0) / (t1 - t0), 1),
        "host_cores": round(cores, 2),
    }


def _parser() -> argparse.ArgumentParser:
    """The command line (camera counts per decoder, batching, timing, output)."""
    p = argparse.ArgumentParser(prog="python -m vidpipe.bench.gpu_pipeline", description=__doc__)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--clip", type=Path, required=True, help="1080p25 H.264 (scripts/gpu-clip.sh)")
    p.add_argument("--nvdec", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    p.add_argument("--cpu", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    p.add_argument("--precision", choices=("f32", "f16"), default="f16")
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--streams", type=int, default=2)
    p.add_argument("--batch-timeout-ms", type=float, default=20.0)
    p.add_argument("--warmup", type=float, default=4.0)
    p.add_argument("--window", type=float, default=8.0)
    p.add_argument("--stop-after-fail", type=int, default=2, help="failed points before stopping")
    p.add_argument("--decode-only", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    p.add_argument("--decoder-stream", action="store_true", help="NVDEC on the camera's stream")
    p.add_argument("--json", type=Path, required=True)
    return p


def _camera_points(
    torch: Any, ex: Any, post: Any, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Every camera count of ``--nvdec`` then ``--cpu``, each list in order until
    ``--stop-after-fail`` points in a row did not hold."""
    points: list[dict[str, Any]] = []
    for decoder, counts in (("nvdec", args.nvdec), ("cpu", args.cpu)):
        fails = 0
        for n in counts:
            point = run_point(torch, ex, post, args, decoder, n)
            print(json.dumps(point), flush=True)
            points.append(point)
            fails = 0 if point["holds"] else fails + 1
            if fails >= args.stop_after_fail:
                break
    return points


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    OWN_DECODER_STREAM[0] = args.decoder_stream
    import torch

    decode_points = []
    for n in args.decode_only:
        for decoder in ("nvdec", "cpu"):
            decode_points.append(decode_only(args.clip, decoder, n, 5.0))
            print(json.dumps(decode_points[-1]), flush=True)
    if not (args.nvdec or args.cpu):
        args.json.write_text(json.dumps({"decode_only": decode_points}, indent=1))
        return 0

    from vidpipe.infer.torch_executor import TorchExecutor
    from vidpipe.postprocess.gpu import YoloxGpuPostprocess

    ex = TorchExecutor(args.model, 0, args.max_batch, args.precision, cuda_graphs=True)
    _, c = ex.io.outputs[0].shape
    h, w = ex.io.input.shape[:2]
    post = YoloxGpuPostprocess(torch, torch.device("cuda", 0), w, h, c - 5, 0.45)
    points = _camera_points(torch, ex, post, args)
    best = {
        d: max([q["cameras"] for q in points if q["decoder"] == d and q["holds"]], default=0)
        for d in ("nvdec", "cpu")
    }
    summary = {
        "decoder_stream": args.decoder_stream,
        "precision": args.precision,
        "max_batch": args.max_batch,
        "streams": args.streams,
        "largest_holding": best,
        "points": points,
        "decode_only": decode_points,
    }
    args.json.write_text(json.dumps(summary, indent=1))
    print(
        "largest camera count that holds:",
        best,
        "ratio nvdec/cpu:",
        best["nvdec"] / best["cpu"] if best["cpu"] else None,
    )
    ex.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
