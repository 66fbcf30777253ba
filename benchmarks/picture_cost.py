"""What a capture reader spends per frame: decode, BGR conversion, the motion gate's grey copy.

Decodes the first frames of a clip with ``PyAVSource`` (vidpipe's defaults: one decoder
thread) and times, in CPU time of this thread, each step apart on the same frames:

* decode (``PyAVSource.read``: demux + decode, no conversion since frames are lazy);
* BGR conversion (``Picture.image``), which a frame now pays only when it is inferred;
* the motion gate's grey copy from the BGR frame (``grey_copy``) and from the luma plane
  (``grey_copy_of_luma``), which the gate uses for PyAV frames.

Converted frames are kept alive four at a time, as in the daemon (a frame waits, is
letterboxed and inferred while the next ones are read), under ``vidpipe run``'s malloc
settings: holding every converted frame would time first-touch page faults instead (0.45
against 0.11 ms a frame at 768x432).

    python -m benchmarks.picture_cost --clip one-by-one-person-detection.mp4 --frames 120
"""

from __future__ import annotations

import argparse
import os
import time
from collections import deque

from vidpipe.assets import default_assets_dir
from vidpipe.bench.common import cache_dir, resolve_clip
from vidpipe.capture.motion import grey_copy, grey_copy_of_luma
from vidpipe.capture.pyav_source import PyAVPicture, PyAVSource
from vidpipe.cli import tune_malloc
from vidpipe.config import CameraConfig, CaptureConfig


def costs_ms(path: str, frames: int) -> dict[str, float]:
    """CPU ms per frame of each step, over the first ``frames`` frames of ``path``."""
    source = PyAVSource(CameraConfig(name="clip", url=path), CaptureConfig())
    source.open()
    pictures: list[PyAVPicture] = []
    t0 = time.thread_time()
    while len(pictures) < frames and (picture := source.read()) is not None:
        pictures.append(picture)
    decode = time.thread_time() - t0
    n = len(pictures)
    lumas = [p.luma() for p in pictures]
    t0 = time.thread_time()
    for luma in lumas:
        assert luma is not None
        grey_copy_of_luma(luma)
    from_luma = time.thread_time() - t0
    del lumas
    held: deque[object] = deque(maxlen=4)
    convert = from_bgr = 0.0
    for picture in pictures:
        t0 = time.thread_time()
        image = picture.image()
        t1 = time.thread_time()
        grey_copy(image)
        from_bgr += time.thread_time() - t1
        convert += t1 - t0
        held.append(image)
    source.close()
    return {
        "frames": n,
        "decode_ms": 1000 * decode / n,
        "bgr_conversion_ms": 1000 * convert / n,
        "gate_copy_from_bgr_ms": 1000 * from_bgr / n,
        "gate_copy_from_luma_ms": 1000 * from_luma / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clip", default="one-by-one-person-detection.mp4")
    parser.add_argument("--frames", type=int, default=120, help="held in memory at once")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tune_malloc()  # as vidpipe run does
    path = resolve_clip(args.clip, default_assets_dir() / "videos", cache_dir())
    for r in range(args.repeats):
        c = costs_ms(str(path), args.frames)
        print(
            f"{path.name} repeat {r}: {c['frames']} frames; CPU ms per frame: decode "
            f"{c['decode_ms']:.3f}, BGR conversion {c['bgr_conversion_ms']:.3f}, gate copy "
            f"from BGR {c['gate_copy_from_bgr_ms']:.3f}, from luma "
            f"{c['gate_copy_from_luma_ms']:.3f}; load average {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
