"""mcpbind's Streamable HTTP server (mcpbind[http]) under uvicorn, with the official `mcp` client:
requests of the server's own travel on the session's GET stream, which the official client opens
after the handshake, and come back as results of the precise generated class."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mcpbind
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from tests._net import free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

REVISION = "2025-11-25"
INFO = {"name": "mcpbind-http", "version": "1.0"}


async def handler(call: Call) -> Any:
    if call.method == "tools/list":
        return {"tools": []}
    raise mcpbind.ProtocolError(-32601, f"Method not found: {call.method!r}")


async def roots_from_the_official_client() -> tuple[Any, Any]:
    import uvicorn
    from mcp import Client, types

    asked: list[Any] = []

    async def list_roots(context: Any) -> types.ListRootsResult:
        asked.append(context)
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    server = StreamableHTTPServer(
        handler, revisions=(REVISION,), capabilities={"tools": {}}, info=INFO
    )
    port = free_port()
    web = uvicorn.Server(uvicorn.Config(server, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(web.serve())
    try:
        while not web.started:
            await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="legacy", list_roots_callback=list_roots) as client:
            await client.list_tools()
            (sid,) = server.sessions
            while server.sessions[sid].standalone is None:  # the client opens it by itself
                await asyncio.sleep(0.05)
            result = await server.request(sid, "roots/list")
            error = None
            try:  # the official client advertised no sampling: refused before it is sent
                await server.request(
                    sid, "sampling/createMessage", {"messages": [], "maxTokens": 1}
                )
            except mcpbind.ProtocolError as exc:
                error = exc
        assert len(asked) == 1
        return result, error
    finally:
        web.should_exit = True
        await serving


def test_the_official_client_answers_a_request_the_server_sends_on_the_get_stream() -> None:
    pytest.importorskip("mcp.client", reason="the pinned `mcp` package (dev extras) is needed")
    result, error = asyncio.run(asyncio.wait_for(roots_from_the_official_client(), 60))
    M = mcpbind.bindings(REVISION)
    assert type(result) is M.ListRootsResult
    assert [(r.uri, r.name) for r in result.roots] == [("file:///work", "work")]
    assert error is not None and error.code == -32601 and "sampling" in error.message
