"""Config of the model and the inference backends (the ``model:`` and ``inference:`` sections).

Each backend config class is declared in ``BACKENDS`` under its ``type`` (its factory is in
``vidpipe.infer``); the model types (``model.type``) are declared in ``MODEL_TYPES`` (their
decoders are in ``vidpipe.postprocess.decode``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from vidpipe.config.base import ConfigModel
from vidpipe.config.registry import BACKENDS, MODEL_TYPES

MODEL_TYPES.declare("yolox", "yolov8", "ssd")

if TYPE_CHECKING:
    ModelType = str
else:
    ModelType = MODEL_TYPES.literal()


class InferenceConfigBase(ConfigModel):
    """What every backend config has: its ``type``, the key of its registration."""

    type: str


class ModelConfig(ConfigModel):
    """The detection model."""

    path: Path = Field(description="ONNX or OpenVINO IR file of the detector")
    labels: Path | None = Field(None, description="class names, one per line, in class-id order")
    type: ModelType = Field(
        "yolox", description="output decoder: yolox, yolov8 (Ultralytics export) or ssd"
    )
    score_threshold: float = Field(0.3, ge=0, le=1, description="default minimum score")
    iou_threshold: float = Field(0.45, gt=0, le=1, description="NMS IoU threshold")


@BACKENDS.config("openvino")
class OpenVINOConfig(InferenceConfigBase):
    """OpenVINO inference backend (asynchronous request pool)."""

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
    num_requests: int | None = Field(
        None,
        ge=1,
        le=64,
        description="request pool size; default 2 x OPTIMAL_NUMBER_OF_INFER_REQUESTS (twice "
        "the device's concurrency; in flight, one per stream, one more once more cameras "
        "than streams have frames)",
    )
    num_streams: int | None = Field(None, ge=1, description="override NUM_STREAMS")
    cpu_pinning: bool | None = Field(
        None,
        description="pin each of OpenVINO's stream threads to one core (ENABLE_CPU_PINNING); "
        "unset: OpenVINO's default (on, on Linux)",
    )
    # Off by default: the conversion in the graph (u8 NHWC -> f32 NCHW by OpenVINO's
    # PrePostProcessor) cost OpenVINO's threads 0.6-0.8 ms a frame more than it saved the
    # scheduler on 2-core bf16 machines, where the channel split and widening in
    # ``hwc_to_chw_float`` take 0.07 ms; 7 of 8 paired points of ``vidpipe bench --contenders
    # naive,vidpipe,vidpipe-f32nchw`` were faster without it (docs/performance.md).
    preprocess_in_graph: bool = Field(
        False,
        description="u8 NHWC input, the layout and u8->f32 conversion done by OpenVINO in the "
        "graph; off: the scheduler writes f32 NCHW",
    )
    graph_rewrites: bool = Field(
        True,
        description="rewrite known slow patterns of the model exactly when it is loaded "
        "(YOLOX's Focus slices as one space-to-depth, its output transpose left to numpy: "
        "7-11 % less CPU per inference)",
    )
    decode_just_in_time: bool = Field(
        True,
        description="unpaced file cameras start decoding a frame only when a request will "
        "be free for it by the time it is ready (timed from the measured inference and "
        "decode times); off: as soon as their last frame was taken",
    )
    postprocess_on_scheduler: bool = Field(
        True,
        description="decode + NMS, tracking and the hand-off to the sinks run on the "
        "scheduler's thread between submissions, where the completion of a request wakes it "
        "anyway; off: on a thread of their own (one more wake-up per frame)",
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
        docs/performance.md)."""
        if self.hint != "auto":
            return self
        return self.model_copy(update={"hint": "latency" if cameras == 1 else "throughput"})


DEFAULT_ENGINE_CACHE = Path("~/.cache/vidpipe/engines")


@BACKENDS.config("tensorrt", "torch")
class GpuConfig(InferenceConfigBase):
    """GPU stream-set backend: TensorRT engines, or the ONNX model run by PyTorch."""

    type: Literal["tensorrt", "torch"] = Field(
        description="tensorrt: TensorRT engine (built and cached); torch: the ONNX model "
        "converted with onnx2torch and run by PyTorch"
    )
    devices: list[int] = Field(
        default_factory=lambda: [0],
        min_length=1,
        description="CUDA device indices; one stream set each, batches go to the least loaded",
    )
    streams: int = Field(2, ge=1, le=16, description="slots (CUDA streams) per GPU")
    max_batch: int = Field(
        8, ge=1, le=256, description="frames gathered across cameras into one batch"
    )
    batch_timeout_ms: float = Field(
        5.0, ge=0, le=1000, description="an incomplete batch is dispatched after this long"
    )
    precision: Literal["f32", "tf32", "f16"] = Field(
        "f32", description="f32 (full float32), tf32 (TF32 matmul/conv) or f16 (half)"
    )
    workspace_mib: int | None = Field(
        None, ge=16, description="TensorRT builder workspace limit, MiB (tensorrt only; 1024)"
    )
    cuda_graphs: bool | None = Field(
        None,
        description="torch only: capture the model as CUDA graphs per slot (default true); "
        "false runs it eagerly, whose Python holds the GIL for milliseconds per batch",
    )
    engine_cache_dir: Path | None = Field(
        None,
        description=f"where built engines are kept (tensorrt only; {DEFAULT_ENGINE_CACHE})",
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
        if self.type == "torch":
            for name in ("workspace_mib", "engine_cache_dir"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} applies to type tensorrt only, not torch")
        elif self.cuda_graphs is not None:
            raise ValueError("cuda_graphs applies to type torch only, not tensorrt")
        return self

    @property
    def workspace(self) -> int:
        return self.workspace_mib or 1024

    @property
    def cache_dir(self) -> Path:
        return (self.engine_cache_dir or DEFAULT_ENGINE_CACHE).expanduser()


if TYPE_CHECKING:  # type checkers see the common base; pydantic gets the real union
    InferenceConfig = InferenceConfigBase
else:
    InferenceConfig = BACKENDS.union()
