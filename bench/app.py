"""tools/call through an App against the same call through a bare ``ServerSession``.

    .venv/bin/python -m bench.app [--quick]      (a target row `make bench` can show)
    .venv/bin/python -m bench.app --instructions [RUNS]   (counted under valgrind, not timed)

For ``tools/call`` in 2024-11-05, 2025-11-25 and 2026-07-28, in process, no I/O: the server side
reads the request (``receive``), answers it and gives the response bytes (``data_to_send``).

- session: the hand-written path of examples/stdio_server.py: a match on the method and the tool
  name, the arguments checked by hand, the result as plain JSON, ``respond``.
- app: an ``App`` with ``async def add(a: int, b: int) -> str``: the method found by the
  revision's facts, the arguments checked by msgspec against the tool's input schema, the result
  built in the newest revision's classes and projected to the request's revision, ``respond``.

Both run inline (no event loop turn): the asynchronous handler completes without suspending. The
``with a task`` figures add what a transport that answers requests concurrently adds to both, a
task per request and the loop turn that runs it (``Connection`` does that). Target: the App costs
at most 1.2x the session path.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from typing import Any

import mcpbind
from mcpbind.app import App
from mcpbind.app.connection import Connection, _Exchange

REVISIONS = ("2024-11-05", "2025-11-25", "2026-07-28")
APP_VS_SESSION = 1.2  # at most this many times the bare session's path
INFO = {"name": "bench", "version": "1"}


def _handshake(client: mcpbind.ClientSession, receive: Callable[[bytes], Any], out: Any) -> None:
    client.connect()
    for _ in range(4):  # the handshake, in memory
        for raw in client.data_to_send():
            receive(raw)
        for raw in out():
            client.receive(raw)
    assert client.state == "ready", client


def _request(revision: str, receive: Callable[[bytes], Any], out: Any) -> bytes:
    client = mcpbind.ClientSession(revisions=(revision,), capabilities={}, info=INFO)
    _handshake(client, receive, out)
    client.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 40}}, id=1)
    (raw,) = client.data_to_send()
    return raw


def session_path(revision: str) -> Callable[[], list[bytes]]:
    """The hand-written server: a bare ``ServerSession`` and a match on what was asked."""
    server = mcpbind.ServerSession(revisions=(revision,), capabilities={"tools": {}}, info=INFO)

    def receive(raw: bytes) -> None:
        server.receive(raw)

    raw = _request(revision, receive, server.data_to_send)

    def answer() -> list[bytes]:
        for event in server.receive(raw):
            params = event.params  # type: ignore[union-attr]
            if event.method == "tools/call" and params.name == "add":  # type: ignore[union-attr]
                args = params.arguments
                a, b = args.get("a"), args.get("b")
                if type(a) is int and type(b) is int:
                    result: dict[str, Any] = {"content": [{"type": "text", "text": str(a + b)}]}
                else:
                    text = "a and b must be integers"
                    result = {"content": [{"type": "text", "text": text}], "isError": True}
                server.respond(event.id, result)  # type: ignore[union-attr]
        return server.data_to_send()

    return answer


def adder(revision: str) -> App:
    app = App("bench", revisions=(revision,))

    @app.tool
    async def add(a: int, b: int) -> str:
        return str(a + b)

    return app


def app_path(revision: str) -> Callable[[], list[bytes]]:
    """The App's answer to the same request, inline."""
    written: list[bytes] = []
    connection = adder(revision).connect(written.append)

    def sent() -> list[bytes]:
        out = list(written)
        written.clear()
        return out

    raw = _request(revision, connection.receive, sent)
    session, serve = connection.session, connection.server.serve

    def answer() -> list[bytes]:
        for event in session.receive(raw):
            coro = serve(_Exchange.of(connection, event))  # type: ignore[arg-type]
            try:
                coro.send(None)
            except StopIteration as done:
                session.respond(event.id, done.value)  # type: ignore[union-attr]
            else:  # pragma: no cover - the handler awaits nothing
                raise AssertionError("the handler suspended")
        return session.data_to_send()

    return answer


def check(revision: str) -> None:
    """Both paths give the same answer (the App's carries the revision's own result fields)."""
    bare = mcpbind.Codec(revision, role="client")
    for answer in (session_path(revision), app_path(revision)):
        (data,) = answer()
        bare.expect(1, "tools/call")
        result = bare.decode(data).result
        assert type(result) is mcpbind.bindings(revision).CallToolResult
        assert result.content[0].text == "42"


async def _with_tasks(revision: str, n: int) -> dict[str, float]:
    """Seconds per request answered by a task of its own, for both paths (best of 5)."""
    written: list[bytes] = []
    connection: Connection = adder(revision).connect(written.append)

    def sent() -> list[bytes]:
        out = list(written)
        written.clear()
        return out

    raw = _request(revision, connection.receive, sent)
    server = mcpbind.ServerSession(revisions=(revision,), capabilities={"tools": {}}, info=INFO)
    bare_raw = _request(revision, server.receive, server.data_to_send)
    bare_out: list[bytes] = []

    async def handle(event: Any) -> None:
        args = event.params.arguments
        server.respond(
            event.id, {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}
        )
        bare_out.extend(server.data_to_send())

    async def app_round() -> None:
        connection.receive(raw)
        while not written:
            await asyncio.sleep(0)
        written.clear()

    async def bare_round() -> None:
        for event in server.receive(bare_raw):
            asyncio.ensure_future(handle(event))
        while not bare_out:
            await asyncio.sleep(0)
        bare_out.clear()

    best = {"app": float("inf"), "session": float("inf")}
    for _ in range(5):
        for name, one in (("app", app_round), ("session", bare_round)):
            start = time.perf_counter()
            for _ in range(n):
                await one()
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return best


def measure(timer: Any) -> dict[str, dict[str, float]]:
    """revision -> seconds per request: ``app`` and ``session`` inline, ``app_task`` and
    ``session_task`` with a task per request."""
    out = {}
    for revision in REVISIONS:
        check(revision)
        out[revision] = timer.many({"app": app_path(revision), "session": session_path(revision)})
        tasks = asyncio.run(_with_tasks(revision, 2000))
        out[revision] |= {"app_task": tasks["app"], "session_task": tasks["session"]}
    return out


def targets(extra: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """The target row of the report's headline table."""
    found = extra.get("app")
    if not found:
        return []
    ratios = {r: t["app"] / t["session"] for r, t in found.items()}
    worst = max(ratios, key=ratios.__getitem__)
    where = ", ".join(
        f"{r} {x:.2f}x ({found[r]['app'] * 1e6:.1f} vs {found[r]['session'] * 1e6:.1f} µs; with a "
        f"task per request {found[r]['app_task'] * 1e6:.1f} vs "
        f"{found[r]['session_task'] * 1e6:.1f} µs)"
        for r, x in ratios.items()
    )
    return [
        (
            f"App tools/call <= {APP_VS_SESSION}x the bare ServerSession path",
            f"worst {ratios[worst]:.2f}x",
            where,
            ratios[worst] <= APP_VS_SESSION,
        )
    ]


def _jobs() -> list[tuple[str, Callable[[], Any]]]:
    jobs: list[tuple[str, Callable[[], Any]]] = []
    for revision in REVISIONS:
        jobs += [
            (f"{revision} app", app_path(revision)),
            (f"{revision} session", session_path(revision)),
        ]
    return jobs


def instructions(runs: int) -> dict[str, dict[str, int]]:
    """revision -> instructions of one request through each path (``app``, ``session``),
    counted by valgrind's callgrind (bench.instructions), which the machine's load does not
    move."""
    from .instructions import count_module

    return count_module("bench.app", runs)


if __name__ == "__main__":
    if "--child" in sys.argv:
        from .instructions import count_each

        count_each(sys.argv[-2], int(sys.argv[-1]), _jobs())
    elif "--instructions" in sys.argv:
        runs = int(sys.argv[-1]) if sys.argv[-1].isdigit() else 200
        for revision, n in sorted(instructions(runs).items()):
            ratio = n["app"] / n["session"]
            print(f"{revision}: app {n['app']:,} / session {n['session']:,} = {ratio:.2f}x")
    else:
        from .__main__ import Timer

        quick = "--quick" in sys.argv
        for row in targets({"app": measure(Timer(quick))}):
            print(*row, sep="\n  ")
