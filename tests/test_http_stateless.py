"""Stateless (2026-07-28) POSTs: each read by a session spawned from the server's template, whose
codec goes back for the next POST once its request is answered, and never serves two requests in
flight at once."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from mcpbind.transports.http_server import Call, StreamableHTTPServer
from tests.test_http_transport import ACCEPT, INFO, URL, http, run

MODERN = "2026-07-28"
HEADERS = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call"}


def body(rid: int, tool: str, client: str) -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
    }
    params = {"name": tool, "arguments": {}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def text(response: Any) -> str:
    assert response.status_code == 200, response.text
    return str(response.json()["result"]["content"][0]["text"])


def test_posts_answered_one_after_another_share_one_codec_and_in_flight_ones_do_not() -> None:
    release = asyncio.Event()
    codecs: dict[str, Any] = {}

    async def handler(call: Call) -> Any:
        codecs[call.params.name] = call.session._codec
        if call.params.name == "slow":
            await release.wait()
        who = call.params.meta["io.modelcontextprotocol/clientInfo"].name
        return {"content": [{"type": "text", "text": f"{call.params.name} for {who}"}]}

    server = StreamableHTTPServer(
        handler, revisions=(MODERN,), capabilities={"tools": {}}, info=INFO
    )

    async def go() -> list[str]:
        async with http(server) as client:
            first = await client.post(
                URL, content=body(1, "fast", "a"), headers={**HEADERS, "mcp-name": "fast"}
            )
            reused = codecs["fast"]
            slow = asyncio.ensure_future(
                client.post(
                    URL, content=body(1, "slow", "b"), headers={**HEADERS, "mcp-name": "slow"}
                )
            )
            while "slow" not in codecs:
                await asyncio.sleep(0.01)
            assert codecs["slow"] is reused  # the codec the first POST gave back
            during = await client.post(
                URL, content=body(1, "fast", "c"), headers={**HEADERS, "mcp-name": "fast"}
            )
            assert codecs["fast"] is not reused  # the slow one holds it: a codec of its own
            release.set()
            return [text(first), text(during), text(await slow)]

    assert run(go()) == ["fast for a", "fast for c", "slow for b"]
