"""The Streamable HTTP adapters (mcpbind[http]) end to end, in process: the httpx client transport
over the ASGI server, both over real sessions."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx
import msgspec
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


class StreamingASGI(httpx.AsyncBaseTransport):
    """An in-process ASGI transport that returns a response as soon as its head is sent and
    streams the body: httpx's own ASGITransport waits for the whole body, so a GET stream that
    stays open (the standalone stream) would never be answered."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = b"".join([part async for part in request.stream])  # type: ignore[union-attr]
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port or 80),
            "client": ("127.0.0.1", 1234),
            "root_path": "",
        }
        head: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        gone = asyncio.Event()
        sent = False

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                head.set_result(message)
            elif message["type"] == "http.response.body":
                if message.get("body"):
                    chunks.put_nowait(message["body"])
                if not message.get("more_body"):
                    chunks.put_nowait(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                if not head.done():
                    head.set_exception(RuntimeError("the app sent no response"))
                chunks.put_nowait(None)

        task = asyncio.ensure_future(run())
        start = await head

        class Body(httpx.AsyncByteStream):
            async def __aiter__(self) -> Any:
                while (chunk := await chunks.get()) is not None:
                    yield chunk

            async def aclose(self) -> None:
                gone.set()
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

        return httpx.Response(
            start["status"], headers=start.get("headers", []), stream=Body(), request=request
        )


def http(server: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=StreamingASGI(server), base_url=URL)


def run(coro: Any, seconds: float = 30) -> Any:
    """Run a test's coroutine; one that waits on an answer that never comes fails, not hangs."""
    return asyncio.run(asyncio.wait_for(coro, seconds))


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


def test_the_event_window_is_bounded_and_calls_go_on_past_it() -> None:
    """``max_events``: a long-lived client keeps the newest events only, and what ``flush``
    returns (what ``call`` reads its answer from) is right after the window has let go of older
    events."""

    async def go() -> None:
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with StreamableHTTPClient(
            URL, session, http=http(app()), max_events=3, listen=False
        ) as client:
            await client.connect()
            for n in range(6):  # each call reports two progress events and a result
                result = await client.call(
                    "tools/call", {"name": "echo", "arguments": {"n": n}}, progress=True
                )
                assert json.loads(result.content[0].text) == {"n": n}
            assert len(client.events) == 3
            assert [type(e).__name__ for e in client.events] == [
                "ProgressReceived",
                "ProgressReceived",
                "ResultReceived",
            ]
        with pytest.raises(ValueError, match="max_events"):
            StreamableHTTPClient(URL, ClientSession(info=INFO), max_events=0)

    run(go())


def test_the_server_sends_requests_of_its_own_on_the_get_stream() -> None:
    """``StreamableHTTPServer.request``: answered through the client's ``on_request``, a result of
    the precise class; an error answer, a capability the client lacks, a stream that closes
    before the answer and a session without a stream each raise what happened."""
    from mcpbind import v2025_11_25 as v4

    async def go() -> None:
        server = app()
        answers: list[Any] = [{"roots": [{"uri": "file:///work", "name": "work"}]}]
        hold = asyncio.Event()

        async def on_request(event: Any) -> Any:
            assert event.method == "roots/list"
            if not answers:
                await hold.wait()  # never set: the client goes away first
            answer = answers.pop(0)
            if isinstance(answer, ProtocolError):
                raise answer
            return answer

        session = ClientSession(revisions=("2025-11-25",), info=INFO, capabilities={"roots": {}})
        async with StreamableHTTPClient(
            URL, session, http=http(server), on_request=on_request
        ) as client:
            await client.connect()
            (sid,) = server.sessions
            result = await server.request(sid, "roots/list")
            assert type(result) is v4.ListRootsResult and result.roots[0].uri == "file:///work"
            answers.append(ProtocolError(-32000, "no roots today"))
            with pytest.raises(ProtocolError, match="no roots today") as info:
                await server.request(sid, "roots/list")
            assert info.value.code == -32000
            with pytest.raises(ProtocolError) as info:  # the client advertised no sampling
                await server.request(
                    sid, "sampling/createMessage", {"messages": [], "maxTokens": 1}
                )
            assert info.value.code == -32601
            waiting = asyncio.ensure_future(server.request(sid, "roots/list"))
            while not server.sessions[sid].standalone or not server.sessions[sid].waiting:
                await asyncio.sleep(0.01)
        with pytest.raises(ConnectionError, match="closed before the client answered"):
            await waiting
        with pytest.raises(LookupError, match="no GET stream"):
            await server.request(sid, "roots/list")

    run(go())


def test_a_request_on_a_post_stream_the_client_left_raises_connection_error() -> None:
    """A handler awaiting the client's answer on the stream of a POST the client closed and
    did not resume within resume_timeout."""
    raised: list[str] = []

    async def handler(call: Call) -> Any:
        if call.method != "tools/call":
            return {"tools": []}
        try:
            return await call.request("roots/list")
        except ConnectionError as exc:
            raised.append(str(exc))
            raise

    async def go() -> None:
        server = StreamableHTTPServer(
            handler,
            revisions=("2025-11-25",),
            capabilities={"tools": {}},
            info=INFO,
            resume_timeout=0.2,
        )
        never = asyncio.Event()

        async def on_request(event: Any) -> Any:
            await never.wait()

        session = ClientSession(revisions=("2025-11-25",), info=INFO, capabilities={"roots": {}})
        async with StreamableHTTPClient(
            URL, session, http=http(server), on_request=on_request, listen=False
        ) as client:
            await client.connect()
            call = asyncio.ensure_future(client.call("tools/call", {"name": "x", "arguments": {}}))
            while not any(live.waiting for live in server.sessions.values()):
                await asyncio.sleep(0.01)
            call.cancel()  # the client leaves the POST's stream
            with contextlib.suppress(asyncio.CancelledError):
                await call
            while not raised:
                await asyncio.sleep(0.01)
        assert "closed before the client answered" in raised[0]

    run(go(), 10)


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
            stateless_headers = {
                **ACCEPT,
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/list",
            }
            ok = await client.post(URL, content=body, headers=stateless_headers)
            assert ok.status_code == 200
            assert ok.json()["result"]["tools"][0]["name"] == "echo"
            unknown = await client.post(
                URL,
                content=json.dumps(stateless("prompts/list")),
                headers={**stateless_headers, "mcp-method": "prompts/list"},
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


# -- the standalone GET stream and resumption, against a server written out by hand --------------

ELICIT = {
    "message": "accept the defaults",
    "requestedSchema": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "score": {"type": "number", "default": 95.5},
        },
    },
}


class HandServer:
    """A 2025-11-25 server over raw ASGI, behaving as the official SDKs' servers may: a request it
    sends outside a request's stream goes on the standalone GET stream (``elicit`` tool), and a
    request's stream may end early, after a priming event with ``retry``, to be resumed by a GET
    carrying ``Last-Event-ID`` (``drop`` tool). ``log`` records what arrived, in order."""

    RETRY_MS = 200

    def __init__(self) -> None:
        self.log: list[str] = []
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()  # for the standalone stream
        self.answers: dict[Any, asyncio.Future[Any]] = {}
        self.streams = 0  # standalone streams open
        self.dropped: Any = None  # the id of a tools/call whose stream ended early
        self.closed_at = 0.0
        self.resumed_at = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}

        async def reply(status: int, kind: str, data: bytes = b"", more: bool = False) -> None:
            head = [(b"content-type", kind.encode()), (b"mcp-session-id", b"s1")]
            await send({"type": "http.response.start", "status": status, "headers": head})
            await send({"type": "http.response.body", "body": data, "more_body": more})

        def event(data: bytes, id: str | None = None) -> bytes:
            head = f"id: {id}\n" if id else ""
            return f"{head}event: message\ndata: ".encode() + data + b"\n\n"

        if scope["method"] == "GET":
            last = headers.get("last-event-id")
            self.log.append(f"GET {last}" if last else "GET")
            prime = f"id: g{len(self.log)}\nretry: {self.RETRY_MS}\ndata: \n\n".encode()
            await reply(200, "text/event-stream", prime, more=True)
            if last is not None and self.dropped is not None:
                self.resumed_at = asyncio.get_running_loop().time()
                answer = {"jsonrpc": "2.0", "id": self.dropped, "result": {"content": []}}
                self.dropped = None
                await send(
                    {"type": "http.response.body", "body": event(json.dumps(answer).encode())}
                )
                return
            self.streams += 1
            try:
                while True:
                    data = await self.outbox.get()
                    await send(
                        {"type": "http.response.body", "body": event(data), "more_body": True}
                    )
            finally:
                self.streams -= 1
        if scope["method"] == "DELETE":
            self.log.append("DELETE")
            return await reply(200, "text/plain")
        message = json.loads(body)
        method = message.get("method")
        self.log.append(f"POST {method}" if method else "POST response")
        rid = message.get("id")
        if method is None:  # the client's answer to a request of ours: a result or an error
            self.answers[rid].set_result(message.get("result", message.get("error")))
            return await reply(202, "text/plain")
        if rid is None:
            return await reply(202, "text/plain")
        result: Any = {}
        if method == "initialize":
            result = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hand", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": []}
        elif method == "tools/call" and message["params"]["name"] == "elicit":
            if not self.streams:  # the official servers drop such a request: no stream for it
                raise AssertionError("no standalone stream open for the elicitation")
            self.answers["e1"] = asyncio.get_running_loop().create_future()
            ask = {"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create", "params": ELICIT}
            self.outbox.put_nowait(json.dumps(ask).encode())
            answer = await self.answers["e1"]
            result = {"content": [{"type": "text", "text": json.dumps(answer)}]}
        elif method == "tools/call" and message["params"]["name"] == "bad":
            result = {"content": 5}  # not a CallToolResult
        elif method == "tools/call":
            self.dropped = rid
            prime = f"id: p1\nretry: {self.RETRY_MS}\ndata: \n\n".encode()
            await reply(200, "text/event-stream", prime, more=True)
            self.closed_at = asyncio.get_running_loop().time()
            return await send({"type": "http.response.body", "body": b""})
        answer = {"jsonrpc": "2.0", "id": rid, "result": result}
        await reply(200, "application/json", json.dumps(answer).encode())


async def accept_defaults(event: Any) -> Any:
    properties = msgspec.to_builtins(event.params)["requestedSchema"]["properties"]
    return {"action": "accept", "content": {k: p["default"] for k, p in properties.items()}}


def test_standalone_stream_opens_after_initialized_and_before_any_request() -> None:
    async def go() -> None:
        server = HandServer()
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(server)) as client:
            await client.connect()
            await client.call("tools/list", {})
        assert server.log == [
            "POST initialize",
            "POST notifications/initialized",
            "GET",
            "POST tools/list",
            "DELETE",
        ]

    run(go())


def test_a_server_request_on_the_standalone_stream_is_answered() -> None:
    async def go() -> None:
        server = HandServer()
        session = ClientSession(
            revisions=("2025-11-25",), info=INFO, capabilities={"elicitation": {"form": {}}}
        )
        async with StreamableHTTPClient(
            URL, session, http=http(server), on_request=accept_defaults
        ) as client:
            await client.connect()
            result = await client.call("tools/call", {"name": "elicit", "arguments": {}})
        # The number default (95.5) goes back as it is: ElicitResult.content holds numbers.
        assert json.loads(result.content[0].text) == {
            "action": "accept",
            "content": {"name": "John Doe", "score": 95.5},
        }
        assert server.log == [
            "POST initialize",
            "POST notifications/initialized",
            "GET",
            "POST tools/call",
            "POST response",
            "DELETE",
        ]

    run(go())


def test_a_failing_on_request_answers_an_internal_error_and_the_stream_stays_open() -> None:
    calls = 0

    async def breaks_once(event: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("the handler broke")
        return await accept_defaults(event)

    async def go() -> None:
        server = HandServer()
        session = ClientSession(
            revisions=("2025-11-25",), info=INFO, capabilities={"elicitation": {"form": {}}}
        )
        async with StreamableHTTPClient(
            URL, session, http=http(server), on_request=breaks_once
        ) as client:
            await client.connect()
            first = await client.call("tools/call", {"name": "elicit", "arguments": {}})
            second = await client.call("tools/call", {"name": "elicit", "arguments": {}})
        assert json.loads(first.content[0].text) == {
            "code": -32603,
            "message": "Internal error: the handler broke",
        }
        assert json.loads(second.content[0].text)["action"] == "accept"
        assert server.log.count("GET") == 1  # the standalone stream outlived the failure

    run(go(), seconds=10)


def test_a_stream_that_ends_early_is_resumed_after_retry_with_last_event_id() -> None:
    async def go() -> None:
        server = HandServer()
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(server)) as client:
            await client.connect()
            result = await client.call("tools/call", {"name": "drop", "arguments": {}})
        assert result.content == []
        # The standalone GET came first and carried no Last-Event-ID; the resumption did, after
        # the server's retry delay.
        assert server.log == [
            "POST initialize",
            "POST notifications/initialized",
            "GET",
            "POST tools/call",
            "GET p1",
            "DELETE",
        ]
        assert server.resumed_at - server.closed_at >= HandServer.RETRY_MS / 1000 - 0.01

    run(go())


def test_an_invalid_result_raises_what_is_wrong_with_it() -> None:
    async def go() -> None:
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(HandServer())) as client:
            await client.connect()
            with pytest.raises(ProtocolError) as caught:
                await client.call("tools/call", {"name": "bad", "arguments": {}})
            # The codec's verdict on the result, with its path, not "no response".
            assert caught.value.code == -32602
            assert "$.result.content" in caught.value.message
            assert await client.call("tools/list", {})  # the session goes on

    run(go())


class AsksForEver:
    """A hostile (or broken) server's handler: every tool call, retried with its input responses
    or not, asks the client for input once more. ``states`` holds the request state each call
    came back with (None: the first try)."""

    def __init__(self) -> None:
        self.states: list[str | None] = []

    async def __call__(self, call: Call) -> Any:
        if call.method != "tools/call":
            return {"tools": [], "cacheScope": "private", "ttlMs": 0}
        state = call.params.request_state
        self.states.append(state if isinstance(state, str) else None)
        return {
            "resultType": "input_required",
            "inputRequests": {"where": {"method": "roots/list", "params": {}}},
            "requestState": f"round {len(self.states)}",
        }


async def some_roots(event: Any) -> Any:
    return {"roots": [{"uri": "file:///work"}]}


def gave_up(error: ProtocolError, rounds: int) -> None:
    """``error`` is the client giving up on a tool call after ``rounds`` input rounds."""
    assert error.code == -32603
    assert f"after {rounds} rounds for 'tools/call' (max_rounds)" in error.message
    assert error.data == {"limit": "max_rounds", "max": rounds}


@pytest.mark.parametrize("max_rounds", [None, 2])
def test_a_server_asking_for_input_for_ever_is_given_up_after_max_rounds(
    max_rounds: int | None,
) -> None:
    from mcpbind.transports._answer import MAX_ROUNDS

    rounds = MAX_ROUNDS if max_rounds is None else max_rounds
    options = {} if max_rounds is None else {"max_rounds": max_rounds}
    asks = AsksForEver()
    answered: list[str] = []

    async def roots(event: Any) -> Any:
        answered.append(event.method)
        return await some_roots(event)

    async def go() -> None:
        server = StreamableHTTPServer(
            asks, revisions=("2026-07-28",), capabilities={"tools": {}}, info=INFO
        )
        session = ClientSession(revisions=("2026-07-28",), capabilities={"roots": {}}, info=INFO)
        async with StreamableHTTPClient(
            URL, session, http=http(server), on_request=roots, **options
        ) as client:
            await client.connect()
            with pytest.raises(ProtocolError) as caught:
                await client.call("tools/call", {"name": "loop", "arguments": {}})
            gave_up(caught.value, rounds)
            assert await client.call("tools/list", {}) is not None  # the connection goes on

    run(go())
    # The first try and one retry per round, each round's input request answered once.
    assert asks.states == [None, *(f"round {n}" for n in range(1, rounds + 1))]
    assert answered == ["roots/list"] * rounds


def test_max_rounds_has_one_default_and_is_not_negative() -> None:
    import inspect

    from mcpbind import Client
    from mcpbind.transports._answer import MAX_ROUNDS

    # Client's own default (mcpbind/client/client.py) is the same number as the transports'.
    assert inspect.signature(Client).parameters["max_rounds"].default == MAX_ROUNDS
    assert inspect.signature(StreamableHTTPClient).parameters["max_rounds"].default == MAX_ROUNDS
    with pytest.raises(ValueError, match="max_rounds must be >= 0, not -1"):
        StreamableHTTPClient(URL, ClientSession(info=INFO), max_rounds=-1)
