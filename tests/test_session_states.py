"""Session states as data: the CLIENT and SERVER transition tables hold exactly the moves sessions
make, ``Session._move`` refuses any other, and nothing outside ``mcpbind.session`` sets a state."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind.session import _common
from mcpbind.session.states import CLIENT, SERVER, IllegalTransition, SessionState
from tests._session_pairs import CLIENT_INFO, SERVER_INFO, of, pair, pump

RUNTIME = Path(mcpbind.__file__).parent
MODERN = "2026-07-28"


def moves(table: Any) -> set[tuple[str, str]]:
    return {(old.value, new.value) for old, news in table.items() for new in news}


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, str]]]:
    """Every move any session makes while the test runs: (role, old state, new state)."""
    seen: list[tuple[str, str, str]] = []
    move = _common.Session._move

    def recording(self: Any, new: SessionState) -> None:
        old = self.state
        move(self, new)
        seen.append((self.role, old.value, new.value))

    monkeypatch.setattr(_common.Session, "_move", recording)
    yield seen


def modern_call(rid: int) -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
    }
    params = {"name": "echo", "arguments": {}, "_meta": meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    ).encode()


def test_the_tables_hold_exactly_the_moves_sessions_make(recorded: list[Any]) -> None:
    # initialize: client idle -> negotiating -> ready; server idle -> initializing -> ready
    client, server = pair(("2025-11-25",), ("2025-11-25",))
    client.connect()
    pump(client, server)
    assert (client.state, server.state) == ("ready", "ready")
    # discover: the server ready at the first request, and again at each one after it
    client, server = pair((MODERN,), (MODERN,))
    client.connect()
    pump(client, server)
    for rid in (7, 8):
        (call,) = server.receive(modern_call(rid))
        assert type(call) is ev.RequestReceived and server.state == "ready"
    # no common revision: the client fails while negotiating
    client, server = pair(("2025-11-25",), ("2024-11-05",))
    client.connect()
    client_events, _ = pump(client, server)
    assert of(client_events, ev.NegotiationFailed) and client.state == "failed"
    # the bridge gives up a client session before it opens
    idle = mcpbind.ClientSession(("2025-11-25",), info=CLIENT_INFO)
    idle.give_up()
    assert idle.state == "failed"
    made = {(role, old, new) for role, old, new in recorded}
    assert {(o, n) for r, o, n in made if r == "client"} == moves(CLIENT)
    assert {(o, n) for r, o, n in made if r == "server"} == moves(SERVER)


def test_every_state_of_a_table_is_reached_from_idle_and_is_a_session_state() -> None:
    for table in (CLIENT, SERVER):
        reached, todo = {SessionState.IDLE}, [SessionState.IDLE]
        while todo:
            for new in table[todo.pop()]:
                if new not in reached:
                    reached.add(new)
                    todo.append(new)
        assert reached == set(table)
    assert set(CLIENT) | set(SERVER) == set(SessionState)


def test_a_move_the_table_does_not_allow_is_refused_naming_both_states() -> None:
    client, server = pair(("2025-11-25",), ("2025-11-25",))
    client.connect()
    pump(client, server)
    with pytest.raises(IllegalTransition) as refused:
        client.give_up()  # ready -> failed: not in CLIENT
    assert refused.value.code == -32603
    assert "ClientSession cannot move from state 'ready' to 'failed'" in refused.value.message
    assert client.state == "ready"
    with pytest.raises(IllegalTransition, match="from state 'ready' to 'initializing'"):
        server._move(SessionState.INITIALIZING)
    assert server.state == "ready"
    fresh = mcpbind.ServerSession(("2025-11-25",), info=SERVER_INFO)
    with pytest.raises(IllegalTransition, match="from state 'idle' to 'negotiating'"):
        fresh._move(SessionState.NEGOTIATING)  # a client's state


def test_a_state_compares_and_prints_as_the_string_it_was() -> None:
    client = mcpbind.ClientSession(("2025-11-25",), info=CLIENT_INFO)
    assert client.state == "idle" and client.state is SessionState.IDLE
    assert repr(client) == "ClientSession(state='idle', revision=None)"
    assert f"{client.state}" == "idle" and json.dumps(client.state) == '"idle"'


def _state_writes(tree: ast.AST) -> Iterator[tuple[int, str | None]]:
    """(line, enclosing function) of every assignment to an attribute named ``state``."""

    def walk(node: ast.AST, function: str | None) -> Iterator[tuple[int, str | None]]:
        for child in ast.iter_child_nodes(node):
            inside = function
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside = child.name
            targets: list[ast.expr] = []
            if isinstance(child, ast.Assign):
                targets = list(child.targets)
            elif isinstance(child, (ast.AugAssign, ast.AnnAssign)):
                targets = [child.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and part.attr == "state":
                        yield child.lineno, inside
            if isinstance(child, ast.Call) and getattr(child.func, "id", None) == "setattr":
                name = child.args[1] if len(child.args) > 1 else None
                if isinstance(name, ast.Constant) and name.value == "state":
                    yield child.lineno, inside
            yield from walk(child, inside)

    yield from walk(tree, None)


def test_nothing_outside_a_session_sets_its_state() -> None:
    outside, inside = [], []
    for path in sorted(RUNTIME.rglob("*.py")):
        writes = list(_state_writes(ast.parse(path.read_text(), str(path))))
        where = path.relative_to(RUNTIME)
        if where.parts[0] == "session":
            inside += [(str(where), function) for _, function in writes]
        else:
            outside += [f"{where}:{line}" for line, _ in writes]
    assert outside == []
    # Inside, _move changes it and _begin sets where every session starts: nothing else.
    assert sorted(inside) == [("session/_common.py", "_begin"), ("session/_common.py", "_move")]


def test_the_state_test_sees_an_assignment_from_outside() -> None:
    code = "def f(back):\n    back.state = 'failed'\n    setattr(back, 'state', 'x')\n"
    assert [line for line, _ in _state_writes(ast.parse(code))] == [2, 3]
