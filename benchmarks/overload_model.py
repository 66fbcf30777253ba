"""A CPU model of one GPU process given more NVDEC cameras than it can infer.

``python -m benchmarks.overload_model [--cameras 64,96,128] [--variants today,fixed]``
(with ``PYTHONPATH=.venv/torch-cpu``: the device postprocessing runs on CPU torch)

On the H200 one process inferred 1,322 fps at 64 cameras and 48 at 96 (benchmarks/README.md,
"One process past its count"): the camera threads starved the completion threads of the GIL,
and the scheduler waited for a free I/O set. This rig rebuilds that contention without a GPU,
with vidpipe's own code wherever the GPU is not involved:

* the **device** is ``tests/fake_gpu.py``'s: each stream runs a batch for ``--kernel-ms``, so
  the capacity is known (2 streams x 64 frames / 80 ms = 1,600 fps by default);
* the **stream set, scheduler, hub and ``newest`` mailboxes** are the real ones;
* the **device postprocessing** is the real ``YoloxGpuPostprocess`` on CPU torch over
  synthetic YOLOX outputs (6 candidates an image, in overlapping pairs), called the way
  ``TorchDevicePostprocess`` calls it: every PyTorch call gives up the GIL and takes it
  back, as on the GPU, so the completion thread makes as many GIL round trips per batch as
  on the H200;
* a **camera** is a thread that, every 1/25 s, does what an NVDEC reader does with the GIL:
  ``--calls`` short GIL-releasing native calls (``benchmarks.gil_model.native_call``), one GPU
  wait (a sleep of ``--gpu-wait-us``), ``--py-us`` of Python between them, inside
  ``GPU_GATE.work()``, then puts the frame into its mailbox.

Variants (``--variants``, alternated per count, ``--repeats`` times): the device
postprocessing of the tree (``after``) or of the git revision ``--before`` (``before``:
``vidpipe/postprocess/gpu.py`` read with ``git show``), with these modifiers after a ``+``:

* ``no-gil-load``: cameras with no Python and no native calls (the scheduler's own ceiling);
* ``no-post``: no device postprocessing at all (empty detections);
* ``skip-unread``: the capture worker's rule (``CaptureWorker._emit``): a camera whose
  previous frame still waits unread in its mailbox (``Mailbox.unread_seq``) drops the new one
  before its post-decode Python (``--post-decode-share`` of ``--py-us``), once in a row. The
  synthetic camera restates the rule (it has no worker); with ``worker`` the worker runs it;
* ``skip-any``: the rule this model first measured, not the daemon's: skip whenever a frame
  waits, however old (what the once-in-a-row bound on the waiting frame's age gives up);
* ``worker``: each camera is a real ``CaptureWorker`` over ``NvdecSource`` and a fake
  PyNvVideoCodec (``benchmarks.overload_worker``); alone, with the skip hidden from it (the
  capture before issue 39), with ``skip-unread`` as the daemon runs it. The worker's own
  Python replaces most of ``--py-us`` (it took about 200 us of CPU a frame here with no load
  added); the fake decoder adds ``--worker-py-us`` (100, as ``benchmarks.gil_worker``) for
  what it leaves out (PyNvVideoCodec's hand-over, PyTorch's stream, dlpack, the pool);
* ``shed`` (with ``worker``): the fake stream has a keyframe every ``--gop`` frames, and the
  workers shed whole groups of pictures as the daemon's NVDEC cameras do
  (``capture.shed_gops``, ``vidpipe/capture/group_budget.py``); each point then traces the
  share of groups decoded in full. A shed packet costs its demux's native call only;
* ``groupN`` (with ``worker``): N cameras a read thread (``capture.nvdec_group_size``);
* ``procN`` (with ``worker``): the cameras demux and decode in N decode processes
  (``capture.nvdec_processes``); the fake decoder's load goes there with them, and the fake
  copy's post-decode Python runs nowhere (the worker's own Frame and put still run).
  ``--decoder-fps`` bounds the pictures a second they decode, split between them, as NVDEC
  does: a frame let go is decoded, a shed one is not (0, the default: no bound);
* ``push`` (with ``procN``): decode processes that pace their cameras and send only the
  frames inference will take, to one receiving thread each (``benchmarks.overload_push``: a
  prototype of a design the daemon does not have);
* ``sendall`` (with ``procN``): the decode processes copy and send every frame, also those
  the worker then drops (``capture.skip_unused_frames: false``), as before they let go the
  frames that would only replace an untaken one.

Per point: total inferred fps, the worst camera against the mean (fairness), frames
overwritten and left unmade per second, the cores this process used (decode processes not
counted), and the completion threads' batches and seconds per batch.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tests.fake_gpu import FakeExecutor, FakeGpuRuntime, device_frame

from benchmarks.gil_model import native_call, python_work
from benchmarks.overload import StackSampler, watch_share
from benchmarks.overload_push import PushCameras
from benchmarks.overload_worker import WorkerCameras
from vidpipe.gpu_gate import GPU_GATE
from vidpipe.infer.streamset import StreamSetBackend
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.postprocess.decode import DecodeParams, decode_yolox
from vidpipe.schedule.hub import FrameHub, Mailbox
from vidpipe.schedule.scheduler import CameraRules, Scheduler
from vidpipe.types import Detections, Frame, FrameResult, PostprocessRequest

_INPUT = 128  # model input side: 336 anchors, small enough for CPU torch on 2 cores
_CLASSES = 80


@dataclass(frozen=True)
class Point:
    """One measured configuration."""

    cameras: int
    variant: str
    py_us: float = 250.0
    worker_py_us: float = 100.0
    calls: int = 5
    gpu_wait_us: float = 500.0
    post_decode_share: float = 0.5
    fps: float = 25.0
    streams: int = 2
    max_batch: int = 64
    kernel_ms: float = 80.0
    batch_timeout_ms: float = 20.0
    warmup_s: float = 4.0
    window_s: float = 8.0
    gop: int = 50  # ``shed``: a keyframe every 2 s at 25 fps, as the GPU benchmark's clip
    decoder_fps: float = 0.0  # pictures a second the decoders make, all told (0: no bound)
    push_py_us: float = 20.0  # ``push``: the receiving thread's Python a frame, beyond its put

    @property
    def capacity_fps(self) -> float:
        return self.streams * self.max_batch / (self.kernel_ms / 1000.0)


def synthetic_outputs(torch: Any, batch: int) -> Any:
    """``(batch, A, 85)`` YOLOX outputs: 6 candidate rows an image, in overlapping pairs of a
    class each (a street camera's few objects; NMS suppresses one of each pair)."""
    anchors = sum((_INPUT // s) ** 2 for s in (8, 16, 32))
    gen = torch.Generator().manual_seed(0)
    out = torch.rand((batch, anchors, 5 + _CLASSES), generator=gen) * 0.2
    for i in range(batch):
        first = torch.randint(0, anchors - 1, (3,), generator=gen)
        rows = torch.cat([first, first + 1])
        out[i, rows, 4] = 0.9
        out[i, rows, 5 + first.repeat(2) % 3] = 0.95
        out[i, rows, 2:4] = 2.5  # wide boxes: each pair overlaps
    return out


class TorchPost:
    """``DevicePostprocess`` of the model: as ``TorchDevicePostprocess``, on CPU torch."""

    def __init__(self, torch: Any, outputs: Any, kind: Any) -> None:
        self.torch = torch
        self._out = outputs
        self._post = kind(torch, torch.device("cpu"), _INPUT, _INPUT, _CLASSES, 0.45)
        self.batches = 0
        self.busy_s = 0.0
        self.skip = False

    def __call__(
        self, d_outputs: list[int], batch: int, requests: list[PostprocessRequest]
    ) -> list[Detections]:
        t0 = time.perf_counter()
        if self.skip:
            self.batches += 1
            return [Detections.empty() for _ in requests]
        torch = self.torch
        out = torch.as_tensor(self._out[:batch])
        masks = self._post.masks_for([r.class_ids for r in requests])
        self._post.iou_threshold = float(requests[0].iou_threshold)
        with GPU_GATE.work(), torch.inference_mode():
            found = self._post(
                out, [r.letterbox for r in requests], [r.score_threshold for r in requests], masks
            )
        self.batches += 1
        self.busy_s += time.perf_counter() - t0
        return list(found)


class TorchPostExecutor(FakeExecutor):
    """The fake executor with the real device postprocessing on CPU torch."""

    def __init__(self, runtime: FakeGpuRuntime, max_batch: int, torch: Any, kind: Any) -> None:
        super().__init__(runtime, max_batch)
        self._torch, self._kind = torch, kind
        # Made here, before the cameras start: each slot's postprocessing is made at its
        # first batch, and 128 cameras starved these ~450 PyTorch calls past the window
        # (the rig's own cost; the daemon's postprocessing starts with a few numpy calls).
        self._outputs = synthetic_outputs(torch, max_batch)
        self.posts: list[TorchPost] = []
        self.skip = False

    def device_postprocess(self, decoder: str) -> Any:
        post = TorchPost(self._torch, self._outputs, self._kind)
        post.skip = self.skip
        self.posts.append(post)
        return post


def _camera(
    box: Mailbox,
    index: int,
    p: Point,
    stop: threading.Event,
    unmade: list[int],
    lag: list[float],
) -> None:
    """A live NVDEC camera's GIL use (module docstring); its frame goes to its mailbox, or is
    left unmade (counted in ``unmade[0]``) by the ``skip-unread``/``skip-any`` rule; how far
    it is behind its stream goes to ``lag[index]``."""
    hasher = hashlib.sha256()
    k, start = 0, time.monotonic() + (index % 25) / p.fps / 25  # staggered phases
    pre_us = p.py_us * (1.0 - p.post_decode_share) / p.calls
    post_us = p.py_us * p.post_decode_share / p.calls
    while not stop.is_set():
        delay = start + k / p.fps - time.monotonic()
        lag[index] = max(0.0, -delay)  # a camera that cannot keep up falls behind
        if delay > 0:
            time.sleep(delay)
        if "no-gil-load" not in p.variant:
            with GPU_GATE.work():
                for c in range(p.calls):
                    native_call(hasher)
                    python_work(pre_us)
                    if c == 1:
                        time.sleep(p.gpu_wait_us / 1e6)  # the decode's and copy's stream wait
                if _skips(p.variant, box.unread_seq(), k):
                    unmade[0] += 1
                    k += 1
                    continue
                for _ in range(p.calls):
                    python_work(post_us)  # the picture, the pool, the frame
        box.put(Frame(f"cam{index}", k, time.monotonic(), device_frame(index % 256, k % 256)), stop)
        k += 1


def _skips(variant: str, waiting: int | None, k: int) -> bool:
    """Whether frame ``k`` is left unmade while frame ``waiting`` is in the mailbox."""
    if "skip-any" in variant:
        return waiting is not None
    # CaptureWorker._emit: the due frame before this one still waits (every frame is due)
    return "skip-unread" in variant and waiting == k - 1


def yolox_postprocess(rev: str | None) -> Any:
    """``YoloxGpuPostprocess`` of the tree (None) or of git revision ``rev``."""
    if rev is None:
        from vidpipe.postprocess.gpu import YoloxGpuPostprocess

        return YoloxGpuPostprocess
    source = subprocess.run(
        ["git", "show", f"{rev}:vidpipe/postprocess/gpu.py"],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    ).stdout
    module = types.ModuleType(f"gpu_postprocess_{rev}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:vidpipe/postprocess/gpu.py", "exec"), module.__dict__)
    return module.YoloxGpuPostprocess


def measure(p: Point, torch: Any, kind: Any) -> dict[str, Any]:
    """One scheduler over the fake device with ``p.cameras`` cameras: warm up, one window."""
    rt = FakeGpuRuntime(0, p.kernel_ms / 1000.0)
    ex = TorchPostExecutor(rt, p.max_batch, torch, kind)
    ex.skip = "no-post" in p.variant
    backend = StreamSetBackend([(rt, ex)], p.streams, p.batch_timeout_ms)
    done: Counter[str] = Counter()
    counting = [False]

    def on_result(r: FrameResult) -> None:
        if counting[0]:
            done[r.camera] += 1

    engine = Scheduler(
        backend,
        decode_yolox,
        Labels.of([str(i) for i in range(_CLASSES)]),
        Metrics(),
        on_result,
        default_rules=CameraRules(DecodeParams(_INPUT, _INPUT, 0.3), None),
        iou_threshold=0.45,
        max_frame_age_s=60.0,
    )
    hub = FrameHub()
    overwritten = [0]

    def dropped(_: Frame) -> None:
        if counting[0]:
            overwritten[0] += 1

    cams = _cameras(hub, p, dropped)
    engine.start(hub)
    cams.start()
    try:
        time.sleep(p.warmup_s)
        posts0 = [(q.batches, q.busy_s) for q in ex.posts]
        sampler = StackSampler(0.01)
        sampler.start()
        counting[0], t0, unmade0 = True, time.monotonic(), cams.left_unmade()
        cpu0 = time.process_time()  # this process only: decode processes are not in it
        shares = _watch(cams, p)
        counting[0], t1, unmade = False, time.monotonic(), cams.left_unmade() - unmade0
        cores = (time.process_time() - cpu0) / (t1 - t0)
        stacks = sampler.stop()
        posts1 = [(q.batches, q.busy_s) for q in ex.posts]
    finally:
        cams.stop()
        engine.close(10.0)
    report = _report(p, done, overwritten[0], t1 - t0, posts0, posts1)
    lags = sorted(cams.lags())
    lag = {"p50": round(lags[len(lags) // 2], 3), "max": round(lags[-1], 3)} if lags else None
    return report | {
        "unmade_per_s": round(unmade / (t1 - t0), 1),
        "process_cores": round(cores, 2),
        "lag_s": lag,
        "gop_share": shares,
        "stacks": stacks,
    }


def _watch(
    cams: _SyntheticCameras | WorkerCameras | PushCameras, p: Point
) -> dict[str, Any] | None:
    """Wait out the window; for cameras that shed groups of pictures, the share traced over
    it (``benchmarks.overload.watch_share``)."""
    if "shed" not in p.variant or not isinstance(cams, WorkerCameras):
        time.sleep(p.window_s)
        return None
    return watch_share(cams.share, p.window_s)


class _SyntheticCameras:
    """The model's cameras: a thread each running ``_camera``."""

    def __init__(self, hub: FrameHub, p: Point, on_drop: Callable[[Frame], None]) -> None:
        self._stop = threading.Event()
        self._unmade = [0]
        self._lag = [0.0] * p.cameras
        self._threads = [
            threading.Thread(
                target=_camera,
                args=(
                    hub.add(f"cam{i}", "newest", on_drop),
                    i,
                    p,
                    self._stop,
                    self._unmade,
                    self._lag,
                ),
                daemon=True,
            )
            for i in range(p.cameras)
        ]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)

    def left_unmade(self) -> int:
        return self._unmade[0]

    def lags(self) -> list[float]:
        """Seconds each camera is behind its stream (a camera that cannot keep up)."""
        return list(self._lag)


def _cameras(
    hub: FrameHub, p: Point, on_drop: Callable[[Frame], None]
) -> _SyntheticCameras | WorkerCameras | PushCameras:
    if "push" in p.variant:
        return PushCameras(hub, p, _modifier_count(p.variant, "proc", 1), on_drop)
    if "worker" not in p.variant:
        return _SyntheticCameras(hub, p, on_drop)
    return WorkerCameras(
        hub,
        p.cameras,
        calls=p.calls,
        py_us=p.worker_py_us,
        post_decode_share=p.post_decode_share,
        gpu_wait_us=p.gpu_wait_us,
        fps=p.fps,
        skip="skip-unread" in p.variant,
        on_drop=on_drop,
        gop=p.gop if "shed" in p.variant else 0,
        group_size=_modifier_count(p.variant, "group", 1),
        processes=_modifier_count(p.variant, "proc", 0),
        skip_unused="sendall" not in p.variant,
        decoder_fps=p.decoder_fps,
    )


def _modifier_count(variant: str, name: str, default: int) -> int:
    """N of a ``nameN`` modifier (``group8``: 8 cameras a read thread); else ``default``."""
    counts = [
        int(m[len(name) :])
        for m in variant.split("+")
        if m.startswith(name) and m[len(name) :].isdigit()
    ]
    return counts[-1] if counts else default


def _report(
    p: Point,
    done: Counter[str],
    overwritten: int,
    seconds: float,
    posts0: list[tuple[int, float]],
    posts1: list[tuple[int, float]],
) -> dict[str, Any]:
    per_cam = [done.get(f"cam{i}", 0) / seconds for i in range(p.cameras)]
    total = sum(per_cam)
    mean = total / p.cameras
    batches = sum(b for b, _ in posts1) - sum(b for b, _ in posts0[: len(posts1)])
    busy = sum(s for _, s in posts1) - sum(s for _, s in posts0[: len(posts1)])
    return {
        "cameras": p.cameras,
        "variant": p.variant,
        "total_fps": round(total, 1),
        "of_capacity": round(total / p.capacity_fps, 3),
        "fairness": round(min(per_cam) / mean, 3) if mean else None,
        "overwritten_per_s": round(overwritten / seconds, 1),
        "post_batches_per_s": round(batches / seconds, 1),
        "post_ms_per_batch": round(1000.0 * busy / batches, 1) if batches else None,
    }


def _fix_share(share: float) -> None:
    """``--fixed-share``: every pipeline's share starts at ``share`` and no period moves it
    (a period's due frames never reach ``MIN_DUE``; its trace is still recorded)."""
    from vidpipe.capture import group_budget

    group_budget.MIN_DUE = sys.maxsize
    made = group_budget.SharedShare.__init__

    def start_at_share(self: group_budget.SharedShare, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        self.share = share

    group_budget.SharedShare.__init__ = start_at_share  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.overload_model", description=__doc__)
    ap.add_argument("--cameras", default="64,96,128")
    ap.add_argument("--variants", default="before,after")
    ap.add_argument("--before", default="612be70", help="git revision of the 'before' variant")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--py-us", type=float, default=250.0, help="camera Python per frame, us")
    ap.add_argument(
        "--worker-py-us",
        type=float,
        default=100.0,
        help="worker cameras: Python per frame the fake decoder adds to the worker's own, us",
    )
    ap.add_argument("--calls", type=int, default=5, help="camera native calls per frame")
    ap.add_argument("--gpu-wait-us", type=float, default=500.0)
    ap.add_argument("--post-decode-share", type=float, default=0.5)
    ap.add_argument("--kernel-ms", type=float, default=80.0, help="fake batch time")
    ap.add_argument("--gop", type=int, default=50, help="shed: frames from keyframe to keyframe")
    ap.add_argument(
        "--fixed-share",
        type=float,
        help="shed: hold the share of groups decoded in full at this value (the controller "
        "off), to see what each share infers",
    )
    ap.add_argument(
        "--decoder-fps",
        type=float,
        default=0.0,
        help="worker: pictures a second the decoder makes, split between the decode processes "
        "(NVDEC's bound; a frame let go is decoded, a shed one is not; 0: no bound)",
    )
    ap.add_argument("--push-py-us", type=float, default=20.0, help="push: receiver Python/frame")
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--switch-interval", type=float, help="sys.setswitchinterval, seconds")
    ap.add_argument("--json", help="append each point here (JSON lines)")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    if args.fixed_share is not None:
        _fix_share(args.fixed_share)
    base = Point(
        0,
        "",
        py_us=args.py_us,
        worker_py_us=args.worker_py_us,
        calls=args.calls,
        gpu_wait_us=args.gpu_wait_us,
        post_decode_share=args.post_decode_share,
        kernel_ms=args.kernel_ms,
        gop=args.gop,
        decoder_fps=args.decoder_fps,
        push_py_us=args.push_py_us,
        warmup_s=args.warmup,
        window_s=args.window,
    )
    kinds = {"before": yolox_postprocess(args.before), "after": yolox_postprocess(None)}
    results: dict[tuple[int, str], list[float]] = {}
    for _ in range(args.repeats):
        for n in (int(c) for c in args.cameras.split(",") if c):
            for variant in args.variants.split(","):
                kind = kinds[variant.split("+")[0]]
                point = measure(replace(base, cameras=n, variant=variant), torch, kind)
                results.setdefault((n, variant), []).append(point["total_fps"])
                line = json.dumps(point)
                print(line, flush=True)
                if args.json:
                    with open(args.json, "a") as out:
                        out.write(line + "\n")
    for (n, variant), fps in sorted(results.items()):
        print(f"{n:4d} {variant:14s} median {statistics.median(fps):7.1f} fps  {fps}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
