"""The package's import graph, read with ``ast`` (nothing is imported).

Two rules of the layout: ``vidpipe.config`` sits at the bottom (it imports no stage), and no
import cycle runs through module-level imports. Imports inside functions are deferred on
purpose (heavy packages, or the assembly reaching down at call time) and do not take part in
the cycle check; imports under ``if TYPE_CHECKING:`` are never executed and are skipped too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vidpipe

PACKAGE_DIR = Path(vidpipe.__file__).parent

# Everything above config in the pipeline, and the pieces that assemble and run it.
STAGES = (
    "vidpipe.capture",
    "vidpipe.preprocess",
    "vidpipe.infer",
    "vidpipe.postprocess",
    "vidpipe.track",
    "vidpipe.sinks",
    "vidpipe.web",
    "vidpipe.schedule.scheduler",
    "vidpipe.schedule.scheduler",
    "vidpipe.daemon",
    "vidpipe.assemble",
    "vidpipe.model",
    "vidpipe.cli",
    "vidpipe.bench",
    "vidpipe.schedule.hub",
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


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> list[str]:
    """The vidpipe modules an import statement names (``from a import b``: ``a.b`` if that
    is a module, else ``a``)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".")
        base = base[: len(base) - node.level + (1 if is_pkg else 0)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [prefix, *(f"{prefix}.{a.name}" for a in node.names)]


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module-level imports, function-level imports) between vidpipe modules."""
    files = {module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}
    top: dict[str, set[str]] = {m: set() for m in files}
    deferred: dict[str, set[str]] = {m: set() for m in files}

    def visit(node: ast.AST, module: str, is_pkg: bool, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, module, is_pkg, in_function)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found = {t for t in _targets(child, module, is_pkg) if t in files}
                (deferred if in_function else top)[module].update(found - {module})
                continue
            nested = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, module, is_pkg, in_function or nested)

    for module, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        visit(tree, module, path.name == "__init__.py", False)
    for module in files:  # "from vidpipe import x" names the package itself: not an edge
        top[module].discard("vidpipe")
        deferred[module].discard("vidpipe")
    return top, deferred


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


def test_config_imports_no_stage() -> None:
    """Config reaches only itself and leaf utilities (an allow-list: a new stage is caught
    without being listed), and none of the stages by name."""
    top, deferred = import_graph()
    config_modules = [m for m in top if m == "vidpipe.config" or m.startswith("vidpipe.config.")]
    assert config_modules, "vidpipe.config not found"
    both = {m: top[m] | deferred[m] for m in top}
    for module in config_modules:
        reached = _reachable(both, module)
        stages = sorted(m for m in reached if _is_stage(m))
        assert not stages, f"{module} imports stages (directly or not): {stages}"
        others = sorted(m for m in reached - set(config_modules) if m not in LEAF_UTILITIES)
        assert not others, f"{module} imports more than config and leaf utilities: {others}"
    for leaf in LEAF_UTILITIES:
        assert not both[leaf], f"{leaf} is meant to be a leaf but imports {sorted(both[leaf])}"


def test_no_import_cycles() -> None:
    top, _ = import_graph()
    assert find_cycles(top) == []


def test_detector_finds_a_cycle() -> None:
    """The detector itself: a cycle of three and a self-contained pair are both found."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d", "a"}, "f": set()}
    assert find_cycles(graph) == [["a", "b", "c"], ["d", "e"]]


def test_graph_sees_relative_and_deferred_imports() -> None:
    top, deferred = import_graph()
    assert "vidpipe.config" in top["vidpipe.cli"]
    assert "vidpipe.daemon" in deferred["vidpipe.cli"]
    assert "vidpipe.daemon" not in top["vidpipe.cli"]


if __name__ == "__main__":  # prints the cycles: `python tests/unit/test_import_graph.py`
    top_graph, deferred_graph = import_graph()
    merged = {m: top_graph[m] | deferred_graph[m] for m in top_graph}
    print("module-level cycles:")
    for cycle in find_cycles(top_graph):
        print("  ", " <-> ".join(cycle))
    print("cycles counting function-level imports too:")
    for cycle in find_cycles(merged):
        print("  ", " <-> ".join(cycle))
