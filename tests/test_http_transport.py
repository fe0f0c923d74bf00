"""The Streamable HTTP adapters (mcpbind[http]) end to end, in process: the httpx client transport
over the ASGI server, both over real sessions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import pytest

from mcpbind import ClientSession, ProtocolError
from mcpbind.events import ProgressReceived
from mcpbind.transports.http_client import StreamableHTTPClient, encode_header_value
from mcpbind.transports.http_server import HEADER_MISMATCH, Call, StreamableHTTPServer

URL = "http://127.0.0.1/mcp"
INFO = {"name": "t", "version": "1"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
}


async def handler(call: Call) -> Any:
    if call.method == "tools/list":
        tools = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        if call.revision == "2026-07-28":  # its list results must carry caching hints
            tools.update(cacheScope="private", ttlMs=0)
        return tools
    if call.method == "tools/call":
        for step in (1, 2):
            with contextlib.suppress(ProtocolError):  # a request without a progress token
                call.progress(step, 2)
            await asyncio.sleep(0)
        return {"content": [{"type": "text", "text": json.dumps(call.params.arguments)}]}
    raise ProtocolError(-32601, f"Method not found: {call.method!r}")


def app() -> StreamableHTTPServer:
    return StreamableHTTPServer(
        handler,
        revisions=("2025-11-25", "2026-07-28"),
        capabilities={"tools": {}},
        info=INFO,
    )


def http(server: StreamableHTTPServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=server), base_url=URL)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_client_and_server_talk_in_either_lifecycle(revision: str) -> None:
    async def go() -> None:
        server = app()
        session = ClientSession(revisions=(revision,), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(server)) as client:
            negotiated = await client.connect()
            assert negotiated.revision == revision
            result = await client.call("tools/call", {"name": "echo", "arguments": {"x": 1}})
            assert json.loads(result.content[0].text) == {"x": 1}
            # Only the initialize revision gets a session of its own.
            assert (client.session_id is not None) == (revision == "2025-11-25")
            assert len(server.sessions) == (1 if revision == "2025-11-25" else 0)
        assert not server.sessions  # closing the client deleted the session

    run(go())


def test_progress_travels_on_the_request_stream() -> None:
    async def go() -> None:
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(app())) as client:
            await client.connect()
            await client.call("tools/call", {"name": "echo", "arguments": {}}, progress=True)
            steps = [e.progress for e in client.events if isinstance(e, ProgressReceived)]
            assert steps == [1, 2]

    run(go())


def test_foreign_host_or_origin_is_refused_before_anything_is_read() -> None:
    async def go() -> None:
        async with http(app()) as client:
            body = json.dumps(INIT)
            evil = await client.post(
                URL, content=body, headers={**ACCEPT, "Host": "evil.example.com"}
            )
            assert evil.status_code == 403
            origin = await client.post(
                URL, content=body, headers={**ACCEPT, "Origin": "http://evil.example.com"}
            )
            assert origin.status_code == 403
            local = await client.post(
                URL, content=body, headers={**ACCEPT, "Host": "localhost:8000"}
            )
            assert local.status_code == 200
            assert local.headers["mcp-session-id"]

    run(go())


def test_session_header_rules() -> None:
    async def go() -> None:
        async with http(app()) as client:
            opened = await client.post(URL, content=json.dumps(INIT), headers=ACCEPT)
            sid = opened.headers["mcp-session-id"]
            ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
            unknown = await client.post(
                URL, content=ping, headers={**ACCEPT, "mcp-session-id": "nope"}
            )
            assert unknown.status_code == 404
            wrong = await client.post(
                URL,
                content=ping,
                headers={**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"},
            )
            assert wrong.status_code == 400
            bad_accept = await client.post(
                URL, content=ping, headers={"Content-Type": "application/json"}
            )
            assert bad_accept.status_code == 406
            gone = await client.delete(URL, headers={"mcp-session-id": sid})
            assert gone.status_code == 200
            after = await client.post(URL, content=ping, headers={**ACCEPT, "mcp-session-id": sid})
            assert after.status_code == 404

    run(go())


def stateless(method: str, version: str = "2026-07-28") -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {"_meta": meta}}


def test_stateless_header_mismatch_and_status_codes() -> None:
    async def go() -> None:
        async with http(app()) as client:
            body = json.dumps(stateless("tools/list"))
            missing = await client.post(URL, content=body, headers=ACCEPT)
            assert missing.status_code == 400
            assert missing.json()["error"]["code"] == HEADER_MISMATCH
            assert missing.json()["id"] == 7
            ok = await client.post(
                URL, content=body, headers={**ACCEPT, "mcp-protocol-version": "2026-07-28"}
            )
            assert ok.status_code == 200
            assert ok.json()["result"]["tools"][0]["name"] == "echo"
            unknown = await client.post(
                URL,
                content=json.dumps(stateless("prompts/list")),
                headers={**ACCEPT, "mcp-protocol-version": "2026-07-28"},
            )
            # The server advertised no prompts: method not found, which is 404 without a session.
            assert unknown.status_code == 404
            assert unknown.json()["error"]["code"] == -32601

    run(go())


@pytest.mark.parametrize(
    ("value", "header"),
    [
        ("us-west1", "us-west1"),
        (42, "42"),
        (True, "true"),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?x?=", "=?base64?PT9iYXNlNjQ/eD89?="),
    ],
)
def test_param_header_values(value: Any, header: str) -> None:
    assert encode_header_value(value) == header


def test_invalid_designations_keep_the_tool_from_being_called() -> None:
    async def go() -> None:
        session = ClientSession(revisions=("2026-07-28",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(app())) as client:
            await client.connect()
            good = {"type": "object", "properties": {"r": {"type": "string", "x-mcp-header": "R"}}}
            bad = {"type": "object", "properties": {"s": {"type": "number", "x-mcp-header": "S"}}}
            client._learn(
                {
                    "tools": [
                        {"name": "echo", "inputSchema": good},
                        {"name": "x", "inputSchema": bad},
                    ]
                }
            )
            assert client.designated["echo"] == {"r": "R"}
            assert client._param_headers({"name": "echo", "arguments": {"r": "a"}}) == {
                "Mcp-Param-R": "a"
            }
            assert client._param_headers({"name": "echo", "arguments": {"r": None}}) == {}
            with pytest.raises(ProtocolError, match="x-mcp-header"):
                await client.call("tools/call", {"name": "x", "arguments": {"s": 1}})

    run(go())
