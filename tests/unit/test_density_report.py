"""The density section of the bench report names the contender of every search and how the
streams started; the search finds the largest passing camera count."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vidpipe.bench.density import fixed_counts, judge, search
from vidpipe.bench.report import _density


def _trial(n: int, passes: bool) -> dict:
    return {
        "cameras": n,
        "passes": passes,
        "fps": 5.0 * n,
        "p50_ms": 20.0,
        "p95_ms": 40.0 if passes else 250.0,
        "worst_inferred_share": 1.0,
        "cpu_percent": 2.0 * n,
        "others_cpu_percent": 10.0,
        "server_cpu_percent": 0.3,
    }


def test_each_search_is_reported_with_its_contender() -> None:
    doc = {
        "density": {
            "clip": "walk.mp4",
            "stream_fps": 10.0,
            "criteria": {
                "min_inferred_share": 0.99,
                "max_p95_ms": 200.0,
                "min_capture_share": 0.97,
                "slack_frames": 3,
            },
            "results": [
                {
                    "contender": "vidpipe",
                    "detect_fps": 5.0,
                    "max_cameras": 2,
                    "trials": [_trial(1, True), _trial(2, True), _trial(3, False)],
                },
                {
                    "contender": "vidpipe-motion",
                    "detect_fps": 5.0,
                    "max_cameras": 3,
                    "trials": [_trial(3, True), _trial(4, False)],
                },
            ],
        }
    }
    text = "\n".join(_density(doc))
    assert "| vidpipe | 5 | 2 | 10 | **largest passing** |" in text
    assert "| vidpipe-motion | 5 | 3 | 15 | **largest passing** |" in text
    assert "| vidpipe | 5 | 3 | 15 | fail |" in text
    assert "**2** at detect_fps 5 (vidpipe)" in text
    assert "**3** at detect_fps 5 (vidpipe-motion)" in text


def test_report_says_whether_the_streams_were_staggered() -> None:
    doc = {
        "density": {
            "clip": "walk.mp4",
            "stream_fps": 10.0,
            "start": "staggered",
            "criteria": {
                "min_inferred_share": 0.99,
                "max_p95_ms": 200.0,
                "min_capture_share": 0.97,
                "slack_frames": 3,
            },
            "results": [],
        }
    }
    assert "different point of the clip (staggered)" in "\n".join(_density(doc))
    doc["density"]["start"] = "same"
    assert "first frame (in step)" in "\n".join(_density(doc))


def test_search_finds_the_largest_passing_count_and_never_passes_the_maximum() -> None:
    tried: list[int] = []

    def trial(limit: int) -> Callable[[int], dict]:
        def run(n: int) -> dict:
            tried.append(n)
            return {"passes": n <= limit}

        return run

    assert search(trial(70), max_cameras=96) == 70
    assert max(tried) <= 96
    tried.clear()
    assert search(trial(1000), max_cameras=96) == 96  # 64 passed, then 96 (not 128)
    assert tried == [1, 2, 4, 8, 16, 32, 64, 96]
    tried.clear()
    assert search(trial(0), max_cameras=96) == 0
    assert tried == [1]


def test_fixed_counts_try_each_given_count_once_ascending_and_report_the_largest_pass() -> None:
    tried: list[int] = []

    def trial(n: int) -> dict:
        tried.append(n)
        return {"passes": n in (48, 56)}  # 64 fails; 72 fails too

    assert fixed_counts(trial, [72, 56, 48, 64, 56]) == 56
    assert tried == [48, 56, 64, 72]
    tried.clear()
    assert fixed_counts(lambda n: {"passes": False}, [8, 16]) == 0


def _counters(captured: float, inferred: float, errors: float = 0.0) -> dict:
    return {
        "captured": captured,
        "inferred": inferred,
        "decimated": captured / 2,
        "no_motion": 0.0,
        "dropped": captured / 2 - inferred,
        "errors": errors,
    }


def _result(after: dict[str, dict[str, float]], **info: Any) -> dict[str, Any]:
    """A trial's result over a 10 s window: every camera's counters from zero to ``after``,
    p95 60 ms; ``info`` added to its info."""
    before = {name: _counters(0, 0) for name in after}
    return {
        "spec": {"cameras": len(after)},
        "window_s": 10.0,
        "latency_ms": {"p50": 20.0, "p95": 60.0},
        "info": {"camera_counters": {"before": before, "after": after}, **info},
    }


def test_judge_passes_a_camera_read_in_real_time_and_names_the_reconnects_of_one_that_was_not() -> (
    None
):
    result = _result({"ok": _counters(100, 50), "flaky": _counters(40, 20, errors=2)})
    result["info"]["camera_counters"]["after"]["ok"]["lag_s"] = 0.7
    verdict = judge(result, stream_fps=10.0)
    assert verdict["worst_lag_s"] == 0.7
    assert not verdict["passes"]
    assert verdict["reasons"] == ["flaky captured 4.0 fps < stream 10 (2 reconnects)"]
    assert verdict["worst_capture_fps"] == 4.0
    result["info"]["camera_counters"]["after"]["flaky"] = _counters(100, 49)
    assert judge(result, stream_fps=10.0)["passes"]  # 49 + 3 slack of 50 due
    result["info"]["camera_counters"]["after"]["flaky"] = _counters(100, 40)
    assert judge(result, stream_fps=10.0)["reasons"] == ["flaky inferred 86.0% of due frames"]


def test_judge_holds_a_camera_detecting_on_its_sub_stream_to_the_sub_streams_rate() -> None:
    result = _result({"c": _counters(50, 25)}, detect_stream="sub")
    assert judge(result, stream_fps=10.0, sub_fps=5.0)["passes"]  # 5 fps read of a 5 fps sub
    result["info"]["detect_stream"] = "main"  # the same reads of the 10 fps main stream
    assert judge(result, stream_fps=10.0, sub_fps=5.0)["reasons"] == [
        "c captured 5.0 fps < stream 10"
    ]


def test_dual_stream_searches_name_the_sub_stream_the_repeat_and_the_cpu_per_camera() -> None:
    criteria = {"min_inferred_share": 0.99, "max_p95_ms": 200.0, "min_capture_share": 0.97,
                "slack_frames": 3}  # fmt: skip
    doc = {
        "machine": {"cores": 2},
        "density": {
            "clip": "walk-1080p.mp4",
            "sub_clip": "walk-432p.mp4",
            "stream_fps": 10.0,
            "criteria": criteria,
            "results": [
                {
                    "contender": "vidpipe-motion-dual",
                    "detect_fps": 5.0,
                    "max_cameras": 2,
                    "repeat": 1,
                    "trials": [_trial(2, True), _trial(4, False)],  # 4 % of the box at 2
                }
            ],
        },
    }
    text = "\n".join(_density(doc))
    assert "sub-stream, walk-432p.mp4, is served" in text
    assert "(vidpipe-motion-dual, repeat 1; 4.0 % of a core per camera)" in text
