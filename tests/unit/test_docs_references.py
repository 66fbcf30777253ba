"""The documents point at files that exist, and the user pages stay user pages.

The README and the pages in ``docs/`` state the figures to expect and link to
``benchmarks/README.md``, which keeps each measurement with its command and names its result
files under ``benchmarks/results/``. A renamed result file or a moved page would leave a
figure without its evidence, and nothing else would notice. The README stays short (at most
300 lines), and no user page tells how vidpipe was developed (issue and stop numbers,
machines "lent" for "device calls").
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [
    "README.md",
    "benchmarks/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
]
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
RESULT = re.compile(r"`((?:benchmarks/)?results/[^`\s]+)`")
# A result named without its folder, as the measurement paragraphs do once the folder is said:
# ``density-2cpu-epyc-walkway-opencv1.*`` (every committed CPU result says its core count).
BARE_RESULT = re.compile(r"`([\w{},*-]*-2cpu-[\w{},*.-]*)`")
BRACES = re.compile(r"\{([^{}]*)\}")


USER_PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
# Words of a development diary, not of a user's page.
HISTORY = [
    re.compile(r"\bissues? #?\d+", re.IGNORECASE),
    re.compile(r"\bstops? \d+", re.IGNORECASE),
    re.compile(r"\blent\b", re.IGNORECASE),
    re.compile(r"\bdevice calls?\b", re.IGNORECASE),
    re.compile(r"the box changed, not the code", re.IGNORECASE),
]
README_MAX_LINES = 300


def _expand(pattern: str) -> list[str]:
    """``a-{x,y}.{json,md}`` -> the four names it stands for."""
    # split() puts the literal text at even places and each group's inside at odd ones
    options = [part.split(",") if i % 2 else [part] for i, part in enumerate(BRACES.split(pattern))]
    return ["".join(picked) for picked in itertools.product(*options)]


def test_expand_names_every_combination() -> None:
    assert _expand("r-{a,b}.{json,md}") == ["r-a.json", "r-a.md", "r-b.json", "r-b.md"]
    assert _expand("plain.json") == ["plain.json"]


@pytest.mark.parametrize("name", DOCUMENTS)
def test_relative_links_resolve(name: str) -> None:
    doc = ROOT / name
    broken = [
        target
        for target in LINK.findall(doc.read_text())
        if not target.startswith(("http://", "https://", "mailto:"))
        and not (doc.parent / target).exists()
    ]
    assert not broken, f"{name}: links to missing files: {broken}"


@pytest.mark.parametrize("name", DOCUMENTS)
def test_named_result_files_exist(name: str) -> None:
    text = (ROOT / name).read_text()
    named = [n if n.startswith("benchmarks/") else "benchmarks/" + n for n in RESULT.findall(text)]
    named += ["benchmarks/results/" + n for n in BARE_RESULT.findall(text)]
    missing = []
    for path in named:
        for candidate in _expand(path.rstrip(".,;:")):
            # `x.*` names every format of one result; a name may also stop at its stem
            if not any(ROOT.glob(candidate.rstrip("*") + "*")):
                missing.append(candidate)
    assert not missing, f"{name}: names result files that do not exist: {missing}"


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_anchor_follows_githubs_rule() -> None:
    assert _anchor("GPU inference (types `torch` and `tensorrt`)") == (
        "gpu-inference-types-torch-and-tensorrt"
    )


@pytest.mark.parametrize("name", DOCUMENTS)
def test_anchors_name_a_heading(name: str) -> None:
    text = (ROOT / name).read_text()
    headings = {_anchor(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    unknown = [a for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in headings]
    assert not unknown, f"{name}: links to headings that do not exist: {unknown}"


def test_readme_is_short() -> None:
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}"


def _history(text: str) -> list[str]:
    return [m.group(0) for pattern in HISTORY for m in pattern.finditer(text)]


def test_history_words_are_found() -> None:
    assert _history("as issue 14 asked, after stop 31, on the lent GPU, in one device call") == [
        "issue 14",
        "stop 31",
        "lent",
        "device call",
    ]
    assert _history("the camera is silent; a stopped camera; 2 stops") == []


@pytest.mark.parametrize("name", USER_PAGES)
def test_user_pages_tell_no_development_history(name: str) -> None:
    found = _history((ROOT / name).read_text())
    assert not found, f"{name}: development history in a user page: {found}"
