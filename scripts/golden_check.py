"""Golden check outside the daemon, for machines without the project's venv.

Runs vidpipe's own letterbox and postprocessing around a plain OpenVINO compiled model (the
device's default precision unless --precision is given), and applies the rule of
shared/assets/README.md exactly. Used to check the golden file on a CPU with bf16 support
(the GPU host), where the CI machine can only run f32.

    python3 scripts/golden_check.py ASSETS_DIR [--precision f32|bf16]
    python3 scripts/golden_check.py ASSETS_DIR --precision f32 --detections GPU.jsonl

With ``--detections`` (the JSON lines of ``vidpipe detect``, e.g. from the GPU backends), those
detections are checked against OpenVINO's at the same rule instead, OpenVINO standing in for
the golden file: a check at equal precision, free of the bf16 origin of expected.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import openvino as ov

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.golden import load_expected, match_golden

from vidpipe.postprocess.decode import DECODERS, DecodeParams
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.letterbox import letterbox


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("assets", type=Path)
    parser.add_argument("--precision")
    parser.add_argument("--detections", type=Path, help="vidpipe detect output to check")
    args = parser.parse_args()
    core = ov.Core()
    props = {"INFERENCE_PRECISION_HINT": args.precision} if args.precision else {}
    compiled = core.compile_model(str(args.assets / "models" / "yolox_nano.onnx"), "CPU", props)
    precision = compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name()
    labels = (args.assets / "models" / "coco80.txt").read_text().split("\n")
    expected = load_expected(args.assets / "images" / "expected.jsonl")
    theirs = load_expected(args.detections) if args.detections else {}
    problems: list[str] = []
    for name in sorted(expected):
        img = cv2.imread(str(args.assets / "images" / name))
        canvas, lb = letterbox(img, 416, 416)
        out = compiled(canvas.transpose(2, 0, 1)[None].astype("float32"))[0]
        det = postprocess([out[0]], lb, DECODERS["yolox"], DecodeParams(416, 416, 0.30), 0.45)
        got = {
            "source": name,
            "width": img.shape[1],
            "height": img.shape[0],
            "detections": [
                {"class_id": int(c), "label": labels[c], "score": float(s), "box": b.tolist()}
                for b, s, c in zip(det.xyxy, det.score, det.class_id, strict=True)
            ],
        }
        if args.detections is None:
            problems += match_golden(expected[name], got)
        else:
            problems += match_golden(got, theirs[name])
    print(json.dumps({"precision": precision, "images": len(expected), "problems": problems}))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
