"""The one HTTP client stack (``transports.http_wire``): every client sends through an
``HttpWire`` (the ``HttpPool`` of keep-alive connections read by httptools, or an
``httpx.AsyncClient`` given as ``http=``), reads events with the one parser (``sse_events``), and
sees one family of errors (``HttpError``) whichever wire it uses."""

from __future__ import annotations

import ast
import asyncio
import contextlib
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcpbind
from mcpbind.auth.errors import AuthorizationError
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_pool import HttpPool
from mcpbind.transports.http_server import StreamableHTTPServer
from mcpbind.transports.http_wire import (
    HttpError,
    HttpTimeout,
    HttpxWire,
    ServerUnreachable,
    closing,
    send,
)
from mcpbind.transports.sse_events import MAX_RETRY_MS, EventParser, ServerEvent, read_stream
from tests._net import free_port
from tests.test_gateway import INFO, Served, client, in_loop, raw_server, run, text

RUNTIME = Path(mcpbind.__file__).parent

# -- the event stream parser ----------------------------------------------------------------------

STREAM = (
    b"\xef\xbb\xbf: a comment\r\n"
    b"id: 1\r\nevent: endpoint\r\ndata: /messages?session_id=x\r\n\r\n"
    b"data: a\ndata:b\n\n"
    b"retry: 250\rdata:  c\r\r"
    b"id: bad\x00id\nretry: soon\ndata\n\n"
    b"unknown: field\n\n"
    b"id: 2\n\n"
)
EVENTS = [
    ServerEvent(b"/messages?session_id=x", "endpoint", "1", None),
    ServerEvent(b"a\nb", "message", "1", None),
    ServerEvent(b" c", "message", "1", 250),
    ServerEvent(b"", "message", "1", None),  # a NUL id, digits-less retry: ignored
    ServerEvent(b"", "message", "2", None),
]


def test_the_event_stream_format_is_read_as_the_standard_writes_it() -> None:
    assert EventParser().feed(STREAM) == EVENTS


def test_events_come_out_the_same_however_the_bytes_are_split() -> None:
    """Every line ending split between two chunks (a CRLF too) and the byte order mark itself."""
    for size in (1, 2, 3, 7):
        parser = EventParser()
        found = []
        for start in range(0, len(STREAM), size):
            found += parser.feed(STREAM[start : start + size])
        assert found == EVENTS, size
    for cut in range(len(STREAM)):
        parser = EventParser()
        assert parser.feed(STREAM[:cut]) + parser.feed(STREAM[cut:]) == EVENTS, cut


class _Chunks:
    """A reply whose body is ``parts`` (what ``read_stream`` reads through ``events``)."""

    def __init__(self, *parts: bytes) -> None:
        self.parts = parts

    async def chunks(self) -> Any:
        for part in self.parts:
            yield part


def test_read_stream_feeds_messages_until_nothing_is_owed_and_gives_the_id_to_resume_from() -> None:
    async def read(*parts: bytes, owed: set[Any]) -> tuple[str | None, list[bytes], list[int]]:
        got: list[bytes] = []
        retries: list[int] = []

        async def receive(data: bytes, owed: set[Any]) -> None:
            got.append(data)
            owed.discard(data)

        last = await read_stream(_Chunks(*parts), owed, receive, retries.append)
        return last, got, retries

    # answered whole: nothing to resume (and what follows is not read)
    assert asyncio.run(read(b"id: 1\ndata: a\n\n", b"data: b\n\n", owed={b"a"})) == (
        None,
        [b"a"],
        [],
    )
    # ended with an answer still owed: the last id, and the retry the server set
    assert asyncio.run(read(b"retry: 50\nid: 7\ndata: x\n\n", owed={b"a"})) == ("7", [b"x"], [50])
    # an empty id field resets it (the SSE rule): nothing to resume from
    assert asyncio.run(read(b"id: 7\ndata: x\n\nid:\ndata: y\n\n", owed={b"a"}))[0] is None
    # a retry of days is taken as MAX_RETRY_MS
    days = b"retry: %d\nid: 7\ndata: x\n\n" % (5 * 86_400_000)
    assert asyncio.run(read(days, owed={b"a"}))[2] == [MAX_RETRY_MS]


def test_an_event_past_max_event_ends_the_stream_with_http_error() -> None:
    parser = EventParser(max_event=64)
    assert parser.feed(b"data: " + b"x" * 50 + b"\n\n") == [ServerEvent(b"x" * 50)]
    with pytest.raises(HttpError, match="exceeds 64 bytes"):
        parser.feed(b"data: " + b"y" * 40 + b"\ndata: " + b"y" * 40 + b"\n")  # lines, together
    with pytest.raises(HttpError, match="max_event"):
        EventParser(max_event=64).feed(b"data: " + b"z" * 100)  # a line not yet ended


# -- the pool -------------------------------------------------------------------------------------


def recording(heads: list[bytes], answer: bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"):  # type: ignore[no-untyped-def]
    """A raw connection handler keeping each request's head and body, answering each."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = head.lower().partition(b"content-length: ")[2].split(b"\r\n")[0]
                body = await reader.readexactly(int(length)) if length else b""
                heads.append(head + body)
                writer.write(answer)
                await writer.drain()
        writer.close()

    return serve


def test_the_pool_sends_any_method_to_its_origin_and_refuses_another() -> None:
    async def main() -> list[bytes]:
        heads: list[bytes] = []
        async with raw_server(recording(heads)) as url:
            pool = HttpPool(url)
            try:
                for method, target, body in (
                    ("POST", url, b"{}"),
                    ("GET", f"{url}?a=1", None),
                    ("DELETE", url, None),
                ):
                    head = pool.head(method, target, {"accept": "text/event-stream"})
                    async with closing(await pool.exchange(head, body)) as reply:
                        assert (reply.status, await reply.read()) == (200, b"{}")
                with pytest.raises(HttpError, match="not on the origin"):
                    pool.head("GET", "http://127.0.0.1:9/mcp", {})
                with pytest.raises(HttpError, match="is not an HTTP method"):
                    pool.head("GET /x", url, {})
                odd = pool.head("GET", url + "/a b\r\nx: \u00e9", {})
                # (line breaks dropped by urlsplit, the rest percent-encoded: one request line)
                assert odd.startswith(b"GET /mcp/a%20bx:%20%C3%A9 HTTP/1.1\r\nhost: ")
            finally:
                await pool.aclose()
        return heads

    post, get, delete = run(main())
    assert post.startswith(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:") and post.endswith(b"\r\n{}")
    assert b"content-length: 2\r\n" in post
    assert get.startswith(b"GET /mcp?a=1 HTTP/1.1\r\n") and b"content-length" not in get
    assert delete.startswith(b"DELETE /mcp HTTP/1.1\r\n") and delete.endswith(b"\r\n\r\n")


def test_a_server_that_does_not_answer_is_a_read_timeout_but_a_quiet_stream_is_not() -> None:
    """``read_timeout`` bounds each wait for more of an answer; an event stream (``stream``) has
    none: its event arrives after a silence longer than the read timeout."""

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if head.startswith(b"GET"):
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
            await asyncio.sleep(0.6)
            writer.write(b"data: late\n\n")
            await writer.drain()
        await asyncio.sleep(5)
        writer.close()

    async def main() -> tuple[str, list[bytes]]:
        async with raw_server(slow) as url:
            pool = HttpPool(url, read_timeout=0.2)
            try:
                with pytest.raises(HttpTimeout) as late:
                    await pool.exchange(pool.head("POST", url, {}), b"{}")
                stream = await pool.exchange(pool.head("GET", url, {}), stream=True)
                parser = EventParser()
                async with closing(stream):
                    async for chunk in stream.chunks():
                        found = parser.feed(chunk)
                        if found:
                            return str(late.value), [e.data for e in found]
            finally:
                await pool.aclose()
        raise AssertionError("the stream ended without its event")

    late, found = run(main())
    assert "sent nothing for 0.2 s (read timeout)" in late
    assert found == [b"late"]


def test_event_streams_are_bounded_apart_from_the_exchanges() -> None:
    """``max_streams`` event streams at once, one more refused at once (not waiting: a stream
    may never end); streams take no exchange slot, and a stream closed frees its place."""

    async def streams(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"GET"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
                    await writer.drain()
                    await reader.read()  # open until the client leaves
                    break
                await reader.readexactly(2)
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}")
                await writer.drain()
        writer.close()

    async def main() -> list[str]:
        found = []
        async with raw_server(streams) as url:
            pool = HttpPool(url, limit=1, max_streams=2)
            get = pool.head("GET", url, {})
            try:
                first = await pool.exchange(get, stream=True)
                second = await pool.exchange(get, stream=True)
                try:
                    await pool.exchange(get, stream=True)
                except HttpError as error:
                    found.append(str(error))
                async with closing(await pool.exchange(pool.head("POST", url, {}), b"{}")) as r:
                    found.append((await r.read()).decode())  # the one exchange slot is free
                await first.aclose()
                third = await pool.exchange(get, stream=True)
                found.append(str(third.status))
                await second.aclose()
                await third.aclose()
            finally:
                await pool.aclose()
        return found

    refused, posted, reopened = run(main())
    assert refused.startswith("2 event streams to ") and refused.endswith("(max_streams)")
    assert (posted, reopened) == ("{}", "200")


@pytest.mark.parametrize("wire", ["pool", "httpx"])
def test_a_server_that_cannot_be_reached_is_server_unreachable_on_either_wire(wire: str) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there

    async def main() -> HttpError:
        http = HttpPool(url) if wire == "pool" else HttpxWire(httpx.AsyncClient())
        try:
            with pytest.raises(ServerUnreachable) as refused:
                await http.exchange(http.head("POST", url, {}), b"{}")
        finally:
            await http.aclose()
        return refused.value

    assert "Connect" in str(run(main()))  # (the socket's or httpx's error, named)


@pytest.mark.parametrize("wire", ["pool", "httpx"])
@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_an_answer_past_max_answer_is_an_http_error_and_its_connection_is_not_reused(
    wire: str, framing: str
) -> None:
    """An answer read whole (not an event stream) of more than ``max_answer`` bytes fails with
    ``HttpError`` once past it, however it is framed; one of exactly ``max_answer`` is read,
    and the next exchange gets an answer of its own (on a new connection after the failure)."""
    big = b"x" * 200_000
    if framing == "length":
        answer = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%s" % (len(big), big)
    else:
        answer = (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
            + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (big[:70_000], big[70_000:]))
            + b"0\r\n\r\n"
        )

    async def main() -> list[bytes]:
        heads: list[bytes] = []
        async with raw_server(recording(heads, answer)) as url:
            for limit, fails in ((len(big) - 1, True), (len(big), False)):
                if wire == "pool":
                    http: Any = HttpPool(url, max_answer=limit)
                else:
                    http = HttpxWire(httpx.AsyncClient(), max_answer=limit)
                try:
                    for _ in range(2):
                        async with closing(
                            await http.exchange(http.head("POST", url, {}), b"{}")
                        ) as reply:
                            if fails:
                                with pytest.raises(HttpError, match=f"exceeds {limit} bytes"):
                                    await reply.read()
                            else:
                                assert await reply.read() == big
                finally:
                    await http.aclose()
        return heads

    assert len(run(main())) == 4  # (each exchange reached the server and was answered)


# -- the authorization retry ------------------------------------------------------------------------


def test_a_challenge_without_credentials_is_an_authorization_error_or_the_callers_own() -> None:
    challenge = b'Bearer resource_metadata="http://127.0.0.1:9/.well-known"'
    answer = b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: " + challenge
    answer += b"\r\ncontent-length: 0\r\n\r\n"

    async def main() -> list[Exception]:
        heads: list[bytes] = []
        found: list[Exception] = []
        async with raw_server(recording(heads, answer)) as url:
            pool = HttpPool(url)
            try:
                with pytest.raises(AuthorizationError) as refused:
                    await send(pool, "POST", url, b"{}", headers={"accept": "*/*"})
                found.append(refused.value)

                def mine(status: int, challenge: str | None) -> Exception:
                    return ValueError(f"{status}: {challenge}")

                with pytest.raises(ValueError) as own:
                    await send(pool, "POST", url, b"{}", headers={}, unauthorized=mine)
                found.append(own.value)
            finally:
                await pool.aclose()
        assert len(heads) == 2  # one attempt each: nothing to retry with
        return found

    refused, own = run(main())
    assert "HTTP 401 from" in str(refused) and "no auth= was given" in str(refused)
    assert str(own) == f"401: {challenge.decode()}"


# -- the clients on either wire ---------------------------------------------------------------------


@pytest.mark.parametrize("wire", ["pool", "httpx"])
def test_a_streamable_http_client_talks_the_same_through_either_wire(wire: str) -> None:
    """A session's whole life against a real server under uvicorn: the handshake (its session
    id), a call answered with an event stream (progress first), a request of the server's on the
    GET stream, and the DELETE at the end; by default through a pool of its own, with
    ``http=httpx.AsyncClient`` through it."""

    async def handler(call: Any) -> Any:
        call.progress(1, 2)
        await asyncio.sleep(0)  # (the progress goes out first, on the request's stream)
        return text(f"{call.params.name} from {call.revision}")

    async def main() -> tuple[str, list[float], Any, type, int]:
        server = StreamableHTTPServer(
            handler, revisions=("2025-11-25",), capabilities={"tools": {}}, info=INFO
        )
        given = httpx.AsyncClient() if wire == "httpx" else None

        async def roots(event: Any) -> Any:
            return {"roots": [{"uri": "file:///here"}]}

        async with in_loop(server) as base:
            session = client("2025-11-25", capabilities={"roots": {}})
            transport = StreamableHTTPClient(f"{base}/mcp", session, http=given, on_request=roots)
            try:
                await transport.connect()
                result = await transport.call(
                    "tools/call", {"name": "echo", "arguments": {}}, progress=True
                )
                (sid,) = server.sessions
                asked = await server.request(sid, "roots/list")
                kind = type(transport.wire)
            finally:
                await transport.close()
                if given is not None:
                    await given.aclose()
            progress = [
                e.progress for e in transport.events if type(e).__name__ == "ProgressReceived"
            ]
            return result.content[0].text, progress, asked.roots[0].uri, kind, len(server.sessions)

    echoed, progress, root, kind, left = run(main())
    assert echoed == "echo from 2025-11-25" and progress == [1]
    assert root == "file:///here" and left == 0  # answered on the GET stream; DELETE at the end
    assert kind is (HttpPool if wire == "pool" else HttpxWire)


def test_a_gateway_given_an_httpx_client_sends_to_its_server_through_it() -> None:
    """``Gateway(http=httpx.AsyncClient(...))``: its links reach the server through that client
    (here one whose event hook counts the requests), not the pool, and it stays open after."""

    async def handler(call: Any) -> Any:
        if call.method == "tools/list":
            return {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        return text(f"echo from {call.revision}")

    async def main() -> tuple[str, int, bool]:
        seen: list[str] = []

        async def count(request: httpx.Request) -> None:
            seen.append(request.method)

        given = httpx.AsyncClient(event_hooks={"request": [count]})
        upstream = StreamableHTTPServer(
            handler, revisions=("2026-07-28",), capabilities={"tools": {}}, info=INFO
        )
        async with in_loop(upstream) as base:
            served = Served(upstream=f"{base}/mcp", server_revisions=("2026-07-28",), http=given)
            async with served.running():
                transport = StreamableHTTPClient(served.url, client("2025-11-25"))
                try:
                    await transport.connect()
                    result = await transport.call("tools/call", {"name": "echo"})
                finally:
                    await transport.close()
        closed = given.is_closed
        await given.aclose()
        return result.content[0].text, seen.count("POST"), closed

    echoed, posts, closed = run(main())
    assert echoed == "echo from 2026-07-28"
    assert posts >= 2 and not closed  # the probe's handshake and the call, at least


# -- one stack --------------------------------------------------------------------------------------


def _runtime_imports(tree: ast.Module) -> set[str]:
    """The top-level packages a module imports outside ``if TYPE_CHECKING:`` blocks."""
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name.split(".")[0] for alias in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                found.add(child.module.split(".")[0])
            walk(child)

    walk(tree)
    return found


def test_one_http_client_stack_sends_everything() -> None:
    """httpx is imported to send only by the wire that wraps it (and by mcpbind.auth, whose own
    requests it makes); httptools only by the pool (the server reads with uvicorn's); httpx-sse
    nowhere; and the gateway's pool of its own is gone."""
    using: dict[str, list[str]] = {"httpx": [], "httptools": [], "httpx_sse": []}
    for path in sorted(RUNTIME.rglob("*.py")):
        where = str(path.relative_to(RUNTIME))
        imported = _runtime_imports(ast.parse(path.read_text(), where))
        for name, modules in using.items():
            if name in imported and not where.startswith("auth/"):
                modules.append(where)
    assert using == {
        "httpx": ["transports/http_wire.py"],
        "httptools": ["transports/http_pool.py"],
        "httpx_sse": [],
    }
    assert not (RUNTIME / "bridge" / "pool.py").exists()


def test_the_stack_test_sees_an_import_that_is_not_for_type_checking() -> None:
    code = "import httpx\nif TYPE_CHECKING:\n    import httptools\ndef f():\n    import httpx_sse\n"
    assert _runtime_imports(ast.parse(code)) == {"httpx", "httpx_sse"}
