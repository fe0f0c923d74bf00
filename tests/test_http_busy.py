"""A busy server's answers over HTTP: "send it again later" is HTTP 503 with ``Retry-After``,
wherever the server is busy (a session past max_in_flight, an App past its in_flight on the
stateless path, the gateway past its max_in_flight, every session kept, every connection held),
never a 500 or a 200 the client cannot tell from an answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import uvicorn

from mcpbind import App
from mcpbind.app import Limits
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.serving import uvicorn_config
from tests._net import free_port
from tests.test_http_transport import ACCEPT, INFO, URL, http, run

MODERN = "2026-07-28"


def stateless(rid: int, tool: str, info: Any = INFO) -> tuple[str, dict[str, str]]:
    """A stateless tools/call of ``tool``: its body and headers."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": info,
    }
    params = {"name": tool, "arguments": {}, "_meta": meta}
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})
    headers = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call"}
    return body, {**headers, "mcp-name": tool}


def assert_busy(response: httpx.Response, rid: Any, says: str) -> None:
    assert response.status_code == 503, (response.status_code, response.text)
    assert int(response.headers["retry-after"]) >= 1
    answer = response.json()
    assert answer["id"] == rid, answer
    assert answer["error"]["code"] == -32603, answer
    assert answer["error"]["message"].startswith("Server busy"), answer
    assert says in answer["error"]["message"], answer


def test_a_session_past_max_in_flight_gets_503_with_retry_after() -> None:
    release = asyncio.Event()

    async def slow(call: Call) -> Any:
        await release.wait()
        return {"tools": []}

    async def go() -> None:
        app = StreamableHTTPServer(
            slow, revisions=("2025-11-25",), capabilities={"tools": {}}, info=INFO, max_in_flight=1
        )
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
        }
        async with http(app) as client:
            opened = await client.post(URL, content=json.dumps(init), headers=ACCEPT)
            session = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            await client.post(URL, content=json.dumps(note), headers=session)
            listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            held = asyncio.ensure_future(
                client.post(URL, content=json.dumps(listing), headers=session)
            )
            sid = session["mcp-session-id"]
            while not app.sessions[sid].tasks:
                await asyncio.sleep(0.01)
            listing["id"] = 2
            refused = await client.post(URL, content=json.dumps(listing), headers=session)
            assert_busy(refused, 2, "(max_in_flight: 1)")
            release.set()
            assert (await held).status_code == 200

    run(go())


def test_an_app_past_its_in_flight_bound_answers_a_stateless_post_503_not_500() -> None:
    app = App("busy", limits=Limits(in_flight=1))
    gate = asyncio.Event()

    @app.tool
    async def hold() -> str:
        await gate.wait()
        return "held"

    async def go() -> None:
        async with http(app.asgi()) as client:
            body, headers = stateless(1, "hold")
            held = asyncio.ensure_future(client.post(URL, content=body, headers=headers))
            await asyncio.sleep(0.2)
            body, headers = stateless(2, "hold")
            assert_busy(await client.post(URL, content=body, headers=headers), 2, "being answered")
            gate.set()
            first = await held
            assert first.status_code == 200 and first.json()["result"]["content"][0]["text"]

    run(go())


def test_the_gateway_past_max_in_flight_answers_a_stateless_post_503() -> None:
    from tests.test_gateway import FAILING, Served, eventually

    async def go() -> None:
        served = Served(
            command=[*FAILING, "silent"], server_revisions=("2025-06-18",), max_in_flight=2
        )
        async with served.running(), httpx.AsyncClient(timeout=30) as client:
            held = []
            for rid in (1, 2):  # never answered: the child is silent
                body, headers = stateless(rid, "x")
                held.append(
                    asyncio.ensure_future(client.post(served.url, content=body, headers=headers))
                )
            await eventually(
                lambda: any(len(link.pending) == 2 for link in served.gateway.shared.values()),
                "two calls in flight",
            )
            body, headers = stateless(3, "x")
            assert_busy(await client.post(served.url, content=body, headers=headers), 3, "2 ")
            for task in held:
                task.cancel()
            await asyncio.gather(*held, return_exceptions=True)

    run(go())


def test_every_session_in_use_gets_503_with_retry_after() -> None:
    async def answer(call: Call) -> Any:
        return {"tools": []}

    async def go() -> None:
        app = StreamableHTTPServer(answer, revisions=("2025-11-25",), info=INFO, max_sessions=1)
        init = {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
        }
        async with http(app) as client:
            assert (await client.post(URL, content=json.dumps(init), headers=ACCEPT)).is_success
            refused = await client.post(URL, content=json.dumps(init), headers=ACCEPT)
            assert refused.status_code == 503 and refused.json()["id"] == 7
            assert int(refused.headers["retry-after"]) >= 1

    run(go())


def test_a_connection_past_max_connections_all_busy_gets_503_with_retry_after() -> None:
    gate = asyncio.Event()

    async def holding(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await gate.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def go() -> None:
        port = free_port()
        config = uvicorn_config(holding, "127.0.0.1", port, log_level="error", max_connections=2)
        web = uvicorn.Server(config)
        task = asyncio.ensure_future(web.serve())
        try:
            while not web.started:
                await asyncio.sleep(0.02)
            writers = []
            for _ in range(2):  # each answering a request, held
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                writers.append(writer)
            await asyncio.sleep(0.2)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            refused = await asyncio.wait_for(reader.read(), 10)
            head = refused.split(b"\r\n\r\n")[0].lower()
            assert head.startswith(b"http/1.1 503 ") and b"\r\nretry-after: 1" in head, refused
            gate.set()
            for w in [*writers, writer]:
                w.close()
        finally:
            web.should_exit = web.force_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 10)

    run(go())
