"""The ``reid`` embedder on the GPU, for a daemon whose detector runs there (inference type
torch or tensorrt): crops of NVDEC frames are cut and resized on the device
(``vidpipe.preprocess.crops``) and embedded there by the model converted with onnx2torch
(``vidpipe.infer.torch_embedder``); no picture crosses to the host. A crop of a host frame (a
pyav camera) is resized on the host and copied up, 96 KB.

The lane's feeder thread is the only one that submits; a crop is embedded at once, on that
thread (about a millisecond on the GPU), so nothing is ever in flight between calls.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.config.models import NamedModelConfig
from vidpipe.gpu_gate import GPU_GATE
from vidpipe.infer.torch_embedder import TorchEmbedder
from vidpipe.preprocess.crops import CROP_SIZE, fit_crop
from vidpipe.secondary.lane import OnEmbedded, Vector


class TorchReidEmbedder:
    """``Embedder`` of the secondary stage's lanes, on one CUDA device.

    Args:
        name: the model's name in ``models:``.
        model: its config (an ONNX file).
        device: the ``torch.device`` the detector's batches run on.
        half: float16, as the detector's ``precision: f16``.
    """

    def __init__(self, name: str, model: NamedModelConfig, device: Any, half: bool) -> None:
        import torch

        self.name = name
        self.torch = torch
        self.device = device
        self._model = TorchEmbedder(model.path, device, half=half)
        self._lock = threading.Lock()  # the lane's feeder and search by picture
        self.embed(np.full((CROP_SIZE[1], CROP_SIZE[0], 3), 114, np.uint8))  # first-call cost

    def _input(self, crop: Any) -> Any:
        """A ``(1, 256, 128, 3)`` uint8 device tensor of ``crop``: a device crop cut at the
        model's size already, or a host BGR crop of any size."""
        if isinstance(crop, np.ndarray):
            crop = self.torch.from_numpy(np.ascontiguousarray(fit_crop(crop))).to(self.device)
        return crop.reshape(1, CROP_SIZE[1], CROP_SIZE[0], 3)

    def submit(self, crop_bgr: Any, tag: object, on_done: OnEmbedded) -> None:
        """Embed one crop now and hand the normalised vector (or the error) to ``on_done``."""
        try:
            with self._lock, GPU_GATE.work():
                vector: Vector | BaseException = self._model.embed(self._input(crop_bgr))[0]
        except Exception as exc:  # a device error: the crop is counted as failed
            vector = exc
        on_done(tag, vector)

    def stale(self, older_than_s: float) -> list[object]:
        return []  # nothing waits for an answer: each crop is embedded within submit

    @property
    def in_flight(self) -> int:
        return 0

    def wait(self, timeout_s: float) -> bool:
        return True

    def close(self) -> None:
        """Nothing to wait for (no request outlives ``submit``)."""

    def embed(self, image_bgr: npt.NDArray[np.uint8]) -> Vector:
        """One picture's normalised embedding (search by picture; any thread)."""
        with self._lock, GPU_GATE.work():
            return self._model.embed(self._input(np.asarray(image_bgr, np.uint8)))[0]
