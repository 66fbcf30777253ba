"""A camera's inputs by role (``inputs:``): detect on one stream, record clips from another.

Each bad case is a ConfigError that names the camera's YAML path, its line and its name.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from vidpipe import redact
from vidpipe.config import ConfigError, parse_config


def config(camera: str) -> str:
    return "model:\n  path: /m.onnx\ncameras:\n" + textwrap.indent(textwrap.dedent(camera), "  ")


TWO_INPUTS = """\
- name: hall
  inputs:
    - {url: "rtsp://cam/sub", roles: [detect]}
    - {url: "rtsp://cam/main", roles: [record]}
"""


def test_detect_input_is_the_cameras_url_and_record_input_is_separate() -> None:
    (cam,) = parse_config(config(TWO_INPUTS), "t.yaml", env={}).cameras
    assert cam.url == "rtsp://cam/sub" and cam.is_stream
    assert cam.record_input is not None and cam.record_input.url == "rtsp://cam/main"


@pytest.mark.parametrize(
    "camera",
    [
        "- {name: hall, url: rtsp://cam/main}",
        "- {name: hall, inputs: [{url: 'rtsp://cam/main', roles: [detect, record]}]}",
        "- {name: hall, inputs: [{url: 'rtsp://cam/main', roles: [detect]}]}",
    ],
    ids=["url-alone", "one-input-both-roles", "detect-only"],
)
def test_one_stream_for_both_roles_has_no_record_input(camera: str) -> None:
    (cam,) = parse_config(config(camera), "t.yaml", env={}).cameras
    assert cam.url == "rtsp://cam/main"
    assert cam.record_input is None


@pytest.mark.parametrize(
    ("camera", "expected"),
    [
        (
            """\
            - name: hall
              url: rtsp://cam/other
              inputs: [{url: 'rtsp://cam/sub', roles: [detect]}]
            """,
            r"cameras\[0\]\.url \(line \d+\): camera 'hall': give url or inputs, not both",
        ),
        (
            """\
            - name: hall
              inputs: [{url: 'rtsp://cam/main', roles: [record]}]
            """,
            r"cameras\[0\]\.inputs \(line \d+\): camera 'hall': exactly one input may have role "
            r"'detect' \(found 0\)",
        ),
        (
            """\
            - name: hall
              inputs:
                - {url: 'rtsp://cam/sub', roles: [detect]}
                - {url: 'rtsp://cam/sub2', roles: [detect]}
            """,
            r"cameras\[0\]\.inputs \(line \d+\): camera 'hall': exactly one input may have role "
            r"'detect' \(found 2\)",
        ),
        (
            """\
            - name: hall
              inputs:
                - {url: 'rtsp://cam/sub', roles: [detect]}
                - {url: 'rtsp://cam/main', roles: [record]}
                - {url: 'rtsp://cam/main2', roles: [record]}
            """,
            r"cameras\[0\]\.inputs \(line \d+\): camera 'hall': at most one input may have role "
            r"'record' \(found 2\)",
        ),
        (
            """\
            - name: hall
              inputs:
                - {url: 'rtsp://cam/sub', roles: [detect]}
                - {url: '/clips/main.mp4', roles: [record]}
            """,
            r"cameras\[0\]\.inputs\[1\]\.url \(line \d+\): camera 'hall': a record input must be a "
            r"live stream",
        ),
        (
            "- {name: hall, inputs: [{url: 'rtsp://cam/sub', roles: [detect, watch]}]}",
            r"cameras\[0\]\.inputs\[0\]\.roles\[1\] \(line \d+\): Input should be 'detect' or "
            r"'record'",
        ),
        (
            "- {name: hall, inputs: [{url: 'rtsp://cam/sub', roles: [detect, detect]}]}",
            r"cameras\[0\]\.inputs\[0\]\.roles \(line \d+\): a role is listed twice",
        ),
        (
            "- {name: hall, inputs: [{url: 'http://cam/sub', roles: [detect]}]}",
            r"cameras\[0\]\.inputs\[0\]\.url \(line \d+\): unsupported URL scheme 'http'",
        ),
        (
            "- {name: hall, inputs: []}",
            r"cameras\[0\]\.inputs \(line \d+\): camera 'hall': exactly one input may have role "
            r"'detect' \(found 0\)",
        ),
    ],
    ids=[
        "url-and-inputs",
        "no-detect",
        "two-detect",
        "two-record",
        "record-file",
        "unknown-role",
        "role-twice",
        "bad-scheme",
        "empty",
    ],
)
def test_bad_inputs_name_the_camera_and_path(camera: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(config(camera), "t.yaml", env={})
    assert len(info.value.problems) == 1, info.value.problems
    assert re.search(expected, info.value.problems[0]), info.value.problems


def test_input_passwords_are_registered_as_secrets() -> None:
    text = config(
        """\
        - name: hall
          inputs:
            - {url: "rtsp://u:sub-pass-1234@cam/sub", roles: [detect]}
            - {url: "rtsp://u:main-pass-5678@cam/main", roles: [record]}
        """
    )
    cfg = parse_config(text, "t.yaml", env={})
    assert {"sub-pass-1234", "main-pass-5678"} <= cfg.secrets()
    shown = redact.redact_text("opening main-pass-5678 and sub-pass-1234")
    assert "main-pass-5678" not in shown and "sub-pass-1234" not in shown


def test_a_file_may_be_the_detect_input() -> None:
    camera = "- {name: hall, inputs: [{url: 'file:///clips/a.mp4', roles: [detect]}]}"
    (cam,) = parse_config(config(camera), "t.yaml", env={}).cameras
    assert cam.url == "file:///clips/a.mp4" and not cam.is_stream


def test_a_camera_as_shown_is_taken_back() -> None:
    """The API shows a camera with inputs with its derived url (the detect input's); a PUT of
    that view, or a YAML copied from GET /config, is not refused for having both."""
    shown = """\
        - name: hall
          url: rtsp://cam/sub
          inputs:
            - {url: 'rtsp://cam/sub', roles: [detect]}
            - {url: 'rtsp://cam/main', roles: [record]}
        """
    (cam,) = parse_config(config(shown), "t.yaml", env={}).cameras
    assert cam.url == "rtsp://cam/sub"
    assert cam.record_input is not None and cam.record_input.url == "rtsp://cam/main"
