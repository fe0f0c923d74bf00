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

from tests.test_gateway import ACCEPT, INFO, ROOT, Served, children, eventually, raw_server, run

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


# -- a child that floods after its client left ------------------------------------------------------


async def call_and_leave(served: Served, http: httpx.AsyncClient) -> dict[str, str]:
    """A 2025-06-18 session that calls a tool (which sets the child flooding) and then leaves
    without a word (no DELETE, no GET stream): the session's headers."""
    opened = await http.post(served.url, headers=ACCEPT, json=initialize())
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    await http.post(served.url, headers=headers, json=initialized)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "x", "arguments": {}}
    answer = await http.post(served.url, headers=headers, json=call)
    assert answer.json()["result"]["content"][0]["text"] == "ok", answer.text
    return headers


def dropped(log: list[str]) -> list[str]:
    return [line for line in log if "notification dropped" in line]


def test_a_child_flooding_after_its_client_left_is_ended_and_said_once(tmp_path: Path) -> None:
    """Past ``max_dropped`` messages no client could take within 10 s the link ends and its
    child is terminated (it was read, one log line a message, until the 30-minute idle
    timeout); the session goes on with a new child."""
    pids = tmp_path / "pids"

    async def main() -> tuple[list[str], str]:
        served = Served(command=[*HOSTILE, "flood", str(pids)])  # max_dropped: 1,000
        async with served.running(), httpx.AsyncClient(timeout=30) as http:
            headers = await call_and_leave(served, http)
            assert len(pids.read_text().split()) == 2  # the probe's child, the session's
            await eventually(lambda: not children("hostile_child.py"), "the flooder ended")
            log = list(served.log)
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
            call["params"] = {"name": "x", "arguments": {}}
            again = await http.post(served.url, headers=headers, json=call)
            return log, again.json()["result"]["content"][0]["text"]

    log, again = run(main())
    ended = [line for line in log if "max_dropped" in line]
    assert ended == [
        "the server sent more than 1,000 messages no client could take within 10 s (the "
        "gateway's max_dropped): the link is ended; 0 pending requests answered with an error"
    ]
    said = dropped(log)
    assert said[0] == (
        "server: 'notifications/message' notification dropped: the client has no stream open "
        "to carry it"
    )
    assert len(said) == 2 and said[1].startswith(f"{said[0]} (and 1,000 more like it in the last ")
    assert again == "ok"  # a new link, a new child
    assert len(pids.read_text().split()) == 3


def test_dropped_notifications_are_logged_once_and_then_counted() -> None:
    """A flood under ``max_dropped``: the first dropped notification is said, the others
    counted (said when the interval ends or, here, when the link ends with the gateway)."""

    async def main() -> list[str]:
        served = Served(command=[*HOSTILE, "flood"], max_dropped=10**9)
        async with served.running(), httpx.AsyncClient(timeout=30) as http:
            await call_and_leave(served, http)
            await asyncio.sleep(2)
            during = list(served.log)
        return [*during, "-- closed --", *served.log[len(during) :]]

    log = run(main())
    said = dropped(log)
    assert said[0] == (
        "server: 'notifications/message' notification dropped: the client has no stream open "
        "to carry it"
    )
    assert len(said) == 2, log[:10]
    assert log.index(said[1]) > log.index("-- closed --")  # counted, said at the end
    count = int(said[1].split("(and ")[1].split(" more")[0].replace(",", ""))
    assert count >= 1000  # the flood was one
