"""``vidpipe check`` through the real CLI: a bad config exits 2 with the path, never a traceback.

A representative subset of tests/unit/test_config_bad.py, run as ``python -m vidpipe.cli check
--config FILE`` subprocesses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.configtext import MINIMAL

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

BASE = MINIMAL
IDS = [
    "malformed",
    "dup-key",
    "unknown-key-camera",
    "unknown-key-snapshot",
    "wrong-type",
    "zero-rate",
    "negative-duration",
    "dup-camera-name",
    "unset-var",
    "path-camera-name",
    "alias-cycle",
    "alias-bomb",
    "deep-nesting",
    "empty",
    "non-utf8",
    "binary-junk",
]
BOMB = "a0: &a0 [x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


def check(config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vidpipe.cli", "check", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env={"PATH": "/usr/bin:/bin", **env},
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("model: [unclosed\n", "line 2, column 1: invalid YAML"),
        (BASE + "    url: /dup.mp4\n", "cameras[0].url (line 6): duplicate key 'url'"),
        (BASE + "    detect_fsp: 3\n", "cameras[0].detect_fsp (line 6): unknown key (did you"),
        (BASE + "sinks:\n  - type: snapshot\n    dir: d\n    keep_lst: 3\n", "sinks[0].keep_lst"),
        (BASE + "http:\n  port: eighty\n", "http.port (line 7)"),
        (BASE + "    detect_fps: 0\n", "cameras[0].detect_fps (line 6)"),
        (BASE + "capture:\n  stall_timeout_s: -1\n", "capture.stall_timeout_s (line 7)"),
        (BASE + "  - name: front\n    url: /b.mp4\n", "cameras[1].name (line 6): duplicate"),
        (BASE.replace("10.0.0.2", "${UNSET_VAR}"), "environment variable UNSET_VAR is not set"),
        (BASE.replace("front", '"../etc"'), "cameras[0].name (line 4)"),
        ("a: &a\n  b: *a\n", "an alias refers to itself"),
        (BOMB, "more than"),
        ("[" * 20000, "nested deeper than"),
        ("", "the file is empty"),
        (b"model:\n  path: caf\xe9\n", "line 2: not UTF-8"),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), "not UTF-8"),
    ],
    ids=IDS,
)
def test_check_exits_2_with_the_path(tmp_path: Path, content: str | bytes, expected: str) -> None:
    config = tmp_path / "bad.yaml"
    if isinstance(content, bytes):
        config.write_bytes(content)
    else:
        config.write_text(content)
    proc = check(config)
    assert proc.returncode == 2, proc.stderr
    assert expected in proc.stderr
    assert str(config) in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_python_tag_is_refused_and_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    config = tmp_path / "bad.yaml"
    config.write_text(BASE + f"x: !!python/object/apply:os.system ['touch {marker}']\n")
    proc = check(config)
    assert proc.returncode == 2
    assert "x (line 6): YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'" in proc.stderr
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_config_exits_2(tmp_path: Path, kind: str) -> None:
    proc = check(tmp_path / "nope.yaml" if kind == "missing" else tmp_path)
    assert proc.returncode == 2
    assert "cannot read config" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_valid_config_exits_0(tmp_path: Path, assets_dir: Path) -> None:
    """The same command accepts a good config: exit 2 above is about the mistakes."""
    models = assets_dir / "models"
    config = tmp_path / "good.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {"path": str(models / "yolox_nano.onnx"), "labels": "${LABELS}"},
                "cameras": [{"name": "front", "url": "rtsp://10.0.0.2/stream"}],
            }
        )
    )
    proc = check(config, LABELS=str(models / "coco80.txt"))
    assert proc.returncode == 0, proc.stderr
    assert "OK (1 camera(s)" in proc.stdout


def test_unknown_class_in_a_sink_filter_exits_2(tmp_path: Path, assets_dir: Path) -> None:
    """A webhook's ``classes`` are matched by name per frame: a misspelt one would silently
    filter out every detection, so ``check`` (and ``run``) resolve it against the labels."""
    models = assets_dir / "models"
    config = tmp_path / "hook.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "model": {
                    "path": str(models / "yolox_nano.onnx"),
                    "labels": str(models / "coco80.txt"),
                },
                "cameras": [{"name": "front", "url": "rtsp://10.0.0.2/stream"}],
                "sinks": [
                    {"type": "jsonl", "path": str(tmp_path / "d.jsonl")},
                    {"type": "webhook", "url": "http://127.0.0.1:9/x", "classes": ["persn", "car"]},
                ],
            }
        )
    )
    proc = check(config)
    assert proc.returncode == 2, proc.stderr
    assert "sinks[1].classes[0]: unknown class 'persn' (did you mean 'person'?)" in proc.stderr
    assert "classes[1]" not in proc.stderr
