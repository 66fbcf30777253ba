"""INT8 post-training quantization with NNCF, and the model-side helpers it needs.

``nncf`` is imported inside the functions that use it (the ``vidpipe[optimize]`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import openvino as ov

from vidpipe.optimize.agreement import Agreement
from vidpipe.optimize.frames import Progress, Sample
from vidpipe.postprocess.decode import DecodeParams, Decoder
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.types import Detections

#: Score threshold of the detections compared (the agreement rule's weak side).
DECODE_THRESHOLD = 0.25
METHODS = ("plain", "accuracy-control")
#: Operation types kept in floating point. YOLOX's and YOLOv8's SiLU is ``x * sigmoid(x)``:
#: NNCF quantizes both inputs of that Multiply by default, and on YOLOX-Nano that alone took
#: the agreement with f32 from recall 0.954 / precision 0.995 down to 0.874 / 0.953 (266
#: held-out frames); keeping every convolution's inputs in INT8 is where the speed is.
FLOAT_TYPES = ("Multiply",)
#: Frames each quantizer is ranked on by accuracy control. It ranks every quantized layer
#: (226 in YOLOX-Nano) by the agreement without it; on all 133 validation frames that ran
#: for more than 15 minutes on 2 busy cores.
RANKING_FRAMES = 48
#: Accuracy control tunes this far above the gate: the gate is then checked on other frames.
TUNE_MARGIN = 0.01


class OptimizeError(Exception):
    """``vidpipe optimize`` cannot go on; the message says why and what to do."""


def import_nncf() -> Any:
    """``nncf``, or a clear error naming the extra that installs it."""
    try:
        import nncf
    except ImportError:
        raise OptimizeError(
            "vidpipe optimize needs NNCF: pip install 'vidpipe[optimize]'"
        ) from None
    return nncf


def prediction_layers(model: ov.Model) -> list[str]:
    """The last convolutions (or MatMuls) before each output: the detection head's
    prediction layers, found by walking back from the results (their friendly names)."""
    found: set[str] = set()
    seen: set[str] = set()
    stack: list[Any] = list(model.get_results())
    while stack:
        node = stack.pop()
        for port in node.inputs():
            src = port.get_source_output().get_node()
            name = src.get_friendly_name()
            if name in seen:
                continue
            seen.add(name)
            if src.get_type_name() in ("Convolution", "GroupConvolution", "MatMul"):
                found.add(name)
            elif src.get_type_name() != "Constant":
                stack.append(src)
    return sorted(found)


class Detector:
    """A compiled model turning one ``Sample`` into detections in frame pixels."""

    def __init__(
        self,
        compiled: ov.CompiledModel,
        decoder: Decoder,
        params: DecodeParams,
        iou_threshold: float,
    ) -> None:
        self.compiled = compiled
        self.decoder = decoder
        self.params = params
        self.iou_threshold = iou_threshold

    def __call__(self, sample: Sample) -> Detections:
        return detect(self.compiled, sample, self.decoder, self.params, self.iou_threshold)


def detect(
    compiled: Any, sample: Sample, decoder: Decoder, params: DecodeParams, iou_threshold: float
) -> Detections:
    """Detections of one sample by any compiled model (the callable OpenVINO form)."""
    outputs = compiled({0: sample.tensor})
    first = [np.asarray(outputs[i])[0] for i in range(len(outputs))]
    return postprocess(first, sample.letterbox, decoder, params, iou_threshold)


def agreement(
    reference: Sequence[Detections],
    candidate: Callable[[Sample], Detections],
    samples: Sequence[Sample],
    labels: Sequence[str],
) -> Agreement:
    """The agreement rule over ``samples`` (``reference[i]`` belongs to ``samples[i]``)."""
    result = Agreement()
    for ref, sample in zip(reference, samples, strict=True):
        result.add(ref, candidate(sample), labels)
    return result


def quantize(
    model: ov.Model,
    calibration: Sequence[Sample],
    method: str,
    validation: Sequence[tuple[Sample, Detections]],
    decode: tuple[Decoder, DecodeParams, float],
    labels: Sequence[str],
    gate: float,
    progress: Progress,
) -> ov.Model:
    """An INT8 copy of ``model``.

    ``plain`` quantizes every layer but the detection head's prediction layers (whose output
    is what the rule compares) and the ``FLOAT_TYPES``. ``accuracy-control`` does the same, then
    has NNCF give layers back to floating point, most harmful first, until the agreement on
    ``validation`` (recall and precision both) reaches ``gate``.
    """
    nncf = import_nncf()
    dataset = nncf.Dataset([s.tensor for s in calibration])
    ignored = nncf.IgnoredScope(
        names=prediction_layers(model), types=list(FLOAT_TYPES), validate=False
    )
    common = {
        "subset_size": len(calibration),
        "ignored_scope": ignored,
        "fast_bias_correction": True,
    }
    if method == "plain":
        progress(f"quantizing: calibrating on {len(calibration)} frames (NNCF)")
        return nncf.quantize(model, dataset, **common)
    decoder, params, iou = decode

    def validate(compiled: Any, items: Any) -> float:
        result = Agreement()
        for sample, ref in items:
            result.add(ref, detect(compiled, sample, decoder, params, iou), labels)
        return min(result.recall, result.precision)

    progress(
        f"quantizing with accuracy control: calibrating on {len(calibration)} frames, "
        f"tuning on {len(validation)} (NNCF; this takes minutes)"
    )
    from nncf.quantization.advanced_parameters import AdvancedAccuracyRestorerParameters

    restorer = AdvancedAccuracyRestorerParameters(
        ranking_subset_size=min(RANKING_FRAMES, len(validation))
    )
    return nncf.quantize_with_accuracy_control(
        model,
        dataset,
        nncf.Dataset(list(validation), lambda item: item[0].tensor),
        validate,
        max_drop=max(0.0, 1.0 - gate - TUNE_MARGIN),
        drop_type=nncf.DropType.ABSOLUTE,
        advanced_accuracy_restorer_parameters=restorer,
        **common,
    )
