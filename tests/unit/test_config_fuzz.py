"""Fuzz ``parse_config``/``load_config``: whatever the input, a Config or a ConfigError.

Four generators: YAML-ish token soup, random structured documents dumped to YAML, valid configs
mutated structurally (wrong types, typos, deletions) and textually (bytes inserted, deleted,
replaced), and raw bytes through ``load_config``. Every ConfigError problem must start with
where it is (a path with its line, ``line L, column C``, or ``<root>``), and a camera password
or token from the document must never appear in the error text.

Derandomized with a fixed, small number of examples: the same cases run in CI every time, in
a few seconds. For a longer, random hunt set ``VIDPIPE_FUZZ_EXAMPLES`` (e.g. 20000).
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vidpipe.config import Config, ConfigError, load_config, parse_config

CANARY_PW = "Fuzz-Canary-Pw"
CANARY_TOKEN = "Fuzz-Canary-Token-0123456789"
VALID: dict[str, Any] = {
    "model": {"path": "/m.onnx", "labels": "/l.txt", "score_threshold": 0.3},
    "inference": {"type": "openvino", "hint": "latency", "advanced": {"num_requests": 2}},
    "scheduler": {"max_frame_age_ms": 500},
    "capture": {"stall_timeout_s": 5, "backoff_initial_s": 0.5},
    "http": {"port": 9108, "token": CANARY_TOKEN},
    "logging": {"level": "INFO"},
    "sinks": [
        {"type": "jsonl", "path": "/tmp/e.jsonl"},
        {"type": "snapshot", "dir": "/tmp/s", "keep_last": 3},
    ],
    "cameras": [
        {"name": "front", "url": f"rtsp://cam.user:{CANARY_PW}@10.0.0.2:554/s"},
        {"name": "back", "url": "/clips/b.mp4", "detect_fps": 5, "classes": ["person", 2]},
    ],
}
VALID_TEXT = yaml.safe_dump(VALID, sort_keys=False)
KEYS = sorted(
    {"type", "name", "url", "path", "dir", "port", "token", "level", "detect_fps", "classes"}
    | set(VALID)
    | {k for section in VALID.values() if isinstance(section, dict) for k in section}
)
# A problem starts with where it is, then ": ".
LOCATED = re.compile(
    r"(<root>(?: \(line \d+\))?|line \d+(?:, column \d+)?|[^\n]+? \(line \d+\)): \S"
)
_HUNT = int(os.environ.get("VIDPIPE_FUZZ_EXAMPLES", "0"))


def fuzz(examples: int) -> settings:
    """CI: ``examples`` fixed cases; with VIDPIPE_FUZZ_EXAMPLES: that many random ones."""
    return settings(
        max_examples=_HUNT or examples,
        deadline=None,
        derandomize=not _HUNT,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def check(text: str) -> Config | None:
    """Parse ``text``; only ConfigError may escape, and its problems say where they are."""
    try:
        return parse_config(text, "fuzz.yaml", env={"HOME": "/root"})
    except ConfigError as exc:
        assert_good_error(exc)
        return None


def assert_good_error(exc: ConfigError) -> None:
    assert exc.problems, "a ConfigError with no problem"
    for problem in exc.problems:
        assert LOCATED.match(problem), f"problem without a location: {problem!r}"
    text = str(exc)
    assert CANARY_PW not in text and CANARY_TOKEN not in text, text


# -------------------------------------------------------------------------- YAML-ish text

TOKENS = [
    *KEYS,
    ": ",
    ":",
    "\n",
    "\n  ",
    "\n    ",
    "- ",
    "  ",
    "[",
    "]",
    "{",
    "}",
    ", ",
    "&a ",
    "*a",
    "&b ",
    "*b",
    "!!python/object/apply:os.system ",
    "!!python/name:os.system ",
    "!!binary ",
    "!!set ",
    "!!int ",
    "!!str ",
    "!local ",
    "? ",
    "<<: ",
    "${X}",
    "${UNSET}",
    "${file:pw}",
    "${",
    "'",
    '"',
    "#",
    "|",
    ">",
    "---\n",
    "...\n",
    "%YAML 1.1\n",
    "\t",
    "\x00",
    "\ufeff",
    "\\",
    "rtsp://u:p@h/s",
    f"rtsp://cam.user:{CANARY_PW}@h/s",
    "1",
    "-1",
    "0",
    "1e999",
    ".inf",
    ".nan",
    "true",
    "null",
    "~",
    "2020-13-45",
    "0x1F",
    "99999999999999999999",
    "jsonl",
    "snapshot",
    "openvino",
    "../x",
]


@fuzz(300)
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_fuzz_yaml_token_soup(text: str) -> None:
    check(text)


@fuzz(150)
@given(st.text(max_size=300))
def test_fuzz_arbitrary_text(text: str) -> None:
    check(text)


# -------------------------------------------------------------------------- structured

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "jsonl", "snapshot", "openvino", "rtsp://h/s", "/x.mp4", "${X}", "a"]),
    st.text(max_size=20),
)
documents = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(KEYS), st.text(max_size=8)), children, max_size=5
        ),
    ),
    max_leaves=30,
)


@fuzz(60)
@given(st.dictionaries(st.sampled_from(KEYS), documents, max_size=6))
def test_fuzz_structured_documents(doc: dict[str, Any]) -> None:
    check(yaml.safe_dump(doc, allow_unicode=True))


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated_configs(draw: st.DrawFn) -> dict[str, Any]:
    """VALID with a few values replaced, keys renamed or deleted, and list items copied."""
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 4))):
        paths = _paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent: Any = doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        action = draw(st.sampled_from(["replace", "rename", "delete", "copy"]))
        if action == "replace":
            parent[last] = draw(documents)
        elif action == "delete":
            del parent[last]
        elif action == "rename" and isinstance(parent, dict):
            new = draw(st.sampled_from([last[:-1], last + "s", last.upper(), *KEYS]))
            parent[new] = parent.pop(last)
        elif action == "copy" and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[last]))  # duplicate camera names, two sinks
    return doc


@fuzz(60)
@given(mutated_configs())
def test_fuzz_mutated_valid_configs(doc: dict[str, Any]) -> None:
    check(yaml.safe_dump(doc, sort_keys=False))


@fuzz(100)
@given(
    st.lists(
        st.tuples(
            st.integers(0, len(VALID_TEXT)),
            st.integers(0, 4),
            st.sampled_from([*TOKENS, "", " ", "-", "x"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_fuzz_text_edits_of_valid_config(edits: list[tuple[int, int, str]]) -> None:
    text = VALID_TEXT
    for pos, cut, insert in edits:
        pos = min(pos, len(text))
        text = text[:pos] + insert + text[pos + cut :]
    check(text)


def test_valid_config_is_valid() -> None:
    """The seed of the mutations parses: mutations, not the seed, cause the errors."""
    cfg = check(VALID_TEXT)
    assert cfg is not None and len(cfg.cameras) == 2


# -------------------------------------------------------------------------- bytes on disk


@fuzz(100)
@given(st.binary(max_size=300) | st.text(max_size=200).map(lambda s: s.encode("utf-16")))
def test_fuzz_load_config_bytes(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(raw)
        try:
            load_config(path, env={})
        except ConfigError as exc:
            assert_good_error(exc)
