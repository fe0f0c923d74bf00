"""``@modelcontextprotocol/server-everything`` over Streamable HTTP (its ``streamableHttp``
mode, 2025-11-25 and older): a client of every released revision opens with the 2026-07-28
``server/discover`` probe, which that server refuses with HTTP 400 and a JSON-RPC error whose id
is ``null``; the client must take that as the probe's answer and fall back to ``initialize``
(the 2026-07-28 spec's rule for older servers), with our sans-IO session, with ``mcpbind.Client``
and through the gateway choosing the server's revision itself."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import mcpbind
from mcpbind import ClientSession
from mcpbind.transports.http_client import StreamableHTTPClient
from tests._net import free_port, started, stopped

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402
from test_bridge_peers import MCPBIND, need_everything  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

INFO = {"name": "t", "version": "1"}


@pytest.fixture(scope="module")
def everything_http() -> Iterator[str]:
    need_everything()
    port = free_port()
    process = started(
        ["node", str(driver.EVERYTHING), "streamableHttp"],
        port,
        env={**os.environ, "PORT": str(port)},
    )
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stopped(process)


def test_our_session_falls_back_from_the_refused_probe(everything_http: str) -> None:
    async def main() -> tuple[str, str]:
        session = ClientSession(info=INFO)  # every released revision, newest first
        async with StreamableHTTPClient(everything_http, session) as client:
            negotiated = await client.connect()
            result = await client.call(
                "tools/call", {"name": "echo", "arguments": {"message": "hi"}}
            )
            return negotiated.revision, result.content[0].text

    revision, text = asyncio.run(main())
    assert revision == "2025-11-25" and text == "Echo: hi"


def test_the_client_opens_with_its_default_revisions(everything_http: str) -> None:
    async def main() -> tuple[str | None, str]:
        async with mcpbind.Client(everything_http) as client:
            result = await client.call_tool("echo", {"message": "hi"})
            return client.revision, result.content[0].text

    assert asyncio.run(main()) == ("2025-11-25", "Echo: hi")


def test_the_gateway_chooses_the_servers_revision_itself(everything_http: str) -> None:
    """No ``--server-revision``: the gateway's own probe is refused the same way, and it opens
    the server at 2025-11-25 for a 2026-07-28 client."""
    port = free_port()
    gateway = started(
        [MCPBIND, "bridge", "--listen", f"127.0.0.1:{port}", "--upstream", everything_http], port
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": INFO,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"message": "hi"}, "_meta": meta},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "echo",
    }
    try:
        answer = httpx.post(
            f"http://127.0.0.1:{port}/mcp", json=message, headers=headers, timeout=30
        )
    finally:
        stopped(gateway)
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["content"][0]["text"] == "Echo: hi"
