"""The gateway in front of a handshake-era HTTP server reads the session's standalone GET stream:
what the server sends outside any request (a notification, a request of its own) reaches the
clients of older and current revisions alike, and the client's answer gets back to the server.
Real uvicorn servers on loopback (the gateway and the upstream ``StreamableHTTPServer``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind.events import NotificationReceived, RequestReceived
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import StreamableHTTPServer
from tests.test_gateway import INFO, Served, eventually, free_port, run

pytestmark = pytest.mark.timeout(120)

SERVER_REVISION = "2025-11-25"
CLIENT_REVISIONS = ("2025-11-25", "2025-06-18")
POKE = [
    {"name": "poke", "description": "talks on the GET stream", "inputSchema": {"type": "object"}}
]


def upstream() -> StreamableHTTPServer:
    """A server whose ``poke`` tool sends, on the session's GET stream (outside the request), a
    tools/list_changed notification and a roots/list request, and returns the roots' names."""
    server: StreamableHTTPServer

    async def handle(call: Any) -> Any:
        if call.method == "tools/list":
            return {"tools": POKE}
        if call.method != "tools/call":
            raise mcpbind.ProtocolError(-32601, f"Method not found: {call.method!r}")
        sid = call.session_id
        assert server.notify(sid, "notifications/tools/list_changed")
        roots = msgspec.to_builtins(await server.request(sid, "roots/list"))["roots"]
        names = ",".join(root["name"] for root in roots)
        return {"content": [{"type": "text", "text": f"roots {names}"}]}

    server = StreamableHTTPServer(
        handle,
        revisions=(SERVER_REVISION,),
        capabilities={"tools": {"listChanged": True}},
        info=INFO,
    )
    return server


async def one_client(served: Served, revision: str) -> tuple[str, list[str], list[str]]:
    """Call ``poke`` as a ``revision`` client; what it got back, the methods of the server's
    requests it answered, and the notifications its GET stream carried."""
    asked: list[str] = []

    async def on_request(event: RequestReceived) -> Any:
        asked.append(event.method)
        return {"roots": [{"uri": f"file:///{revision}", "name": revision}]}

    session = mcpbind.ClientSession(revision, info=INFO, capabilities={"roots": {}})
    transport = StreamableHTTPClient(
        served.url, session, on_request=on_request, headers={"x-wire": revision}
    )
    try:
        await transport.connect()
        result = await transport.call("tools/call", {"name": "poke", "arguments": {}})

        def heard() -> list[str]:
            return [
                e.method
                for e in transport.events
                if isinstance(e, NotificationReceived) and e.method.endswith("list_changed")
            ]

        notified = await eventually(heard, f"the {revision} client hears list_changed")
    finally:
        await transport.close()
    return result.content[0].text, asked, notified


def test_what_the_server_sends_on_its_get_stream_reaches_clients_of_each_revision() -> None:
    async def main() -> dict[str, Any]:
        import uvicorn

        port = free_port()
        web = uvicorn.Server(
            uvicorn.Config(upstream(), host="127.0.0.1", port=port, log_level="warning")
        )
        serving = asyncio.ensure_future(web.serve())
        while not web.started:
            await asyncio.sleep(0.02)
        try:
            served = Served(
                upstream=f"http://127.0.0.1:{port}/mcp",
                client_revisions=CLIENT_REVISIONS,
                server_revisions=(SERVER_REVISION,),
            )
            async with served.running():
                found = await asyncio.gather(*(one_client(served, r) for r in CLIENT_REVISIONS))
                invalid = {r: served.wire.invalid(r, r) for r in CLIENT_REVISIONS}
            return {r: (*f, invalid[r]) for r, f in zip(CLIENT_REVISIONS, found, strict=True)}
        finally:
            web.should_exit = True
            await serving

    found = run(main())
    for revision, (text, asked, notified, invalid) in found.items():
        assert text == f"roots {revision}", revision  # the client's answer reached the server
        assert asked == ["roots/list"], revision
        assert notified == ["notifications/tools/list_changed"], revision
        assert invalid == [], revision
