"""What capture costs, libav (PyAV) against OpenCV, in the same run::

    python -m benchmarks.capture_cost [--clips A,B] [--cameras 8] [--json out.json]


Two measurements:

* **Decode + conversion**, CPU ms per frame, one decoder thread, for each clip: OpenCV's
  ``VideoCapture.read`` (BGR) against vidpipe's PyAV source (BGR), and, for the letterbox
  size the model takes, ``cv2.resize`` of the full BGR frame against the source's conversion
  at that size (``pyav_fitted``: the planes resized, then converted) and against libav's
  scaler producing the small BGR frame directly (``pyav_sws_fast_bilinear``, what the source
  did before). Variants alternate within each repeat (reversed on odd
  repeats) so drift and other load on a shared machine hit all of them alike; ratios are
  reported against OpenCV.
* **Time to streaming**: N RTSP cameras (real GStreamer server on loopback, one mount each)
  from start until every camera delivered a frame, then again from a server restart. The
  baseline opens the same N streams with OpenCV's FFmpeg backend on N threads, as vidpipe
  did before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
from av.video.reformatter import VideoReformatter

from vidpipe.capture.pyav_source import PyAVSource
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.preprocess.letterbox import letterbox_geometry
from vidpipe.types import FittedImage

MODEL_SIZE = 416  # YOLOX-Nano's input; the letterbox keeps the aspect ratio inside it


def letterbox_size(w: int, h: int, side: int = MODEL_SIZE) -> tuple[int, int]:
    return letterbox_geometry(w, h, side, side)[1:]


# -- decode + conversion ---------------------------------------------------------------------


class _Looping:
    """A looping frame source built from ``open_fn`` (a fresh iterator of frames per pass)."""

    def __init__(self, open_fn: Callable[[], Any]) -> None:
        self._open = open_fn
        self._it = open_fn()

    def next(self) -> Any:
        try:
            return next(self._it)
        except StopIteration:
            self._it = self._open()
            return next(self._it)


def _opencv_frames(path: str) -> Any:
    cap = cv2.VideoCapture(path, cv2.CAP_FFMPEG, [cv2.CAP_PROP_N_THREADS, 1])
    while True:
        ok, img = cap.read()
        if not ok:
            cap.release()
            return
        yield img


def _pyav_source_frames(path: str) -> Any:
    src = PyAVSource(CameraConfig(name="bench", url=path), CaptureConfig(decoder_threads=1))
    src.open()
    while (picture := src.read()) is not None:
        yield picture.image()  # decode + conversion, as every frame that is inferred
    src.close()


def _pyav_letterbox_frames(path: str, size: tuple[int, int]) -> Any:
    """Frames as the daemon converts them for a model: plane by plane at the letterbox size
    (``PyAVPicture.image_for``, ``vidpipe/preprocess/yuv.py``; one decoder thread)."""
    src = PyAVSource(CameraConfig(name="bench", url=path), CaptureConfig(decoder_threads=1))
    src.open()
    while (picture := src.read()) is not None:
        image = picture.image_for((MODEL_SIZE, MODEL_SIZE))
        assert isinstance(image, FittedImage), "PyAV pictures are fitted"
        assert image.fitted.shape[1::-1] == size, (image.fitted.shape, size)
        yield image.fitted
    src.close()


class _SwsFitSource(PyAVSource):
    """The PyAV source as it fitted frames before: libav's scaler converting and scaling to
    the letterbox size in one step, ``FAST_BILINEAR`` (its cheapest filter; it samples
    otherwise than the GPU letterbox, so a CPU camera's detections differed from an NVDEC
    camera's)."""

    def fit(self, frame: Any, fit: tuple[int, int]) -> FittedImage:
        self.fittings += 1
        _, new_w, new_h = letterbox_geometry(frame.width, frame.height, *fit)
        scaled = self._sws.reformat(
            frame, new_w, new_h, "bgr24", interpolation="FAST_BILINEAR", threads=1
        )
        image = np.asarray(scaled.to_ndarray(), np.uint8)
        return FittedImage(image, fit, frame.width, frame.height, lambda: image)

    _sws = VideoReformatter()


def _pyav_sws_frames(path: str, size: tuple[int, int]) -> Any:
    """Frames as ``_pyav_letterbox_frames`` gives them, fitted by ``_SwsFitSource``."""
    src = _SwsFitSource(CameraConfig(name="bench", url=path), CaptureConfig(decoder_threads=1))
    src.open()
    while (picture := src.read()) is not None:
        image = picture.image_for((MODEL_SIZE, MODEL_SIZE))
        assert isinstance(image, FittedImage) and image.fitted.shape[1::-1] == size
        yield image.fitted
    src.close()


def decode_variants(path: str, size: tuple[int, int]) -> dict[str, Callable[[], np.ndarray]]:
    """name -> a function returning the next frame, converted (and scaled to ``size``)."""
    lw, lh = size
    cv = _Looping(lambda: _opencv_frames(path))
    cv_r = _Looping(lambda: _opencv_frames(path))
    pa = _Looping(lambda: _pyav_source_frames(path))
    pa_r = _Looping(lambda: _pyav_source_frames(path))
    fitted = _Looping(lambda: _pyav_letterbox_frames(path, size))
    sws = _Looping(lambda: _pyav_sws_frames(path, size))
    linear = cv2.INTER_LINEAR
    return {
        "opencv_bgr": cv.next,
        "pyav_bgr": pa.next,
        "opencv_bgr+cv2_resize": lambda: cv2.resize(cv_r.next(), (lw, lh), interpolation=linear),
        "pyav_bgr+cv2_resize": lambda: cv2.resize(pa_r.next(), (lw, lh), interpolation=linear),
        "pyav_fitted": fitted.next,
        "pyav_sws_fast_bilinear": sws.next,
    }


def _cpu_ms(fn: Callable[[], Any], n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) * 1000.0 / n


def decode_costs(path: str, frames: int, repeats: int) -> dict[str, Any]:
    """CPU ms per frame of every variant on ``path``, median over ``repeats`` alternated runs."""
    with av.open(path) as c:
        w, h = c.streams.video[0].width, c.streams.video[0].height
    size = letterbox_size(w, h)
    variants = decode_variants(path, size)
    for fn in variants.values():
        for _ in range(5):  # open and first keyframe: not steady state
            fn()
    runs: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for r in range(repeats):
        for name in order if r % 2 == 0 else order[::-1]:
            runs[name].append(_cpu_ms(variants[name], frames))
    ms = {k: statistics.median(v) for k, v in runs.items()}
    return {
        "clip": path,
        "size": [w, h],
        "letterbox": list(size),
        "frames": frames,
        "repeats": repeats,
        "cpu_ms_per_frame": ms,
        "runs": runs,
        "ratio_pyav_to_opencv": ms["pyav_bgr"] / ms["opencv_bgr"],
        # each repeat ran both back to back: the median of those ratios is the least noisy
        "ratio_pyav_to_opencv_paired": statistics.median(
            a / b for a, b in zip(runs["pyav_bgr"], runs["opencv_bgr"], strict=True)
        ),
        "ratio_fitted_to_pyav_cv2_resize": ms["pyav_fitted"] / ms["pyav_bgr+cv2_resize"],
        "ratio_fitted_to_sws_fast_bilinear_paired": statistics.median(
            a / b for a, b in zip(runs["pyav_fitted"], runs["pyav_sws_fast_bilinear"], strict=True)
        ),
    }


# -- time to streaming -----------------------------------------------------------------------


def _opencv_first_frames(urls: list[str], timeout_s: float) -> float | None:
    """Seconds until N OpenCV captures (one thread each) have each read a frame."""
    os.environ.setdefault(
        "OPENCV_FFMPEG_CAPTURE_OPTIONS", "rtsp_transport;tcp|analyzeduration;500000"
    )
    done = threading.Barrier(len(urls) + 1, timeout=timeout_s)
    caps: list[Any] = []

    def one(url: str) -> None:
        cap = cv2.VideoCapture(url, cv2.CAP_FFMPEG)
        caps.append(cap)
        cap.read()
        done.wait()

    t0 = time.monotonic()
    for u in urls:
        threading.Thread(target=one, args=(u,), daemon=True).start()
    try:
        done.wait()
    except threading.BrokenBarrierError:
        return None
    took = time.monotonic() - t0
    for cap in caps:
        cap.release()
    return took


def time_to_streaming(cameras: int, clip: Path, timeout_s: float = 30.0) -> dict[str, Any]:
    """vidpipe's workers against OpenCV: start-up and recovery after a server restart."""
    from vidpipe.bench.density import load_rtsp_module
    from vidpipe.metrics import Metrics
    from vidpipe.types import CameraState

    rtsp = load_rtsp_module()
    if reason := rtsp.gst_rtsp_available():
        return {"error": reason}
    with tempfile.TemporaryDirectory(prefix="vidpipe-capture-") as tmp:
        served = Path(tmp)
        for i in range(cameras):
            (served / f"cam{i}.mp4").symlink_to(clip.resolve())
        with rtsp.RtspServer(served, loop=True) as server:
            urls = [server.url(f"cam{i}") for i in range(cameras)]
            opencv_s = _opencv_first_frames(urls, timeout_s)
            server.restart()  # every client of the baseline gone
            from vidpipe.wiring import capture_stage

            first: dict[str, float] = {}
            lock = threading.Lock()

            def on_state(name: str, state: CameraState) -> None:
                if state is CameraState.STREAMING:
                    with lock:
                        first.setdefault(name, time.monotonic())

            cfg = CaptureConfig(backoff_initial_s=0.2, backoff_max_s=1.0)
            cams = [CameraConfig(name=f"cam{i}", url=url) for i, url in enumerate(urls)]
            _hub, workers = capture_stage(cams, cfg, Metrics(), on_state)
            t0 = time.monotonic()
            for w in workers:
                w.start()
            start_s = _wait_all(first, cameras, t0, timeout_s, lock)
            first.clear()
            t1 = time.monotonic()
            server.restart()
            restart_s = _wait_all(first, cameras, t1, timeout_s, lock)
            for w in workers:
                w.stop()
            for w in workers:
                w.join(10)
    return {
        "cameras": cameras,
        "clip": str(clip),
        "opencv_first_frames_s": opencv_s,
        "vidpipe_start_s": start_s,
        "vidpipe_after_restart_s": restart_s,
    }


def _wait_all(
    first: dict[str, float], n: int, t0: float, timeout_s: float, lock: threading.Lock
) -> float | None:
    """Seconds from ``t0`` until ``n`` cameras reported STREAMING (None: timed out)."""
    while time.monotonic() - t0 < timeout_s:
        with lock:
            if len(first) >= n:
                return max(first.values()) - t0
        time.sleep(0.01)
    return None


# -- entry -----------------------------------------------------------------------------------


def run_capture_bench(
    clips: list[Path],
    frames: int,
    repeats: int,
    cameras: int,
    rtsp_clip: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    doc: dict[str, Any] = {"decode": [], "startup": None}
    for clip in clips:
        result = decode_costs(str(clip), frames, repeats)
        doc["decode"].append(result)
        ms = result["cpu_ms_per_frame"]
        say(f"{clip.name}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in ms.items()))
    if cameras > 0:
        doc["startup"] = time_to_streaming(cameras, rtsp_clip)
    say(f"time to streaming: {json.dumps(doc['startup'])}")
    return doc


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.capture_cost", description=__doc__)
    p.add_argument("--assets", type=Path, help="assets directory (default: as vidpipe finds it)")
    p.add_argument(
        "--clips",
        "--clip",
        default="car-detection.mp4,car-detection-1080p.mp4",
        help="comma list of the clips whose decode is timed",
    )
    p.add_argument("--stage-frames", type=int, default=300, help="frames timed per variant")
    p.add_argument("--repeats", type=int, default=5, help="repeats, variants alternated")
    p.add_argument(
        "--cameras", type=int, default=8, help="RTSP cameras of time to streaming (0: not run)"
    )
    p.add_argument(
        "--density-clip",
        default="one-by-one-person-detection.mp4",
        help="clip served over RTSP for time to streaming",
    )
    p.add_argument("--json", type=Path, help="result file (default: OUT/bench-capture-TIME.json)")
    p.add_argument("--out", type=Path, default=Path("."), help="directory of the default --json")
    return p


def main(argv: list[str] | None = None) -> int:
    """Print the figures, write them as JSON."""
    from datetime import datetime

    from vidpipe.assets import default_assets_dir
    from vidpipe.bench.common import cache_dir, resolve_clip

    args = _parser().parse_args(argv)
    assets = args.assets or default_assets_dir()
    names = [n.strip() for n in args.clips.split(",") if n.strip()]
    clips = [resolve_clip(n, assets / "videos", cache_dir()) for n in names]
    rtsp_clip = resolve_clip(args.density_clip, assets / "videos", cache_dir())
    doc = run_capture_bench(clips, args.stage_frames, args.repeats, args.cameras, rtsp_clip, print)
    path = args.json or args.out / f"bench-capture-{datetime.now().strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1))
    print(f"json: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
