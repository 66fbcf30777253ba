"""CPU a capture reader spends per frame of the stream, in the real worker, by capture setting.

One ``CaptureWorker`` reads a clip (a looping file camera, unpaced: it decodes as fast as a
consumer thread takes its frames), and the reader thread's own CPU time is divided by the
frames it captured over the window (decoded, or left undecoded by
``capture.skip_unused_frames``). Run for: every frame due; ``detect_fps: 5``, decoding every
frame and skipping what it can; the same with the motion gate. Thread CPU time hardly
depends on what else the machine runs, so two checkouts can be compared back to back (run
this file by path, with ``PYTHONPATH``
pointing at the other checkout, to measure that one)::

    python benchmarks/reader_cost.py --seconds 10 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from benchmarks.threads import draining, named_thread_cpu_s
from vidpipe.assets import default_assets_dir
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import Metrics
from vidpipe.wiring import capture_stage

GATE: dict[str, object] = {"detect_fps": 5, "motion": {"enabled": True}}
# every frame decoded (capture.skip_unused_frames off): what skipping saves
DECODE_ALL: dict[str, object] = {"skip_unused_frames": False}
# name -> (camera settings, capture settings)
SETTINGS: dict[str, tuple[dict[str, object], dict[str, object]]] = {
    "every frame": ({}, {}),
    "detect_fps 5, decoding all": ({"detect_fps": 5}, DECODE_ALL),
    "detect_fps 5": ({"detect_fps": 5}, {}),
    "detect_fps 5 + motion gate, decoding all": (GATE, DECODE_ALL),
    "detect_fps 5 + motion gate": (GATE, {}),
}


def reader_ms_per_frame(
    clip: Path, camera: dict[str, object], capture: dict[str, object], seconds: float
) -> float:
    """Reader CPU ms per frame of the stream (decoded, or skipped undecoded) of one worker
    over ``seconds`` (after 1 s of warm-up)."""
    metrics = Metrics()
    cfg = CameraConfig.model_validate({"name": "clip", "url": str(clip), "loop": True, **camera})
    hub, (worker,) = capture_stage([cfg], CaptureConfig.model_validate(capture), metrics)

    def captured() -> float:
        got = metrics.registry.get_sample_value("vidpipe_frames_captured_total", {"camera": "clip"})
        return float(got or 0.0)

    with draining(hub):
        worker.start()
        time.sleep(1.0)
        cpu0, n0 = named_thread_cpu_s("capture-clip-reader"), captured()
        time.sleep(seconds)
        cpu1, n1 = named_thread_cpu_s("capture-clip-reader"), captured()
        worker.stop()
        worker.join(10)
    return 1000.0 * (cpu1 - cpu0) / max(1.0, n1 - n0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="one-by-one-person-detection.mp4")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    clip = default_assets_dir() / "videos" / args.clip
    for r in range(args.repeats):
        costs = {k: reader_ms_per_frame(clip, *v, args.seconds) for k, v in SETTINGS.items()}
        print(
            f"{clip.name} repeat {r}: reader CPU ms per frame of the stream: "
            + ", ".join(f"{k} {v:.3f}" for k, v in costs.items())
            + f"; load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
