"""The runtime's import graph (issue 33): module-level, function-level and ``TYPE_CHECKING``
imports alike, read with ``ast`` from ``mcpbind/``. No import circle and no private name
imported from another module (a name used across modules is public in its home module).
``make check`` runs it (``make layers``)."""

from __future__ import annotations

import ast
from pathlib import Path

RUNTIME = Path(__file__).resolve().parent.parent / "mcpbind"


def _modules() -> dict[str, tuple[Path, ast.Module]]:
    found = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        parts = list(path.relative_to(RUNTIME.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = (path, ast.parse(path.read_text(), str(path)))
    return found


def _target(module: str, node: ast.ImportFrom, package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _graph() -> tuple[dict[str, set[str]], set[tuple[str, str, str]]]:
    modules = _modules()
    edges: dict[str, set[str]] = {name: set() for name in modules}
    private = set()
    for name, (path, tree) in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = _target(name, node, path.name == "__init__.py")
                for alias in node.names:
                    whole = f"{target}.{alias.name}"
                    if whole in modules:
                        edges[name].add(whole)
                    elif target in modules:
                        edges[name].add(target)
                    hidden = alias.name.startswith("_") and not alias.name.startswith("__")
                    if hidden and target != name and target.startswith("mcpbind"):
                        private.add((name, target, alias.name))
            elif isinstance(node, ast.Import):
                edges[name].update(a.name for a in node.names if a.name in modules)
    return edges, private


def _circles(edges: dict[str, set[str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    edges, _ = _graph()
    assert _circles(edges) == set()


def test_no_private_name_imported_across_modules() -> None:
    _, private = _graph()
    assert sorted(private) == []


def test_the_graph_reads_every_kind_of_import() -> None:
    """The reader sees a TYPE_CHECKING and a function-level import, and finds a circle (so that
    the answers above mean no new circle, not an unread graph)."""
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .b import _X\n"
        "def f():\n    from . import b\n"
    )
    targets = {
        (n.module, tuple(a.name for a in n.names))
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.level == 1
    }
    assert targets == {("b", ("_X",)), (None, ("b",))}
    assert _circles({"a": {"b"}, "b": {"a"}, "c": set()}) == {frozenset({"a", "b"})}
    edges, _ = _graph()
    assert "mcpbind.packages" in edges["mcpbind.app.revision"]


# The sans-IO rooms the client and the gateway build on (docs/design.md, "The runtime's rooms"):
# none of them reaches up into what uses it.
LOWER = {
    "mcpbind.surface.canonical",
    "mcpbind.surface.kinds",
    "mcpbind.surface.lockfile",
    "mcpbind.surface.schemas",
    "mcpbind.surface.compare",
    "mcpbind.surface.validation",
    "mcpbind.surface.guard",
    "mcpbind.session.raw",
}
UPPER = ("mcpbind.client", "mcpbind.bridge", "mcpbind.app", "mcpbind.transports", "mcpbind.cli")


def _reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in edges[todo.pop()]:
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_the_sans_io_surface_core_and_raw_results_import_nothing_above_them() -> None:
    edges, _ = _graph()
    assert edges.keys() >= LOWER
    reached = {m: sorted(w for w in _reach(edges, m) if w.startswith(UPPER)) for m in LOWER}
    assert {m: ws for m, ws in reached.items() if ws} == {}
    # and the tools of the surface room are above the client (they read through its links)
    assert "mcpbind.client.links" in _reach(edges, "mcpbind.surface.reader")
