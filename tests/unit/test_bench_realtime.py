"""``vidpipe bench --realtime``: every contender's cameras read their clip at its frame rate."""

from __future__ import annotations

from pathlib import Path

import cv2
import pytest

from benchmarks.capture import LoopingReader
from vidpipe.bench.common import PointSpec
from vidpipe.bench.vidpipe_run import VidpipeRun, bench_config
from vidpipe.capture.pacing import Pacer
from vidpipe.cli import build_parser


class FakeClock:
    """Time that moves only when the reader sleeps, or when the test moves it."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clip(assets_dir: Path) -> Path:
    return assets_dir / "videos" / "car-detection.mp4"


def test_realtime_reader_delivers_frames_at_the_clip_rate(clip: Path) -> None:
    clock = FakeClock()
    reader = LoopingReader(str(clip), realtime=True, clock=clock, sleep=clock.sleep)
    fps = cv2.VideoCapture(str(clip)).get(cv2.CAP_PROP_FPS)
    try:
        for _ in range(6):
            reader.read()
            clock.now += 0.01  # the consumer's work between reads
    finally:
        reader.close()
    # frame k is due k / fps after the first: five waits, each the period less the work
    assert len(clock.sleeps) == 5
    assert clock.sleeps == pytest.approx([1.0 / fps - 0.01] * 5)


def test_unpaced_reader_never_waits(clip: Path) -> None:
    clock = FakeClock()
    reader = LoopingReader(str(clip), clock=clock, sleep=clock.sleep)
    try:
        for _ in range(6):
            reader.read()
    finally:
        reader.close()
    assert clock.sleeps == []


def test_aligned_pacers_make_frames_due_at_the_same_instants() -> None:
    """Cameras opened at different moments deliver in step when aligned, out of step when
    free (the daemon's default)."""

    def due_times(start_s: float, aligned: bool) -> list[float]:
        pacer, now, out = Pacer(aligned=aligned), start_s, []
        for _ in range(4):
            now += pacer.delay_s(now, 12.5)
            out.append(round(now, 6))
        return out

    assert due_times(100.013, True) == due_times(100.051, True) == [100.08, 100.16, 100.24, 100.32]
    assert due_times(100.013, False) != due_times(100.051, False)


def test_a_frame_read_after_undecoded_ones_is_due_at_its_own_place_in_the_file() -> None:
    """The frames a source left undecoded (unused, or shed with their group) keep their
    places in the schedule: the frame after them waits for its own time, and so does the
    next one, so a realtime file plays at its rate however many frames are not decoded."""
    pacer, now = Pacer(), 100.0
    assert pacer.wait_s(now, 10.0) == 0.0  # frame 0, due at once
    now += pacer.wait_s(now, 10.0)  # frame 1 at 100.1
    assert now == 100.1
    assert pacer.wait_s(now, 10.0) == 0.0
    # what was read for frame 1 came after 4 undecoded frames: it is frame 5, due at 100.5
    assert abs(pacer.advance_s(4, now, 10.0) - 0.4) < 1e-9
    now = 100.5
    assert abs(pacer.wait_s(now, 10.0) - 0.1) < 1e-9  # frame 6 at 100.6
    assert pacer.advance_s(0, 100.7, 10.0) == 0.0  # nothing undecoded, already due
    assert Pacer().advance_s(3, now, None) == 0.0  # no rate known: no pacing


def test_realtime_point_paces_vidpipe_file_cameras_only(tmp_path: Path) -> None:
    spec = PointSpec("vidpipe", "/clip.mp4", "clip.mp4", 3, 1, 1, "f32", "/m.onnx",
                     "/labels.txt", realtime=True)  # fmt: skip
    paced = bench_config(spec, tmp_path / "a.jsonl")
    assert all(c.realtime for c in paced.cameras)
    unpaced = PointSpec(**{**spec.to_dict(), "realtime": False})
    plain = bench_config(unpaced, tmp_path / "b.jsonl")
    assert not any(c.realtime for c in plain.cameras)
    stream = PointSpec(**{**spec.to_dict(), "clip": "rtsp://127.0.0.1:8554/cam{i}"})
    assert not any(c.realtime for c in bench_config(stream, tmp_path / "c.jsonl").cameras)


class _Started(Exception):
    """Raised by the stand-in for ``Daemon.start``: the test needs nothing after it."""


@pytest.mark.parametrize(("realtime", "phase"), [(True, "aligned"), (False, "free")])
def test_realtime_point_starts_the_cameras_in_step(
    realtime: bool, phase: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Paced cameras are in step, on the same clock grid as the other designs' readers; the
    daemon's own default is free."""
    spec = PointSpec("vidpipe", "/clip.mp4", "clip.mp4", 2, 1, 1, "f32", "/m.onnx",
                     "/labels.txt", realtime=realtime)  # fmt: skip
    run = VidpipeRun(spec)
    seen: list[str] = []

    def start() -> None:
        seen.append(getattr(run.daemon.pipeline, "capture_phase", "free"))
        raise _Started

    monkeypatch.setattr(run.daemon, "start", start)
    try:
        with pytest.raises(_Started):
            run.start()
    finally:
        run.close()
    assert seen == [phase]


def test_realtime_flag_reaches_the_options() -> None:
    from vidpipe.bench.harness import SUITES, with_overrides

    args = build_parser().parse_args(["bench", "--realtime", "--cameras", "4"])
    assert args.realtime is True
    options = with_overrides(SUITES["full"], realtime=args.realtime)
    assert options.realtime is True
    plain = build_parser().parse_args(["bench"])
    assert with_overrides(SUITES["full"], realtime=plain.realtime).realtime is False


def test_fps_targets_apply_to_unpaced_runs_only(repo_root: Path) -> None:
    """Paced cameras give every contender the same frames: an fps ratio says nothing there."""
    import json

    from benchmarks.study import targets
    from vidpipe.bench.report import markdown

    results = repo_root / "benchmarks" / "results"
    unpaced = json.loads((results / "naive-suite-2cpu-xeon-rewrites-2req.json").read_text())
    assert any(t["target"] == "vidpipe / naive" for t in targets(unpaced))
    paced = json.loads((results / "naive-suite-2cpu-xeon-realtime.json").read_text())
    assert paced["options"]["realtime"] is True
    assert targets(paced) == []
    assert "No target applies to this run." in markdown(paced)


def test_a_stored_run_with_a_variant_this_registry_lacks_still_renders(
    repo_root: Path, tmp_path: Path
) -> None:
    """A result file outlives the registry that made it: its plot labels an unknown contender
    by its name (a missing label once lost the report of a finished run)."""
    import json

    from vidpipe.bench.report import write_outputs

    results = repo_root / "benchmarks" / "results"
    doc = json.loads((results / "naive-1cam-2cpu-xeon-hint.json").read_text())
    for row in doc["summary"]:
        if row["contender"] == "vidpipe-throughput":
            row["contender"] = "vidpipe-gone"
    paths = write_outputs(doc, tmp_path / "run.json", tmp_path)
    assert "vidpipe-gone" in paths["markdown"].read_text()
    assert paths["png"].stat().st_size > 0
