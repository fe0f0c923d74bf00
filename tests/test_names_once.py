"""One name, one thing, in the runtime: an error code and a bound are defined in one module (others
import it), and a class name is not reused by another module for something else. Read off every
module of ``mcpbind/`` with ``ast``."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import mcpbind
from mcpbind import errors
from mcpbind.bridge import gateway, limits
from mcpbind.transports import http_limits

RUNTIME = Path(mcpbind.__file__).parent
# Class names still defined by two modules, each for a thing of its own: left to the re-layering
# of bridge/ (issue 33), which gives each a name saying what it is. Never add to this list.
SHARED_CLASS_NAMES = {"_Listener", "Link"}


def modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(RUNTIME)): ast.parse(path.read_text(), str(path))
        for path in sorted(RUNTIME.rglob("*.py"))
    }


def module_constants(tree: ast.Module) -> dict[str, ast.expr]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            out[node.target.id] = node.value
    return out


def error_codes(tree: ast.Module) -> list[int]:
    """The JSON-RPC server-error literals (-32000 to -32099) written in a module."""
    return [
        -node.operand.value
        for node in ast.walk(tree)
        if isinstance(node, ast.UnaryOp)
        and isinstance(node.op, ast.USub)
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) is int
        and 32000 <= node.operand.value <= 32099
    ]


def test_connection_closed_and_its_code_are_written_in_errors_alone() -> None:
    found = modules()
    defining = [m for m, tree in found.items() if "CONNECTION_CLOSED" in module_constants(tree)]
    assert defining == ["errors.py"]
    writing = collections.defaultdict(list)
    for where, tree in found.items():
        for code in error_codes(tree):
            writing[code].append(where)
    assert writing[-32000] == ["errors.py"]
    assert {code: where for code, where in writing.items() if len(where) > 1} == {}
    assert errors.CONNECTION_CLOSED == -32000 and "CONNECTION_CLOSED" in errors.__all__


def test_the_in_flight_bounds_have_a_name_each() -> None:
    defining = collections.defaultdict(list)
    for where, tree in modules().items():
        for name in module_constants(tree):
            if name.startswith("MAX_IN_FLIGHT"):
                defining[name].append(where)
    assert dict(defining) == {
        "MAX_IN_FLIGHT": ["transports/http_limits.py"],
        "MAX_IN_FLIGHT_PER_SIDE": ["bridge/limits.py"],
    }
    # the gateway's links are bounded as the HTTP server's sessions are
    assert gateway.MAX_IN_FLIGHT is http_limits.MAX_IN_FLIGHT == 128
    assert limits.MAX_IN_FLIGHT_PER_SIDE == 1024


def test_a_class_name_means_one_thing() -> None:
    defining = collections.defaultdict(list)
    for where, tree in modules().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                defining[node.name].append(where)
    shared = {name for name, where in defining.items() if len(where) > 1}
    assert shared <= SHARED_CLASS_NAMES, {n: defining[n] for n in shared - SHARED_CLASS_NAMES}
    for name in ("_Peek", "_Session", "_Front"):  # five, four and two modules had one
        assert name not in defining
