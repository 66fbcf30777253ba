"""Camera drop-ins (``cameras.d/<name>.yaml``) as ``load_config`` reads them: every mistake is
an error that names its file (and the YAML path where there is one), none hides another, and
what the control API writes keeps ``${VAR}`` references as written."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.configtext import MINIMAL
from vidpipe.api.control import CameraControl
from vidpipe.config import Config, ConfigError, load_config
from vidpipe.reload import ConfigDiff, diff_configs


def write(root: Path, files: dict[str, str]) -> Path:
    """The main file (MINIMAL: camera ``front``) and ``files`` under ``cameras.d/``."""
    main = root / "config.yaml"
    main.write_text(MINIMAL)
    for name, text in files.items():
        (root / "cameras.d").mkdir(exist_ok=True)
        (root / "cameras.d" / name).write_text(text)
    return main


def problems(main: Path, env: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(main, env=env or {})
    assert info.value.source == str(main)
    return info.value.problems


def test_a_dropin_for_a_camera_of_the_main_file_names_both_files(tmp_path: Path) -> None:
    main = write(tmp_path, {"front.yaml": "url: /other.mp4\n"})
    found = problems(main)
    assert found == [
        f"{tmp_path}/cameras.d/front.yaml: camera 'front' is also defined in {main} "
        "(cameras[0]): keep one of them"
    ]


def test_an_invalid_dropin_names_its_file_camera_path_and_line(tmp_path: Path) -> None:
    door = "url: /door.mp4\ndetect_fps: fast\nzones:\n  - name: z\n    points: [[0, 0]]\n"
    main = write(tmp_path, {"door.yaml": door})
    where = f"{tmp_path}/cameras.d/door.yaml: cameras[name=door]"
    found = problems(main)
    assert len(found) == 2, found
    assert found[0].startswith(f"{where}.detect_fps (line 2): Input should be a valid number")
    assert found[1].startswith(f"{where}.zones[0].points (line 5): a zone needs at least 3")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: gate\nurl: /x.mp4\n", "name: 'gate' does not match the file's 'door'"),
        ("", "<root>: the file is empty"),
        ("- url: /x.mp4\n", "<root>: expected a mapping, got a list"),
        ("url: [unclosed\n", "invalid YAML"),
        ("url: /x.mp4\nurl: /y.mp4\n", "url (line 2): duplicate key 'url'"),
    ],
    ids=["name-mismatch", "empty", "a-list", "yaml-syntax", "duplicate-key"],
)
def test_a_dropin_that_is_no_camera_of_its_name_is_an_error(
    tmp_path: Path, text: str, expected: str
) -> None:
    main = write(tmp_path, {"door.yaml": text})
    found = problems(main)
    assert len(found) == 1 and found[0].startswith(f"{tmp_path}/cameras.d/door.yaml: "), found
    assert expected in found[0]


def test_one_bad_dropin_does_not_hide_another(tmp_path: Path) -> None:
    main = write(tmp_path, {"a.yaml": "", "b.yaml": "name: c\nurl: /x.mp4\n", "front.yaml": ""})
    found = problems(main)
    assert [p.split(": ", 1)[0] for p in found] == [
        f"{tmp_path}/cameras.d/{n}.yaml" for n in ("a", "b", "front")
    ]


def test_a_yaml_file_whose_name_is_no_camera_name_is_refused(tmp_path: Path) -> None:
    main = write(tmp_path, {"door cam.yaml": "url: /x.mp4\n"})
    assert problems(main) == [
        f"{tmp_path}/cameras.d/door cam.yaml: not a camera's drop-in: name it "
        "<camera name>.yaml (letters, digits, '_', '-', '.'; starting with a letter or digit)"
    ]


def test_other_files_in_cameras_d_are_not_dropins(tmp_path: Path) -> None:
    """An atomic write's temporary, an editor's backup and notes are left alone."""
    others = {".door.yaml.tmp": "junk: [", "door.yaml~": "junk: [", "README": "notes"}
    main = write(tmp_path, {**others, "door.yaml": "url: /door.mp4\n"})
    cfg = load_config(main, env={})
    assert [c.name for c in cfg.cameras] == ["front", "door"]


def test_an_empty_cameras_d_loads_the_main_file_alone(tmp_path: Path) -> None:
    main = write(tmp_path, {})
    (tmp_path / "cameras.d").mkdir()
    assert load_config(main, env={}) == load_config(main.rename(tmp_path / "alone.yaml"), env={})


def test_dropins_come_after_the_main_file_sorted_by_name(tmp_path: Path) -> None:
    files = {f"{n}.yaml": f"url: /{n}.mp4\n" for n in ("zeta", "alpha", "m-1")}
    cfg = load_config(write(tmp_path, files), env={})
    assert [c.name for c in cfg.cameras] == ["front", "alpha", "m-1", "zeta"]


class LoadOnlyRuntime:
    """The control API's ``Runtime`` without a pipeline: ``load`` is the daemon's (the real
    loader on the real files), ``reload`` only records the diff a daemon would apply. The
    daemon's own reload is covered by tests/integration/test_control_api.py."""

    def __init__(self, config_path: Path, env: dict[str, str]) -> None:
        self.config_path: Path | None = config_path
        self.env = env
        self.reload_lock = threading.Lock()
        self.cfg: Config = self.load()
        self.diffs: list[ConfigDiff] = []

    def load(self, dropins: dict[str, str | None] | None = None) -> Config:
        assert self.config_path is not None
        return load_config(self.config_path, env=self.env, dropins=dropins)

    def reload(self, new_cfg: Config) -> ConfigDiff:
        self.diffs.append(diff_configs(self.cfg, new_cfg))
        self.cfg = new_cfg
        return self.diffs[-1]

    def capture_stats(self) -> dict[str, dict[str, Any]]:
        return {}


def test_the_api_writes_var_references_verbatim(tmp_path: Path) -> None:
    password, user = "Dropin-Canary-pw", "Dropin-Canary-user"
    env = {"DOOR_PW": password, "DOOR_USER": user}
    main = write(tmp_path, {})
    control = CameraControl(LoadOnlyRuntime(main, env))
    url = "rtsp://${DOOR_USER}:${DOOR_PW}@10.0.0.5/door"
    view, created = control.put("door", {"url": url, "detect_fps": 5}, None)
    assert created and view["source"] == "api"
    control.patch("door", {"detect_fps": 2, "zones": None}, None)
    control.set_paused("door", True, None)
    text = (tmp_path / "cameras.d" / "door.yaml").read_text()
    assert yaml.safe_load(text) == {"url": url, "detect_fps": 2, "name": "door", "paused": True}
    assert password not in text and user not in text
    # read back as a restart would: the references resolve from the environment
    cam = load_config(main, env=env).cameras[1]
    assert (cam.name, cam.url, cam.paused) == (
        "door",
        f"rtsp://{user}:{password}@10.0.0.5/door",
        True,
    )
    with pytest.raises(ConfigError, match="DOOR_PW is not set"):
        load_config(main, env={"DOOR_USER": user})
