"""Small frozen message types that the pipeline stages hand each other.

``Frame`` (capture to preprocess), ``Completion`` (a backend's answer), ``Detections``,
``FrameResult`` and ``TrackEvent`` (postprocess and tracking to the sinks). They hold data
only: how a result is written as JSON is ``vidpipe.sinks.record``'s job, how a class id is
named ``vidpipe.labels.Labels``'.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vidpipe.labels import Labels


class CameraState(enum.Enum):
    """Lifecycle of a capture worker.

    Allowed transitions (see ``capture.session.ALLOWED_TRANSITIONS``)::

        CONNECTING -> STREAMING | BACKOFF | STOPPED
        STREAMING  -> BACKOFF | STOPPED | CONNECTING
        BACKOFF    -> CONNECTING | STOPPED

    ``PAUSED`` is never a worker's: a paused camera has no worker, and the pipeline reports
    this state for it (metrics, status page, MQTT) until it is resumed or removed.
    """

    CONNECTING = "connecting"
    STREAMING = "streaming"
    BACKOFF = "backoff"
    STOPPED = "stopped"
    PAUSED = "paused"


@dataclass(frozen=True, slots=True)
class DeviceImage:
    """A decoded frame that stays in GPU memory (NVDEC cameras).

    Attributes:
        nv12: ``(H * 3 / 2, W)`` uint8 CUDA tensor (a luma plane, then interleaved U, V at
            half resolution), owned by this image (a copy of the decoder's surface).
        gpu: the CUDA device holding it; the camera's batches run there.
        width, height: picture size in pixels.
        to_host: downloads the picture as ``(H, W, 3)`` uint8 BGR (live view and snapshots,
            only when one is due). Not called on the hot path.
        ready: a CUDA event recorded after ``nv12`` was written (None: already complete); a
            consumer on another stream waits for it before reading.
    """

    nv12: Any = field(repr=False)
    gpu: int
    width: int
    height: int
    to_host: Callable[[], npt.NDArray[np.uint8]] = field(repr=False, compare=False)
    ready: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class FittedImage:
    """A decoded host frame of which only the model's view is converted so far.

    The YUV picture's planes are resized to the size the letterbox gives it in the model
    input, then converted to BGR (:mod:`vidpipe.preprocess.yuv`, the GPU letterbox's
    sampling): less CPU than converting the whole frame and then resizing it
    (``python -m benchmarks.capture_cost``), and the detections agree with an NVDEC camera's
    (``tests/component/test_model_input_agreement.py``). The whole frame is converted only if a sink
    asks for it (a watched live view, a due snapshot, a clip's crop).

    Attributes:
        fitted: ``(h, w, 3)`` uint8 BGR: the picture scaled for a model input of ``fit``.
        fit: the model input ``(width, height)`` that ``fitted`` was made for; a backend with
            another input size letterboxes ``to_host()`` instead.
        width, height: the whole picture's size in pixels.
        to_host: the whole picture as ``(H, W, 3)`` uint8 BGR, converted on the first call
            from any thread, the same array after it.
    """

    fitted: npt.NDArray[np.uint8] = field(repr=False)
    fit: tuple[int, int]
    width: int
    height: int
    to_host: Callable[[], npt.NDArray[np.uint8]] = field(repr=False, compare=False)


Image = npt.NDArray[np.uint8] | DeviceImage | FittedImage
"""What a frame carries: a host BGR array, a device NV12 picture, or a host picture that is
converted for the model only."""


def image_size(image: Image) -> tuple[int, int]:
    """``(width, height)`` of any ``Image`` in pixels (the whole frame's, for a fitted one)."""
    if isinstance(image, np.ndarray):
        return int(image.shape[1]), int(image.shape[0])
    return image.width, image.height


def host_image(image: Image) -> npt.NDArray[np.uint8]:
    """``image`` as a whole-frame host BGR array (downloads or converts it if need be)."""
    return image if isinstance(image, np.ndarray) else image.to_host()


@dataclass(frozen=True, slots=True)
class Frame:
    """One decoded frame from a camera.

    Attributes:
        camera: camera name from the config.
        seq: per-camera sequence number of the decoded frame (counts every decoded frame,
            also those decimated away by ``detect_fps``).
        t_capture: ``time.monotonic()`` when the frame was read.
        image: ``(H, W, 3)`` uint8 BGR image, a ``DeviceImage`` (NVDEC cameras: the picture
            stays on the GPU) or a ``FittedImage`` (PyAV cameras feeding a model: converted
            at the model's size only). Owned by the frame; never mutated in place.
        epoch: per-camera stream epoch: a new number each time the capture (re)opens the source
            (a reconnect, or a looping file starting over). State built from consecutive
            frames, such as object tracks, is reset when it changes.
        still_frames: due frames the motion gate skipped right before this one: the picture
            had not changed since the frame inferred before them.
    """

    camera: str
    seq: int
    t_capture: float
    image: Image
    epoch: int = 0
    still_frames: int = 0

    @property
    def height(self) -> int:
        return image_size(self.image)[1]

    @property
    def width(self) -> int:
        return image_size(self.image)[0]


@dataclass(frozen=True, slots=True)
class Letterbox:
    """How an original frame maps into the model input.

    The image is resized by ``scale`` keeping aspect and placed with its top-left corner at
    ``(pad_x, pad_y)`` of the input (0, 0 for YOLOX; centred for NanoDet); the rest is
    padding. A point ``p`` in input pixels is ``(p - pad) / scale`` in frame pixels.
    """

    scale: float
    src_w: int
    src_h: int
    pad_x: int = 0
    pad_y: int = 0


@dataclass(frozen=True, slots=True)
class TensorSpec:
    """Shape, element type and layout of a model input."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    layout: str = "NCHW"

    @property
    def height(self) -> int:
        return int(self.shape[self.layout.index("H")])

    @property
    def width(self) -> int:
        return int(self.shape[self.layout.index("W")])


def _as_array(name: str, value: Any, dtype: npt.DTypeLike, ndim: int) -> np.ndarray:
    arr = np.asarray(value, dtype=dtype)
    if arr.ndim != ndim:
        raise ValueError(f"Detections.{name} must have {ndim} dimension(s), got shape {arr.shape}")
    return arr


@dataclass(frozen=True, slots=True)
class Detections:
    """Detections of one frame as a struct of arrays.

    Attributes:
        xyxy: ``(N, 4)`` float32 boxes ``x1, y1, x2, y2``.
        score: ``(N,)`` float32 confidences.
        class_id: ``(N,)`` int32 class indices.
        tracker_id: ``(N,)`` int64 track ids when the camera tracks objects (``-1``: a detection
            not (yet) part of a confirmed track), else None.
    """

    xyxy: npt.NDArray[np.float32]
    score: npt.NDArray[np.float32]
    class_id: npt.NDArray[np.int32]
    tracker_id: npt.NDArray[np.int64] | None = None

    def __post_init__(self) -> None:
        if np.size(self.xyxy) == 0:
            xyxy = np.zeros((0, 4), np.float32)
        else:
            xyxy = _as_array("xyxy", self.xyxy, np.float32, 2)
        if xyxy.shape[1] != 4:
            raise ValueError(f"Detections.xyxy must have shape (N, 4), got {xyxy.shape}")
        score = _as_array("score", self.score, np.float32, 1)
        class_id = _as_array("class_id", self.class_id, np.int32, 1)
        n = xyxy.shape[0]
        if score.shape != (n,) or class_id.shape != (n,):
            raise ValueError(
                f"Detections arrays disagree: xyxy {xyxy.shape}, score {score.shape}, "
                f"class_id {class_id.shape}; expected (N, 4), (N,), (N,)"
            )
        object.__setattr__(self, "xyxy", xyxy)
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "class_id", class_id)
        if self.tracker_id is not None:
            tracker_id = _as_array("tracker_id", self.tracker_id, np.int64, 1)
            if tracker_id.shape != (n,):
                raise ValueError(
                    f"Detections.tracker_id must have shape ({n},) like score, got "
                    f"{tracker_id.shape}"
                )
            object.__setattr__(self, "tracker_id", tracker_id)

    @classmethod
    def empty(cls) -> Detections:
        return cls(
            np.zeros((0, 4), np.float32), np.zeros((0,), np.float32), np.zeros((0,), np.int32)
        )

    def __len__(self) -> int:
        return int(self.score.shape[0])

    def select(self, index: npt.ArrayLike) -> Detections:
        """Subset by boolean mask or integer index array."""
        idx = np.asarray(index)
        tid = None if self.tracker_id is None else self.tracker_id[idx]
        return Detections(self.xyxy[idx], self.score[idx], self.class_id[idx], tid)

    def with_tracker_ids(self, tracker_id: npt.ArrayLike) -> Detections:
        """The same detections with ``tracker_id`` set (``(N,)``, -1 for untracked)."""
        return Detections(self.xyxy, self.score, self.class_id, np.asarray(tracker_id))


Outputs = tuple[np.ndarray, ...]
"""A model's raw outputs: one array per output, batch dimension first."""


@dataclass(frozen=True, slots=True)
class Completion:
    """What an inference backend hands back for one submitted frame.

    ``result`` is exactly one of three things, and its type says which: the raw ``Outputs``
    (copies owned by the receiver: the backend's request slot may already be reused), the
    final ``Detections`` (the backend postprocessed on the device, as the tag's
    ``PostprocessRequest`` asked), or the error the inference failed with.

    Attributes:
        tag: whatever the submitter passed with the frame (opaque to the backend, except a
            ``SubmitTag``'s ``postprocess``).
        result: the outputs, the detections or the error.
        infer_s: wall time from submit to completion, seconds.
    """

    tag: Any
    result: Outputs | Detections | BaseException
    infer_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.result, tuple | Detections | BaseException):
            raise TypeError(
                "Completion.result must be the outputs (a tuple of arrays), Detections or an "
                f"exception, got {type(self.result).__name__}"
            )

    @property
    def error(self) -> BaseException | None:
        """The failure, if inference failed."""
        return self.result if isinstance(self.result, BaseException) else None

    @property
    def outputs(self) -> Outputs | None:
        """The raw outputs, if the backend handed them back."""
        return self.result if isinstance(self.result, tuple) else None

    @property
    def detections(self) -> Detections | None:
        """The final detections, if the backend postprocessed on the device."""
        return self.result if isinstance(self.result, Detections) else None


@dataclass(frozen=True, slots=True)
class PostprocessRequest:
    """What a backend that can postprocess on the device needs of one frame.

    Attributes:
        decoder: the model's output decoder (``model.type``: ``yolox``...).
        letterbox: how the frame was placed into the input.
        score_threshold: the camera's threshold.
        class_ids: the camera's classes (None: all).
        iou_threshold: NMS IoU threshold.
    """

    decoder: str
    letterbox: Letterbox
    score_threshold: float
    class_ids: frozenset[int] | None
    iou_threshold: float


@dataclass(frozen=True, slots=True)
class SubmitTag:
    """A submission's tag that lets the backend postprocess on the device (None: it must
    hand back the raw outputs)."""

    postprocess: PostprocessRequest | None


@dataclass(frozen=True, slots=True)
class TrackEvent:
    """Something a tracked object did in one frame: entered or left a zone, crossed a line.

    Attributes:
        kind: ``"enter"`` or ``"leave"`` (a zone), ``"cross"`` (a line).
        camera: camera name.
        seq: the frame in which it happened.
        wall_time: ``time.time()`` of that frame's result.
        where: the zone's or the line's name.
        tracker_id: the track's id (unique per camera for the life of the process).
        class_id: the track's class.
        label: the class name.
        point: the track's anchor point ``(x, y)`` in frame pixels.
        direction: ``cross`` only: ``"in"`` or ``"out"`` (see ``vidpipe.track.geometry``).
        dwell_s: ``leave`` only: seconds between the enter and the leave frames' captures.
        reason: ``leave`` only: ``"exited"`` (left the polygon), ``"lost"`` (the track ended)
            or ``"reset"`` (the camera reconnected).
    """

    kind: str
    camera: str
    seq: int
    wall_time: float
    where: str
    tracker_id: int
    class_id: int
    label: str
    point: tuple[float, float]
    direction: str | None = None
    dwell_s: float | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ClipEvent:
    """An event clip was written (``vidpipe.clips``); it rides on its camera's next result, or
    goes to the sinks on its own where none will come (``vidpipe.stages.events_result``).

    Attributes:
        camera: camera name.
        seq: the frame of the clip's last trigger.
        wall_time: ``time.time()`` when the clip was written.
        clip_id: the clip's id (its file name without ``.mp4``).
        start, end: ``time.time()`` of the clip's first and last packet.
        url: where the HTTP server serves it (``/clips/<camera>/<id>.mp4``).
        label: the class of the first trigger ("" for none).
        classes: every class seen in the clip's triggers.
        tracker_ids: the tracks of its triggers.
        size: bytes of the MP4 file.
        crop_url: the best-shot crop's URL, or None.
        crop_file: that crop's file on this machine (not in the record), or None.
    """

    camera: str
    seq: int
    wall_time: float
    clip_id: str
    start: float
    end: float
    url: str
    label: str
    classes: tuple[str, ...]
    tracker_ids: tuple[int, ...]
    size: int
    crop_url: str | None = None
    crop_file: str | None = None
    kind: str = "clip"


@dataclass(frozen=True, slots=True)
class ReidEvent:
    """A track on one camera matched a recent track on another camera: both now carry one
    ``global_id`` (``vidpipe.secondary``). It rides on the result of the frame in which the
    match was made.

    Attributes:
        camera, track_id: the track that was matched (the newer one).
        seq: the frame of ``camera`` on whose result the event rides.
        wall_time: ``time.time()`` of that frame's result.
        global_id: the identity both tracks share from now on.
        matched_camera, matched_track_id: the earlier track.
        similarity: cosine similarity of the two tracks' mean embeddings.
    """

    camera: str
    seq: int
    wall_time: float
    track_id: int
    global_id: int
    matched_camera: str
    matched_track_id: int
    similarity: float
    kind: str = "reid"


@dataclass(frozen=True, slots=True)
class TrackSummary:
    """What an embedder said of one track, when the track ended: the vector that
    re-identification and search compare (``vidpipe.secondary``).

    Attributes:
        camera, track_id: the track.
        seq: the frame of ``camera`` on whose result the summary rides (the one the track
            ended in).
        wall_time: ``time.time()`` of that frame's result.
        global_id: its identity across cameras (its own new one when nothing matched).
        class_id, label: the track's class.
        first_seen, last_seen: ``time.time()`` of the first and last crop embedded.
        crops: crops averaged into ``embedding``.
        embedding: ``(D,)`` float32, the L2-normalised mean of the crops' normalised
            embeddings.
        model: the embedder's name in ``models:``.
        record_embedding: its JSON record carries ``embedding`` (the secondary stage's
            ``include_embeddings``); the event store keeps the vector either way.
    """

    camera: str
    seq: int
    wall_time: float
    track_id: int
    global_id: int
    class_id: int
    label: str
    first_seen: float
    last_seen: float
    crops: int
    embedding: npt.NDArray[np.float32] = field(repr=False)
    model: str
    kind: str = "track"
    record_embedding: bool = False


@dataclass(frozen=True, slots=True)
class ModelTag:
    """The model that produced a result: its type and the name the config gives it (a
    ``models:`` key, or the file name of the one ``model:``)."""

    type: str
    name: str


Event = TrackEvent | ClipEvent | ReidEvent | TrackSummary
"""Everything that rides on a ``FrameResult`` besides its detections."""


@dataclass(frozen=True, slots=True)
class FrameResult:
    """Postprocessed result of one frame, as sinks receive it.

    Attributes:
        camera: camera name.
        seq: frame sequence number.
        t_capture: monotonic capture time.
        t_done: monotonic time postprocessing finished.
        wall_time: ``time.time()`` at completion (for event timestamps).
        width: original frame width.
        height: original frame height.
        detections: boxes in original-frame pixels.
        labels: the model's class names (a plain sequence of names is converted).
        image: the original frame (read-only). Sinks that draw make a copy. A ``DeviceImage``
            (NVDEC cameras) or a ``FittedImage`` is downloaded or converted with
            ``host_image`` only by a sink that uses it (a watched live view, a due snapshot).
        epoch: the frame's stream epoch (see ``Frame.epoch``).
        events: zone and line events of this frame (cameras with zones or lines only), and
            the camera's clips written since its previous result.
        still_frames: see ``Frame.still_frames``.
        model: the detector that produced ``detections`` (None where no model was opened).
        ended_tracks: ids of this camera's confirmed tracks that ended in this frame (lost
            for too long, or dropped by a reconnect): state kept per track can go.
        global_ids: tracker id -> identity across cameras, for this frame's tracks that have
            one (``vidpipe.secondary``; empty without re-identification).
        events_only: no frame, only ``events`` (``vidpipe.stages.events_result``): sinks
            deliver the events and write nothing of a frame.
    """

    camera: str
    seq: int
    t_capture: float
    t_done: float
    wall_time: float
    width: int
    height: int
    detections: Detections
    labels: Labels = field(repr=False, default=Labels())
    image: Image | None = field(repr=False, default=None)
    epoch: int = 0
    events: tuple[Event, ...] = ()
    still_frames: int = 0
    model: ModelTag | None = None
    ended_tracks: frozenset[int] = frozenset()
    global_ids: Mapping[int, int] = field(default_factory=dict)
    events_only: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", Labels.of(self.labels))
