"""The Streamable HTTP server against hostile and failing clients: bounded bodies, bad bodies that
get JSON-RPC answers instead of tracebacks, a session table an anonymous client cannot flush,
strict Content-Type and Host parsing, handlers cancelled when their client leaves, and (under a
real uvicorn on loopback) a connection cap and a header deadline that trickling connections cannot
get around."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind.transports.http_server import Call, StreamableHTTPServer
from tests._net import free_port

INFO = {"name": "hostile", "version": "1"}
JSON_ACCEPT = [
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def stateless(method: str, params: dict[str, Any] | None = None, rid: Any = 7) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": method,
        "params": {**(params or {}), "_meta": meta},
    }


STATELESS = [(b"mcp-protocol-version", b"2026-07-28")]
TOOLS_LIST = [(b"mcp-method", b"tools/list")]


class Exchange:
    """One HTTP exchange with an ASGI app, driven by hand: the request body is handed over chunk
    by chunk only when the app asks for it (``pulled`` counts what it took), and the client may
    leave at any moment (``leave``), which the app then hears as ``http.disconnect``."""

    def __init__(
        self,
        app: Any,
        method: str = "POST",
        headers: Iterable[tuple[bytes, bytes]] = JSON_ACCEPT,
        body: bytes | Iterable[bytes] = b"",
        *,
        complete: bool = True,
    ) -> None:
        self.headers = list(headers)
        if not any(k == b"host" for k, _ in self.headers):
            self.headers.append((b"host", b"127.0.0.1:8000"))
        self.scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": self.headers,
            "server": ("127.0.0.1", 8000),
            "client": ("127.0.0.1", 40000),
        }
        self._chunks: Iterator[bytes] = iter([body] if isinstance(body, bytes) else body)
        self._complete = complete  # False: the body never ends (a client that stalls)
        self._sent_all = False
        self.pulled = 0
        self.left = asyncio.Event()
        self.status: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.response_headers: dict[str, str] = {}
        self.parts: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.task = asyncio.ensure_future(self._run(app))

    async def _receive(self) -> dict[str, Any]:
        if not self._sent_all and not self.left.is_set():
            chunk = next(self._chunks, None)
            if chunk is not None:
                self.pulled += len(chunk)
                return {"type": "http.request", "body": chunk, "more_body": True}
            if self._complete:
                self._sent_all = True
                return {"type": "http.request", "body": b"", "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: dict[str, Any]) -> None:
        if self.left.is_set():
            return  # as uvicorn does (ASGI 2.3): nothing reaches a client that left
        if message["type"] == "http.response.start":
            self.response_headers = {k.decode(): v.decode() for k, v in message["headers"]}
            self.status.set_result(message["status"])
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.parts.put_nowait(message["body"])
            if not message.get("more_body"):
                self.parts.put_nowait(None)

    async def _run(self, app: Any) -> None:
        try:
            await app(self.scope, self._receive, self._send)
        except Exception as exc:  # what a server would turn into a bare 500
            crash = AssertionError(f"the app raised {type(exc).__name__}: {str(exc)[:200]}")
            if not self.status.done():
                self.status.set_exception(crash)
            self.parts.put_nowait(None)

    async def body(self) -> bytes:
        """The whole response body (the response must end)."""
        await self.status
        data = b""
        while (part := await self.parts.get()) is not None:
            data += part
        return data

    async def json(self) -> Any:
        return json.loads(await self.body())

    async def events(self) -> AsyncIterator[Any]:
        """The messages of an event-stream response, as they come."""
        await self.status
        buffer = b""
        while (part := await self.parts.get()) is not None:
            buffer += part
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data: "):
                        yield json.loads(line[6:])

    async def leave(self) -> None:
        """The client goes away; the app's task ends (it is not cancelled from outside)."""
        self.left.set()
        await asyncio.wait_for(asyncio.shield(self.task), 10)


def run(coro: Any, seconds: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coro, seconds))


def post(
    app: Any, message: Any, headers: Iterable[tuple[bytes, bytes]] = (), **kw: Any
) -> Exchange:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return Exchange(app, "POST", [*JSON_ACCEPT, *mirrored(message, headers)], body, **kw)


def mirrored(message: Any, headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers, with the Mcp-Method and Mcp-Name a stateless request must mirror from its
    body (as every 2026-07-28 client sends them)."""
    out = list(headers)
    if (b"mcp-protocol-version", b"2026-07-28") in out and isinstance(message, dict):
        if isinstance(message.get("method"), str):
            out.append((b"mcp-method", message["method"].encode()))
        name = (message.get("params") or {}).get("name")
        if isinstance(name, str):
            out.append((b"mcp-name", name.encode()))
    return out


async def handler(call: Call) -> Any:
    if call.method == "tools/list":
        tools: dict[str, Any] = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        if call.revision == "2026-07-28":
            tools.update(cacheScope="private", ttlMs=0)
        return tools
    raise AssertionError(f"unexpected {call.method}")


def held(
    cancelled: list[Any], first: Callable[[Call], Awaitable[None]] | None = None
) -> Callable[[Call], Awaitable[Any]]:
    """A handler that never answers a tools/call: it runs ``first`` (when given), then waits
    until cancelled, and records the call's id in ``cancelled``; other methods go to
    ``handler``."""

    async def holding(call: Call) -> Any:
        if call.method != "tools/call":
            return await handler(call)
        try:
            if first is not None:
                await first(call)
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(call.id)
            raise

    return holding


async def eventually(check: Callable[[], Any]) -> None:
    """Wait for ``check()`` to be true, for 10 s at most (a hang guard, not a timing check: the
    caller asserts what it waited for)."""
    for _ in range(500):
        if check():
            return
        await asyncio.sleep(0.02)


def server(**options: Any) -> StreamableHTTPServer:
    return StreamableHTTPServer(
        options.pop("handler", handler),
        revisions=("2025-11-25", "2026-07-28"),
        capabilities={"tools": {}},
        info=INFO,
        **options,
    )


async def open_session(app: StreamableHTTPServer) -> str:
    opened = post(app, INIT)
    assert await opened.status == 200
    sid = opened.response_headers["mcp-session-id"]
    await opened.body()
    done = post(app, INITIALIZED, [(b"mcp-session-id", sid.encode())])
    assert await done.status == 202
    return sid


def ping(rid: int = 5) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "ping"}


# -- 1. request bodies are bounded ---------------------------------------------------------------

MiB = 1024 * 1024


def junk(total: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    piece = b"x" * chunk
    for _ in range(total // chunk):
        yield piece


def test_a_body_past_the_limit_is_refused_with_413_after_reading_at_most_the_limit() -> None:
    async def go() -> None:
        app = server(max_body_size=1 * MiB)
        # No Content-Length: 100 MiB of junk streamed in 64 KiB chunks.
        big = Exchange(app, "POST", JSON_ACCEPT, junk(100 * MiB))
        assert await big.status == 413
        answer = await big.json()
        assert answer["error"]["code"] == -32600 and "1048576" in answer["error"]["message"]
        assert big.pulled <= 1 * MiB + 64 * 1024  # it stopped reading one chunk past the bound
        # A declared length past the bound is refused before a byte of the body is read.
        declared = Exchange(
            app,
            "POST",
            [*JSON_ACCEPT, (b"content-length", str(100 * MiB).encode())],
            junk(100 * MiB),
        )
        assert await declared.status == 413
        assert (await declared.json())["error"]["code"] == -32600
        assert declared.pulled == 0
        # Within the bound, a request is answered as ever.
        ok = post(app, stateless("tools/list"), STATELESS)
        assert await ok.status == 200
        assert (await ok.json())["result"]["tools"][0]["name"] == "echo"

    run(go())


def test_a_body_that_never_ends_is_answered_408_after_the_body_timeout() -> None:
    async def go() -> None:
        app = server(body_timeout=0.2)
        stalled = Exchange(app, "POST", JSON_ACCEPT, [b'{"jsonrpc": "2.0",'], complete=False)
        assert await stalled.status == 408
        assert (await stalled.json())["error"]["code"] == -32600
        assert stalled.response_headers["connection"] == "close"

    run(go())


# -- 2 and 3. bad bodies get JSON-RPC answers, never a traceback ---------------------------------

DEEP = 10**6


def deep_params() -> bytes:
    return (
        b'{"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"x": '
        + b"[" * DEEP
        + b"]" * DEEP
        + b"}}"
    )


def test_a_body_nesting_a_million_arrays_gets_a_parse_error() -> None:
    async def go() -> None:
        app = server(max_body_size=4 * MiB)
        flat = post(app, deep_params(), STATELESS)
        assert await flat.status == 400
        assert flat.response_headers["content-type"] == "application/json"
        assert (await flat.json())["error"]["code"] == -32700
        sid = await open_session(app)
        bound = post(app, deep_params(), [(b"mcp-session-id", sid.encode())])
        status = await bound.status
        assert bound.response_headers["content-type"] == "application/json"
        answer = await bound.json()
        # The status of any parse error on a session (its JSON-RPC errors all travel in a 200).
        broken = post(app, b"{", [(b"mcp-session-id", sid.encode())])
        assert (status, answer["error"]["code"]) == (await broken.status, -32700)
        await broken.body()
        still = post(app, ping(), [(b"mcp-session-id", sid.encode())])
        assert (await still.json())["result"] == {}

    run(go())


@pytest.mark.parametrize("method", [{}, [1]])
def test_a_method_that_is_not_a_string_gets_invalid_request(method: Any) -> None:
    async def go() -> None:
        app = server()
        wrong = {"jsonrpc": "2.0", "id": 4, "method": method}
        flat = post(app, wrong, STATELESS)
        assert await flat.status == 400
        assert flat.response_headers["content-type"] == "application/json"
        assert (await flat.json())["error"]["code"] == -32600
        sid = await open_session(app)
        bound = post(app, wrong, [(b"mcp-session-id", sid.encode())])
        assert await bound.status == 200  # a session's JSON-RPC errors travel in a 200
        assert bound.response_headers["content-type"] == "application/json"
        answer = await bound.json()
        assert (answer["id"], answer["error"]["code"]) == (4, -32600)
        still = post(app, ping(), [(b"mcp-session-id", sid.encode())])
        assert (await still.json())["result"] == {}

    run(go())


def test_an_unexpected_exception_while_reading_a_post_is_a_logged_internal_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def on_event(session: Any, event: Any) -> None:
        raise KeyError("a bug in the application's event hook")

    async def go() -> None:
        app = server(on_event=on_event)
        failed = post(app, stateless("tools/list"), STATELESS)
        assert await failed.status == 500
        assert failed.response_headers["content-type"] == "application/json"
        answer = await failed.json()
        assert answer["error"]["code"] == -32603 and "Traceback" not in answer["error"]["message"]

    with caplog.at_level(logging.ERROR, logger="mcpbind.transports.http_server"):
        run(go())
    (record,) = [r for r in caplog.records if r.name == "mcpbind.transports.http_server"]
    assert record.exc_info is not None and record.exc_info[0] is KeyError


# -- 4. the session table: idle expiry, and eviction that spares sessions in use -----------------


def test_anonymous_initializes_cannot_evict_an_active_session() -> None:
    async def go() -> None:
        app = server(max_sessions=8)
        active = await open_session(app)
        refused = []
        for _ in range(20):
            opened = post(app, INIT)
            status = await opened.status
            answer = await opened.json()
            if status == 503:
                assert answer["error"]["code"] == -32603 and answer["id"] == 1
                assert "mcp-session-id" not in opened.response_headers
                refused.append(answer)
        assert len(refused) == 20 - 7  # the table held 8, none idle long enough to evict
        assert len(app.sessions) == 8 and active in app.sessions
        still = post(app, ping(), [(b"mcp-session-id", active.encode())])
        assert await still.status == 200 and (await still.json())["result"] == {}

    run(go())


def test_past_max_sessions_only_idle_sessions_are_evicted() -> None:
    blocked = asyncio.Event()

    async def slow(call: Call) -> Any:
        if call.method == "tools/list":
            await blocked.wait()
        return await handler(call)

    async def go() -> None:
        app = server(max_sessions=3, session_evictable_after=0, handler=slow)
        busy = await open_session(app)  # a request in flight
        streaming = await open_session(app)  # its GET stream open
        idle = await open_session(app)
        call = post(
            app,
            {"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
            [(b"mcp-session-id", busy.encode())],
        )
        get = Exchange(
            app,
            "GET",
            [(b"accept", b"text/event-stream"), (b"mcp-session-id", streaming.encode())],
        )
        assert await get.status == 200
        while not app.sessions[busy].tasks:
            await asyncio.sleep(0)
        newcomer = await open_session(app)
        assert idle not in app.sessions  # the only session not in use made room
        assert set(app.sessions) == {busy, streaming, newcomer}
        again = await open_session(app)
        assert set(app.sessions) == {busy, streaming, again}  # again the one not in use
        get_again = Exchange(
            app, "GET", [(b"accept", b"text/event-stream"), (b"mcp-session-id", again.encode())]
        )
        assert await get_again.status == 200
        refused = post(app, INIT)  # all three in use: refused, none of them dropped
        assert await refused.status == 503
        assert (await refused.json())["error"]["code"] == -32603
        assert set(app.sessions) == {busy, streaming, again}
        blocked.set()
        assert (await call.json())["result"]["tools"][0]["name"] == "echo"
        await get.leave()
        await get_again.leave()

    run(go())


def test_idle_sessions_expire() -> None:
    async def go() -> None:
        app = server(session_idle_timeout=0.05)
        old = await open_session(app)
        streaming = await open_session(app)
        get = Exchange(
            app, "GET", [(b"accept", b"text/event-stream"), (b"mcp-session-id", streaming.encode())]
        )
        assert await get.status == 200
        await asyncio.sleep(0.2)
        late = post(app, ping(), [(b"mcp-session-id", old.encode())])
        assert await late.status == 404
        assert old not in app.sessions
        assert streaming in app.sessions  # a session with its GET stream open is in use
        await get.leave()

    run(go())


# -- 5. requests in flight are bounded; a client that leaves takes its handlers with it ----------


def test_requests_in_flight_on_a_session_are_bounded() -> None:
    release = asyncio.Event()

    async def slow(call: Call) -> Any:
        await release.wait()
        return await handler(call)

    async def go() -> None:
        app = server(max_in_flight=2, handler=slow)
        sid = await open_session(app)
        header = [(b"mcp-session-id", sid.encode())]
        calls = [
            post(app, {"jsonrpc": "2.0", "id": i, "method": "tools/list"}, header) for i in (1, 2)
        ]
        while len(app.sessions[sid].tasks) < 2:
            await asyncio.sleep(0)
        third = post(app, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, header)
        answer = await third.json()
        assert answer["id"] == 3
        # Word for word what SSEServer answers (tests/test_sse_transport.py).
        assert answer["error"] == {
            "code": -32603,
            "message": "Server busy: this session is handling as many requests at once as it "
            "may (max_in_flight: 2); send it again once one is answered",
            "data": {"limit": "max_in_flight", "max": 2},
        }
        release.set()
        for call in calls:
            assert "result" in await call.json()
        fourth = post(app, {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, header)
        assert "result" in await fourth.json()  # the bound counts requests in flight only

    run(go())


POSITIVE = (
    "max_body_size",
    "body_timeout",
    "max_sessions",
    "session_idle_timeout",
    "max_in_flight",
    "max_queued",
    "resume_timeout",
)


@pytest.mark.parametrize(
    ("option", "value", "must"),
    [(o, v, "be positive") for o in POSITIVE for v in (0, -1)]
    + [(o, -1, "be >= 0") for o in ("session_evictable_after", "retry_ms")]
    + [("body_timeout", float("nan"), "be positive")],
)
def test_a_limit_that_bounds_nothing_is_refused_at_construction(
    option: str, value: float, must: str
) -> None:
    with pytest.raises(ValueError) as refused:
        server(**{option: value})
    assert str(refused.value) == f"{option} must {must}, not {value!r}"


def test_limits_of_zero_where_zero_means_at_once_are_taken() -> None:
    app = server(session_evictable_after=0, retry_ms=0)
    assert (app.session_evictable_after, app.retry_ms) == (0, 0)


@pytest.mark.parametrize("stateful", [False, True])
def test_a_client_that_leaves_a_post_cancels_its_handler(stateful: bool) -> None:
    started = asyncio.Event()
    cancelled: list[Any] = []

    async def start(call: Call) -> None:
        started.set()

    async def go() -> None:
        app = server(handler=held(cancelled, start))
        params = {"name": "echo", "arguments": {}}
        if stateful:
            sid = await open_session(app)
            message = {"jsonrpc": "2.0", "id": 11, "method": "tools/call", "params": params}
            call = post(app, message, [(b"mcp-session-id", sid.encode())])
        else:
            call = post(app, stateless("tools/call", params, rid=11), STATELESS)
        await started.wait()
        await call.leave()
        await eventually(lambda: cancelled)
        assert cancelled == [11]
        if stateful:  # the session forgot the request: its id may be used again
            again = post(
                app,
                {"jsonrpc": "2.0", "id": 11, "method": "ping"},
                [(b"mcp-session-id", sid.encode())],
            )
            assert (await again.json())["result"] == {}
            assert not app.sessions[sid].tasks

    run(go(), 10)


def test_a_client_that_leaves_an_event_stream_cancels_its_handler() -> None:
    cancelled: list[Any] = []

    async def chat(call: Call) -> None:
        call.notify("notifications/message", {"level": "info", "data": "working"})

    async def go() -> None:
        app = server(handler=held(cancelled, chat))
        call = post(
            app, stateless("tools/call", {"name": "echo", "arguments": {}}, rid=12), STATELESS
        )
        assert await call.status == 200
        assert call.response_headers["content-type"].startswith("text/event-stream")
        async for message in call.events():
            assert message["method"] == "notifications/message"
            break
        await call.leave()
        await eventually(lambda: cancelled)
        assert cancelled == [12]

    run(go(), 10)


def test_a_stream_its_client_does_not_read_is_given_up_past_max_queued() -> None:
    cancelled: list[Any] = []

    async def flood(call: Call) -> None:
        for n in range(1000):  # faster than anyone reads
            call.notify("notifications/message", {"level": "info", "data": n})

    async def go() -> None:
        app = server(handler=held(cancelled, flood), max_queued=100)
        call = post(
            app, stateless("tools/call", {"name": "echo", "arguments": {}}, rid=13), STATELESS
        )
        got = [message async for message in call.events()]  # the stream ends by itself
        assert [m["params"]["data"] for m in got] == list(range(100))
        await eventually(lambda: cancelled)
        assert cancelled == [13]

    run(go(), 10)


# -- 6. Content-Type and Host are parsed, not searched --------------------------------------------


def status_of(headers: list[tuple[bytes, bytes]]) -> int:
    async def go() -> int:
        body = json.dumps(stateless("tools/list")).encode()
        exchange = Exchange(server(), "POST", [*headers, *STATELESS, *TOOLS_LIST], body)
        status = await exchange.status
        await exchange.body()
        return status

    status: int = run(go())
    return status


def test_content_type_is_a_media_type() -> None:
    accept = (b"accept", b"application/json, text/event-stream")
    statuses = {
        value: status_of([accept, (b"content-type", value)])
        for value in [
            b"application/jsonx",
            b"text/plain; x=application/json",
            b"application/json-seq",
            b"application/json; charset=utf-8",
            b"Application/JSON",
        ]
    }
    assert statuses == {
        b"application/jsonx": 415,
        b"text/plain; x=application/json": 415,
        b"application/json-seq": 415,
        b"application/json; charset=utf-8": 200,
        b"Application/JSON": 200,
    }


def test_accept_is_a_list_of_media_types() -> None:
    content_type = (b"content-type", b"application/json")
    statuses = {
        value: status_of([(b"accept", value), content_type])
        for value in [
            b"application/jsonx, text/event-streams",
            b"application/json;q=1, Text/Event-Stream",
        ]
    }
    assert statuses == {
        b"application/jsonx, text/event-streams": 406,
        b"application/json;q=1, Text/Event-Stream": 200,
    }


def test_host_is_parsed_strictly() -> None:
    cases = {
        b"[::1].evil.example": 403,
        b"[::1]evil.example:80": 403,
        b"[::1]:80:80": 403,
        b"[::1]:": 403,
        b"localhost:80:80": 403,
        b"localhost:http": 403,
        b"localhost.evil.example": 403,
        b"": 403,
        b"[::1]:8000": 200,
        b"[::1]": 200,
        b"LOCALHOST:8000": 200,
    }
    assert {host: status_of([*JSON_ACCEPT, (b"host", host)]) for host in cases} == cases


def test_origin_is_parsed_strictly() -> None:
    cases = {
        b"http://[::1].evil.example": 403,
        b"http://[::1": 403,
        b"http://user@localhost": 403,
        b"null": 403,
        b"http://[::1]:3000": 200,
        b"https://localhost": 200,
    }
    host = (b"host", b"localhost")
    assert {o: status_of([*JSON_ACCEPT, host, (b"origin", o)]) for o in cases} == cases


# -- 14. the example server's subscriptions/listen ----------------------------------------------


def load_example(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_two_listeners_with_the_same_request_id_both_hear_a_list_change() -> None:
    example = load_example("everything_server")

    async def go() -> None:
        app = example.app()
        listen = stateless(
            "subscriptions/listen", {"notifications": {"toolsListChanged": True}}, rid=1
        )
        listeners = [post(app, listen, STATELESS) for _ in range(2)]
        streams = [listener.events() for listener in listeners]
        for stream in streams:
            acknowledged = await anext(stream)
            assert acknowledged["method"] == "notifications/subscriptions/acknowledged"
        trigger = stateless("tools/call", {"name": "test_trigger_tool_change", "arguments": {}})
        assert "result" in await post(app, trigger, STATELESS).json()
        for stream in streams:
            changed = await asyncio.wait_for(anext(stream), 5)
            assert changed["method"] == "notifications/tools/list_changed"
            assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 1
        for listener in listeners:
            await listener.leave()
        assert example.mcp.listening == 0  # the listen handlers ended with their clients

    run(go())


# -- 5, under a real uvicorn on loopback: connection cap, header deadline, disconnects ----------


@contextlib.asynccontextmanager
async def serving(
    app: Any, *, bound: bool = False, **limits: Any
) -> AsyncIterator[tuple[str, Any]]:
    """``app`` under uvicorn (``uvicorn_config`` with ``limits``) on a free loopback port, in
    this event loop: its base URL and the uvicorn server. ``bound``: on a socket bound
    beforehand, as ``serve(workers=N)`` binds it."""
    import uvicorn

    from mcpbind.transports.serving import uvicorn_config

    port = free_port()
    config = uvicorn_config(app, "127.0.0.1", port, log_level="error", **limits)
    sock = config.bind_socket() if bound else None
    web = uvicorn.Server(config)
    task = asyncio.ensure_future(web.serve(sockets=None if sock is None else [sock]))
    try:
        while not web.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}", web
    finally:
        web.should_exit = True
        web.force_exit = True
        await asyncio.wait_for(task, 10)
        if sock is not None:
            sock.close()


async def ping_over_http(base: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as client:
        return await client.post(
            f"{base}/mcp",
            json=stateless("tools/list"),
            headers={
                "accept": "application/json, text/event-stream",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/list",
            },
        )


async def trickle(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
    await writer.drain()
    return reader, writer


def raw_call(rid: int) -> bytes:
    """A stateless 2026-07-28 tools/call of ``echo`` as a whole HTTP/1.1 request, for a socket."""
    body = json.dumps(stateless("tools/call", {"name": "echo", "arguments": {}}, rid=rid))
    return (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Accept: application/json, text/event-stream\r\n"
        "Mcp-Method: tools/call\r\nMcp-Name: echo\r\n"
        f"Mcp-Protocol-Version: 2026-07-28\r\nContent-Length: {len(body)}\r\n\r\n{body}"
    ).encode()


def test_trickling_connections_past_the_cap_do_not_stop_a_request() -> None:
    async def go() -> None:
        async with serving(server(), max_connections=50, header_timeout=60) as (base, web):
            port = int(base.rsplit(":", 1)[1])
            slow = [await trickle(port) for _ in range(300)]
            await asyncio.sleep(0.2)
            # Never more connections than the cap: the oldest without a request head made room.
            assert len(web.server_state.connections) <= 50
            answered = await ping_over_http(base)
            assert answered.status_code == 200 and answered.json()["result"]["tools"]
            for _, writer in slow:
                writer.close()

    run(go(), 60)


def test_a_connection_that_does_not_finish_its_head_is_closed_after_the_header_timeout() -> None:
    async def go() -> None:
        async with serving(server(), header_timeout=0.3) as (base, web):
            port = int(base.rsplit(":", 1)[1])
            reader, writer = await trickle(port)
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
            # The server ends both: a 408 for the partial head, plain EOF for the silent one.
            answer = await asyncio.wait_for(reader.read(), 10)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert await asyncio.wait_for(silent_reader.read(), 10) == b""
            assert (await ping_over_http(base)).status_code == 200
            writer.close()
            silent_writer.close()

    run(go(), 60)


def test_a_real_client_that_disconnects_cancels_the_stateless_handler() -> None:
    started = asyncio.Event()
    cancelled: list[Any] = []

    async def start(call: Call) -> None:
        started.set()

    async def go() -> None:
        async with serving(server(handler=held(cancelled, start))) as (base, _):
            port = int(base.rsplit(":", 1)[1])
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(raw_call(21))
            await writer.drain()
            await started.wait()
            writer.close()
            await eventually(lambda: cancelled)
            assert cancelled == [21]

    run(go(), 60)


def test_a_client_that_stops_reading_is_disconnected_after_the_write_timeout() -> None:
    cancelled: list[Any] = []

    async def flood(call: Call) -> None:
        for _ in range(200):  # 12.5 MiB: more than the socket buffers between them hold
            call.notify("notifications/message", {"level": "info", "data": "x" * 65536})
            await asyncio.sleep(0.001)

    async def go() -> None:
        handling = server(handler=held(cancelled, flood))
        async with serving(handling, write_timeout=0.5) as (base, web):
            port = int(base.rsplit(":", 1)[1])
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
            await asyncio.get_running_loop().sock_sendall(sock, raw_call(31))
            # The client reads nothing; the server gives up on it and its handler.
            await eventually(lambda: cancelled and not web.server_state.connections)
            assert cancelled == [31]
            assert not web.server_state.connections
            sock.close()

    run(go(), 60)


def test_a_socket_bound_as_serve_workers_binds_it_sends_without_delay() -> None:
    # serve(workers=N) binds the socket itself (protocol 0), and asyncio then leaves Nagle on:
    # every small answer waited ~40 ms for the client's delayed ACK.
    async def go() -> None:
        async with serving(server(), bound=True) as (base, web):
            port = int(base.rsplit(":", 1)[1])
            assert (await ping_over_http(base)).status_code == 200
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            await eventually(lambda: web.server_state.connections)
            assert web.server_state.connections
            for connection in web.server_state.connections:
                accepted = connection.transport.get_extra_info("socket")
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
            writer.close()

    run(go(), 30)
