"""The HTTP+SSE transport (MCP 2024-11-05's HTTP transport, mcpbind[http]) end to end: our
``SSEClient`` against our ``SSEServer`` under uvicorn on 127.0.0.1, each limit of the server
answered as documented, and ``connect_http`` picking Streamable HTTP or HTTP+SSE."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import mcpbind
from mcpbind import ClientSession, ProtocolError
from mcpbind.events import ErrorReceived, NotificationReceived, ProgressReceived
from mcpbind.session import ServerSession
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.sse_client import SSEClient, connect_http
from mcpbind.transports.sse_server import SSEServer
from mcpbind.validate import validate_lines
from tests._net import free_port
from tests.test_http_transport import AsksForEver, gave_up, some_roots

pytestmark = pytest.mark.timeout(60)

INFO = {"name": "sse-test", "version": "1"}
RELEASED = mcpbind.REVISIONS[: mcpbind.REVISIONS.index(mcpbind.LATEST) + 1]
# The released revisions with the initialize handshake: the ones HTTP+SSE carries.
HANDSHAKE = tuple(r for r in RELEASED if mcpbind.bindings(r).FACTS.handshake == "initialize")
CAPS = {"roots": {"listChanged": True}, "sampling": {}}
ROOTS = {"roots": [{"uri": "file:///work", "name": "work"}]}
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}


class Recording(ClientSession):
    """A client session that keeps every message it sends and receives: the session's transcript,
    one JSON-RPC message a line, for ``mcpbind validate``'s checker."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.wire: list[str] = []

    def receive(self, data: bytes | str) -> Any:
        self.wire.append(data.decode() if isinstance(data, bytes) else data)
        return super().receive(data)

    def data_to_send(self) -> list[bytes]:
        out = super().data_to_send()
        self.wire.extend(m.decode() for m in out)
        return out


class Gate:
    """What the test handler's slow tools wait on, and what it saw."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.cancelled: list[str] = []
        self.waiting: list[Any] = []


def handler_with(gate: Gate, flood: int = 0) -> Callable[[Call], Awaitable[Any]]:
    async def handler(call: Call) -> Any:
        if call.method == "tools/list":
            return {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}
        if call.method != "tools/call":
            raise ProtocolError(-32601, f"Method not found: {call.method!r}")
        name, arguments = call.params.name, call.params.arguments or {}
        if name == "echo":
            for step in (1, 2):
                with contextlib.suppress(ProtocolError):  # a request without a progress token
                    call.progress(step, 2)
                await asyncio.sleep(0)
            return text(json.dumps(arguments))
        if name == "ask":  # the server's own requests and a notification, within a call
            roots = await call.request("roots/list")
            sampled = await call.request(
                "sampling/createMessage",
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                    "maxTokens": 5,
                },
            )
            call.notify("notifications/message", {"level": "info", "data": "asked"})
            return text(json.dumps([roots.roots[0].uri, sampled.content.text]))
        if name == "slow":
            gate.waiting.append(call.id)
            try:
                await gate.open.wait()
            except asyncio.CancelledError:
                gate.cancelled.append(str(call.id))
                raise
            return text("done")
        if name == "flood":  # more notifications at once than the stream may hold
            for i in range(flood):
                call.notify("notifications/message", {"level": "info", "data": i})
            return text("flooded")
        raise ProtocolError(-32602, f"no tool {name!r}")

    return handler


TOOLS = ("echo", "ask", "slow", "flood")


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def sse_server(gate: Gate, revisions: tuple[str, ...] = HANDSHAKE, **limits: Any) -> SSEServer:
    return SSEServer(
        handler_with(gate, limits.pop("flood", 0)),
        revisions=revisions,
        capabilities={"tools": {}, "logging": {}},
        info=INFO,
        **limits,
    )


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """``app`` under uvicorn on a free loopback port; yields its base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="error", timeout_graceful_shutdown=2
    )
    web = uvicorn.Server(config)
    task = asyncio.ensure_future(web.serve())
    try:
        while not web.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        web.should_exit = True
        await asyncio.wait_for(task, 10)


async def answer(event: Any) -> Any:
    return ROOTS if event.method == "roots/list" else SAMPLED


def client(base: str, revision: str = "2024-11-05", **options: Any) -> SSEClient:
    session = Recording(revisions=(revision,), capabilities=CAPS, info=INFO)
    options.setdefault("on_request", answer)
    return SSEClient(f"{base}/sse", session, **options)


async def until(condition: Callable[[], Any]) -> None:
    """Wait for something the other side does (the test's timeout bounds the wait)."""
    while not condition():
        await asyncio.sleep(0.01)


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 45))


# -- the conversation ----------------------------------------------------------------------------


@pytest.mark.parametrize("revision", HANDSHAKE)
def test_client_and_server_talk_in_each_revision_the_transport_carries(revision: str) -> None:
    """Requests, progress, the server's own requests and notifications (within a call and
    outside any), a client notification: all cross, and the whole transcript is valid in the
    revision."""

    async def go() -> None:
        heard: list[str] = []
        server = sse_server(Gate(), on_event=lambda s, e: heard.append(getattr(e, "method", "")))
        async with serving(server) as base, client(base, revision) as c:
            negotiated = await c.connect()
            assert negotiated.revision == revision == c.session.revision
            assert c.endpoint == f"{base}/messages?session_id={c.session_id}"
            assert list(server.sessions) == [c.session_id]
            M = mcpbind.bindings(revision)

            echoed = await c.call(
                "tools/call", {"name": "echo", "arguments": {"x": 1}}, progress=True
            )
            assert type(echoed) is M.CallToolResult
            assert json.loads(echoed.content[0].text) == {"x": 1}
            assert [e.progress for e in c.events if isinstance(e, ProgressReceived)] == [1, 2]

            asked = await c.call("tools/call", {"name": "ask", "arguments": {}})
            assert json.loads(asked.content[0].text) == ["file:///work", "sampled"]
            logged = [e for e in c.events if isinstance(e, NotificationReceived)]
            assert [(e.method, e.params.data) for e in logged] == [
                ("notifications/message", "asked")
            ]

            await c.notify("notifications/roots/list_changed")
            await until(lambda: "notifications/roots/list_changed" in heard)

            sid = c.session_id
            assert sid is not None
            roots = await server.request(sid, "roots/list")  # outside any call
            assert type(roots) is M.ListRootsResult and roots.roots[0].name == "work"
            assert server.notify(sid, "notifications/message", {"level": "info", "data": "late"})
            await until(
                lambda: len([e for e in c.events if isinstance(e, NotificationReceived)]) == 2
            )
        assert not server.sessions  # the stream closed with the client: so did the session
        findings = list(validate_lines(c.session.wire, revision))
        assert findings == []
        methods = {json.loads(line).get("method") for line in c.session.wire}
        assert {"initialize", "tools/call", "roots/list", "sampling/createMessage"} <= methods

    run(go())


def test_a_stream_that_closes_ends_its_session_and_cancels_what_is_in_flight() -> None:
    async def go() -> None:
        gate = Gate()
        server = sse_server(gate)
        never = asyncio.Event()

        async def silent(event: Any) -> Any:
            await never.wait()

        async with serving(server) as base:
            c = client(base, on_request=silent)
            await c.connect()
            sid = c.session_id
            assert sid is not None
            slow = asyncio.ensure_future(c.call("tools/call", {"name": "slow", "arguments": {}}))
            asked = asyncio.ensure_future(server.request(sid, "roots/list"))
            await until(lambda: gate.waiting and server.sessions[sid].waiting)
            await c.close()
            with pytest.raises(ProtocolError, match="Connection closed") as info:
                await slow
            assert info.value.code == -32000
            with pytest.raises(ConnectionError, match="closed before the client answered"):
                await asked
            await until(lambda: gate.cancelled)
            assert sid not in server.sessions
            with pytest.raises(LookupError):
                await server.request(sid, "roots/list")
            assert (
                server.notify(sid, "notifications/message", {"level": "info", "data": 1}) is False
            )
            async with httpx.AsyncClient() as http:
                late = await http.post(c.endpoint or "", json={"jsonrpc": "2.0", "method": "x"})
            assert late.status_code == 404 and late.json()["error"]["code"] == -32600

    run(go())


# -- the limits ----------------------------------------------------------------------------------


def test_host_origin_accept_session_and_content_type_are_checked() -> None:
    async def go() -> None:
        server = sse_server(Gate())
        async with serving(server) as base, httpx.AsyncClient(base_url=base) as http:
            for headers in ({"Host": "evil.example"}, {"Origin": "http://evil.example"}):
                refused = await http.get("/sse", headers=headers)
                assert refused.status_code == 403
                assert "Host or Origin" in refused.json()["error"]["message"]
                post = await http.post("/messages?session_id=x", headers=headers, content=b"{}")
                assert post.status_code == 403
            assert (await http.get("/sse", headers={"Accept": "text/html"})).status_code == 406
            assert (await http.head("/sse")).status_code == 405
            missing = await http.post("/messages", json={})
            assert missing.status_code == 400 and "session_id" in missing.json()["error"]["message"]
            unknown = await http.post("/messages?session_id=nope", json={})
            assert unknown.status_code == 404
            assert not server.sessions  # none of these opened one
            async with client(base) as c:
                await c.connect()
                wrong = await http.post(
                    c.endpoint or "", content=b"{}", headers={"Content-Type": "text/plain"}
                )
                assert wrong.status_code == 415
                assert (await c.call("tools/call", {"name": "echo", "arguments": {}})).content

    run(go())


def test_bodies_that_cannot_be_read_are_answered_on_the_stream_and_the_session_goes_on() -> None:
    async def go() -> None:
        server = sse_server(Gate())
        deep = b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"x": '
        deep += b"[" * 10**6 + b"]" * 10**6 + b"}}"
        bodies = [b"{not json", deep, b'{"jsonrpc": "2.0", "id": 4, "method": {}}']
        async with serving(server) as base, client(base) as c, httpx.AsyncClient() as http:
            await c.connect()
            for body in bodies:
                posted = await http.post(
                    c.endpoint or "", content=body, headers={"Content-Type": "application/json"}
                )
                assert posted.status_code == 202

            def errors() -> list[int]:
                return [e.code for e in c.events if isinstance(e, ErrorReceived)]

            await until(lambda: len(errors()) == 3)
            assert errors() == [-32700, -32700, -32600]
            assert (await c.call("tools/call", {"name": "echo", "arguments": {}})).content

    run(go())


def test_a_body_past_max_body_size_is_refused_with_413_and_the_session_goes_on() -> None:
    async def go() -> None:
        server = sse_server(Gate(), max_body_size=2048, body_timeout=5)
        async with serving(server) as base, client(base) as c:
            await c.connect()
            # A Content-Length past the bound is answered before a byte of the body is sent.
            port = int(base.rsplit(":", 1)[1])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(
                f"POST {(c.endpoint or '').removeprefix(base)} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n".encode()
            )
            head = await reader.readuntil(b"\r\n\r\n")
            writer.close()
            assert head.startswith(b"HTTP/1.1 413"), head
            big = {"name": "echo", "arguments": {"blob": "x" * 4096}}
            with pytest.raises(ProtocolError, match="max_body_size") as info:
                await c.call("tools/call", big)
            assert info.value.code == -32600 and "HTTP 413" in info.value.message

            # A body sent in chunks, with no Content-Length to refuse it by, is read no further.
            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(10):
                    yield b" " * 1024

            async with httpx.AsyncClient() as http:
                chunked = await http.post(
                    c.endpoint or "", content=chunks(), headers={"Content-Type": "application/json"}
                )
            assert chunked.status_code == 413 and "max_body_size" in chunked.text
            small = await c.call("tools/call", {"name": "echo", "arguments": {"blob": "x"}})
            assert json.loads(small.content[0].text) == {"blob": "x"}

    run(go())


def test_a_body_that_stalls_is_answered_408_after_body_timeout() -> None:
    async def go() -> None:
        server = sse_server(Gate(), body_timeout=0.2)
        async with serving(server) as base, client(base) as c:
            await c.connect()
            port = int(base.rsplit(":", 1)[1])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            path = (c.endpoint or "").removeprefix(base)
            writer.write(
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                "Content-Length: 100\r\n\r\n{".encode()
            )
            await writer.drain()
            head = await reader.read()  # the server closes the connection after its answer
            writer.close()
            assert head.startswith(b"HTTP/1.1 408"), head
            assert b"body_timeout" in head

    run(go())


def test_past_max_sessions_a_new_stream_is_refused_with_503() -> None:
    async def go() -> None:
        server = sse_server(Gate(), max_sessions=1, session_evictable_after=3600)
        async with serving(server) as base:
            async with client(base) as first:
                await first.connect()
                second = client(base)
                with pytest.raises(ProtocolError, match="HTTP 503") as info:
                    await second.connect()
                await second.close()
                assert "max_sessions" in str(info.value)
                assert first.session_id in server.sessions  # not evicted: in use recently
                assert (await first.call("tools/call", {"name": "echo", "arguments": {}})).content
            await until(lambda: not server.sessions)
            async with client(base) as third:  # room again
                assert (await third.connect()).revision == "2024-11-05"

    run(go())


def test_past_max_sessions_only_a_session_with_nothing_in_flight_is_evicted() -> None:
    async def go() -> None:
        gate = Gate()
        server = sse_server(gate, max_sessions=2, session_evictable_after=0)
        async with serving(server) as base:
            busy, quiet, newcomer, late = (client(base) for _ in range(4))
            await busy.connect()
            await quiet.connect()
            call = asyncio.ensure_future(busy.call("tools/call", {"name": "slow", "arguments": {}}))
            await until(lambda: gate.waiting)
            await newcomer.connect()  # the quiet one made room
            assert set(server.sessions) == {busy.session_id, newcomer.session_id}
            await until(lambda: quiet.closed)
            with pytest.raises(ProtocolError, match="Connection closed"):
                await quiet.call("tools/call", {"name": "echo", "arguments": {}})
            newcoming = asyncio.ensure_future(
                newcomer.call("tools/call", {"name": "slow", "arguments": {}})
            )
            await until(lambda: len(gate.waiting) == 2)
            with pytest.raises(ProtocolError, match="HTTP 503"):  # both busy: nobody goes
                await late.connect()
            gate.open.set()
            assert (await call).content[0].text == "done"
            assert (await newcoming).content[0].text == "done"
            for c in (busy, quiet, newcomer, late):
                await c.close()

    run(go())


def test_an_idle_session_expires_and_a_busy_one_does_not() -> None:
    async def go() -> None:
        gate = Gate()
        server = sse_server(gate, session_idle_timeout=1.0)
        async with serving(server) as base, client(base) as busy, client(base) as idle:
            await busy.connect()
            call = asyncio.ensure_future(busy.call("tools/call", {"name": "slow", "arguments": {}}))
            await until(lambda: gate.waiting)
            await idle.connect()
            await until(lambda: idle.closed)
            assert idle.session_id not in server.sessions
            with pytest.raises(ProtocolError, match="Connection closed"):
                await idle.call("tools/call", {"name": "echo", "arguments": {}})
            assert busy.session_id in server.sessions  # a request in flight: in use
            gate.open.set()
            assert (await call).content[0].text == "done"

    run(go())


def test_requests_in_flight_past_max_in_flight_get_an_error() -> None:
    async def go() -> None:
        gate = Gate()
        server = sse_server(gate, max_in_flight=1)
        async with serving(server) as base, client(base) as c:
            await c.connect()
            call = asyncio.ensure_future(c.call("tools/call", {"name": "slow", "arguments": {}}))
            await until(lambda: gate.waiting)
            with pytest.raises(ProtocolError) as info:
                await c.call("tools/call", {"name": "echo", "arguments": {}})
            # Word for word what StreamableHTTPServer answers (tests/test_http_hostile.py).
            assert info.value.code == -32603
            assert info.value.message == (
                "Server busy: this session is handling as many requests at once as it may "
                "(max_in_flight: 1); send it again once one is answered"
            )
            assert info.value.data == {"limit": "max_in_flight", "max": 1}
            gate.open.set()
            assert (await call).content[0].text == "done"
            assert (await c.call("tools/call", {"name": "echo", "arguments": {}})).content

    run(go())


def test_a_stream_past_max_queued_ends_its_session_answering_what_is_owed() -> None:
    async def go() -> None:
        server = sse_server(Gate(), max_queued=5, flood=20)
        async with serving(server) as base, client(base) as c:
            await c.connect()
            with pytest.raises(ProtocolError, match="max_queued") as info:
                await c.call("tools/call", {"name": "flood", "arguments": {}})
            assert info.value.code == -32603
            assert info.value.data == {"limit": "max_queued", "max": 5}
            assert not server.sessions
            await until(lambda: c.closed)
            with pytest.raises(ProtocolError, match="Connection closed"):
                await c.call("tools/call", {"name": "echo", "arguments": {}})
        # What waited on the stream was still written, what did not fit was not.
        assert len([e for e in c.events if isinstance(e, NotificationReceived)]) == 5

    run(go())


def test_the_client_bounds_the_server_requests_it_answers_at_once() -> None:
    async def go() -> None:
        server = sse_server(Gate())
        held = asyncio.Event()
        release = asyncio.Event()

        async def slow_answer(event: Any) -> Any:
            held.set()
            await release.wait()
            return ROOTS

        async with (
            serving(server) as base,
            client(base, on_request=slow_answer, max_in_flight=1) as c,
        ):
            await c.connect()
            sid = c.session_id or ""
            first = asyncio.ensure_future(server.request(sid, "roots/list"))
            await held.wait()
            with pytest.raises(ProtocolError, match="max_in_flight") as info:
                await server.request(sid, "roots/list")
            assert info.value.code == -32000
            release.set()
            assert (await first).roots[0].uri == "file:///work"

    run(go())


def test_a_server_asking_for_input_for_ever_is_given_up_after_max_rounds() -> None:
    # HTTP+SSE carries sessions opened by initialize, so an SSEServer refuses the revisions with
    # input rounds; a session class of its own gets one served anyway (a server set up wrong).
    from mcpbind.transports._answer import MAX_ROUNDS

    def rounding(**config: Any) -> ServerSession:
        return ServerSession(**{**config, "revisions": ("2026-07-28",)})

    asks = AsksForEver()
    answered: list[str] = []

    async def roots(event: Any) -> Any:
        answered.append(event.method)
        return await some_roots(event)

    async def go() -> None:
        server = SSEServer(asks, capabilities={"tools": {}}, info=INFO, session_class=rounding)
        session = ClientSession(revisions=("2026-07-28",), capabilities={"roots": {}}, info=INFO)
        async with (
            serving(server) as base,
            SSEClient(f"{base}/sse", session, on_request=roots) as c,
        ):
            assert (await c.connect()).revision == "2026-07-28"
            with pytest.raises(ProtocolError) as caught:
                await c.call("tools/call", {"name": "loop", "arguments": {}})
            gave_up(caught.value, MAX_ROUNDS)
            assert await c.call("tools/list", {}) is not None  # the connection goes on

    run(go())
    assert asks.states == [None, *(f"round {n}" for n in range(1, MAX_ROUNDS + 1))]
    assert answered == ["roots/list"] * MAX_ROUNDS
    assert inspect.signature(SSEClient).parameters["max_rounds"].default == MAX_ROUNDS


@pytest.mark.parametrize("option", ["max_sessions", "max_body_size", "max_queued", "body_timeout"])
def test_a_limit_must_be_positive(option: str) -> None:
    with pytest.raises(ValueError, match=option):
        SSEServer(handler_with(Gate()), **{option: 0})


def test_revisions_without_a_session_are_refused_and_left_out_by_default() -> None:
    with pytest.raises(ValueError, match="2026-07-28"):
        SSEServer(handler_with(Gate()), revisions=("2026-07-28", "2025-11-25"))
    assert SSEServer(handler_with(Gate())).revisions == tuple(reversed(HANDSHAKE))


# -- the client's own checks ---------------------------------------------------------------------


def test_an_endpoint_on_another_origin_is_refused() -> None:
    async def go() -> None:
        # A messages path starting with // names another host once joined to the stream's URL.
        server = SSEServer(handler_with(Gate()), messages_path="//evil.example/messages")
        async with serving(server) as base, client(base) as c:
            with pytest.raises(ProtocolError, match="another origin"):
                await c.connect()
            await c.close()
            await until(lambda: not server.sessions)

    run(go())


def test_a_url_that_is_no_event_stream_is_refused_with_its_status() -> None:
    async def go() -> None:
        streamable = StreamableHTTPServer(handler_with(Gate()), info=INFO)
        async with serving(streamable) as base:
            session = ClientSession(revisions=("2024-11-05",), info=INFO)
            async with SSEClient(f"{base}/mcp", session) as c:
                with pytest.raises(ProtocolError, match="not an event stream"):
                    await c.connect()

    run(go())


# -- connect_http: Streamable HTTP first, HTTP+SSE on a 4xx --------------------------------------


def both(gate: Gate) -> tuple[Starlette, SSEServer, StreamableHTTPServer]:
    """One application with both transports: Streamable HTTP at /mcp, HTTP+SSE at /sse."""
    old = SSEServer(handler_with(gate), capabilities={"tools": {}}, info=INFO)
    new = StreamableHTTPServer(
        handler_with(gate), revisions=HANDSHAKE, capabilities={"tools": {}}, info=INFO
    )
    return Starlette(routes=[*old.routes, Mount("", app=new)]), old, new


@pytest.mark.parametrize(
    ("path", "revisions", "kind", "agreed"),
    [
        ("/mcp", ("2025-11-25",), StreamableHTTPClient, "2025-11-25"),
        # POST /sse is 405 without a JSON-RPC answer: the old transport, as the spec says.
        ("/sse", ("2024-11-05",), SSEClient, "2024-11-05"),
        # The discover probe goes through the old transport too, and falls back to initialize.
        ("/sse", ("2026-07-28", "2025-06-18"), SSEClient, "2025-06-18"),
    ],
)
def test_connect_http_falls_back_to_http_sse_on_a_4xx_to_the_opening(
    path: str, revisions: tuple[str, ...], kind: type, agreed: str
) -> None:
    async def go() -> None:
        app, old, new = both(Gate())
        async with serving(app) as base:
            session = Recording(revisions=revisions, info=INFO)
            connected = await connect_http(f"{base}{path}", session)
            try:
                assert type(connected) is kind and session.revision == agreed
                echoed = await connected.call("tools/call", {"name": "echo", "arguments": {"a": 1}})
                assert json.loads(echoed.content[0].text) == {"a": 1}
                assert bool(old.sessions) == (kind is SSEClient)
            finally:
                await connected.close()
            # The transcript is valid in the agreed revision, after the discover probe and its
            # refusal where the session opened with one.
            probed = mcpbind.bindings(revisions[0]).FACTS.handshake != "initialize"
            assert list(validate_lines(session.wire[2 if probed else 0 :], agreed)) == []

    run(go())


def test_connect_http_takes_a_4xx_json_rpc_answer_as_streamable_http() -> None:
    """A Streamable HTTP server that speaks no discover answers the probe with 404 and a JSON-RPC
    error: that is an answer, not the old transport, and the session falls back to initialize
    over Streamable HTTP."""

    async def go() -> None:
        app, old, new = both(Gate())
        async with serving(app) as base:
            session = ClientSession(revisions=("2026-07-28", "2025-11-25"), info=INFO)
            connected = await connect_http(f"{base}/mcp", session)
            try:
                assert type(connected) is StreamableHTTPClient
                assert session.revision == "2025-11-25" and not old.sessions
            finally:
                await connected.close()

    run(go())
