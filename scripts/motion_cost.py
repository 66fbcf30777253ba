"""CPU cost of the motion gate per frame, at 768x432 and 1080p: ``python scripts/motion_cost.py``.

Runs ``MotionGate.admit`` over the first 300 frames of a clip (default: the walkway clip in the
assets), scaled to both sizes, and prints milliseconds per frame.
"""

from __future__ import annotations

import sys
import time

import cv2

from vidpipe.assets import default_assets_dir
from vidpipe.capture.motion import MotionGate
from vidpipe.config import MotionConfig


def main() -> None:
    clip = (
        sys.argv[1]
        if len(sys.argv) > 1
        else str(default_assets_dir() / "videos" / "one-by-one-person-detection.mp4")
    )
    cap = cv2.VideoCapture(clip)
    frames = []
    while len(frames) < 300:
        ok, image = cap.read()
        if not ok:
            break
        frames.append(image)
    for width, height in ((768, 432), (1920, 1080)):
        sized = [cv2.resize(f, (width, height)) for f in frames]
        gate = MotionGate(MotionConfig(enabled=True))
        t0 = time.perf_counter()
        for i, image in enumerate(sized):
            gate.admit(image, i / 10)
        ms = (time.perf_counter() - t0) / len(sized) * 1e3
        print(f"{width}x{height}: {ms:.3f} ms per frame over {len(sized)} frames")


if __name__ == "__main__":
    main()
