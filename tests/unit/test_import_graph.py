"""The package's import graph, read with ``ast`` (nothing is imported).

Two rules of the layout: ``vidpipe.config`` sits at the bottom (it imports no stage), and there
is no import cycle. Imports inside functions count for both: they are deferred (heavy packages,
the assembly reaching down at call time) but they still run, and one that closes a cycle means
the helper it fetches belongs lower down. Imports under ``if TYPE_CHECKING:`` never run and are
skipped.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path

import vidpipe

PACKAGE_DIR = Path(vidpipe.__file__).parent
BENCHMARKS_DIR = PACKAGE_DIR.parent / "benchmarks"

# Everything above config in the pipeline, and the pieces that assemble and run it (a package
# stands for its modules).
STAGES = (
    "vidpipe.capture",
    "vidpipe.preprocess",
    "vidpipe.schedule",
    "vidpipe.infer",
    "vidpipe.postprocess",
    "vidpipe.track",
    "vidpipe.clips",
    "vidpipe.sinks",
    "vidpipe.web",
    "vidpipe.daemon",
    "vidpipe.assemble",
    "vidpipe.reload",
    "vidpipe.model",
    "vidpipe.cli",
    "vidpipe.bench",
    "vidpipe.optimize",
    "vidpipe.metrics",
)
# What config may import besides itself: modules that import nothing from vidpipe.
LEAF_UTILITIES = ("vidpipe.redact",)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool, modules: Collection[str]
) -> set[str]:
    """The vidpipe modules an import statement names.

    ``from a import b`` names the module ``a.b`` when there is one (``from vidpipe import
    fileio``), else ``a`` (``from vidpipe.types import Frame``): the module the name is read
    from, so that a submodule taken from its package is an edge to it, not to the package.
    """
    if isinstance(node, ast.Import):
        return {a.name for a in node.names} & set(modules)
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_pkg else 0)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    named = (f"{prefix}.{a.name}" for a in node.names)
    return {m if m in modules else prefix for m in named} & set(modules)


def import_graph(
    packages: tuple[Path, ...] = (PACKAGE_DIR,),
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, function-level imports) between the modules of ``packages``
    (vidpipe's alone by default)."""
    files = {module_name(p): p for d in packages for p in d.rglob("*.py")}
    top: dict[str, set[str]] = {m: set() for m in files}
    deferred: dict[str, set[str]] = {m: set() for m in files}

    def visit(node: ast.AST, module: str, is_pkg: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, module, is_pkg, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found = _targets(child, module, is_pkg, files)
                (deferred if in_function else top)[module].update(found - {module})
                continue
            nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, module, is_pkg, in_function or nested)

    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        visit(tree, module, path.name == "__init__.py", False)
    return top, deferred


def whole_graph(packages: tuple[Path, ...] = (PACKAGE_DIR,)) -> dict[str, set[str]]:
    """Module-level and function-level imports together: a deferred import still runs, and
    one that closes a cycle means the helper it fetches belongs lower down."""
    top, deferred = import_graph(packages)
    return {m: top[m] | deferred[m] for m in top}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sorted(out)


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _is_stage(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in STAGES)


def test_stages_name_modules_once() -> None:
    """A stage moved or renamed must be renamed here too, or the rule above checks nothing."""
    top, _ = import_graph()
    assert len(set(STAGES)) == len(STAGES), STAGES
    assert [s for s in STAGES if s not in top] == []


def test_config_imports_no_stage() -> None:
    """Config reaches only itself and leaf utilities (an allow-list: a new stage is caught
    without being listed), and none of the stages by name, counting function-level imports."""
    both = whole_graph()
    config_modules = [m for m in both if m == "vidpipe.config" or m.startswith("vidpipe.config.")]
    assert config_modules, "vidpipe.config not found"
    for module in config_modules:
        reached = _reachable(both, module)
        stages = sorted(m for m in reached if _is_stage(m))
        assert not stages, f"{module} imports stages (directly or not): {stages}"
        others = sorted(m for m in reached - set(config_modules) if m not in LEAF_UTILITIES)
        assert not others, f"{module} imports more than config and leaf utilities: {others}"
    for leaf in LEAF_UTILITIES:
        assert not both[leaf], f"{leaf} is meant to be a leaf but imports {sorted(both[leaf])}"


def test_no_import_cycles() -> None:
    """None at module level, none counting the imports inside functions."""
    top, _ = import_graph()
    assert find_cycles(top) == []
    assert find_cycles(whole_graph()) == []


def test_the_benchmarks_sit_above_the_package_without_cycles() -> None:
    """``benchmarks/`` (not shipped) extends ``vidpipe bench`` by registration: the package
    never imports it, and the two together have no cycle either."""
    both = whole_graph((PACKAGE_DIR, BENCHMARKS_DIR))
    assert any(m.startswith("benchmarks.") for m in both), "benchmarks/ not found"
    assert find_cycles(both) == []
    into = {m: sorted(t for t in ts if t.split(".")[0] == "benchmarks") for m, ts in both.items()}
    assert {m: ts for m, ts in into.items() if ts and m.startswith("vidpipe")} == {}


def test_detector_finds_a_cycle() -> None:
    """The detector itself: a cycle of three and a self-contained pair are both found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d", "a"}, "f": set()}
    assert find_cycles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_graph_sees_relative_and_deferred_imports() -> None:
    top, deferred = import_graph()
    assert "vidpipe.config" in top["vidpipe.cli"]
    assert "vidpipe.daemon" in deferred["vidpipe.cli"]
    assert "vidpipe.daemon" not in top["vidpipe.cli"]
    assert "vidpipe.daemon" in whole_graph()["vidpipe.cli"]


def test_a_submodule_taken_from_its_package_is_an_edge_to_the_submodule() -> None:
    modules = {"vidpipe", "vidpipe.schedule", "vidpipe.schedule.hub", "vidpipe.types"}

    def targets(source: str, module: str = "vidpipe.daemon", is_pkg: bool = False) -> set[str]:
        (node,) = ast.parse(source).body
        assert isinstance(node, ast.Import | ast.ImportFrom)
        return _targets(node, module, is_pkg, modules)

    assert targets("from vidpipe.schedule import hub") == {"vidpipe.schedule.hub"}
    assert targets("from vidpipe.schedule import Scheduler") == {"vidpipe.schedule"}
    assert targets("from vidpipe import types, __version__") == {"vidpipe.types", "vidpipe"}
    assert targets("from . import hub", "vidpipe.schedule", True) == {"vidpipe.schedule.hub"}
    assert targets("from .hub import Hub", "vidpipe.schedule.x") == {"vidpipe.schedule.hub"}
    assert targets("import numpy, vidpipe.types") == {"vidpipe.types"}
    # the tree's own case: config takes redact from the package
    top, _ = import_graph()
    assert "vidpipe.redact" in top["vidpipe.config.base"]
    assert "vidpipe" not in top["vidpipe.config.base"]


if __name__ == "__main__":  # prints the cycles: `python tests/unit/test_import_graph.py`
    print("module-level cycles:")
    for cycle in find_cycles(import_graph()[0]):
        print("  ", " <-> ".join(cycle))
    print("cycles counting function-level imports too:")
    for cycle in find_cycles(whole_graph()):
        print("  ", " <-> ".join(cycle))
