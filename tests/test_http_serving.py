"""The connection bounds of mcpbind.transports.serving under both uvicorn protocols it offers
(httptools, the default, and h11): a real uvicorn on a loopback port, a raw socket client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn

from mcpbind.transports.serving import uvicorn_config

PROTOCOLS = ("httptools", "h11")
# serve() runs on uvloop where the http extra installed it (uvicorn's loop="auto"): the bounds
# are checked on both loops.
LOOPS = ("asyncio", "uvloop")
BODY = b'{"jsonrpc":"2.0","id":1,"result":{}}'


async def app(scope: Any, receive: Any, send: Any) -> None:
    """Answers every request with BODY; /flood answers 12 MiB a client may not read."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    flood = scope["path"] == "/flood"
    headers = [(b"content-type", b"application/json")]
    if not flood:
        headers.append((b"content-length", str(len(BODY)).encode()))
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if flood:
        for _ in range(200):
            await send({"type": "http.response.body", "body": b"x" * 65536, "more_body": True})
    await send({"type": "http.response.body", "body": BODY})


def run(coro: Any, seconds: float = 60, loop: str = "asyncio") -> Any:
    if loop == "uvloop":
        import uvloop

        return uvloop.run(asyncio.wait_for(coro, seconds))
    return asyncio.run(asyncio.wait_for(coro, seconds))


@contextlib.asynccontextmanager
async def serving(http: str, **limits: Any) -> AsyncIterator[tuple[int, uvicorn.Server]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = uvicorn_config(app, "127.0.0.1", port, log_level="error", http=http, **limits)
    web = uvicorn.Server(config)
    task = asyncio.ensure_future(web.serve())
    try:
        while not web.started:
            assert not task.done(), "uvicorn did not start"
            await asyncio.sleep(0.02)
        yield port, web
    finally:
        web.should_exit = True
        web.force_exit = True
        await asyncio.wait_for(task, 10)


def request(path: str = "/mcp") -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: 2\r\n\r\n{{}}"
    ).encode()


async def answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="http must be one of"):
        uvicorn_config(app, http="wsproto")


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("http", PROTOCOLS)
def test_requests_on_a_kept_alive_connection_are_answered(http: str, loop: str) -> None:
    async def go() -> None:
        async with serving(http) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for _ in range(3):
                writer.write(request())
                got = await asyncio.wait_for(answer(reader), 10)
                assert got.startswith(b"HTTP/1.1 200 ") and got.endswith(BODY)
            writer.close()

    run(go(), loop=loop)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("http", PROTOCOLS)
def test_a_head_past_max_head_size_is_answered_400_and_closed(http: str, loop: str) -> None:
    async def go() -> None:
        async with serving(http, max_head_size=4096, header_timeout=60) as (port, web):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            # 10 KiB of one header, never finished
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 10240)
            got = await asyncio.wait_for(reader.read(), 10)
            assert got.startswith(b"HTTP/1.1 400 ")
            if http == "httptools":
                assert b"max_head_size (4096 bytes)" in got
            assert not web.server_state.connections
            writer.close()

    run(go(), loop=loop)


@pytest.mark.parametrize("http", PROTOCOLS)
def test_a_head_within_max_head_size_is_served(http: str) -> None:
    async def go() -> None:
        async with serving(http, max_head_size=4096) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            big = (
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                + b"a" * 3000
                + b"\r\nContent-Length: 0\r\n\r\n"
            )
            writer.write(big)
            got = await asyncio.wait_for(answer(reader), 10)
            assert got.startswith(b"HTTP/1.1 200 ")
            writer.close()

    run(go())


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("http", PROTOCOLS)
def test_an_unfinished_head_gets_408_and_a_silent_connection_is_closed(
    http: str, loop: str
) -> None:
    async def go() -> None:
        async with serving(http, header_timeout=0.3) as (port, _):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", port)
            assert (await asyncio.wait_for(reader.read(), 10)).startswith(b"HTTP/1.1 408 ")
            assert await asyncio.wait_for(silent_reader.read(), 10) == b""
            writer.close()
            silent_writer.close()

    run(go(), loop=loop)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("http", PROTOCOLS)
def test_trickling_connections_past_the_cap_leave_room_for_a_request(http: str, loop: str) -> None:
    async def go() -> None:
        async with serving(http, max_connections=20, header_timeout=60) as (port, web):
            slow = []
            for _ in range(100):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"POST /mcp HTTP/1.1\r\nX-Slow: ")
                slow.append(w)
            await asyncio.sleep(0.2)
            assert len(web.server_state.connections) <= 20
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request())
            assert (await asyncio.wait_for(answer(reader), 10)).startswith(b"HTTP/1.1 200 ")
            for w in [*slow, writer]:
                w.close()

    run(go(), loop=loop)


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("http", PROTOCOLS)
def test_a_client_that_stops_reading_is_aborted_after_the_write_timeout(
    http: str, loop: str
) -> None:
    async def go() -> None:
        async with serving(http, write_timeout=0.5) as (port, web):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            await loop.sock_connect(sock, ("127.0.0.1", port))
            await loop.sock_sendall(sock, request("/flood"))
            for _ in range(500):
                if not web.server_state.connections:
                    break
                await asyncio.sleep(0.02)
            assert not web.server_state.connections
            sock.close()

    run(go(), loop=loop)


@pytest.mark.parametrize("pause", [0.0, 0.2])
def test_a_body_in_parts_is_read_whole_by_the_mcp_server(pause: float) -> None:
    # The body is read at once when it came with the head, and awaited (within body_timeout)
    # when its parts come later: both give the same answer.
    from mcpbind.transports.http_server import StreamableHTTPServer

    async def handler(call: Any) -> Any:
        raise AssertionError("no request reaches the handler")

    mcp = StreamableHTTPServer(
        handler, revisions=("2025-11-25",), info={"name": "t", "version": "1"}
    )
    body = (
        b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
        b'"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}'
    )
    head = (
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()

    async def go() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        web = uvicorn.Server(uvicorn_config(mcp, "127.0.0.1", port, log_level="error"))
        task = asyncio.ensure_future(web.serve())
        try:
            while not web.started:
                await asyncio.sleep(0.02)
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            if pause:
                writer.write(head + body[:40])
                await writer.drain()
                await asyncio.sleep(pause)
                writer.write(body[40:])
            else:
                writer.write(head + body)
            got = await asyncio.wait_for(answer(reader), 10)
            assert got.startswith(b"HTTP/1.1 200 ")
            assert b'"id":3' in got and b'"protocolVersion":"2025-11-25"' in got
            writer.close()
        finally:
            web.should_exit = True
            await asyncio.wait_for(task, 10)

    run(go())


@pytest.mark.parametrize("kind", ["coroutine on an event", "future", "coroutine polling"])
def test_a_client_leaving_during_a_handler_cancels_it_whatever_its_receive(kind: str) -> None:
    # The disconnect is watched by stepping receive's coroutine by hand when it waits on a
    # future, and by a task otherwise (a receive that is not a coroutine, or polls).
    from mcpbind.transports.http_server import StreamableHTTPServer

    started = asyncio.Event()
    cancelled: list[Any] = []

    async def handler(call: Any) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(call.id)
            raise

    mcp = StreamableHTTPServer(
        handler,
        revisions=("2026-07-28",),
        capabilities={"tools": {}},
        info={"name": "t", "version": "1"},
    )
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
    }
    body = (
        b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{},'
        b'"_meta":' + json.dumps(meta).encode() + b"}}"
    )
    headers = [
        (b"host", b"127.0.0.1"),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2026-07-28"),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"echo"),
    ]
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("127.0.0.1", 80),
        "client": ("127.0.0.1", 5),
    }

    async def go() -> None:
        left = asyncio.Event()
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        sent: list[Any] = []

        async def on_event() -> Any:
            if messages:
                return messages.pop()
            await left.wait()
            return {"type": "http.disconnect"}

        def as_future() -> Any:
            future = asyncio.ensure_future(on_event())
            return future

        async def polling() -> Any:
            if messages:
                return messages.pop()
            while not left.is_set():
                await asyncio.sleep(0)
            return {"type": "http.disconnect"}

        receive = {"coroutine on an event": on_event, "future": as_future}.get(kind, polling)

        async def send(message: Any) -> None:
            sent.append(message)

        call = asyncio.ensure_future(mcp(scope, receive, send))
        await asyncio.wait_for(started.wait(), 10)
        left.set()
        await asyncio.wait_for(call, 10)
        for _ in range(100):
            if cancelled:
                break
            await asyncio.sleep(0.01)
        assert cancelled == [9]
        assert not sent  # nobody to answer

    run(go())
