"""Bad config, table-driven: every case is a ConfigError that names the YAML path and line.

The tables cover each kind of mistake a user makes (malformed YAML, duplicate keys, unknown
keys at every nesting level, wrong types, zero or negative rates, duplicate camera names,
unset variables, YAML tags) and the hostile inputs a fuzzer would try (alias cycles and bombs,
deep nesting, huge files, NUL bytes, non-UTF-8 bytes).
"""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.configtext import MINIMAL
from vidpipe.config import MAX_CONFIG_BYTES, ConfigError, load_config, parse_config

# Every section present, so that a key can be misspelt at every nesting level.
FULL: dict[str, Any] = {
    "model": {"path": "/m.onnx", "labels": "/l.txt", "score_threshold": 0.3},
    "inference": {"type": "openvino", "device": "CPU", "advanced": {"num_requests": 2}},
    "scheduler": {"max_frame_age_ms": 500},
    "capture": {"stall_timeout_s": 5, "backoff_initial_s": 0.5, "open_timeout_ms": 3000},
    "http": {"port": 9108, "token": "0123456789abcdef0123"},
    "logging": {"level": "DEBUG"},
    "sinks": [
        {"type": "jsonl", "path": "/tmp/e.jsonl", "only_with_detections": True},
        {"type": "snapshot", "dir": "/tmp/snaps", "keep_last": 5, "min_interval_s": 1},
    ],
    "shutdown_timeout_s": 5,
    "cameras": [
        {"name": "front", "url": "rtsp://10.0.0.2/s"},
        {"name": "back", "url": "/clips/b.mp4", "detect_fps": 5, "loop": True},
    ],
}

BASE = MINIMAL


def parse(text: str, env: dict[str, str] | None = None) -> Any:
    return parse_config(text, "test.yaml", env=env or {})


def problems_of(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text, env)
    return str(info.value)


def test_full_config_is_valid() -> None:
    cfg = parse(yaml.safe_dump(FULL, sort_keys=False))
    assert cfg.sinks[1].keep_last == 5
    assert cfg.cameras[1].detect_fps == 5


# -------------------------------------------------------------------------- unknown keys


@pytest.mark.parametrize(
    ("where", "bad", "suggestion"),
    [
        ((), "camera", "cameras"),
        ((), "shutdown_timeout", "shutdown_timeout_s"),
        (("model",), "score_treshold", "score_threshold"),
        (("inference", "advanced"), "num_request", "num_requests"),
        (("inference",), "devcie", "device"),
        (("scheduler",), "max_frame_age", "max_frame_age_ms"),
        (("capture",), "stall_timeout", "stall_timeout_s"),
        (("capture",), "backoff_max", "backoff_max_s"),
        (("http",), "tokn", "token"),
        (("logging",), "levl", "level"),
        (("cameras", 0), "urls", "url"),
        (("cameras", 1), "detect_fsp", "detect_fps"),
        (("sinks", 0), "only_with_detection", "only_with_detections"),
        (("sinks", 0), "pth", "path"),
        (("sinks", 1), "keep_lst", "keep_last"),
        (("sinks", 1), "min_interval", "min_interval_s"),
    ],
)
def test_unknown_key_suggests_closest_at_every_level(
    where: tuple[str | int, ...], bad: str, suggestion: str
) -> None:
    data = copy.deepcopy(FULL)
    target: Any = data
    for part in where:
        target = target[part]
    target[bad] = 1
    message = problems_of(yaml.safe_dump(data, sort_keys=False))
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in (*where, bad))
    path = path.lstrip(".")
    assert re.search(
        rf"{re.escape(path)} \(line \d+\): unknown key \(did you mean '{suggestion}'\?\)", message
    ), message
    assert "1 problem(s)" in message  # nothing else is reported about a valid config


def test_unknown_key_without_close_match_has_no_suggestion() -> None:
    message = problems_of(BASE + "    zzzzzz: 1\n")
    assert "cameras[0].zzzzzz (line 6): unknown key" in message
    assert "did you mean" not in message


# -------------------------------------------------------------------------- the table

INFERENCE = "inference:\n  type: openvino\n"
CASES: list[tuple[str, str, list[str]]] = [
    # malformed YAML: the position, never the source line (it may hold a secret)
    ("unclosed-flow", "model: [unclosed\n", ["line 2, column 1: invalid YAML"]),
    ("mapping-in-scalar", "a: b: c\n", ["line 1, column 5: invalid YAML: mapping values"]),
    ("tab-indent", "model:\n\tpath: x\n", ["line 2, column 1: invalid YAML", "'\\t'"]),
    ("unterminated-quote", 'model: "abc\n', ["invalid YAML", "quoted scalar at line 1"]),
    ("bad-indent", "model:\n  path: x\n bad: 1\n", ["line 3", "invalid YAML"]),
    ("two-documents", BASE + "---\n" + BASE, ["line 6", "invalid YAML", "single document"]),
    ("nul-byte-in-text", "model:\x00\n", ["line 1: invalid YAML: character U+0000"]),
    ("control-char", BASE + "x: \x07\n", ["line 6: invalid YAML: character U+0007"]),
    # duplicate keys, at every level
    ("dup-root", BASE + "model: {path: /x}\n", ["model (line 6): duplicate key 'model'"]),
    ("dup-model", BASE.replace("  path: /m.onnx\n", "  path: a\n  path: b\n"), ["model.path"]),
    ("dup-camera", BASE + "    url: /dup.mp4\n", ["cameras[0].url (line 6): duplicate key"]),
    (
        "dup-sink",
        BASE + "sinks:\n  - type: jsonl\n    path: a\n    path: b\n",
        ["sinks[0].path (line 9): duplicate key 'path'"],
    ),
    ("dup-spelt-differently", BASE + "1: a\n'1': b\n", ["['1'] (line 7): duplicate key '1'"]),
    # wrong types
    ("type-float", BASE + "    detect_fps: fast\n", ["cameras[0].detect_fps (line 6)", "string"]),
    ("type-bool", BASE + "    loop: maybe\n", ["cameras[0].loop (line 6)", "boolean"]),
    ("type-list", "model: {path: /m}\ncameras: {a: 1}\n", ["cameras (line 2)", "got a mapping"]),
    ("type-camera", "model: {path: /m}\ncameras: [abc]\n", ["cameras[0] (line 2)", "string"]),
    ("type-section", BASE + "http: 8080\n", ["http (line 6)", "got an integer"]),
    ("type-port", BASE + "http:\n  port: [1]\n", ["http.port (line 7)", "got a list"]),
    ("type-int", BASE + "capture:\n  decoder_threads: 1.5\n", ["capture.decoder_threads"]),
    (
        "nvdec-group-zero",
        BASE + "capture:\n  nvdec_group_size: 0\n",
        ["capture.nvdec_group_size (line 7)", "greater than or equal to 1"],
    ),
    (
        "nvdec-open-concurrency-zero",
        BASE + "capture:\n  nvdec_open_concurrency: 0\n",
        ["capture.nvdec_open_concurrency (line 7)", "greater than or equal to 1"],
    ),
    (
        "nvdec-group-huge",
        BASE + "capture:\n  nvdec_group_size: 65\n",
        ["capture.nvdec_group_size (line 7)", "less than or equal to 64"],
    ),
    ("type-literal", BASE + "logging:\n  level: TRACE\n", ["logging.level (line 7)", "DEBUG"]),
    (
        "sharding-assignment",
        BASE + "sharding:\n  assignment: even\n",
        ["sharding.assignment (line 7)", "'rendezvous' or 'balanced'"],
    ),
    ("type-classes", BASE + "    classes: [[1]]\n", ["cameras[0].classes[0] (line 6)", " or "]),
    ("type-path", "model:\n  path: [a]\n", ["model.path (line 2)"]),
    ("out-of-range-port", BASE + "http:\n  port: 70000\n", ["http.port (line 7)", "65535"]),
    ("threshold>1", BASE + "    score_threshold: 1.5\n", ["cameras[0].score_threshold"]),
    ("huge-int", BASE + "http:\n  port: " + "9" * 5000 + "\n", ["http.port (line 7)"]),
    # zero, negative and non-finite rates and durations
    ("fps-zero", BASE + "    detect_fps: 0\n", ["cameras[0].detect_fps (line 6)", "than 0"]),
    ("fps-negative", BASE + "    detect_fps: -1\n", ["cameras[0].detect_fps (line 6)"]),
    ("fps-inf", BASE + "    detect_fps: .inf\n", ["cameras[0].detect_fps", "finite"]),
    ("fps-nan", BASE + "    detect_fps: .nan\n", ["cameras[0].detect_fps", "finite"]),
    ("shutdown-inf", BASE + "shutdown_timeout_s: .inf\n", ["shutdown_timeout_s (line 6)"]),
    ("shutdown-zero", BASE + "shutdown_timeout_s: 0\n", ["shutdown_timeout_s (line 6)"]),
    ("age-zero", BASE + "scheduler:\n  max_frame_age_ms: 0\n", ["scheduler.max_frame_age_ms"]),
    ("backoff-zero", BASE + "capture:\n  backoff_initial_s: 0\n", ["capture.backoff_initial_s"]),
    ("stall-negative", BASE + "capture:\n  stall_timeout_s: -5\n", ["capture.stall_timeout_s"]),
    ("open-timeout-zero", BASE + "capture:\n  open_timeout_ms: 0\n", ["capture.open_timeout_ms"]),
    (
        "requests-zero",
        BASE + INFERENCE + "  advanced:\n    num_requests: 0\n",
        ["inference.advanced.num_requests (line 9)", "greater than or equal to 1"],
    ),
    (
        "queue-zero",
        BASE + "sinks:\n  - type: jsonl\n    path: a\n    queue_size: 0\n",
        ["sinks[0].queue_size (line 9)"],
    ),
    (
        "snapshot-interval-negative",
        BASE + "sinks:\n  - type: snapshot\n    dir: d\n    min_interval_s: -1\n",
        ["sinks[0].min_interval_s (line 9)"],
    ),
    # sink and backend types
    ("sink-no-type", BASE + "sinks:\n  - path: x\n", ["sinks[0] (line 7)", "'jsonl', 'snapshot'"]),
    ("sink-bad-type", BASE + "sinks:\n  - type: jsnl\n", ["sinks[0] (line 7)", "'jsnl'"]),
    ("backend-bad-type", BASE + "inference:\n  type: tensorrtx\n", ["inference", "'openvino'"]),
    # cameras
    (
        "dup-camera-name",
        BASE + "  - name: front\n    url: /x.mp4\n",
        ["cameras[1].name (line 6): duplicate camera name 'front' (also cameras[0].name)"],
    ),
    ("no-model", "cameras: []\n", ["model (line 1): missing: give model:, or a detector"]),
    ("no-url", "model: {path: /m}\ncameras:\n  - name: a\n", ["cameras[0].url", "missing"]),
    ("realtime-stream", BASE + "    realtime: true\n", ["cameras[0] (line 4)", "files only"]),
    ("url-scheme", BASE.replace("rtsp://10.0.0.2", "http://h"), ["cameras[0].url", "scheme"]),
    # variables and credentials
    (
        "unset-var",
        BASE.replace("10.0.0.2", "${UNSET_VAR}"),
        ["cameras[0].url (line 5): environment variable UNSET_VAR is not set"],
    ),
    ("bad-var-name", BASE.replace("10.0.0.2", "${1x}"), ["cameras[0].url", "bad variable"]),
    ("nested-var", BASE.replace("10.0.0.2", "${A${B}}"), ["cameras[0].url", "bad variable"]),
    (
        "file-without-credentials-dir",
        BASE.replace("10.0.0.2", "${file:pw}"),
        ["cameras[0].url (line 5)", "needs $CREDENTIALS_DIRECTORY"],
    ),
    # YAML tags: only plain mappings, sequences and core scalars
    (
        "python-object-apply",
        BASE + "x: !!python/object/apply:os.system ['true']\n",
        ["x (line 6): YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed"],
    ),
    ("python-object", BASE + "x: !!python/object:os.Foo {a: 1}\n", ["x (line 6)", "not allowed"]),
    ("python-name", "model: {path: !!python/name:os.system }\n", ["model.path", "not allowed"]),
    ("python-module", BASE + "x: !!python/module:os\n", ["x (line 6)", "not allowed"]),
    ("python-tuple", BASE + "x: !!python/tuple [1]\n", ["x (line 6)", "not allowed"]),
    ("local-tag", BASE + "x: !custom 1\n", ["x (line 6): YAML tag '!custom' is not allowed"]),
    ("set-tag", BASE + "x: !!set {a, b}\n", ["x (line 6)", "2002:set' is not allowed"]),
    ("omap-tag", BASE + "x: !!omap [a: 1]\n", ["x (line 6)", "omap' is not allowed"]),
    ("binary-tag", "model: {path: !!binary aGk=}\n", ["model.path", "binary' is not allowed"]),
    ("tag-on-key", BASE + "!!python/name:os.system : 1\n", ["<root> (line 6)", "not allowed"]),
    ("bad-int-tag", BASE + "x: !!int abc\n", ["x (line 6): cannot read int"]),
    ("bad-bool-tag", BASE + "x: !!bool maybe\n", ["x (line 6): cannot read bool"]),
    ("bad-float-tag", BASE + "x: !!float abc\n", ["x (line 6): cannot read float"]),
    # anchors, aliases, nesting, size
    ("alias-cycle", "a: &a\n  b: *a\n", ["a.b (line 1): an alias refers to itself"]),
    ("alias-cycle-seq", "x: &x [*x]\n", ["x[0] (line 1): an alias refers to itself"]),
    ("merge-key", "d: &d {path: /m}\nmodel:\n  <<: *d\n", ["model (line 3)", "merge keys"]),
    ("complex-key", BASE + "? [a, b]\n: 1\n", ["<root> (line 6): a key must be a plain string"]),
    ("mapping-key", BASE + "? {a: 1}\n: 1\n", ["<root> (line 6): a key must be a plain string"]),
    ("deep-nesting", "a: " + "[" * 40 + "]" * 40 + "\n", ["line 1, column 35: nested deeper"]),
    ("very-deep-nesting", "[" * 20000, ["line 1, column 33: nested deeper than 32 levels"]),
    ("very-deep-mapping", "a: {" * 5000 + "}" * 5000, ["line 1, column 128: nested deeper"]),
    (
        "deep-through-alias",
        "a: &a " + "[" * 30 + "]" * 30 + "\nb: [[[[*a]]]]\n",
        ["b[0][0][0][0]", "(line 1): nested too deeply"],
    ),
    ("too-large", "#" * (MAX_CONFIG_BYTES + 1), ["<root>: larger than"]),
    # not a mapping at the root
    ("empty", "", ["<root>: the file is empty"]),
    ("only-comment", "# nothing\n", ["<root>: the file is empty"]),
    ("list-root", "- just\n- a list\n", ["<root>: expected a mapping", "got a list"]),
    ("scalar-root", "hello\n", ["<root>: expected a mapping", "got a string"]),
    ("null-root", "~\n", ["<root>: expected a mapping", "got null"]),
    ("nul-in-string", BASE + 'x: "a\\0b"\n', ["x (line 6): contains a NUL character"]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_config_table(text: str, expected: list[str]) -> None:
    message = problems_of(text)
    for fragment in expected:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    assert "Traceback" not in message


def test_alias_bomb_is_refused_quickly() -> None:
    """'Billion laughs': nine levels of nine aliases would expand to 9**9 values."""
    lines = ['a0: &a0 ["lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    message = problems_of("\n".join(lines) + "\n")
    assert "more than" in message and "values" in message


def test_aliases_within_limits_are_accepted() -> None:
    text = BASE + "sinks:\n  - &s {type: jsonl, path: a.jsonl}\nextra_sinks: [*s]\n"
    message = problems_of(text)  # the alias itself is fine; only the unknown key is reported
    assert "extra_sinks (line 8): unknown key" in message
    assert "1 problem(s)" in message


def test_timestamp_like_values_stay_text() -> None:
    cfg = parse(BASE.replace("front", "2024-01-31").replace("/m.onnx", "2020-13-45"))
    assert cfg.cameras[0].name == "2024-01-31"
    assert str(cfg.model.path) == "2020-13-45"


def test_every_problem_is_reported_at_once() -> None:
    text = BASE + "    detect_fps: -1\n    loop: maybe\nhttp:\n  prot: 1\n"
    message = problems_of(text)
    assert "3 problem(s)" in message
    for path in ("cameras[0].detect_fps", "cameras[0].loop", "http.prot"):
        assert path in message


# -------------------------------------------------------------------------- older configs


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("num_requests", "moved to inference.advanced.num_requests"),
        ("num_streams", "moved to inference.advanced.num_streams"),
        ("cpu_pinning", "moved to inference.advanced.cpu_pinning"),
        ("preprocess_in_graph", "was removed: the scheduler always writes the model's f32 NCHW"),
        ("graph_rewrites", "was removed: the rewrites are always applied; delete it"),
        ("decode_just_in_time", "was removed: unpaced file cameras always decode just in time"),
        ("postprocess_on_scheduler", "was removed: postprocessing always runs on the scheduler"),
    ],
)
def test_a_key_of_an_older_config_says_what_became_of_it(key: str, expected: str) -> None:
    message = problems_of(BASE + INFERENCE + f"  {key}: 2\n")
    assert f"inference.{key} (line 8): {expected}" in message, message
    assert "1 problem(s)" in message and "unknown key" not in message


def test_every_key_of_an_older_config_is_reported_at_once() -> None:
    old = INFERENCE + "  num_requests: 2\n  graph_rewrites: true\n  cpu_pinning: false\n"
    message = problems_of(BASE + old)
    assert "3 problem(s)" in message
    for line, key in ((8, "num_requests"), (9, "graph_rewrites"), (10, "cpu_pinning")):
        assert f"inference.{key} (line {line}): " in message


def test_an_older_key_without_the_type_is_recognised_too() -> None:
    """``type`` defaults to openvino: an old section that never named it is still explained."""
    message = problems_of(BASE + "inference:\n  num_requests: 2\n")
    assert "inference.num_requests (line 7): moved to inference.advanced.num_requests" in message


# -------------------------------------------------------------------------- camera names


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ('"../etc"', "letters, digits"),
        ('"../../x"', "letters, digits"),
        ('"/etc/passwd"', "letters, digits"),
        ('"a/b"', "letters, digits"),
        ('".."', "letters, digits"),
        ('".hidden"', "letters, digits"),
        ('"a\\0b"', "NUL"),
        ('"a\\\\b"', "letters, digits"),
        ('"front door"', "letters, digits"),
        ('""', "at least 1"),
        ("x" * 65, "at most 64"),
    ],
)
def test_unsafe_camera_names_are_refused(name: str, why: str) -> None:
    text = BASE + f"  - name: {name}\n    url: /x.mp4\n"
    message = problems_of(text)
    assert "cameras[1].name (line 6)" in message
    assert why in message


def test_camera_name_from_variable_is_checked_after_substitution() -> None:
    message = problems_of(BASE.replace("front", "${CAM}"), env={"CAM": "../../etc"})
    assert "cameras[0].name (line 4)" in message


# -------------------------------------------------------------------------- credentials


@pytest.mark.parametrize(
    ("reference", "setup", "expected"),
    [
        ("${file:missing}", None, "credential 'missing' not found"),
        ("${file:../pw}", None, "bad credential name '../pw'"),
        ("${file:}", None, "bad credential name ''"),
        ("${file:..}", None, "bad credential name '..'"),
        ("${file:sub}", "dir", "credential 'sub' cannot be read"),
        ("${file:bin}", "binary", "credential 'bin' cannot be read: not UTF-8"),
    ],
)
def test_bad_credentials(tmp_path: Path, reference: str, setup: str | None, expected: str) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00pw")
    text = BASE.replace("10.0.0.2", f"u:{reference}@10.0.0.2")
    message = problems_of(text, env={"CREDENTIALS_DIRECTORY": str(tmp_path)})
    assert "cameras[0].url (line 5)" in message
    assert expected in message


def test_yaml_syntax_error_does_not_quote_the_line() -> None:
    """PyYAML quotes the offending line; a token there was never registered as a secret."""
    token = "Syntax-Canary-Token-0123456789"
    message = problems_of(BASE + f'http:\n  token: "{token}\n  port: [\n')
    assert "invalid YAML" in message
    assert "Syntax-Canary" not in message


def test_short_token_error_does_not_show_the_token() -> None:
    message = problems_of(BASE + "http:\n  token: Short-Canary\n")
    assert "http.token (line 7)" in message and "16 characters" in message
    assert "Short-Canary" not in message


# -------------------------------------------------------------------------- load_config


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (BASE.encode() + b"x: caf\xe9\n", "line 6: not UTF-8 text (byte 0xe9)"),
        (b"\xff\xfe\x00\x01junk", "line 1: not UTF-8"),
        (bytes(range(256)), "not UTF-8"),
        (b"\x00" * 100, "invalid YAML"),
        (b"model:\n  path: /m\n" + b"\x1b[31m\n", "invalid YAML"),
    ],
)
def test_load_config_binary_junk(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert expected in str(info.value)
    assert str(path) in str(info.value)


def test_load_config_utf8_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert load_config(path, env={}).cameras[0].name == "front"


@pytest.mark.parametrize("kind", ["missing", "directory", "dev-zero"])
def test_load_config_unreadable(tmp_path: Path, kind: str) -> None:
    path = {"missing": tmp_path / "nope.yaml", "directory": tmp_path}.get(kind, Path("/dev/zero"))
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(path) in str(info.value)


def test_dedent_helper_sanity() -> None:
    """The table's BASE is itself valid, so each case fails only for its own mistake."""
    assert parse(textwrap.dedent(BASE)).cameras[0].url == "rtsp://10.0.0.2/stream"
