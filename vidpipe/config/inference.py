"""Config of the model and the inference backends (the ``model:`` and ``inference:`` sections).

Each backend config class is declared in ``BACKENDS`` under its ``type`` (its factory is in
``vidpipe.infer``); the model types (``model.type``) are declared in ``MODEL_TYPES`` (their
decoders are in ``vidpipe.postprocess.decode``). A backend's section holds what a user
chooses (type, device, precision, hint) and, under ``advanced``, the tuning knobs; a key that
an older config had there reports where it went (``retired_keys``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from vidpipe.config.base import ConfigModel
from vidpipe.config.registry import BACKENDS, MODEL_TYPES

MODEL_TYPES.declare("yolox", "yolov8", "ssd", "nanodet")

GPU_MODEL_TYPES: frozenset[str] = frozenset({"yolox", "yolov8", "ssd"})
"""The model types the GPU backends (torch, tensorrt) take. Their letterbox (host rows and the
CUDA kernel) places the picture top-left with pad 114 and gives the model 0-255 pixels, and
their postprocessing runs on the device: a type trained on another input (NanoDet: centred,
pad 0, normalised) would be fed the wrong picture. A new type is refused there until both
are taught its input and its decoder."""

if TYPE_CHECKING:
    ModelType = str
else:
    ModelType = MODEL_TYPES.literal()


class InferenceConfigBase(ConfigModel):
    """What every backend config has: its ``type``, the key of its registration, and how
    many processes ``vidpipe run`` runs the cameras in (``vidpipe.supervisor``)."""

    type: str
    # auto by default: a GPU config given more cameras than one process can drive would
    # otherwise overload that process while the GPU idles (one process past its count sheds
    # most of its frames: docs/gpu.md), and a user adds cameras without thinking of processes.
    processes: int | Literal["auto"] = Field(
        "auto",
        description="processes that run the cameras, each its shard of them, behind one HTTP "
        "port (vidpipe run supervises them); auto: on a GPU backend one per "
        "32 enabled cameras (one Python process drives about 40 NVDEC cameras), at most one "
        "per host core, and with several devices at least one a GPU and a multiple of their "
        "number; on OpenVINO 1. Applies at the next start",
    )
    start_timeout_s: float = Field(
        120.0,
        gt=0,
        description="with more than one process: a process not ready this long after it "
        "started has its threads' stacks logged, is killed and started again",
    )

    @field_validator("processes")
    @classmethod
    def _at_least_one(cls, v: int | str) -> int | str:
        if isinstance(v, int) and v < 1:
            raise ValueError(f"processes must be at least 1 or auto, got {v}")
        return v


class ModelConfig(ConfigModel):
    """The detection model."""

    path: Path = Field(description="ONNX or OpenVINO IR file of the detector")
    labels: Path | None = Field(None, description="class names, one per line, in class-id order")
    type: ModelType = Field(
        "yolox",
        description="the model's type, which fixes its input (letterbox placement, pad, "
        "normalisation) and its output decoder: yolox (top-left, pad 114), yolov8 (Ultralytics "
        "export), ssd, or nanodet (NanoDet-m: centred, pad 0, mean/std in the graph; "
        "inference type openvino only)",
    )
    score_threshold: float = Field(0.3, ge=0, le=1, description="default minimum score")
    iou_threshold: float = Field(0.45, gt=0, le=1, description="NMS IoU threshold")
    input_size: tuple[int, int] | None = Field(
        None,
        description="[width, height] to run the model at, each a multiple of 32, instead of "
        "the size it was exported with (OpenVINO reshapes it at load; inference type openvino "
        "only). Fit it to the cameras' shape: a 16:9 picture fills 416x234 of a 416x416 "
        "input, and [416, 256] infers the same picture at the same scale in 62 % of the "
        "pixels (1.6x the frames a second on a 2-core CPU). Unset: the model's own size. "
        "A model whose graph fixes its size (NanoDet-m's export) is refused at load",
    )

    @field_validator("input_size")
    @classmethod
    def _multiple_of_32(cls, v: tuple[int, int] | None) -> tuple[int, int] | None:
        if v is None:
            return v
        for name, side in zip(("width", "height"), v, strict=True):
            # the detectors' coarsest stride: every head's grid must tile the input exactly
            if side < 32 or side > 4096 or side % 32:
                raise ValueError(
                    f"input_size {name} {side} must be a multiple of 32 from 32 to 4096 "
                    f"(the detectors' coarsest stride is 32), e.g. [416, 256] for 16:9 cameras"
                )
        return v

    def backend_problem(self, inference: InferenceConfigBase) -> str | None:
        """Why ``inference`` cannot run this model's type (None: it can); the message starts
        with the YAML path, so that the loader points at the line."""
        if self.input_size is not None and inference.type != "openvino":
            return (
                f"model.input_size: inference type {inference.type!r} runs the model at the "
                f"size it was exported with; remove input_size, or export the model at "
                f"{self.input_size[0]}x{self.input_size[1]} (inference type openvino "
                f"reshapes it at load)"
            )
        if inference.type in ("torch", "tensorrt") and self.type not in GPU_MODEL_TYPES:
            takes = ", ".join(sorted(GPU_MODEL_TYPES))
            return (
                f"model.type: {self.type!r} runs on inference type openvino only; inference "
                f"type {inference.type!r} letterboxes top-left with pad 114 and decodes "
                f"on the GPU for {takes} alone (use inference type openvino)"
            )
        return None


class OpenVINOAdvanced(ConfigModel):
    """``inference.advanced`` of the OpenVINO backend: tuning knobs whose defaults won their
    A/B runs (benchmarks/README.md, "The defaults and the A/B behind each"). Leave them unset
    unless a measurement on the box says otherwise."""

    num_requests: int | None = Field(
        None,
        ge=1,
        le=64,
        description="request pool size; unset: twice OPTIMAL_NUMBER_OF_INFER_REQUESTS, with "
        "the requests in flight capped by the cameras that have frames (one per stream, one "
        "more once more cameras than streams have frames). A value set here is kept in flight "
        "as given: the whole pool of 4 on 2 cores gave 2-4 % more fps and twice the p95 "
        "latency, so set it only where throughput matters more than latency",
    )
    num_streams: int | None = Field(
        None,
        ge=1,
        description="OpenVINO's NUM_STREAMS (requests the device runs at once); unset: what "
        "the hint picks (1 under latency, one per core or two under throughput). No "
        "measurement here has beaten the hint's choice: set it only to measure another "
        "against it",
    )
    cpu_pinning: bool | None = Field(
        None,
        description="pin each of OpenVINO's stream threads to one core (ENABLE_CPU_PINNING); "
        "unset: OpenVINO's default (on, on Linux). Unpinned inferred 2-6 % more on an "
        "overloaded 2-core box, within its drift; set false where other pinned work shares "
        "the box (two pinned OpenVINO processes on one box each ran at half speed)",
    )


_OPENVINO_REMOVED = {
    "preprocess_in_graph": "the scheduler always writes the model's f32 NCHW input (the "
    "conversion in the graph cost more than it saved)",
    "graph_rewrites": "the rewrites are always applied",
    "decode_just_in_time": "unpaced file cameras always decode just in time",
    "postprocess_on_scheduler": "postprocessing always runs on the scheduler's thread",
}


@BACKENDS.config("openvino")
class OpenVINOConfig(InferenceConfigBase):
    """OpenVINO inference backend (asynchronous request pool).

    The scheduler writes the model's f32 NCHW input, the graph is rewritten at load
    (``vidpipe.infer.ov_rewrites``), file cameras decode just in time and postprocessing runs
    on the scheduler's thread: each won its A/B (benchmarks/README.md), so none is a setting.
    """

    retired_keys: ClassVar[dict[str, str]] = {
        **{key: f"moved to inference.advanced.{key}" for key in OpenVINOAdvanced.model_fields},
        **{key: f"was removed: {why}; delete it" for key, why in _OPENVINO_REMOVED.items()},
    }

    type: Literal["openvino"] = "openvino"
    device: str = Field("CPU", description="OpenVINO device name: CPU, GPU, NPU, AUTO:...")
    hint: Literal["auto", "throughput", "latency"] = Field(
        "auto",
        description="performance hint; auto: latency for a process that runs one camera, "
        "throughput for more (or none)",
    )
    precision: Literal["auto", "f32", "bf16", "f16"] = Field(
        "auto", description="inference precision; auto = the device's best (logged, exported)"
    )
    advanced: OpenVINOAdvanced = Field(
        default_factory=OpenVINOAdvanced,
        description="tuning knobs: request pool, streams, CPU pinning",
    )

    def for_cameras(self, cameras: int) -> OpenVINOConfig:
        """This section as a process running ``cameras`` cameras compiles it: ``auto`` picks
        the latency hint for one camera (one stream on every core: its frames are inferred
        one after the other, each sooner), throughput for more (one stream per core or two,
        several frames at once), as OpenVINO's guide puts it for one input stream against
        many. At one camera on 2 cores the throughput hint ran 1.3-1.4x the frames of the
        latency hint at 1.8-1.9x its p95 latency, and the latency hint still ran 1.3-1.6x the
        frames of a loop that infers one frame at a time, at its p95 or less (``vidpipe bench
        --contenders naive,vidpipe,vidpipe-throughput --cameras 1``, 768x432 and 1080p,
        benchmarks/README.md)."""
        if self.hint != "auto":
            return self
        return self.model_copy(update={"hint": "latency" if cameras == 1 else "throughput"})


DEFAULT_ENGINE_CACHE = Path("~/.cache/vidpipe/engines")


class GpuAdvanced(ConfigModel):
    """``inference.advanced`` of the GPU backends: batching and executor knobs whose defaults
    held up on the H200 (benchmarks/README.md, "GPU"). Change them for many cameras or a model
    whose batch needs differ, and measure the change there."""

    streams: int = Field(
        2,
        ge=1,
        le=16,
        description="slots (CUDA streams) per GPU; 2 reached 0.97-0.98 of the tight loop at "
        "batch 64 in f32 where 1 did not (its copies queue behind the compute); try 4 for "
        "tf32 or f16 at large batches (tf32 batch 64: 0.71 with 2, 0.99 with 4)",
    )
    max_batch: int = Field(
        8,
        ge=1,
        le=256,
        description="frames gathered across cameras into one batch; raise it with the number "
        "of cameras (32 real-time 1080p cameras ran at max_batch 32) so that the GPU runs "
        "full batches: the batch-size histogram (vidpipe_batch_size) shows whether they fill",
    )
    batch_timeout_ms: float = Field(
        5.0,
        ge=0,
        le=1000,
        description="an incomplete batch is dispatched after this long; a longer wait fills "
        "batches (fewer, larger launches) at the cost of latency: 10-20 ms (with max_batch "
        "32-64) served 32 real-time 1080p cameras at a p95 within 200 ms",
    )
    workspace_mib: int | None = Field(
        None,
        ge=16,
        description="TensorRT builder workspace limit, MiB (tensorrt only; unset: 1024); "
        "1024 built every engine measured so far; raise it only when TensorRT's build log says "
        "a tactic was skipped for lack of workspace",
    )
    cuda_graphs: bool | None = Field(
        None,
        description="torch only: capture the model as CUDA graphs per slot (unset: true); "
        "false runs it eagerly, whose Python holds the GIL for milliseconds per batch (0.67 "
        "of the tight loop at batch 64): only to debug the model",
    )
    engine_cache_dir: Path | None = Field(
        None,
        description="where built engines (tensorrt) and converted models (torch) are kept, so "
        f"that a restart skips building them (unset: {DEFAULT_ENGINE_CACHE}); set it where the "
        "service user cannot write its home",
    )

    @property
    def workspace(self) -> int:
        """The TensorRT builder workspace limit in MiB."""
        return self.workspace_mib or 1024

    @property
    def cache_dir(self) -> Path:
        """Where built engines are kept, expanded."""
        return (self.engine_cache_dir or DEFAULT_ENGINE_CACHE).expanduser()


@BACKENDS.config("tensorrt", "torch")
class GpuConfig(InferenceConfigBase):
    """GPU stream-set backend: TensorRT engines, or the ONNX model run by PyTorch."""

    retired_keys: ClassVar[dict[str, str]] = {
        key: f"moved to inference.advanced.{key}" for key in GpuAdvanced.model_fields
    }

    type: Literal["tensorrt", "torch"] = Field(
        description="tensorrt: TensorRT engine (built and cached); torch: the ONNX model "
        "converted with onnx2torch and run by PyTorch"
    )
    devices: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="CUDA device indices; one stream set each, batches go to the least "
        "loaded; with several processes each process runs on one of them (process i on "
        "devices[i % len(devices)]) with its NVDEC cameras",
    )
    precision: Literal["f32", "tf32", "f16"] = Field(
        "f32", description="f32 (full float32), tf32 (TF32 matmul/conv) or f16 (half)"
    )
    advanced: GpuAdvanced = Field(
        default_factory=GpuAdvanced,
        description="tuning knobs: streams, batching, TensorRT build, CUDA graphs",
    )
    stream_while_loading: bool = Field(
        True,
        description="start the HTTP server and the cameras before the model loads: the page "
        "and /metrics answer and the cameras stream within seconds, their frames counted as "
        "dropped 'starting' until inference runs; the decoding slows the model's load, so "
        "the first detection comes later (docs/gpu.md); false opens the model first. "
        "Applies at the next start",
    )

    @field_validator("devices")
    @classmethod
    def _distinct_devices(cls, v: list[int]) -> list[int]:
        if any(d < 0 for d in v):
            raise ValueError(f"device indices must be >= 0, got {v}")
        if len(set(v)) != len(v):
            raise ValueError(f"each device may appear once, got {v}")
        return v

    @model_validator(mode="after")
    def _tensorrt_only(self) -> GpuConfig:
        # the leading path lets the loader point at the key's own line
        if self.type == "torch":
            if self.advanced.workspace_mib is not None:
                raise ValueError(
                    "inference.advanced.workspace_mib: applies to type tensorrt only, not torch"
                )
        elif self.advanced.cuda_graphs is not None:
            raise ValueError(
                "inference.advanced.cuda_graphs: applies to type torch only, not tensorrt"
            )
        return self


if TYPE_CHECKING:  # type checkers see the common base; pydantic gets the real union
    InferenceConfig = InferenceConfigBase
else:
    InferenceConfig = BACKENDS.union()
