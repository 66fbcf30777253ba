"""Loading a config: YAML text -> substituted, validated ``Config``, or a ``ConfigError``.

The YAML node tree is walked by hand: that keeps a line number for every path, catches
duplicate keys, refuses tags, aliases that expand without bound and deep nesting, and replaces
``${VAR}`` (environment) and ``${file:NAME}`` (``$CREDENTIALS_DIRECTORY``) once, here.
Only ``ConfigError`` ever leaves this module.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from vidpipe import redact
from vidpipe.config.base import ConfigError, ConfigModel
from vidpipe.config.dropins import dropin_files, stray_files
from vidpipe.config.registry import BACKENDS, SINKS
from vidpipe.config.schema import Config

MAX_CONFIG_BYTES = 1 << 20
"""Larger files are refused: no real config comes close, and PyYAML is slow on huge input."""
MAX_VALUES = 20_000
"""Aliases can expand a small file into a huge tree ("billion laughs"): stop building here."""
MAX_DEPTH = 32
"""No config section nests deeper than a few levels; deeper is junk (and recursion)."""

_VAR = re.compile(r"\$\{([^}]*)\}")
_CORE = "tag:yaml.org,2002:"
_PLAIN_TAGS = {_CORE + "map", _CORE + "seq"}
_TIMESTAMP = _CORE + "timestamp"  # no field is a date: "2024-01-31" stays the text written
_SCALAR_TAGS = {_CORE + t for t in ("str", "int", "float", "bool", "null")} | {_TIMESTAMP}
_TAG_MODELS: dict[str, type[BaseModel]] = {
    **SINKS.models(),
    **BACKENDS.models(),
}  # discriminator tags that pydantic puts into error locations
_PATH_PREFIX = re.compile(r"((?:[A-Za-z_]\w*)(?:\.[A-Za-z_]\w*|\[\d+\])*): (.*)", re.S)
Path_ = tuple[str | int, ...]


class _Loader(yaml.SafeLoader):
    """Safe loader; we walk the node tree ourselves to keep line numbers and catch dup keys."""


class _TooBig(Exception):
    """The document nests too deeply or expands to more than MAX_VALUES values."""


def _fmt_path(path: Iterable[str | int]) -> str:
    """``cameras[0].name``; a key that is not a plain name is quoted: ``capture['a b']``."""
    out = ""
    for p in path:
        if isinstance(p, int):
            out += f"[{p}]"
        elif not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", p):
            out += f"[{p!r}]"
        else:
            out += f".{p}" if out else p
    return out or "<root>"


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    """A PyYAML error as ``line L, column C: ...``.

    PyYAML's own text quotes the offending source line, which may hold a secret that was never
    registered (the parse failed before we could), so only its problem and position are kept.
    """
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        line = text.count("\n", 0, exc.position) + 1
        char = exc.character
        shown = f"U+{char:04X}" if isinstance(char, int) else repr(char)
        return f"line {line}: invalid YAML: character {shown} is not allowed"
    if not isinstance(exc, yaml.MarkedYAMLError):
        return f"invalid YAML: {exc}"
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    text = exc.problem or exc.context or "syntax error"
    if exc.problem and exc.context:
        start = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        text += f" ({exc.context}{start})"
    return f"{where}invalid YAML: {text}"


def _read_credential(name: str, env: dict[str, str]) -> str:
    """The secret in ``$CREDENTIALS_DIRECTORY/name``; raises ValueError saying what is wrong."""
    base = env.get("CREDENTIALS_DIRECTORY")
    if not base:
        raise ValueError(f"${{file:{name}}} needs $CREDENTIALS_DIRECTORY, which is unset")
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise ValueError(f"bad credential name {name!r}: one file name in $CREDENTIALS_DIRECTORY")
    target = Path(base) / name
    try:
        secret = target.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ValueError(f"credential {name!r} not found in $CREDENTIALS_DIRECTORY") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ValueError(f"credential {name!r} cannot be read: {reason}") from None
    return secret


def _substitute(
    value: str, where: str, problems: list[str], env: dict[str, str], secrets: set[str]
) -> str:
    """``value`` with ``${VAR}`` and ``${file:NAME}`` replaced; credentials go to ``secrets``."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1)
        try:
            if name.startswith("file:"):
                secret = _read_credential(name[5:], env)
                secrets.add(secret)
                return secret
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"bad variable reference ${{{name}}}")
            if name not in env:
                raise ValueError(f"environment variable {name} is not set")
            return env[name]
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
            return ""

    return _VAR.sub(repl, value)


class _Builder:
    """Turn a composed YAML node tree into Python data, recording each path's line.

    Only plain mappings, sequences and core scalars are accepted; keys are taken as written
    (``1:`` and ``on:`` are the keys "1" and "on"), so a duplicate is a duplicate however it is
    spelled, and no constructor ever runs on a key.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.lines: dict[Path_, int] = {}
        self.problems: list[str] = []
        self.secrets: set[str] = set()  # credentials read and URL passwords, to register
        self.env = env
        self.loader = _Loader("")
        self._active: set[int] = set()  # nodes on the current path: an alias cycle revisits one
        self._count = 0

    def build(self, node: yaml.Node, path: Path_) -> Any:
        line = node.start_mark.line + 1
        self.lines.setdefault(path, line)
        where = f"{_fmt_path(path)} (line {line})"
        self._count += 1
        if self._count > MAX_VALUES:
            raise _TooBig(f"<root>: more than {MAX_VALUES} values (aliases expanding?)")
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, where)
        if node.tag not in _PLAIN_TAGS:
            self.problems.append(f"{where}: YAML tag {node.tag!r} is not allowed")
            return None
        if len(path) >= MAX_DEPTH or id(node) in self._active:
            what = "an alias refers to itself" if id(node) in self._active else "nested too deeply"
            self.problems.append(f"{where}: {what}")
            return None
        self._active.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            return [self.build(v, (*path, i)) for i, v in enumerate(node.value)]
        finally:
            self._active.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            where = f"{_fmt_path(path)} (line {key_node.start_mark.line + 1})"
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(f"{where}: a key must be a plain string, not a {key_node.id}")
                continue
            if key_node.tag == _CORE + "merge":
                self.problems.append(f"{where}: YAML merge keys ('<<') are not supported")
                continue
            if key_node.tag not in _SCALAR_TAGS:
                self.problems.append(f"{where}: YAML tag {key_node.tag!r} is not allowed")
                continue
            key = key_node.value
            if key in out:
                self.problems.append(
                    f"{_fmt_path((*path, key))} (line {key_node.start_mark.line + 1}): "
                    f"duplicate key {key!r}"
                )
                continue
            out[key] = self.build(value_node, (*path, key))
        return out

    def _scalar(self, node: yaml.ScalarNode, where: str) -> Any:
        if node.tag not in _SCALAR_TAGS:
            self.problems.append(f"{where}: YAML tag {node.tag!r} is not allowed")
            return None
        try:
            value = node.value if node.tag == _TIMESTAMP else self.loader.construct_object(node)
        # PyYAML's scalar constructors raise bare built-in errors for malformed values
        # ("!!int x", "!!int" with no digits, "!!bool maybe", ints of more than 4300 digits)
        except (yaml.YAMLError, ValueError, LookupError, AttributeError, OverflowError) as exc:
            detail = getattr(exc, "problem", None) or f"{type(exc).__name__}: {exc}"
            self.problems.append(f"{where}: cannot read {node.tag.rsplit(':', 1)[-1]}: {detail}")
            return None
        if not isinstance(value, str):
            return value
        if "\0" in value:
            self.problems.append(f"{where}: contains a NUL character")
            return None
        value = _substitute(value, where, self.problems, self.env, self.secrets)
        if "://" in value:
            pw = redact.url_password(value)
            if pw:
                self.secrets.add(pw)
        return value


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models inside an annotation (through list[...], unions and Annotated)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) or () for m in _models_in(arg)]


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Path_, type[BaseModel] | None]:
    """A pydantic error location as a YAML path, and the model holding its last key.

    Pydantic adds discriminator tags (``jsonl``) and union member names (``str``, ``int``) to
    locations; neither is a key of the file, so both are dropped.
    """
    model: Any = Config
    parent: type[BaseModel] | None = None
    out: list[str | int] = []
    for part in loc:
        if isinstance(part, int):
            out.append(part)
            continue
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            continue  # a union member name below a plain value
        if part in _TAG_MODELS and part not in model.model_fields:
            model = _TAG_MODELS[part]
            continue
        parent = model
        out.append(str(part))
        field = model.model_fields.get(str(part))
        model = next(iter(_models_in(field.annotation)), None) if field else None
    return tuple(out), parent


def _kind(value: Any) -> str:
    """What a YAML reader would call ``value`` (never the value: it may be a secret)."""
    kinds = [(bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string")]
    kinds += [(list, "a list"), (dict, "a mapping"), (type(None), "null")]
    return next((name for t, name in kinds if isinstance(value, t)), type(value).__name__)


def _describe(err: Any) -> tuple[Path_, str]:
    """One pydantic error as (path, message)."""
    loc, parent = _clean_loc(tuple(err["loc"]))
    msg = str(err["msg"]).removeprefix("Value error, ")
    found = _PATH_PREFIX.fullmatch(msg)
    if found and found.group(1).split(".")[0].split("[")[0] in Config.model_fields:
        # a validator names a path at or below its own, e.g. "cameras[1].name: duplicate ..."
        # from the whole config, "inference.advanced.cuda_graphs: ..." from inference
        tokens = re.findall(r"([A-Za-z_]\w*)|\[(\d+)\]", found.group(1))
        named = tuple(int(i) if i else name for name, i in tokens)
        if named[: len(loc)] == loc:
            loc, msg = named, found.group(2)
    kind = err["type"]
    if kind == "extra_forbidden" and parent:
        key = str(loc[-1])
        # a key of an older config says where it went; any other, what it may be misspelt for
        retired = parent.retired_keys if issubclass(parent, ConfigModel) else {}
        msg = retired.get(key) or "unknown key" + _closest(key, parent.model_fields)
    elif kind == "extra_forbidden":
        msg = "unknown key"
    elif kind == "missing":
        msg = "required key is missing"
    elif kind == "union_tag_invalid":
        msg = f"unknown type {err['input'].get('type')!r}: use {err['ctx']['expected_tags']}"
    elif kind == "union_tag_not_found":
        field = Config.model_fields.get(str(loc[0])) if loc else None
        models = _models_in(field.annotation) if field else []
        tags = ", ".join(repr(t) for t, m in _TAG_MODELS.items() if m in models)
        msg = f"required key 'type' is missing (one of {tags})"
    elif kind.endswith(("_type", "_parsing")) or kind in {"dict_type", "model_type"}:
        msg += f", got {_kind(err['input'])}"
    return loc, msg


def _where(loc: Path_, lines: dict[Path_, int], labels: dict[int, str]) -> str:
    """``cameras[2].url (line 9)``; a drop-in's camera by its file and name:
    ``cameras.d/door.yaml: cameras[name=door].url (line 2)``."""
    line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), None)
    where = _fmt_path(loc)
    if len(loc) >= 2 and loc[0] == "cameras" and isinstance(loc[1], int) and loc[1] in labels:
        where = labels[loc[1]] + _fmt_path(("x", *loc[2:]))[1:]  # the rest after "x"
    return where + (f" (line {line})" if line else "")


def _closest(name: str, options: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(options), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _validation_problems(
    exc: ValidationError, lines: dict[Path_, int], labels: dict[int, str]
) -> list[str]:
    """One line per path; a union's alternatives ("a string", "an integer") joined by 'or'."""
    merged: dict[Path_, list[str]] = {}
    for err in exc.errors():
        loc, msg = _describe(err)
        if msg not in merged.setdefault(loc, []):
            merged[loc].append(msg)
    return [f"{_where(loc, lines, labels)}: {'; or '.join(msgs)}" for loc, msgs in merged.items()]


def _check_depth(text: str) -> None:
    """Refuse deep nesting while streaming events, before PyYAML builds (and recurses on) it.

    PyYAML's scanner costs O(depth) per token on deeply nested flow collections, so a 1 MiB
    line of ``[`` would take minutes to compose; streamed, it stops at the first level too many.
    """
    depth = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                mark = event.start_mark
                where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "<root>"
                raise _TooBig(f"{where}: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _compose(text: str, source: str, env: dict[str, str] | None) -> tuple[Any, _Builder]:
    """YAML text as plain data (``${...}`` replaced) and the builder holding its lines."""
    env = dict(os.environ) if env is None else env
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError([f"<root>: larger than {MAX_CONFIG_BYTES} bytes"], source)
    builder = _Builder(env)
    try:
        _check_depth(text)
        node = yaml.compose(text, Loader=_Loader)
        if node is None:
            raise ConfigError(["<root>: the file is empty"], source)
        data = builder.build(node, ())
    except yaml.YAMLError as exc:
        raise ConfigError([_yaml_problem(exc, text)], source) from None
    except RecursionError:  # PyYAML's composer recurses once per nesting level
        raise ConfigError([f"<root>: nested deeper than {MAX_DEPTH} levels"], source) from None
    except _TooBig as exc:
        raise ConfigError([str(exc)], source) from None
    # before any problem is reported: a problem's text may quote a credential or a URL
    register_secrets(builder.secrets)
    if builder.problems:
        raise ConfigError(builder.problems, source)
    if not isinstance(data, dict):
        raise ConfigError([f"<root>: expected a mapping, got {_kind(data)}"], source)
    return data, builder


def _validate(
    data: dict[str, Any], lines: dict[Path_, int], source: str, labels: dict[int, str]
) -> Config:
    try:
        cfg = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_validation_problems(exc, lines, labels), source) from None
    register_secrets(cfg.secrets())
    return cfg


def parse_config(text: str, source: str = "config", env: dict[str, str] | None = None) -> Config:
    """Parse and validate YAML text. Raises ConfigError listing every problem.

    The secrets found (credentials read, URL passwords, fields marked secret) are registered
    with ``vidpipe.redact`` here, explicitly: parsing itself has no side effects.
    """
    data, builder = _compose(text, source, env)
    return _validate(data, builder.lines, source, {})


def register_secrets(secrets: Iterable[str]) -> None:
    """Mask ``secrets`` in every log line, metric, event and error from now on."""
    for secret in secrets:
        redact.register_secret(secret)


def read_text(path: Path) -> str:
    """A config file's text (bounded read: the path may be a pipe or /dev/zero).

    Raises:
        ConfigError: the file cannot be read, is too large or is not UTF-8.
    """
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_CONFIG_BYTES + 1)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError([f"cannot read config: {reason}"], str(path)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError([f"<root>: larger than {MAX_CONFIG_BYTES} bytes"], str(path))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        problem = f"line {line}: not UTF-8 text (byte {raw[exc.start]:#04x})"
        raise ConfigError([problem], str(path)) from None


def load_config(
    path: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    dropins: Mapping[str, str | None] | None = None,
) -> Config:
    """Read, substitute and validate a YAML config file and its camera drop-ins.

    The drop-ins (``cameras.d/<name>.yaml`` beside the file, one camera each, see
    ``vidpipe.config.dropins``) come after the file's own cameras, sorted by name.
    ``dropins`` replaces drop-ins before validation without touching the disk: camera name
    -> YAML text, or None for no drop-in (the control API checks a change this way, through
    the very code a restart will run).

    Raises:
        ConfigError: every problem, each with its file, YAML path and line where known.
    """
    p = Path(path)
    data, builder = _compose(read_text(p), str(p), env)
    texts = {n: (str(f), read_text(f)) for n, f in dropin_files(p).items()}
    for name, text in (dropins or {}).items():  # the API's change, checked before it is written
        if text is None:
            texts.pop(name, None)
        else:
            texts[name] = ("request body", text)
    stray = stray_files(p)
    if not texts and not stray:
        return _validate(data, builder.lines, str(p), {})
    lines, labels = dict(builder.lines), dict[int, str]()
    cameras, problems = _merge_dropins(p, data, texts, env, lines, labels)
    problems += [
        f"{f}: not a camera's drop-in: name it <camera name>.yaml (letters, digits, '_', '-',"
        " '.'; starting with a letter or digit)"
        for f in stray
    ]
    if problems:
        raise ConfigError(problems, str(p))
    return _validate({**data, "cameras": cameras}, lines, str(p), labels)


def _merge_dropins(
    main_path: Path,
    data: dict[str, Any],
    texts: dict[str, tuple[str, str]],
    env: dict[str, str] | None,
    lines: dict[Path_, int],
    labels: dict[int, str],
) -> tuple[list[Any], list[str]]:
    """The main file's cameras followed by the drop-ins' (name -> (where, text)), and every
    problem of every drop-in: one bad file does not hide another's mistake. ``lines`` and
    ``labels`` are filled in for the drop-ins' cameras."""
    main = data.get("cameras")
    cameras = list(main) if isinstance(main, list) else []
    main_names = {c.get("name"): i for i, c in enumerate(cameras) if isinstance(c, dict)}
    problems: list[str] = []
    for name, (where, text) in sorted(texts.items()):
        if name in main_names:
            problems.append(
                f"{where}: camera {name!r} is also defined in {main_path} "
                f"(cameras[{main_names[name]}]): keep one of them"
            )
            continue
        try:
            cam, cam_builder = _compose(text, where, env)
        except ConfigError as exc:
            problems += [f"{where}: {problem}" for problem in exc.problems]
            continue
        if cam.setdefault("name", name) != name:
            problems.append(f"{where}: name: {cam['name']!r} does not match the file's {name!r}")
            continue
        index = len(cameras)
        cameras.append(cam)
        labels[index] = f"{where}: cameras[name={name}]"
        if where != "request body":  # a body's lines are those of our own YAML dump of it
            lines.update({("cameras", index, *k): v for k, v in cam_builder.lines.items()})
    return cameras, problems
