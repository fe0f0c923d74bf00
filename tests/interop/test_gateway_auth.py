"""The gateway (``mcpbind bridge --listen ... --upstream URL``) in front of a protected MCP server:
it obtains its own tokens (client credentials at the real authorization server of
tests/interop/authserver.py) and never passes a client's token on. The upstream is a
``StreamableHTTPServer(auth=ResourceServer(...))`` under uvicorn; the gateway too, in the same
event loop; the client is ours, unauthenticated (or with a token of its own the gateway must
not forward)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind import ClientSession, ProtocolError
from mcpbind.auth import ClientCredentials, OAuthClient
from mcpbind.auth.resource import ResourceServer
from mcpbind.auth.store import MemoryTokenStore
from mcpbind.bridge.gateway import Gateway
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from tests._net import free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

HERE = Path(__file__).resolve().parent
REVISION = "2025-11-25"
INFO = {"name": "t", "version": "1"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": REVISION, "capabilities": {}, "clientInfo": INFO},
}


@pytest.fixture(scope="module")
def issuer(authorization_servers: tuple[str, str]) -> str:
    return authorization_servers[0]


class Served:
    """An ASGI app under uvicorn in the test's loop; every Authorization header it received, and
    how many POSTs."""

    def __init__(self, app: Any, port: int) -> None:
        import uvicorn

        self.app = app
        self.authorizations: list[str] = []
        self.posts = 0
        self.bare_posts = 0  # POSTs without an Authorization header
        self.web = uvicorn.Server(
            uvicorn.Config(
                self.record, host="127.0.0.1", port=port, log_level="warning", interface="asgi3"
            )
        )

    async def record(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.posts += scope["method"] == "POST"
            bare = True
            for name, value in scope["headers"]:
                if name.lower() == b"authorization":
                    self.authorizations.append(value.decode())
                    bare = False
            self.bare_posts += bare and scope["method"] == "POST"
        await self.app(scope, receive, send)

    async def __aenter__(self) -> Served:
        self.serving = asyncio.ensure_future(self.web.serve())
        while not self.web.started:
            assert not self.serving.done(), "the server did not start"
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.web.should_exit = True
        await self.serving


class Upstream:
    """The protected MCP server: an ``echo`` tool; the client id of every call's token."""

    def __init__(self, issuer: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.clients: list[str | None] = []
        self.app = StreamableHTTPServer(
            self.handler,
            revisions=(REVISION,),
            capabilities={"tools": {}},
            info={"name": "protected", "version": "1"},
            auth=ResourceServer(self.url, issuer, required_scopes=["mcp:read"]),
        )

    async def handler(self, call: Call) -> Any:
        self.clients.append(call.auth.client_id if call.auth else None)
        if call.method == "tools/list":
            return {"tools": []}
        if call.method == "tools/call":
            text = str(call.params.arguments["text"])
            return {"content": [{"type": "text", "text": text}]}
        raise ProtocolError(-32601, f"Method not found: {call.method!r}")


async def through(issuer: str, auth: OAuthClient, work: Any) -> tuple[Any, Upstream, Served]:
    """Run ``work(gateway_url)`` with the gateway (its own ``auth``) in front of a protected
    upstream."""
    upstream = Upstream(issuer)
    gateway = Gateway(upstream=upstream.url, server_revisions=(REVISION,), upstream_auth=auth)
    port = free_port()
    async with Served(upstream.app, upstream.port) as seen, Served(gateway, port):
        try:
            result = await work(f"http://127.0.0.1:{port}/mcp")
        finally:
            await gateway.aclose()
    return result, upstream, seen


async def echo(url: str, headers: dict[str, str] | None = None) -> Any:
    session = ClientSession(revisions=(REVISION,), info=INFO)
    async with StreamableHTTPClient(url, session, headers=headers) as client:
        await client.connect()
        result = await client.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        return [block.text for block in result.content]


def app(secret: str = "app-secret") -> OAuthClient:
    return OAuthClient(ClientCredentials("app", secret))


def test_the_gateway_obtains_its_own_token(issuer: str) -> None:
    auth = app()

    async def work(url: str) -> Any:
        first = await echo(url)
        # The token gone (as when it is lost or revoked): the next link's POST is challenged,
        # and the gateway gets another one and sends it again.
        auth.store = MemoryTokenStore()
        return first + await echo(url)

    result, upstream, seen = asyncio.run(through(issuer, auth, work))
    assert result == ["hi", "hi"]
    # Two challenged POSTs: the gateway's first (its probe), and the one after the loss.
    assert seen.bare_posts == 2
    # Every call the upstream's handler saw carried the gateway's token (client ``app``).
    assert upstream.clients and set(upstream.clients) == {"app"}
    assert any(a.startswith("Bearer ") for a in seen.authorizations)


def test_a_clients_token_is_never_passed_on(issuer: str) -> None:
    async def work(url: str) -> Any:
        return await echo(url, {"Authorization": "Bearer xyz"})

    result, upstream, seen = asyncio.run(through(issuer, app(), work))
    assert result == ["hi"]
    assert set(upstream.clients) == {"app"}
    assert seen.authorizations and all("xyz" not in a for a in seen.authorizations)


def test_a_wrong_secret_ends_the_request_with_an_error(issuer: str) -> None:
    async def work(url: str) -> Any:
        async with httpx.AsyncClient(timeout=30) as http:
            return await http.post(
                url,
                json=INITIALIZE,
                headers={"Accept": "application/json, text/event-stream"},
            )

    answer, upstream, seen = asyncio.run(through(issuer, app("wrong-secret"), work))
    error = answer.json()["error"]
    assert "authorization failed" in error["message"], error
    assert "invalid_client" in error["message"], error
    assert upstream.clients == []
    # Bounded: the token endpoint refused, and the gateway did not go on asking.
    assert seen.posts == 1 and seen.authorizations == []
