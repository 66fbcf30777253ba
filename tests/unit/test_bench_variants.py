"""The camera variants of the benchmark: config merge and paired ratios to plain vidpipe."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.variants import markdown, variant_ratios, variant_settings
from vidpipe.bench.common import PointSpec, all_contenders, default_contenders
from vidpipe.bench.vidpipe_run import bench_config


def config_of(spec: PointSpec, jsonl: Path) -> Any:
    """The daemon config of ``spec``: vidpipe's, or its variant's."""
    if spec.contender == "vidpipe":
        return bench_config(spec, jsonl)
    return bench_config(spec, jsonl, *variant_settings(spec))


def point(contender: str, repeat: int, fps: float, cpu_ms: float) -> dict:
    spec = {"contender": contender, "clip_name": "belt.mp4", "cameras": 4, "repeat": repeat}
    # postprocessing 1 ms per frame in vidpipe, 3 ms with tracking, on the scheduler's thread
    # (1.5 ms of its own work in both) and the postprocessing thread (0.5 ms in both)
    post_ms = 2.5 if contender == "vidpipe-track" else 0.5
    threads = {
        "vidpipe-scheduler": (1.5 + post_ms) * fps / 10.0,
        "vidpipe-postprocess": 0.5 * fps / 10.0,
        "capture-camN-reader-N": 50.0,
        "native": 180.0,
    }
    return {
        "spec": spec,
        "fps": fps,
        "cpu_ms_per_frame": cpu_ms,
        "info": {"thread_cpu_percent": threads},
    }


def test_tracking_variant_is_opt_in_and_configures_every_camera(tmp_path) -> None:
    assert "vidpipe-track" in all_contenders() and "vidpipe-track" not in default_contenders()
    spec = PointSpec("vidpipe-track", "/clip.mp4", "clip.mp4", 3, 1, 1, "f32", "/m.onnx",
                     "/labels.txt")  # fmt: skip
    cfg = config_of(spec, tmp_path / "out.jsonl")
    assert all(c.tracks and len(c.zones) == 2 and len(c.lines) == 2 for c in cfg.cameras)
    plain = config_of(PointSpec(**{**spec.to_dict(), "contender": "vidpipe"}), tmp_path / "x")
    assert not any(c.tracks for c in plain.cameras)


def test_ratios_pair_the_repeats_and_judge_the_budget() -> None:
    doc = {
        "summary": [
            {"contender": "vidpipe", "clip": "belt.mp4", "cameras": 4},
            {"contender": "vidpipe-track", "clip": "belt.mp4", "cameras": 4},
        ],
        "points": [
            point("vidpipe", 0, 30.0, 60.0),
            point("vidpipe-track", 0, 29.0, 62.0),
            point("vidpipe", 1, 20.0, 60.0),  # a disturbed repeat: both sides slower
            point("vidpipe-track", 1, 19.5, 61.0),
            point("vidpipe-track", 2, 10.0, 90.0),  # no vidpipe point to pair with: ignored
        ],
    }
    (row,) = variant_ratios(doc)
    assert row["ratio_repeats"] == [pytest.approx(0.967, abs=1e-3), 0.975]
    assert row["ratio"] == pytest.approx((29 / 30 + 0.975) / 2)
    assert row["cpu_per_frame_ratio"] == pytest.approx((62 / 60 + 61 / 60) / 2)
    assert row["holds"] is True and row["needed"] == 0.95
    assert (row["postprocess_ms"], row["variant_postprocess_ms"]) == pytest.approx((2.5, 4.5))
    assert row["cpu_bound_ratio"] == pytest.approx(1 / (1 + 2.0 / 60.0))
    doc["points"][1]["fps"] = 25.0
    doc["points"][3]["fps"] = 18.0
    assert variant_ratios(doc)[0]["holds"] is False
    text = "\n".join(markdown(doc))
    assert "vidpipe-track | belt.mp4 | 4 |" in text and "**missed**" in text


def test_int8_contenders_run_the_int8_model_beside_the_others(tmp_path) -> None:
    base = PointSpec("vidpipe", "/clip.mp4", "clip.mp4", 2, 1, 1, "f32", "/m.onnx",
                     "/labels.txt", extra={"int8_model": "/int8.xml"})  # fmt: skip
    plain = config_of(base, tmp_path / "a.jsonl")
    int8 = config_of(PointSpec(**{**base.to_dict(), "contender": "vidpipe-int8"}), tmp_path / "b")
    gated = config_of(
        PointSpec(**{**base.to_dict(), "contender": "vidpipe-motion-int8"}), tmp_path / "c"
    )
    assert str(plain.model.path) == "/m.onnx"
    assert str(int8.model.path) == "/int8.xml" and str(gated.model.path) == "/int8.xml"
    assert not any((c.motion or int8.capture.motion).enabled for c in int8.cameras)
    assert all((c.motion or gated.capture.motion).enabled for c in gated.cameras)
    with pytest.raises(ValueError, match="--int8-model"):
        config_of(
            PointSpec(**{**base.to_dict(), "contender": "vidpipe-int8", "extra": {}}),
            tmp_path / "d",
        )


def test_bench_refuses_int8_contenders_without_an_int8_model(capsys) -> None:
    from benchmarks.__main__ import main

    assert main(["--contenders", "vidpipe,vidpipe-motion-int8", "--cameras", "1"]) == 2
    assert "vidpipe-motion-int8 run the model of --int8-model" in capsys.readouterr().err


def test_inference_variants_merge_into_the_inference_section(tmp_path) -> None:
    """A variant changes one setting; the point's own inference settings stay."""
    base = PointSpec("vidpipe-nopin", "/clip.mp4", "clip.mp4", 2, 1, 1, "f32", "/m.onnx",
                     "/labels.txt")  # fmt: skip
    nopin = config_of(base, tmp_path / "a.jsonl").inference
    assert nopin.advanced.cpu_pinning is False and nopin.precision == "f32"
    gated = config_of(PointSpec(**{**base.to_dict(), "contender": "vidpipe-motion-nopin"}),
                      tmp_path / "b")  # fmt: skip
    assert gated.inference.advanced.cpu_pinning is False
    assert all((c.motion or gated.capture.motion).enabled for c in gated.cameras)
    two = config_of(PointSpec(**{**base.to_dict(), "contender": "vidpipe-2req"}), tmp_path / "c")
    assert two.inference.advanced.num_requests == 2
    assert config_of(PointSpec(**{**base.to_dict(), "contender": "vidpipe"}),
                     tmp_path / "d").inference.advanced.cpu_pinning is None  # fmt: skip


def test_dual_stream_variant_detects_on_the_sub_stream_and_records_the_main() -> None:
    main, sub = "rtsp://127.0.0.1:9/cam{i}", "rtsp://127.0.0.1:9/sub-cam{i}"
    spec = PointSpec("vidpipe-motion-dual", main, "walk-1080p.mp4", 2, 1, 1, "f32", "/m.onnx",
                     "/labels.txt", extra={"sub_url": sub})  # fmt: skip
    cfg = variant_run_config(spec)
    for i, cam in enumerate(cfg.cameras):
        assert cam.url == f"rtsp://127.0.0.1:9/sub-cam{i}"  # the detect input's
        assert cam.record_input is not None
        assert cam.record_input.url == f"rtsp://127.0.0.1:9/cam{i}"
        assert cam.motion.enabled and cam.clips.enabled
    one = variant_run_config(PointSpec(**{**spec.to_dict(), "contender": "vidpipe-motion-clips"}))
    assert [c.url for c in one.cameras] == ["rtsp://127.0.0.1:9/cam0", "rtsp://127.0.0.1:9/cam1"]
    assert all(c.record_input is None for c in one.cameras)
    with pytest.raises(ValueError, match="--density-sub-clip"):
        variant_run_config(PointSpec(**{**spec.to_dict(), "extra": {}}))


def variant_run_config(spec: PointSpec) -> Any:
    """The config ``variant_run`` builds for ``spec`` (its daemon is never started)."""
    from benchmarks.variants import VARIANTS

    variant = VARIANTS[spec.contender]
    overrides, camera = variant_settings(spec)
    return bench_config(spec, Path("/nonexistent/out.jsonl"), overrides, camera,
                        variant.odd_camera, variant.dual_stream)  # fmt: skip
