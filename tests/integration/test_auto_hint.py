"""``hint: auto`` on a real daemon: the latency hint while it runs one camera, the throughput
hint once a reload (SIGHUP) gives it two, with the pool rebuilt and no frame of the first
camera lost across it."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import free_port, scrape, wait_for
from tests.integration.test_daemon_e2e import read_jsonl, sample
from tests.integration.test_live_reload import reload_base, write_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _hint(port: int) -> tuple[str | None, float | None]:
    """The hint in ``vidpipe_inference_info`` and the request pool's size."""
    text = scrape(port)
    hints = [
        line.split('hint="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("vidpipe_inference_info{")
    ]
    return (hints[0] if len(hints) == 1 else None), sample(text, "vidpipe_pool_size")


def test_one_camera_runs_the_latency_hint_and_a_second_one_switches_to_throughput(
    assets_dir: Path, tmp_path: Path, run_daemon: Any
) -> None:
    port = free_port()
    out = tmp_path / "results.jsonl"
    clip = str(assets_dir / "videos" / "car-detection.mp4")
    base = reload_base(assets_dir, port, out)
    # a file read with backpressure: every frame it decodes is inferred, so its sequence in
    # the sink has no gap, across the pool rebuild too
    one = {"name": "one", "url": clip, "loop": True}
    daemon = run_daemon({**base, "cameras": [one]})

    def frames(camera: str) -> list[int]:
        return [r["frame"] for r in read_jsonl(out) if r["camera"] == camera]

    wait_for(lambda: len(frames("one")) >= 10, 90, "results from the one camera")
    hint, pool = _hint(port)
    assert hint == "latency", scrape(port)
    assert pool is not None and pool >= 1
    assert "hint latency" in daemon.log()

    write_config(daemon.config_path, {**base, "cameras": [one, {**one, "name": "two"}]})
    daemon.proc.send_signal(signal.SIGHUP)
    # "reload applied" is logged after the pool was rebuilt and the new camera started
    wait_for(lambda: "reload applied" in daemon.log(), 90, "the reload")
    assert "inference pool rebuilt" in daemon.log()
    assert "start two; rebuild the inference pool; 1 camera(s) untouched" in daemon.log()
    wait_for(lambda: len(frames("two")) >= 10, 90, "results from the second camera")
    hint, bigger = _hint(port)
    assert hint == "throughput", scrape(port)
    assert bigger is not None and bigger > pool  # 2 x the streams, against 1 x

    code = daemon.terminate(30)
    assert code == 0, daemon.log()[-3000:]
    seen = frames("one")
    # requests complete out of order across the two pools: compare as a set
    assert sorted(seen) == list(range(len(seen))), "'one' lost a frame across the rebuild"
