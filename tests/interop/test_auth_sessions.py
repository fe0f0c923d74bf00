"""Sessions bound to the principal that opened them (docs/auth.md), against the real authorization
server of tests/interop/authserver.py: with ``auth=``, another user's valid token with a session's
``Mcp-Session-Id`` gets the 404 an unknown id gets, on POST, GET, GET with ``Last-Event-ID`` and
DELETE, with the in-memory store and with two workers sharing a real Redis; the gateway's links
are bound the same way, its session-less ones keyed by principal (two OAuth clients whose tokens
carry no ``sub`` and the same ``clientInfo`` get links of their own)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mcpbind import ClientSession, ProtocolError
from mcpbind.auth.resource import ResourceServer
from mcpbind.bridge.gateway import Gateway
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.store import RedisStore
from tests._net import free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

DEEP = os.environ.get("MCPBIND_DEEP") == "1"
REVISION = "2025-11-25"
INFO = {"name": "t", "version": "1"}
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def token(issuer: str, client: str, resource: str) -> str:
    async with httpx.AsyncClient() as http:
        answer = await http.post(
            f"{issuer}/token",
            auth=(client, f"{client}-secret"),
            data={"grant_type": "client_credentials", "scope": "mcp:read", "resource": resource},
        )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


def request(rid: int, method: str, params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}


def events(text: str) -> list[tuple[str | None, Any]]:
    """The (id, message) of each event of an event stream's body (message None: priming)."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "id" in fields or "data" in fields:
            data = fields.get("data", "").strip()
            out.append((fields.get("id"), json.loads(data) if data else None))
    return out


class Worker:
    """A ``StreamableHTTPServer`` protected by the authorization server, under uvicorn in the
    test's loop: what its handler saw (session id, subject) of every call."""

    def __init__(self, issuer: str, resource: str, port: int, store: Any = None) -> None:
        import uvicorn

        self.url = f"http://127.0.0.1:{port}/mcp"
        self.seen: list[tuple[str | None, str | None]] = []
        self.app = StreamableHTTPServer(
            self.handler,
            revisions=(REVISION,),
            capabilities={"tools": {}, "logging": {}},
            info={"name": "bound", "version": "1"},
            auth=ResourceServer(resource, issuer, required_scopes=["mcp:read"]),
            store=store,
        )
        self.web = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning")
        )

    async def handler(self, call: Call) -> Any:
        subject = call.auth.subject if call.auth else None
        self.seen.append((call.session_id, subject))
        if call.method == "tools/list":
            return {"tools": []}
        if call.method == "tools/call":
            # A notification first: the answer comes on an event stream with event ids.
            call.notify("notifications/message", {"level": "info", "data": "working"})
            text = f"{subject} {call.session_id}"
            return {"content": [{"type": "text", "text": text}]}
        raise ProtocolError(-32601, f"Method not found: {call.method!r}")

    async def __aenter__(self) -> Worker:
        self.serving = asyncio.ensure_future(self.web.serve())
        while not self.web.started:
            assert not self.serving.done(), "the server did not start"
            await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.web.should_exit = True
        await self.serving
        await self.app.aclose()


class User:
    """A client with a token of its own, over raw HTTP."""

    def __init__(self, http: httpx.AsyncClient, bearer: str) -> None:
        self.http = http
        self.bearer = bearer

    def headers(self, sid: str | None, **more: str) -> dict[str, str]:
        headers = {**ACCEPT, "Authorization": f"Bearer {self.bearer}", **more}
        if sid is not None:
            headers |= {"Mcp-Session-Id": sid, "MCP-Protocol-Version": REVISION}
        return headers

    async def post(self, url: str, message: Any, sid: str | None = None) -> httpx.Response:
        return await self.http.post(url, json=message, headers=self.headers(sid))

    async def get(self, url: str, sid: str, **more: str) -> httpx.Response:
        headers = self.headers(sid, **more) | {"Accept": "text/event-stream"}
        async with self.http.stream("GET", url, headers=headers) as response:
            if response.status_code == 200:
                return response  # an open stream: its head is enough (the body is not read)
            await response.aread()
            return response

    async def delete(self, url: str, sid: str) -> httpx.Response:
        return await self.http.delete(url, headers=self.headers(sid))

    async def open(self, url: str) -> str:
        initialize = request(
            1, "initialize", {"protocolVersion": REVISION, "capabilities": {}, "clientInfo": INFO}
        )
        opened = await self.post(url, initialize)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["Mcp-Session-Id"]
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await self.post(url, initialized, sid)).status_code == 202
        return sid

    async def call(self, url: str, sid: str, rid: int) -> tuple[list[str | None], str]:
        """A tools/call in session ``sid``: the ids of its response's events, and its text."""
        answered = await self.post(url, request(rid, "tools/call", {"name": "who"}), sid)
        assert answered.status_code == 200, answered.text
        assert answered.headers["content-type"].startswith("text/event-stream")
        seen = events(answered.text)
        (answer,) = [m for _, m in seen if m is not None and m.get("id") == rid]
        return [i for i, _ in seen], answer["result"]["content"][0]["text"]


def same_as_unknown(response: httpx.Response, unknown: httpx.Response, sid: str) -> None:
    """``response`` (to a request naming session ``sid``) is exactly what a never issued id got:
    the status, the media type, the body with the id in it."""
    assert response.status_code == 404, (response.request.method, response.status_code)
    assert response.headers["content-type"] == unknown.headers["content-type"]
    assert "Mcp-Session-Id" not in response.headers
    made_up = unknown.request.headers["Mcp-Session-Id"]
    assert response.text == unknown.text.replace(made_up, sid)


async def another_principal_finds_nothing(a: User, b: User, urls: list[str], sid: str) -> None:
    """User ``b`` names ``a``'s session ``sid`` at each of ``urls`` (workers): every request
    gets what an unknown id gets, and the session is untouched (``a`` goes on, then ends it)."""
    first = urls[0]
    rid = 10
    ids, text = await a.call(first, sid, rid)
    assert text.startswith("app ")
    last_event = ids[0]
    assert last_event is not None and ":" in last_event
    made_up = secrets.token_hex(16)
    for url in urls:
        for method in ("tools/list", "tools/call"):
            rid += 1
            params = {"name": "who"} if method == "tools/call" else {}
            unknown = await b.post(url, request(rid, method, params), made_up)
            assert unknown.status_code == 404
            same_as_unknown(await b.post(url, request(rid, method, params), sid), unknown, sid)
        unknown = await b.get(url, made_up)
        same_as_unknown(await b.get(url, sid), unknown, sid)
        # Resuming a's stream from its first event (its answer follows it in the log).
        unknown = await b.get(url, made_up, **{"Last-Event-ID": last_event})
        same_as_unknown(await b.get(url, sid, **{"Last-Event-ID": last_event}), unknown, sid)
        unknown = await b.delete(url, made_up)
        same_as_unknown(await b.delete(url, sid), unknown, sid)
    for url in urls:  # still a's, on every worker
        rid += 1
        _, text = await a.call(url, sid, rid)
        assert text == f"app {sid}"
    assert (await a.delete(urls[-1], sid)).status_code == 200
    for url in urls:
        assert (await a.post(url, request(99, "tools/list"), sid)).status_code == 404


@contextlib.asynccontextmanager
async def workers(issuer: str, count: int, redis: str | None) -> AsyncIterator[list[Worker]]:
    """``count`` workers of one resource, sharing a store in ``redis`` (each its own
    ``RedisStore``, one key prefix) or, without, one worker with its memory store."""
    prefix = f"bound{secrets.token_hex(4)}:"
    ports = [free_port() for _ in range(count)]
    resource = f"http://127.0.0.1:{ports[0]}/mcp"
    async with contextlib.AsyncExitStack() as stack:
        found = []
        for port in ports:
            store = RedisStore(redis, prefix=prefix) if redis else None
            found.append(await stack.enter_async_context(Worker(issuer, resource, port, store)))
        yield found


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_another_principal_gets_404_for_a_session(
    authorization_servers: tuple[str, str], redis_url: str, store: str
) -> None:
    issuer = authorization_servers[0]

    async def run() -> list[tuple[str | None, str | None]]:
        redis = redis_url if store == "redis" else None
        async with workers(issuer, 2 if redis else 1, redis) as found:
            urls = [w.url for w in found]
            async with httpx.AsyncClient(timeout=30) as http:
                a = User(http, await token(issuer, "app", urls[0]))
                b = User(http, await token(issuer, "other", urls[0]))
                sid = await a.open(urls[0])
                await another_principal_finds_nothing(a, b, urls, sid)
                # b's own session is b's: a cannot use it either.
                theirs = await b.open(urls[-1])
                _, text = await b.call(urls[0], theirs, 1)
                assert text == f"other {theirs}"
                refused = await a.post(urls[0], request(2, "tools/list"), theirs)
                assert refused.status_code == 404
            return [seen for w in found for seen in w.seen]

    seen = asyncio.run(run())
    # Every call any handler saw in a session came from the principal that opened it.
    by_session: dict[str | None, set[str | None]] = {}
    for sid, subject in seen:
        by_session.setdefault(sid, set()).add(subject)
    assert len(by_session) == 2 and all(len(s) == 1 for s in by_session.values()), by_session


class Upstream:
    """The server behind the gateway (2025-11-25, no authorization of its own): every call
    answers with the upstream session it arrived in, which is the gateway's link."""

    def __init__(self) -> None:
        import uvicorn

        port = free_port()
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.app = StreamableHTTPServer(
            self.handler,
            revisions=(REVISION,),
            capabilities={"tools": {}},
            info={"name": "upstream", "version": "1"},
        )
        self.web = uvicorn.Server(
            uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning")
        )

    async def handler(self, call: Call) -> Any:
        if call.method == "tools/list":
            return {"tools": [{"name": "link", "inputSchema": {"type": "object"}}]}
        if call.method == "tools/call":
            return {"content": [{"type": "text", "text": str(call.session_id)}]}
        raise ProtocolError(-32601, f"Method not found: {call.method!r}")


@contextlib.asynccontextmanager
async def gateway(issuer: str) -> AsyncIterator[str]:
    """A gateway requiring tokens of ``issuer`` in front of an ``Upstream``: its URL."""
    import uvicorn

    upstream = Upstream()
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    front = Gateway(
        upstream=upstream.url,
        server_revisions=(REVISION,),
        auth=ResourceServer(url, issuer, required_scopes=["mcp:read"]),
        log=lambda line: None,
    )
    web = uvicorn.Server(uvicorn.Config(front, host="127.0.0.1", port=port, log_level="warning"))
    servings = [asyncio.ensure_future(upstream.web.serve()), asyncio.ensure_future(web.serve())]
    try:
        while not (upstream.web.started and web.started):
            assert not any(s.done() for s in servings), "a server did not start"
            await asyncio.sleep(0.02)
        yield url
    finally:
        await front.aclose()
        upstream.web.should_exit = web.should_exit = True
        await asyncio.gather(*servings)
        await upstream.app.aclose()


def test_the_gateway_binds_sessions_and_links_to_the_principal(
    authorization_servers: tuple[str, str],
) -> None:
    """Through the gateway: b's call in a's session gets the 404 of an unknown id (the front
    binds it); clients of the session-less revision whose tokens have no ``sub`` (two OAuth
    clients, the same ``clientInfo``) each get a link of their own (keyed by principal: client
    id and issuer), and each principal keeps its link."""
    issuer = authorization_servers[0]

    async def stateless(url: str, bearer: str) -> str:
        session = ClientSession(revisions=("2026-07-28",), info=INFO)
        headers = {"Authorization": f"Bearer {bearer}"}
        async with StreamableHTTPClient(url, session, headers=headers) as client:
            await client.connect()
            result = await client.call("tools/call", {"name": "link", "arguments": {}})
            return str(result.content[0].text)

    async def run() -> dict[str, list[str]]:
        async with gateway(issuer) as url, httpx.AsyncClient(timeout=30) as http:
            a = User(http, await token(issuer, "app", url))
            b = User(http, await token(issuer, "other", url))
            sid = await a.open(url)
            call = request(2, "tools/call", {"name": "link", "arguments": {}})
            mine = await a.post(url, call, sid)
            assert mine.status_code == 200 and "result" in mine.text, mine.text
            unknown = await b.post(url, call, secrets.token_hex(16))
            same_as_unknown(await b.post(url, call, sid), unknown, sid)
            links: dict[str, list[str]] = {}
            for client in ("anon-1", "anon-2", "anon-1", "anon-2"):
                bearer = await token(issuer, client, url)
                links.setdefault(client, []).append(await stateless(url, bearer))
            return links

    links = asyncio.run(run())
    assert len(set(links["anon-1"])) == 1 and len(set(links["anon-2"])) == 1, links
    assert links["anon-1"][0] != links["anon-2"][0], links


KINDS = ("own call", "post", "own call", "get", "own call", "resume", "own call", "delete")


async def crossfire(a: User, b: User, urls: list[str], count: int) -> dict[str, Any]:
    """``count`` requests at once (64 in flight), each user in turn: calls in its own session,
    and POST, GET, GET with ``Last-Event-ID`` and DELETE naming the other's session, at every
    worker; every answer checked as it comes (a call's text names its caller and session, every
    request in the other's session is what an unknown id gets)."""
    users = {"a": a, "b": b}
    names = {"a": "app", "b": "other"}
    sids = {"a": await a.open(urls[0]), "b": await b.open(urls[-1])}
    last_events = {}
    for who, user in users.items():
        ids, _ = await user.call(urls[0], sids[who], 1)
        last_events[who] = ids[0]
    made_up = secrets.token_hex(16)
    unknown: dict[tuple[str, str], httpx.Response] = {}
    for url in urls:
        unknown["post", url] = await b.post(url, request(2, "tools/call", {"name": "who"}), made_up)
        unknown["get", url] = await b.get(url, made_up)
        unknown["resume", url] = await b.get(url, made_up, **{"Last-Event-ID": last_events["a"]})
        unknown["delete", url] = await b.delete(url, made_up)
    own = {"a": 1, "b": 1}  # calls each made in its own session
    refused = 0
    gate = asyncio.Semaphore(64)

    async def one(n: int) -> None:
        nonlocal refused
        who, other = ("a", "b") if n % 2 == 0 else ("b", "a")
        user, url, kind = users[who], urls[n // 2 % len(urls)], KINDS[n // 2 % len(KINDS)]
        async with gate:
            if kind == "own call":
                _, text = await user.call(url, sids[who], 100 + n)
                assert text == f"{names[who]} {sids[who]}", (who, text)
                own[who] += 1
                return
            sid = sids[other]
            if kind == "post":
                answer = await user.post(url, request(2, "tools/call", {"name": "who"}), sid)
            elif kind == "get":
                answer = await user.get(url, sid)
            elif kind == "resume":
                answer = await user.get(url, sid, **{"Last-Event-ID": last_events[other]})
            else:
                answer = await user.delete(url, sid)
            same_as_unknown(answer, unknown[kind, url], sid)
            refused += 1

    await asyncio.gather(*(one(n) for n in range(count)))
    for who, user in users.items():  # both sessions still there, each its owner's
        for url in urls:
            _, text = await user.call(url, sids[who], 7)
            assert text == f"{names[who]} {sids[who]}"
            own[who] += 1
    return {"sids": sids, "own": own, "refused": refused}


@pytest.mark.deep
@pytest.mark.skipif(not DEEP, reason="deep run only (MCPBIND_DEEP=1, make test-deep)")
@pytest.mark.timeout(900)
@pytest.mark.parametrize("store", ["memory", "redis"])
def test_two_principals_sharing_session_ids_under_load(
    authorization_servers: tuple[str, str], redis_url: str, store: str
) -> None:
    """Two users hammer each other's session ids (4,000 requests at once: half of them POST,
    GET, GET with ``Last-Event-ID`` and DELETE in the other's session, half calls in their own),
    on one worker with the memory store, on two workers sharing a real Redis: every request in
    the other's session is refused as an unknown id, every call is answered to its caller in its
    own session, and no handler ever ran in a session for another principal."""
    issuer = authorization_servers[0]

    async def run() -> tuple[dict[str, Any], list[tuple[str | None, str | None]]]:
        redis = redis_url if store == "redis" else None
        async with workers(issuer, 2 if redis else 1, redis) as found:
            urls = [w.url for w in found]
            limits = httpx.Limits(max_connections=64)
            async with httpx.AsyncClient(timeout=60, limits=limits) as http:
                a = User(http, await token(issuer, "app", urls[0]))
                b = User(http, await token(issuer, "other", urls[0]))
                outcome = await crossfire(a, b, urls, 4000)
            return outcome, [seen for w in found for seen in w.seen]

    outcome, seen = asyncio.run(run())
    assert outcome["refused"] == 2000, outcome
    sids = outcome["sids"]
    for who, name in (("a", "app"), ("b", "other")):
        ran = [subject for sid, subject in seen if sid == sids[who]]
        assert ran == [name] * outcome["own"][who], (who, len(ran), outcome["own"])
    assert {sid for sid, _ in seen} == set(sids.values())
