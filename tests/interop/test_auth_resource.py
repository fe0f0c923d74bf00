"""The resource server (``StreamableHTTPServer(..., auth=ResourceServer(...))``) against a real
authorization server (tests/interop/authserver.py: authlib on Flask, in its own process) that
issues RFC 9068 JWT access tokens: each kind of bad token gets its status and challenge before
any session work, and a good one reaches the handler with its subject. A second authorization
server on the same signing key stands for a wrong issuer: its tokens verify, but name it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind import ClientSession, ProtocolError
from mcpbind.app import App, Context
from mcpbind.auth import AuthorizationError, ClientCredentials, OAuthClient, parse_challenges
from mcpbind.auth.resource import ResourceServer
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from tests._net import free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

HERE = Path(__file__).resolve().parent
REVISION = "2025-11-25"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": REVISION,
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


@pytest.fixture(scope="module")
def issuers(authorization_servers: tuple[str, str]) -> tuple[str, str]:
    """The trusted issuer, and another on the same signing key (a wrong issuer)."""
    return authorization_servers


async def token(issuer: str, client: str, scope: str, resource: str) -> str:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{issuer}/token",
            auth=(client, f"{client}-secret"),
            data={"grant_type": "client_credentials", "scope": scope, "resource": resource},
        )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


class Protected:
    """The MCP server under uvicorn, protected by a ResourceServer; what its handler saw."""

    def __init__(self, issuer: str, **options: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.subjects: list[str | None] = []
        options.setdefault("required_scopes", ["mcp:read"])
        self.rs = ResourceServer(self.url, issuer, **options)
        server = StreamableHTTPServer(
            self.handler,
            revisions=(REVISION,),
            capabilities={"tools": {}},
            info={"name": "protected", "version": "1"},
            auth=self.rs,
        )
        self.web = uvicorn.Server(
            uvicorn.Config(server, host="127.0.0.1", port=self.port, log_level="warning")
        )

    async def handler(self, call: Call) -> Any:
        self.subjects.append(call.auth.subject if call.auth else None)
        if call.method == "tools/list":
            return {"tools": []}
        raise ProtocolError(-32601, f"Method not found: {call.method!r}")

    async def __aenter__(self) -> Protected:
        self.serving = asyncio.ensure_future(self.web.serve())
        while not self.web.started:
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.web.should_exit = True
        await self.serving

    async def post(
        self, bearer: str | None, message: dict[str, Any], sid: str | None = None
    ) -> httpx.Response:
        headers = {"Accept": "application/json, text/event-stream"}
        if bearer is not None:
            headers["Authorization"] = f"Bearer {bearer}"
        if sid is not None:
            headers |= {"Mcp-Session-Id": sid, "MCP-Protocol-Version": REVISION}
        async with httpx.AsyncClient() as http:
            return await http.post(self.url, json=message, headers=headers)

    async def session(self, bearer: str) -> str:
        """A session opened with a good token: its id."""
        opened = await self.post(bearer, INITIALIZE)
        sid = opened.headers["Mcp-Session-Id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.post(bearer, initialized, sid)).status_code == 202
        return sid


def challenge_of(response: httpx.Response) -> dict[str, str]:
    (challenge,) = parse_challenges(response.headers["WWW-Authenticate"])
    assert challenge.scheme == "Bearer"
    return challenge.params


def tampered(jwt: str) -> str:
    """The token with one claim changed and the signature kept."""
    import base64
    import json

    head, payload, signature = jwt.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["scope"] = "mcp:read mcp:write"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{head}.{forged}.{signature}"


async def refusals(issuer: str, other: str) -> dict[str, tuple[httpx.Response, list[Any]]]:
    out = {}
    async with Protected(issuer) as server:
        good = await token(issuer, "app", "mcp:read", server.url)
        cases = {
            "missing": None,
            "expired": await token(issuer, "stale", "mcp:read", server.url),
            "wrong audience": await token(issuer, "app", "mcp:read", "http://127.0.0.1:9/mcp"),
            "wrong issuer": await token(other, "app", "mcp:read", server.url),
            "insufficient scope": await token(issuer, "app", "mcp:write", server.url),
            "tampered": tampered(await token(issuer, "app", "mcp:write", server.url)),
            "valid": good,
        }
        # Each token asks for the tool list on a session a good token opened: a bad one must
        # be refused before the session (and so the handler) sees the request.
        sid = await server.session(good)
        listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        for name, bearer in cases.items():
            before = len(server.subjects)
            response = await server.post(bearer, listing, sid)
            out[name] = (response, server.subjects[before:])
        async with httpx.AsyncClient() as http:
            metadata = await http.get(server.rs.metadata_url)
        out["metadata"] = (metadata, [])
    return out


def test_each_bad_token_gets_its_status_and_challenge(issuers: tuple[str, str]) -> None:
    issuer, other = issuers
    seen = asyncio.run(refusals(issuer, other))
    metadata_url = seen["metadata"][0].request.url
    assert seen["metadata"][0].json() == {
        "resource": str(seen["valid"][0].request.url),
        "authorization_servers": [issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp:read"],
    }
    response, reached = seen["missing"]
    assert response.status_code == 401 and reached == []
    assert challenge_of(response) == {
        "scope": "mcp:read",
        "resource_metadata": str(metadata_url),
    }
    for name, why in [
        ("expired", "expired"),
        ("wrong audience", "'aud'"),
        ("wrong issuer", "'iss'"),
        ("tampered", "bad_signature"),
    ]:
        response, reached = seen[name]
        params = challenge_of(response)
        assert (response.status_code, params["error"]) == (401, "invalid_token"), name
        assert why in params["error_description"], (name, params)
        assert params["resource_metadata"] == str(metadata_url)
        assert reached == [], name
    response, reached = seen["insufficient scope"]
    params = challenge_of(response)
    assert response.status_code == 403 and reached == []
    assert (params["error"], params["scope"]) == ("insufficient_scope", "mcp:read")
    response, reached = seen["valid"]
    assert response.status_code == 200
    assert response.json()["result"] == {"tools": []}
    assert reached == ["app"]  # the handler saw the request, with the token's subject


def test_our_client_obtains_a_token_and_reaches_the_handler(issuers: tuple[str, str]) -> None:
    """The whole loop: 401, discovery through the server's metadata, client credentials at the
    real authorization server, the token's subject in the handler."""
    issuer, _ = issuers

    async def run() -> list[str | None]:
        async with Protected(issuer) as server:
            auth = OAuthClient(ClientCredentials("app", "app-secret"))
            session = ClientSession(revisions=(REVISION,), info={"name": "t", "version": "1"})
            async with StreamableHTTPClient(server.url, session, auth=auth) as client:
                await client.connect()
                await client.call("tools/list", {})
            return server.subjects

    assert asyncio.run(run())[-1:] == ["app"]


def test_introspection_verifies_too(issuers: tuple[str, str]) -> None:
    issuer, _ = issuers

    async def run() -> tuple[int, int, list[str | None]]:
        async with Protected(issuer, introspection_client=("rs", "rs-secret")) as server:
            good = await token(issuer, "app", "mcp:read", server.url)
            sid = await server.session(good)
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
            ok = await server.post(good, listing, sid)
            stale = await token(issuer, "stale", "mcp:read", server.url)
            refused = await server.post(stale, listing, sid)
            return ok.status_code, refused.status_code, server.subjects

    assert asyncio.run(run()) == (200, 401, ["app"])


def test_a_token_the_server_refuses_ends_the_flow_at_once(issuers: tuple[str, str]) -> None:
    """The server wants another audience than the resource it names: the token the client
    obtains is refused, and the client says so instead of authorizing again and again."""
    issuer, _ = issuers

    async def run() -> str:
        async with Protected(issuer, audience="http://127.0.0.1:9/elsewhere") as server:
            auth = OAuthClient(ClientCredentials("app", "app-secret"))
            session = ClientSession(revisions=(REVISION,), info={"name": "t", "version": "1"})
            async with StreamableHTTPClient(server.url, session, auth=auth) as client:
                with pytest.raises(AuthorizationError) as caught:
                    await client.connect()
            assert server.subjects == []
            return caught.value.message

    message = asyncio.run(run())
    assert "for the token just obtained" in message and "invalid_token" in message


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_an_app_tool_sees_the_token_in_its_context(issuers: tuple[str, str], revision: str) -> None:
    """``ctx.auth`` of an ``App`` behind ``app.asgi(auth=...)``: the verified token's subject and
    scopes reach the tool, in a handshake revision and a per-request-``_meta`` one alike."""
    import uvicorn

    issuer, _ = issuers
    app = App("protected-app", "1")

    @app.tool()
    def whoami(ctx: Context) -> str:
        assert ctx.auth is not None
        return f"{ctx.auth.subject} {' '.join(sorted(ctx.auth.scopes))}"

    async def run() -> str:
        port = free_port()
        url = f"http://127.0.0.1:{port}/mcp"
        rs = ResourceServer(url, issuer, required_scopes=["mcp:read"])
        web = uvicorn.Server(
            uvicorn.Config(app.asgi(auth=rs), host="127.0.0.1", port=port, log_level="warning")
        )
        serving = asyncio.ensure_future(web.serve())
        try:
            while not web.started:
                await asyncio.sleep(0.02)
            auth = OAuthClient(ClientCredentials("app", "app-secret"))
            session = ClientSession(revisions=(revision,), info={"name": "t", "version": "1"})
            async with StreamableHTTPClient(url, session, auth=auth) as client:
                await client.connect()
                result = await client.call("tools/call", {"name": "whoami", "arguments": {}})
            return str(result.content[0].text)
        finally:
            web.should_exit = True
            await serving

    assert asyncio.run(run()) == "app mcp:read"
