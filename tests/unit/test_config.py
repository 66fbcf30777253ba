"""Config loading: every bad input is a ConfigError that names the YAML path (and line)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.configtext import MINIMAL
from vidpipe.config import ConfigError, load_config, parse_config

BASE = MINIMAL


def parse(text: str, env: dict[str, str] | None = None):
    return parse_config(textwrap.dedent(text), "test.yaml", env=env or {})


def test_minimal_config_has_defaults() -> None:
    cfg = parse(BASE)
    assert cfg.inference.type == "openvino"
    assert cfg.inference.hint == "auto"
    assert cfg.http.host == "127.0.0.1"
    assert cfg.cameras[0].is_stream


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BASE + "bogus: 1\n", ["bogus (line 6): unknown key"]),
        (
            BASE.replace("path:", "pth:"),
            ["model.pth (line 2): unknown key (did you mean 'path'?)", "model.path", "missing"],
        ),
        (BASE + "    detect_fps: -1\n", ["cameras[0].detect_fps (line 6)", "greater than 0"]),
        (BASE + "    detect_fps: 0\n", ["cameras[0].detect_fps"]),
        (BASE + "    detect_fps: fast\n", ["cameras[0].detect_fps (line 6)", "number"]),
        (BASE + "  - name: front\n    url: /x.mp4\n", ["duplicate camera name 'front'"]),
        (BASE + "    url: /dup.mp4\n", ["cameras[0].url (line 6): duplicate key 'url'"]),
        (BASE.replace("rtsp://10.0.0.2/stream", "${NOPE}"), ["NOPE is not set", "cameras[0].url"]),
        (BASE + "inference:\n  type: tensorrtx\n", ["inference", "tensorrtx", "openvino"]),
        (BASE + "inference:\n  devcie: GPU\n", ["inference.devcie", "did you mean 'device'"]),
        (BASE.replace("rtsp://10.0.0.2/stream", "http://x/y"), ["unsupported URL scheme"]),
        (BASE.replace("front", "../etc"), ["cameras[0].name", "letters, digits"]),
        (BASE + "    realtime: true\n", ["cameras[0]", "realtime applies to files only"]),
        ("a: !!python/object/apply:os.system ['true']\n", ["not allowed"]),
        ("model: [unclosed\n", ["invalid YAML"]),
        ("", ["empty"]),
        ("- just\n- a list\n", ["expected a mapping"]),
        (BASE + "sinks:\n  - type: jsonl\n    pth: x\n", ["sinks[0].pth", "did you mean 'path'"]),
    ],
)
def test_bad_config_names_the_path(text: str, expected: list[str]) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    message = str(info.value)
    for fragment in expected:
        assert fragment in message


def test_env_substitution_and_credentials_dir(tmp_path: Path) -> None:
    (tmp_path / "cam_pw").write_text("s3cr3t-pw\n")
    text = BASE.replace("rtsp://10.0.0.2/stream", "rtsp://${CAM_USER}:${file:cam_pw}@h/s")
    cfg = parse(text, env={"CAM_USER": "admin", "CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert cfg.cameras[0].url == "rtsp://admin:s3cr3t-pw@h/s"


def test_secret_never_in_error_message() -> None:
    text = (
        BASE.replace("rtsp://10.0.0.2/stream", "rtsp://u:Canary-Pw-123@h/s") + "    loop: maybe\n"
    )
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert "Canary-Pw-123" not in str(info.value)
    assert "cameras[0].loop" in str(info.value)


def test_load_config_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml")


def test_demo_config_is_valid(repo_root: Path, assets_dir: Path) -> None:
    cfg = load_config(repo_root / "configs" / "demo.yaml", env={"VIDPIPE_ASSETS": str(assets_dir)})
    assert len(cfg.cameras) == 3
    assert all(Path(c.url).is_file() for c in cfg.cameras)
