"""The gateway in front of servers that misbehave: a child that never answers its handshake, a
child that floods after its client left, an HTTP server that accepts the handshake's POST and
never answers it. Real child processes (tests/fixtures/hostile_child.py, started as the gateway's
``CMD``) and a real socket server; the gateway under uvicorn in the test's loop (``Served``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path

import httpx
import pytest

from tests.test_gateway import ACCEPT, INFO, ROOT, Served, raw_server, run

pytestmark = pytest.mark.timeout(120)

HOSTILE = [sys.executable, str(ROOT / "tests" / "fixtures" / "hostile_child.py")]
CONNECTION_CLOSED = -32000


def initialize(revision: str = "2025-06-18") -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": INFO},
    }


# -- a handshake that never comes -------------------------------------------------------------------


def test_a_child_that_never_answers_its_handshake_gets_502_saying_it_timed_out() -> None:
    """The probe's child never answers: after ``open_timeout`` the client gets 502 whose
    reason says the handshake timed out (it was empty: ``TimeoutError`` is an ``OSError``)."""

    async def main() -> httpx.Response:
        served = Served(command=[*HOSTILE, "mute"], open_timeout=0.5)
        async with served.running(), httpx.AsyncClient(timeout=30) as http:
            return await http.post(served.url, headers=ACCEPT, json=initialize())

    answer = run(main())
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["message"] == (
        "Bad Gateway: Connection closed: the server did not complete its handshake within 0.5 s"
    )


def test_a_links_child_that_never_answers_its_handshake_fails_the_request_saying_so(
    tmp_path: Path,
) -> None:
    """The probe's child answers; the session's own child never does: the session's request
    gets -32000 naming the timeout."""
    pids = tmp_path / "pids"

    async def main() -> dict:
        served = Served(command=[*HOSTILE, "mute-later", str(pids)], open_timeout=0.5)
        async with served.running(), httpx.AsyncClient(timeout=30) as http:
            opened = await http.post(served.url, headers=ACCEPT, json=initialize())
            assert opened.status_code == 200, opened.text
            headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            call["params"] = {"name": "x", "arguments": {}}
            answer = await http.post(served.url, headers=headers, json=call)
            return dict(answer.json())

    answer = run(main())
    assert answer["error"]["code"] == CONNECTION_CLOSED
    assert answer["error"]["message"] == (
        "Connection closed: the server did not complete its handshake within 0.5 s"
    )
    assert len(pids.read_text().split()) == 2  # the probe's child, then the session's


def test_an_http_server_that_never_answers_the_handshake_gets_502_saying_it_timed_out() -> None:
    """An upstream that reads the initialize POST and never answers it: the probe gives up after
    ``open_timeout`` (it waited for ever: reads have no timeout on the gateway's client)."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # kept open, never answered
        with contextlib.suppress(ConnectionError):
            await reader.read()

    async def main() -> httpx.Response:
        async with raw_server(silent) as url:
            served = Served(upstream=url, open_timeout=0.5)
            async with served.running(), httpx.AsyncClient(timeout=30) as http:
                try:
                    return await http.post(served.url, headers=ACCEPT, json=initialize())
                finally:
                    for writer in held:
                        writer.close()

    answer = run(main())
    assert answer.status_code == 502
    assert answer.json()["error"]["message"] == (
        "Bad Gateway: Connection closed: the server did not complete its handshake within 0.5 s"
    )
