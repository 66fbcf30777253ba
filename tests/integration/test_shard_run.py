"""`vidpipe run` sharded: two processes over one config, each runs only its own cameras."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.conftest import free_port, scrape, wait_for
from tests.integration.test_daemon_e2e import sample
from tests.precision import with_precision
from vidpipe.shard import owner

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def pick_cameras() -> dict[str, int]:
    """Two camera names per shard of 2 (found, not hard-coded, from the real hash)."""
    chosen: dict[str, int] = {}
    for i in range(100):
        name = f"cam-{i}"
        shard = owner(name, 2)
        if sum(1 for s in chosen.values() if s == shard) < 2:
            chosen[name] = shard
        if len(chosen) == 4:
            return chosen
    raise AssertionError("the hash put 98 names in one shard")


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "vidpipe.cli", "run", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
        )


def captured(port: int, camera: str) -> float | None:
    try:
        return sample(scrape(port), "vidpipe_frames_captured_total", camera=camera)
    except OSError:
        return None


def test_two_shards_split_the_cameras(assets_dir: Path, tmp_path: Path) -> None:
    cameras = pick_cameras()
    clip = str(assets_dir / "videos" / "bottle-detection.mp4")
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            with_precision(
                {
                    "model": {
                        "path": str(assets_dir / "models" / "yolox_nano.onnx"),
                        "labels": str(assets_dir / "models" / "coco80.txt"),
                    },
                    "http": {"port": 1},  # overridden per process by --http-port
                    "cameras": [
                        {"name": n, "url": clip, "loop": True, "realtime": True, "detect_fps": 2}
                        for n in cameras
                    ],
                }
            )
        )
    )
    ports = [free_port(), free_port()]
    procs = [
        # shard 0 from the command line
        start(
            ["-c", str(config), "--shard", "0/2", "--http-port", str(ports[0])],
            {},
            tmp_path / "0.log",
        ),
        # shard 1 as a StatefulSet pod: count from the environment, index from the pod name
        start(
            ["-c", str(config), "--http-port", str(ports[1])],
            {"VIDPIPE_SHARD_COUNT": "2", "HOSTNAME": "vidpipe-1"},
            tmp_path / "1.log",
        ),
    ]
    try:
        for shard, port in enumerate(ports):
            mine = [c for c, s in cameras.items() if s == shard]
            wait_for(
                lambda port=port, mine=mine: all((captured(port, c) or 0) > 0 for c in mine),
                120,
                f"shard {shard}'s cameras {mine} to capture",
            )
        for shard, port in enumerate(ports):
            text = scrape(port)
            for cam, owner_shard in cameras.items():
                present = sample(text, "vidpipe_frames_captured_total", camera=cam) is not None
                assert present == (owner_shard == shard), (shard, cam)
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(60) for p in procs]
    logs = [(tmp_path / f"{i}.log").read_text() for i in range(2)]
    assert codes == [0, 0], logs
    assert "started 2 camera(s) (shard 0/2, of 4 configured)" in logs[0]
    assert "started 2 camera(s) (shard 1/2, of 4 configured)" in logs[1]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--shard", "2/2"], {}, "--shard: shard 2/2 out of range"),
        (["--shard", "half"], {}, "--shard: expected INDEX/COUNT"),
        ([], {"VIDPIPE_SHARD_COUNT": "3", "HOSTNAME": "laptop"}, "VIDPIPE_SHARD_INDEX"),
        (["--http-port", "99999"], {}, "--http-port: 99999 is not a TCP port"),
    ],
)
def test_bad_shard_or_port_is_a_config_error(
    assets_dir: Path, tmp_path: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump({"model": {"path": str(assets_dir / "models" / "yolox_nano.onnx")}})
    )
    res = subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "run", "-c", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
        check=False,
    )
    assert res.returncode == 2, res.stderr
    assert message in res.stderr
