"""The ``reid`` embedder: person re-identification on crops, with OpenVINO on the CPU.

Facts this module is built around (openvino 2026.4.1, 2-core x86 with AVX-512 BF16, the walkway
clip's model ``person-reidentification-retail-0288``):

* The model takes one ``(1, 256, 128, 3)`` NHWC BGR crop, 0-255 float, and gives a 256-d
  vector; only its direction means anything, so every vector handed on is L2-normalised.
* Detection comes first. The embedder's compiled model has one stream and one inference
  thread, so at most one of the machine's cores runs it at a time: a crop costs about 6.4 ms of
  one core at bf16, which at the default of one crop a second per track is 0.6 % of a core per
  walking person.
* No batching. Batches need the model's graph rewritten (its Reshape targets fix the batch at 1;
  ``vidpipe.infer.torch_embedder.batchable`` does it, with the ``onnx`` package the CPU install
  lacks): batches of 4 and 8 saved only 10-18 % CPU per crop (6.3 -> 5.2-5.6 ms, three runs),
  about 1 % of a core at 20 crops a second.
* ``AsyncInferQueue.start_async`` is not safe from several threads: only the stage's feeder
  thread calls ``submit``. The callback runs with the GIL held and keeps its request busy
  until it returns: it copies and normalises the output and hands it on, nothing more, and
  never raises. A failed inference calls no callback: ``submit`` reports submissions that
  were left without one (``stale``).
* ``embed`` (search by picture, from the web server's worker threads) runs on a request of its
  own, under a lock, on the same compiled model.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from vidpipe.config.models import NamedModelConfig
from vidpipe.config.registry import EMBEDDER_TYPES
from vidpipe.infer.base import BackendError
from vidpipe.preprocess.crops import CROP_SIZE, fit_crop
from vidpipe.secondary.lane import OnEmbedded, Vector

if TYPE_CHECKING:  # OpenVINO is imported when a CPU embedder opens (a GPU image has none)
    import openvino as ov

log = logging.getLogger(__name__)

#: The crop size the ``reid`` type takes: width, height.
REID_INPUT = CROP_SIZE
#: The length of a ``reid`` embedding.
REID_DIM = 256
#: Requests in flight: one runs while the feeder fills the next.
_REQUESTS = 2


def reid_input(crop_bgr: npt.NDArray[np.uint8]) -> npt.NDArray[np.float32]:
    """``(h, w, 3)`` uint8 BGR crop -> ``(1, 256, 128, 3)`` float32, as the model takes it."""
    return fit_crop(crop_bgr).astype(np.float32)[None]


def normalised(vector: npt.ArrayLike) -> Vector:
    """``vector`` flattened, as float32, with unit length (a zero vector stays zero)."""
    v = np.asarray(vector, np.float32).reshape(-1)
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def _check_fits(model: ov.Model, path: Path) -> None:
    """BackendError naming ``path`` unless ``model`` is shaped like a reid model."""
    width, height = REID_INPUT
    expected = f"one (1, {height}, {width}, 3) NHWC crop in, a {REID_DIM}-d vector out"
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise BackendError(
            f"model {path} does not fit model type 'reid': {len(model.inputs)} input(s) and "
            f"{len(model.outputs)} output(s); expected {expected}"
        )
    shape = model.input().get_partial_shape()
    dims = [d.get_length() if d.is_static else -1 for d in shape] if shape.rank.is_static else []
    if dims[1:] != [REID_INPUT[1], REID_INPUT[0], 3] or dims[0] not in (1, -1):
        raise BackendError(
            f"model {path} does not fit model type 'reid': input shape {dims or shape}; "
            f"expected {expected} (is it a detector?)"
        )
    out = model.output().get_partial_shape()
    size = int(np.prod([d.get_length() for d in out][1:])) if out.is_static else -1
    if size != REID_DIM:
        raise BackendError(
            f"model {path} does not fit model type 'reid': output shape {out}; expected {expected}"
        )


class ReidEmbedder:
    """A ``reid`` model compiled for the CPU: asynchronous ``submit`` for the secondary stage,
    synchronous ``embed`` for search by picture.

    Args:
        name: the model's name in ``models:`` (logs and messages).
        path: its ONNX or OpenVINO IR file.
        precision: ``auto`` (the CPU's best) or an inference precision (``f32``, ``bf16``).
        threads: inference threads (1: the detector keeps the other cores).

    Raises:
        BackendError: the file cannot be read or compiled, or is not shaped like a reid model.
    """

    def __init__(self, name: str, path: Path, precision: str = "auto", threads: int = 1) -> None:
        self.name = name
        self.path = path
        import openvino as ov

        from vidpipe.infer.openvino import _read_model as read_model  # one reader, one message

        core = ov.Core()
        model = read_model(core, path)
        _check_fits(model, path)
        if model.input().get_partial_shape()[0].is_dynamic:
            model.reshape([1, REID_INPUT[1], REID_INPUT[0], 3])
        props: dict[str, Any] = {"NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": threads}
        if precision != "auto":
            props["INFERENCE_PRECISION_HINT"] = precision
        try:
            self._compiled = core.compile_model(model, "CPU", props)
        except Exception as exc:
            raise BackendError(f"model {name}: cannot compile {path} with {props}: {exc}") from None
        hint = self._compiled.get_property("INFERENCE_PRECISION_HINT")
        self.precision = hint.get_type_name() if hasattr(hint, "get_type_name") else str(hint)
        self._queue = ov.AsyncInferQueue(self._compiled, _REQUESTS)
        self._queue.set_callback(self._on_complete)
        self._sync = self._compiled.create_infer_request()
        self._sync_lock = threading.Lock()
        self._lock = threading.Lock()
        self._inflight: dict[int, tuple[Any, OnEmbedded, float]] = {}
        self._next_id = 0
        self.callback_errors = 0
        self._closed = False
        self.embed(np.full((REID_INPUT[1], REID_INPUT[0], 3), 114, np.uint8))  # first-call cost

    # ------------------------------------------------------------------ asynchronous

    def submit(self, crop_bgr: npt.NDArray[np.uint8], tag: Any, on_done: OnEmbedded) -> None:
        """Start embedding one crop (one thread only); blocks while both requests run.

        ``on_done(tag, vector_or_error)`` is called on OpenVINO's thread with the normalised
        ``(256,)`` vector. A failed inference surfaces here, on a later call, as the
        BackendError raised; its submission is then among ``stale``.
        """
        x = reid_input(crop_bgr)
        with self._lock:
            if self._closed:
                raise BackendError(f"model {self.name}: the embedder is closed")
            sub_id = self._next_id
            self._next_id += 1
            self._inflight[sub_id] = (tag, on_done, time.monotonic())
        try:
            self._queue.start_async({0: x}, sub_id)
        except Exception as exc:  # a stored error of an earlier request, or this one's shape
            with self._lock:
                self._inflight.pop(sub_id, None)
            raise BackendError(f"model {self.name}: inference failed: {exc}") from None

    def stale(self, older_than_s: float) -> list[Any]:
        """Tags of submissions without an answer for ``older_than_s``: their inference failed
        (OpenVINO calls no callback then). They are forgotten here."""
        now = time.monotonic()
        with self._lock:
            old = [k for k, (_, _, t) in self._inflight.items() if now - t > older_than_s]
            return [self._inflight.pop(k)[0] for k in old]

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._inflight)

    def _on_complete(self, request: ov.InferRequest, sub_id: int) -> None:
        try:
            vector = normalised(request.get_output_tensor(0).data)  # a copy: the slot is reused
            with self._lock:
                entry = self._inflight.pop(sub_id, None)
            if entry is not None:
                entry[1](entry[0], vector)
        except BaseException:  # never out of the callback: the next one would abort
            self.callback_errors += 1
            log.exception("model %s: embedding callback failed", self.name)

    def wait(self, timeout_s: float) -> bool:
        """Wait until nothing is in flight; True if that happened within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.005)
        return not self.in_flight

    def close(self) -> None:
        """Wait for every request in flight (an OpenVINO request must not outlive its queue),
        then refuse new ones. Idempotent."""
        with self._lock:
            self._closed = True
        try:
            self._queue.wait_all()
        except Exception as exc:
            log.warning("model %s: a request failed while closing: %s", self.name, exc)

    # ------------------------------------------------------------------ synchronous

    def embed(self, image_bgr: npt.NDArray[np.uint8]) -> Vector:
        """One picture's normalised ``(256,)`` embedding, now (any thread; one at a time)."""
        x = reid_input(np.asarray(image_bgr, np.uint8))
        with self._sync_lock:
            out = self._sync.infer({0: x})
            return normalised(next(iter(out.values())))


@EMBEDDER_TYPES.register("reid")
def open_reid(
    name: str, model: NamedModelConfig, precision: str = "auto", gpu: Any | None = None
) -> Any:
    """The factory of embedder type ``reid`` (``EMBEDDER_TYPES.factory("reid")``): on the CPU
    with OpenVINO, or on the GPU the detector runs on (``gpu``: a ``torch.device``; float16
    where ``precision`` is ``f16``)."""
    if gpu is not None:
        from vidpipe.secondary.gpu import TorchReidEmbedder

        return TorchReidEmbedder(name, model, gpu, half=precision == "f16")
    return ReidEmbedder(name, model.path, precision)
