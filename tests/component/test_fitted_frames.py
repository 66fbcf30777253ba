"""Frames for a model are converted at the model's size only; the whole frame waits for a sink.

Real clips decoded by the real ``PyAVSource`` (the assets' clips, and clips PyAV encodes here),
the real preprocessing buffers, and the real model through OpenVINO for the agreement check:
detections from fitted frames are held to the rule ``vidpipe optimize`` holds INT8 to, against
the whole-frame path at the same precision (whatever this CPU runs), never to fixed outputs.
"""

from __future__ import annotations

import threading
from pathlib import Path

import cv2
import numpy as np
import pytest

from tests.component.capture_rig import FAST, Rig
from tests.component.test_lazy_frames import STILL_FRAMES, write_clip
from tests.precision import forced_precision
from vidpipe.capture.pyav_source import PyAVPicture, PyAVSource, WholeFrame
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.optimize.agreement import Agreement
from vidpipe.optimize.frames import Sample
from vidpipe.optimize.quantize import Detector
from vidpipe.optimize.speed import compile_model
from vidpipe.postprocess.decode import DECODERS, DecodeParams
from vidpipe.preprocess.buffers import InputBuffer, input_buffer
from vidpipe.preprocess.letterbox import PAD_VALUE, letterbox
from vidpipe.types import CameraState, Detections, FittedImage, Image, TensorSpec

FIT = (416, 416)
NHWC = TensorSpec("images", (1, 416, 416, 3), "u8", "NHWC")


def _pictures(clip: Path, every: int, limit: int) -> list[tuple[np.ndarray, FittedImage]]:
    """(whole frame converted by the reader, fitted frame) of every ``every``-th frame."""
    source = PyAVSource(CameraConfig(name="clip", url=str(clip)), CaptureConfig())
    source.open()
    out: list[tuple[np.ndarray, FittedImage]] = []
    try:
        index = 0
        while len(out) < limit and (picture := source.read()) is not None:
            if index % every == 0:
                fitted = picture.image_for(FIT)
                assert isinstance(fitted, FittedImage)
                out.append((fitted.to_host(), fitted))
            index += 1
    finally:
        source.close()
    assert out, f"no frame decoded from {clip}"
    return out


@pytest.mark.parametrize("stem", ["car-detection", "one-by-one-person-detection"])
def test_the_fitted_picture_is_the_letterbox_region_of_the_whole_frame(
    videos: Path, stem: str
) -> None:
    source = PyAVSource(CameraConfig(name="c", url=str(videos / f"{stem}.mp4")), CaptureConfig())
    source.open()
    try:
        picture = source.read()
        assert isinstance(picture, PyAVPicture)
        image = picture.image_for(FIT)
        assert isinstance(image, FittedImage)
        assert (image.width, image.height, image.fit) == (768, 432, FIT)
        assert isinstance(image.to_host, WholeFrame) and not image.to_host.converted
        assert (source.fittings, source.conversions) == (1, 0)
        boxed, lb = letterbox(image.to_host(), *FIT)  # the whole-frame path
        assert image.to_host.converted and image.to_host() is image.to_host()
        assert image.fitted.shape == (233, 416, 3)  # 768x432 * 416/768, truncated as YOLOX does
        diff = np.abs(image.fitted.astype(int) - boxed[:233].astype(int))
        # another filter, the same picture: a few levels on edges, nothing systematic
        assert np.mean(diff) < 3.0 and abs(np.mean(image.fitted) - np.mean(boxed[:233])) < 1.0
        assert (lb.src_w, lb.src_h) == (768, 432)
        whole = PyAVSource(CameraConfig(name="c", url=str(videos / f"{stem}.mp4")), CaptureConfig())
        whole.open()
        try:
            first = whole.read()
            assert first is not None
            # a sink's conversion (its own scaler, on its thread) is the reader's conversion
            assert np.array_equal(first.image(), image.to_host())
        finally:
            whole.close()
    finally:
        source.close()


def test_a_sink_converts_the_whole_frame_once_whichever_thread_asks(videos: Path) -> None:
    (_, fitted), *_ = _pictures(videos / "car-detection.mp4", 1, 1)
    fresh = _pictures(videos / "car-detection.mp4", 1, 1)[0][1]
    got: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: got.append(fresh.to_host())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 4 and all(g is got[0] for g in got), "one conversion, one array"
    assert np.array_equal(got[0], fitted.to_host())


def test_fill_copies_a_fitted_picture_and_maps_boxes_to_the_whole_frame(videos: Path) -> None:
    whole, fitted = _pictures(videos / "car-detection.mp4", 1, 1)[0]
    buf = input_buffer(NHWC, 0, np.zeros(NHWC.shape, np.uint8))
    lb = buf.fill(fitted)
    assert (lb.src_w, lb.src_h) == (768, 432)
    assert lb.scale == pytest.approx(416 / 768)
    assert np.array_equal(buf.hwc[:233], fitted.fitted)
    assert np.all(buf.hwc[233:] == PAD_VALUE), "the pad below the picture"
    # a model of another size: the whole frame is letterboxed, as before fitting existed
    other = TensorSpec("images", (1, 320, 320, 3), "u8", "NHWC")
    small = input_buffer(other, 1)
    lb_other = small.fill(fitted)
    expected, lb_expected = letterbox(whole, 320, 320)
    assert lb_other == lb_expected
    assert np.array_equal(small.hwc, expected)


def test_a_fitted_picture_of_the_wrong_size_is_refused(videos: Path) -> None:
    _, fitted = _pictures(videos / "car-detection.mp4", 1, 1)[0]
    bad = FittedImage(fitted.fitted[:100], FIT, fitted.width, fitted.height, fitted.to_host)
    with pytest.raises(ValueError, match="is not"):
        input_buffer(NHWC, 0).fill(bad)


def _detections(buf: InputBuffer, image: Image, detect: Detector) -> Detections:
    lb = buf.fill(image)
    return detect(Sample("", buf.tensor.copy(), lb))


@pytest.mark.timeout(300)
def test_detections_from_fitted_frames_agree_with_whole_frames(
    videos: Path, assets_dir: Path, bench_clip_1080p: Path
) -> None:
    """The rule ``vidpipe optimize`` gates INT8 with (recall and precision of strong
    detections, both ways), at the precision this CPU runs both: bf16 agrees with f32 at
    1.000 / 0.998 by that rule, and fitting measured 0.999 / 0.999 at f32 on all four clips."""
    import openvino as ov

    core = ov.Core()
    compiled = compile_model(
        core, core.read_model(str(assets_dir / "models" / "yolox_nano.onnx")), forced_precision()
    )
    detect = Detector(compiled, DECODERS["yolox"], DecodeParams(*FIT, 0.25), 0.45)
    labels = (assets_dir / "models" / "coco80.txt").read_text().splitlines()
    f32 = TensorSpec("images", (1, 3, 416, 416), "f32")
    buf = input_buffer(f32, 0)
    result = Agreement()
    for clip in (videos / "car-detection.mp4", videos / "one-by-one-person-detection.mp4"):
        for whole, fitted in _pictures(clip, 4, 80):
            ref = _detections(buf, whole, detect)
            result.add(ref, _detections(buf, fitted, detect), labels)
    for whole, fitted in _pictures(bench_clip_1080p, 3, 60):
        assert (fitted.width, fitted.height) == (1920, 1080)
        ref = _detections(buf, whole, detect)
        result.add(ref, _detections(buf, fitted, detect), labels)
    print(f"\nfitted against whole frames: {result.as_dict()}")
    assert result.ref_strong >= 60, "the clips must have detections to compare"
    assert result.passes(0.97), result.as_dict()


@pytest.fixture(scope="module")
def bench_clip_1080p(videos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The car clip scaled to 1080p with PyAV (60 frames), as ``vidpipe bench`` makes it."""
    import av

    out = tmp_path_factory.mktemp("fit") / "car-1080p.mp4"
    with av.open(str(videos / "car-detection.mp4")) as src, av.open(str(out), "w") as dst:
        stream = dst.add_stream("mpeg4", rate=12)
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        stream.codec_context.qmax = 4
        for i, frame in enumerate(src.decode(video=0)):
            if i == 180:
                break
            big = cv2.resize(frame.to_ndarray(format="bgr24"), (1920, 1080))
            dst.mux(stream.encode(av.VideoFrame.from_ndarray(big, format="bgr24")))
        dst.mux(stream.encode(None))
    return out


@pytest.mark.timeout(30)
@pytest.mark.parametrize("at_model_size", [True, False])
def test_a_worker_feeding_a_model_converts_at_its_size_unless_told_not_to(
    rig: Rig, sources: list[PyAVSource], tmp_path: Path, at_model_size: bool
) -> None:
    clip = write_clip(tmp_path / "clip.mp4", "mpeg4", "yuv420p")
    rig.hub.fit = FIT
    capture = FAST.model_copy(update={"convert_at_model_size": at_model_size})
    worker, states = rig.worker("cam", str(clip), "block", capture=capture)
    worker.start()
    states.wait_for(CameraState.STOPPED, 20)
    frames = rig.collector.wait_count("cam", 2 * STILL_FRAMES, 5)
    assert all((f.width, f.height) == (320, 240) for f in frames)
    counts = (sources[0].fittings, sources[0].conversions)
    if at_model_size:
        assert counts == (len(frames), 0)
        shapes = {f.image.fitted.shape for f in frames if isinstance(f.image, FittedImage)}
        assert shapes == {(312, 416, 3)}, "every frame fitted: 320x240 * 1.3 into 416x416"
    else:
        assert counts == (0, len(frames))
        whole = [f.image.shape for f in frames if isinstance(f.image, np.ndarray)]
        assert whole == [(240, 320, 3)] * len(frames)


def test_a_picture_converted_whole_already_is_handed_on_as_is(tmp_path: Path) -> None:
    """A motion gate without a luma plane converts the whole frame: no second conversion."""
    clip = write_clip(tmp_path / "clip.mp4", "mpeg4", "yuv420p")
    source = PyAVSource(CameraConfig(name="c", url=str(clip)), CaptureConfig())
    source.open()
    try:
        picture = source.read()
        assert picture is not None
        whole = picture.image()
        assert picture.image_for(FIT) is whole
        assert (source.conversions, source.fittings) == (1, 0)
    finally:
        source.close()
