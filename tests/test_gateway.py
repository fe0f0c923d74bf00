"""`mcpbind bridge --listen`: the HTTP gateway in front of real servers of the project's own (the
stdio example server, the failing fixture server, the everything server over HTTP), with clients
of several revisions at once over Streamable HTTP and HTTP+SSE. Each client's wire (both ways) is
recorded at the gateway's door and validated against that client's own revision.

The gateway runs under uvicorn in the test's event loop (``Served``); its servers are real child
processes. The real npm and PyPI peers are in tests/interop/test_gateway_peers.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

import mcpbind
from mcpbind.bridge.gateway import Gateway
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.sse_client import SSEClient
from mcpbind.validate import validate_lines
from tests._net import free_port, wait_port

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = [sys.executable, str(ROOT / "examples" / "stdio_server.py")]
FAILING = [sys.executable, str(ROOT / "tests" / "fixtures" / "failing_server.py")]
CONNECTION_CLOSED = -32000  # docs/bridge.md
INFO = {"name": "gateway-test", "version": "1"}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class Wire:
    """An ASGI wrapper recording every JSON-RPC message through the gateway's door, both ways, in
    order, per client: ``by[key]`` where the key is the client's ``x-wire`` header, else the
    session id (Streamable HTTP or HTTP+SSE), else the protocol version header."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.by: dict[str, list[str]] = {}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = dict(
            part.split("=", 1) for part in scope["query_string"].decode().split("&") if "=" in part
        )
        key = [headers.get("x-wire") or headers.get("mcp-session-id") or query.get("session_id")]
        version = headers.get("mcp-protocol-version", "")
        early: list[str] = []  # the request's messages, until its key is known
        body: list[bytes] = []
        kind = [""]
        pending = [b""]

        def keep(line: str) -> None:
            if key[0] is None:
                early.append(line)
            else:
                self.by.setdefault(key[0], []).append(line)

        async def receiving() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
                if not message.get("more_body") and b"".join(body).strip():
                    _json(b"".join(body), keep)
            return message

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                answer = {k.decode().lower(): v.decode() for k, v in message.get("headers") or []}
                kind[0] = answer.get("content-type", "")
                if key[0] is None and scope["path"] != "/sse":
                    key[0] = answer.get("mcp-session-id") or f"stateless {version}"
                if key[0] is not None:
                    for line in early:
                        keep(line)
                    early.clear()
            elif message["type"] == "http.response.body":
                chunk = message.get("body", b"")
                if kind[0].startswith("text/event-stream"):
                    pending[0] += chunk
                    *events, pending[0] = pending[0].split(b"\n\n")
                    for event in events:
                        self._event(event, key, keep)
                elif kind[0].startswith("application/json"):
                    pending[0] += chunk
                    if not message.get("more_body") and pending[0].strip():
                        _json(pending[0], keep)
            await send(message)

        await self.app(scope, receiving, sending)

    @staticmethod
    def _event(event: bytes, key: list[str | None], keep: Callable[[str], None]) -> None:
        fields = dict(
            line.split(b":", 1) for line in event.split(b"\n") if b":" in line and line[:1] != b":"
        )
        data = fields.get(b"data", b"").strip().decode()
        name = fields.get(b"event", b"message").strip()
        if name == b"endpoint":  # HTTP+SSE: the stream names its session
            key[0] = key[0] or data.partition("session_id=")[2]
        elif name == b"message" and data:
            keep(data)

    def invalid(self, key: str, revision: str) -> list[str]:
        """What ``key``'s messages hold that ``revision`` does not validate (strictly)."""
        lines = self.by.get(key, [])
        assert lines, f"nothing recorded for {key!r} (recorded: {list(self.by)})"
        return [str(f) for f in validate_lines(lines, revision, strict=True)]


def _json(data: bytes, keep: Callable[[str], None]) -> None:
    value = json.loads(data)
    if isinstance(value, dict) and value.get("id") is None and "error" in value:
        return  # an HTTP refusal that is also a JSON-RPC error without id: no message
    keep(data.decode())


class Served:
    """A gateway under uvicorn on a free loopback port, in this event loop; ``log`` collects
    what it says."""

    def __init__(self, **options: Any) -> None:
        self.log: list[str] = []
        self.gateway = Gateway(log=self.log.append, **options)
        self.wire = Wire(self.gateway)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.sse_url = f"http://127.0.0.1:{self.port}/sse"

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Served]:
        async with in_loop(self.wire, self.port):
            yield self


@contextlib.asynccontextmanager
async def in_loop(app: Any, port: int | None = None) -> AsyncIterator[str]:
    """``app`` under uvicorn on a loopback port (a free one unless ``port``), in this event loop,
    for as long as the block runs: its base URL, ``http://127.0.0.1:PORT``."""
    import uvicorn

    port = free_port() if port is None else port
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_graceful_shutdown=2,  # event streams a test left open end then
    )
    web = uvicorn.Server(config)
    serving = asyncio.ensure_future(web.serve())
    try:
        while not web.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        web.should_exit = True
        await serving


@contextlib.asynccontextmanager
async def raw_server(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    """A plain asyncio server on a loopback port, ``answer`` serving each connection, for as
    long as the block runs: the URL of its /mcp."""
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    finally:
        server.close()
        await server.wait_closed()


def replying(
    reply: Callable[[bytes], bytes],
) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
    """A ``raw_server`` connection handler that reads each HTTP/1.1 request (its head and the
    body its content-length gives) and writes ``reply(body)``, until the client leaves."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                size = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                writer.write(reply(await reader.readexactly(size)))
                await writer.drain()
        writer.close()

    return answer


def run(coroutine: Awaitable[Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 100))


async def eventually(check: Callable[[], Any], what: str) -> Any:
    """Wait (a hang guard, not a timing check) for ``check()`` to be true."""
    for _ in range(1000):
        found = check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def children(script: str) -> list[int]:
    """The pids of this process's children running ``script``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and script.encode() in command:
            found.append(int(entry.name))
    return found


def client(revision: str, **options: Any) -> mcpbind.ClientSession:
    return mcpbind.ClientSession(revision, info=INFO, **options)


# -- a child per session ----------------------------------------------------------------------------


def test_clients_of_three_revisions_each_get_a_child_of_their_own_ended_with_their_session() -> (
    None
):
    async def main() -> dict[str, Any]:
        served = Served(command=EXAMPLE)
        found: dict[str, Any] = {}
        async with served.running():
            modern = StreamableHTTPClient(served.url, client("2025-11-25"))
            old = SSEClient(served.sse_url, client("2024-11-05"))
            await modern.connect()
            await old.connect()
            modern_sid = modern.session_id or ""
            found["before"] = len(children("stdio_server.py"))  # the probe's has ended
            found["2025-11-25"] = await modern.call(
                "tools/call", {"name": "echo", "arguments": {"message": "new"}}
            )
            found["2024-11-05"] = await old.call(
                "tools/call", {"name": "echo", "arguments": {"message": "old"}}
            )
            found["during"] = len(children("stdio_server.py"))
            await modern.close()  # DELETE
            found["after DELETE"] = await eventually(
                lambda: len(children("stdio_server.py")) == 1 or None, "the child ended"
            )
            await old.close()  # the event stream closed
            await eventually(lambda: not children("stdio_server.py"), "the other child ended")
            found["wire"] = {
                "2025-11-25": served.wire.invalid(modern_sid, "2025-11-25"),
                "2024-11-05": served.wire.invalid(old.session_id or "", "2024-11-05"),
            }
        return found

    found = run(main())
    assert found["before"] == 0  # started lazily, on a session's first request
    assert found["during"] == 2
    assert found["2025-11-25"].content[0].text == "new"
    assert type(found["2025-11-25"]) is mcpbind.bindings("2025-11-25").CallToolResult
    assert found["2024-11-05"].content[0].text == "old"
    assert type(found["2024-11-05"]) is mcpbind.bindings("2024-11-05").CallToolResult
    assert found["wire"] == {"2025-11-25": [], "2024-11-05": []}


def test_a_session_idle_for_its_timeout_has_its_child_ended() -> None:
    async def main() -> tuple[int, int]:
        served = Served(command=EXAMPLE, session_idle_timeout=0.5)
        async with served.running():
            session = StreamableHTTPClient(served.url, client("2025-06-18"))
            await session.connect()
            await session.call("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
            during = len(children("stdio_server.py"))
            await eventually(lambda: not children("stdio_server.py"), "the idle child ended")
            return during, len(children("stdio_server.py"))

    assert run(main()) == (1, 0)


# -- an HTTP server behind the gateway, both directions -------------------------------------------


@pytest.fixture(scope="module")
def everything(everything_server: str) -> str:
    """examples/everything_server.py (2025-06-18, 2025-11-25, 2026-07-28)."""
    return everything_server


SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "from the client"},
    "model": "m",
}


def asked_log() -> tuple[list[Any], Callable[[Any], Awaitable[Any]]]:
    """What a client was asked (the ids: a name for an input request of an input-required
    result, a number for a request of the server's own), and the answers it gives."""
    asked: list[Any] = []

    async def on_request(event: Any) -> Any:
        asked.append((event.method, event.id))
        if event.method == "elicitation/create":
            return {"action": "accept", "content": {"ok": True}}
        return SAMPLED

    return asked, on_request


def test_an_older_server_asks_a_2026_client_through_input_required_results(everything: str) -> None:
    """A 2025-11-25 server's own sampling and elicitation requests, in the middle of a
    tools/call, reach a 2026-07-28 client (which has no such methods) as input-required results
    of that call; its retry carries the answers back and the call completes."""

    async def main() -> tuple[Any, ...]:
        served = Served(upstream=everything, server_revisions=("2025-11-25",))
        asked, on_request = asked_log()
        async with served.running():
            modern = StreamableHTTPClient(
                served.url,
                client("2026-07-28", capabilities={"sampling": {}, "elicitation": {}}),
                on_request=on_request,
            )
            await modern.connect()
            sampled = await modern.call(
                "tools/call", {"name": "test_sampling", "arguments": {"prompt": "hi"}}
            )
            elicited = await modern.call(
                "tools/call", {"name": "test_elicitation", "arguments": {"message": "ok?"}}
            )
            wire = served.wire.by["stateless 2026-07-28"]
            return (
                sampled,
                elicited,
                asked,
                wire,
                served.wire.invalid("stateless 2026-07-28", "2026-07-28"),
            )

    sampled, elicited, asked, wire, invalid = run(main())
    assert sampled.content[0].text == "LLM response: from the client"
    assert "action=accept" in elicited.content[0].text
    # Asked as input requests (named), not as requests of the server's own (numbered).
    assert [(m, isinstance(i, str)) for m, i in asked] == [
        ("sampling/createMessage", True),
        ("elicitation/create", True),
    ]
    assert sum('"resultType":"input_required"' in line for line in wire) == 2
    assert invalid == []


def test_older_clients_answer_a_2026_servers_input_requests_as_their_own_requests(
    everything: str,
) -> None:
    """The other way: a 2026-07-28 server's input-required result reaches a 2025-11-25 client
    (Streamable HTTP) and a 2024-11-05 client (HTTP+SSE) as sampling requests of their own, and
    their answers go back in the retry."""

    async def main() -> tuple[Any, ...]:
        served = Served(upstream=everything, server_revisions=("2026-07-28",))
        asked, on_request = asked_log()
        async with served.running():
            caps = {"sampling": {}}
            new = StreamableHTTPClient(
                served.url, client("2025-11-25", capabilities=caps), on_request=on_request
            )
            old = SSEClient(
                served.sse_url, client("2024-11-05", capabilities=caps), on_request=on_request
            )
            await new.connect()
            await old.connect()
            call = {"name": "test_input_required_result_sampling", "arguments": {}}
            results = await asyncio.gather(
                new.call("tools/call", call), old.call("tools/call", call)
            )
            invalid = (
                served.wire.invalid(new.session_id or "", "2025-11-25"),
                served.wire.invalid(old.session_id or "", "2024-11-05"),
            )
            await new.close()
            await old.close()
            return results, asked, invalid

    results, asked, invalid = run(main())
    assert [r.content[0].text for r in results] == ["Sampled: from the client"] * 2
    assert [(m, isinstance(i, int)) for m, i in asked] == [("sampling/createMessage", True)] * 2
    assert invalid == ([], [])


def test_losses_are_logged_with_their_path_and_refused_with_strict(everything: str) -> None:
    """What a 2024-11-05 client cannot carry: an audio block is replaced (and logged with its
    path); with --strict, the server's completions capability already refuses the handshake."""

    async def main(strict: bool) -> tuple[Any, list[str]]:
        served = Served(upstream=everything, server_revisions=("2025-11-25",), strict=strict)
        async with served.running():
            old = SSEClient(served.sse_url, client("2024-11-05"))
            try:
                await old.connect()
                found: Any = await old.call(
                    "tools/call", {"name": "test_audio_content", "arguments": {}}
                )
            except mcpbind.ProtocolError as error:
                found = error
            finally:
                await old.close()
            return found, served.log

    carried, log = run(main(strict=False))
    assert carried.content[0].text.startswith("[audio content (audio/wav) cannot be carried")
    assert any(
        line.startswith("loss: the result of 'tools/call' into MCP 2024-11-05: $.content[0]")
        for line in log
    ), log
    refused, _ = run(main(strict=True))
    assert isinstance(refused, mcpbind.ProtocolError) and refused.code == -32602
    assert (
        "--strict: the server's capabilities cannot be carried to MCP 2024-11-05 without "
        "loss at $.completions" in refused.message
    )


def test_the_clients_credentials_never_reach_the_server() -> None:
    """The client's Authorization header stays at the gateway: its connection to the server is
    its own (the server here records the headers it is sent)."""
    from mcpbind.transports.http_server import StreamableHTTPServer

    seen: list[dict[str, str]] = []

    async def handler(call: Any) -> Any:
        return {"content": [{"type": "text", "text": "ok"}]}

    upstream = StreamableHTTPServer(handler, capabilities={"tools": {}}, info=INFO)

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await upstream(scope, receive, send)

    async def main() -> Any:
        async with in_loop(recording) as base:
            served = Served(upstream=f"{base}/mcp")
            async with served.running():
                secret = {"Authorization": "Bearer the-clients-own"}
                async with StreamableHTTPClient(
                    served.url, client("2025-11-25"), headers=secret
                ) as session:
                    await session.connect()
                    return await session.call("tools/call", {"name": "x", "arguments": {}})

    result = run(main())
    assert result.content[0].text == "ok"
    assert len(seen) >= 3 and not [h for h in seen if "authorization" in h]


# -- nothing lost -----------------------------------------------------------------------------------


def test_a_server_that_dies_fails_every_pending_request_of_every_client_with_why() -> None:
    """Two session-less clients of one identity share a child; it exits on the third call it
    reads: the three calls of both clients are answered with -32000 naming its status."""

    async def main() -> list[Any]:
        served = Served(command=[*FAILING, "die", "3"], server_revisions=("2025-06-18",))
        async with served.running():
            one = StreamableHTTPClient(served.url, client("2026-07-28"))
            two = StreamableHTTPClient(served.url, client("2026-07-28"))
            await one.connect()
            await two.connect()
            call = {"name": "x", "arguments": {}}

            async def outcome(session: StreamableHTTPClient) -> Any:
                try:
                    return await session.call("tools/call", call)
                except mcpbind.ProtocolError as error:
                    return error

            return await asyncio.gather(outcome(one), outcome(two), outcome(one))

    errors = run(main())
    assert [(e.code, e.message) for e in errors] == [
        (CONNECTION_CLOSED, "Connection closed: the server exited (status 3)")
    ] * 3


def test_a_client_that_leaves_has_its_request_cancelled_on_the_server(tmp_path: Path) -> None:
    heard = tmp_path / "server-stderr"
    command = ["sh", "-c", f'exec "$@" 2>>{heard}', "sh", *FAILING, "silent"]

    async def main() -> str:
        served = Served(command=command, server_revisions=("2025-06-18",))
        async with served.running(), httpx.AsyncClient(timeout=10) as http:
            opened = await http.post(
                served.url,
                headers=ACCEPT,
                json={
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": INFO,
                    },
                },
            )
            headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
            await http.post(
                served.url,
                headers=headers,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            )
            call = {"name": "x", "arguments": {}}
            with pytest.raises(httpx.ReadTimeout):  # the client gives up and leaves
                await http.post(
                    served.url,
                    headers=headers,
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
                    timeout=httpx.Timeout(10, read=1.0),
                )
            return await eventually(
                lambda: "notifications/cancelled" in heard.read_text() and heard.read_text(),
                "the server heard of the cancellation",
            )

    text = run(main())
    cancelled = [json.loads(line[5:]) for line in text.splitlines() if "cancelled" in line]
    called = [json.loads(line[5:]) for line in text.splitlines() if '"tools/call"' in line]
    assert cancelled[0]["params"]["requestId"] == called[0]["id"]


def test_past_max_in_flight_a_request_is_refused_at_once() -> None:
    async def main() -> Any:
        served = Served(
            command=[*FAILING, "silent"], server_revisions=("2025-06-18",), max_in_flight=2
        )
        async with served.running():
            session = StreamableHTTPClient(served.url, client("2026-07-28"))
            await session.connect()
            call = {"name": "x", "arguments": {}}
            held = [asyncio.ensure_future(session.call("tools/call", call)) for _ in range(2)]
            await eventually(
                lambda: any(len(link.pending) == 2 for link in served.gateway.shared.values()),
                "two calls in flight",
            )
            try:
                await session.call("tools/call", call)
            except mcpbind.ProtocolError as error:
                return error
            finally:
                for task in held:
                    task.cancel()
                await asyncio.gather(*held, return_exceptions=True)

    error = run(main())
    assert error.code == -32603 and error.message.startswith("Server busy: 2 requests")


# -- every pair of revisions, both ways ------------------------------------------------------------

TOOLS = [
    {"name": "echo", "inputSchema": {"type": "object"}},
    {"name": "ask", "inputSchema": {"type": "object"}},
]
SAMPLE = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "say hi"}}],
    "maxTokens": 5,
}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def sampled_text(result: Any) -> str:
    content = msgspec.to_builtins(result)["content"]
    return str((content[0] if isinstance(content, list) else content)["text"])


async def upstream_handler(call: Any) -> Any:
    """A server of any revision: ``echo``, and ``ask``, which needs a sampling from the client:
    a request of its own up to 2025-11-25, an input-required result from 2026-07-28 on."""
    if call.method == "tools/list":
        return {"tools": TOOLS}
    if call.method != "tools/call":
        raise mcpbind.ProtocolError(-32601, f"Method not found: {call.method!r}")
    if call.params.name == "echo":
        return text(f"echo {call.params.arguments['message']} from {call.revision}")
    trip = mcpbind.bindings(call.revision).FACTS.round_trip
    if trip is None:
        result = await call.request("sampling/createMessage", SAMPLE)
        return text(f"{call.revision} was told {sampled_text(result)}")
    answers = msgspec.to_builtins(call.params).get(trip.input_responses)
    if not answers:
        return {
            "resultType": "input_required",
            "inputRequests": {"s": {"method": "sampling/createMessage", "params": SAMPLE}},
            "requestState": "asked",
        }
    return text(f"{call.revision} was told {answers['s']['content']['text']}")


@pytest.mark.parametrize("server_revision", mcpbind.REVISIONS)
def test_clients_of_every_revision_at_once_in_front_of_a_server_of_each(
    server_revision: str,
) -> None:
    """Six clients at once (2024-11-05 over HTTP+SSE, the others over Streamable HTTP, draft
    included) through the gateway to an HTTP server of ``server_revision``: each calls a tool,
    and answers the server's need for a sampling however the pair carries it (a request of the
    server's own, or an input-required result, either way round)."""
    from mcpbind.transports.http_server import StreamableHTTPServer

    async def main() -> dict[str, Any]:
        upstream = StreamableHTTPServer(
            upstream_handler, revisions=(server_revision,), capabilities={"tools": {}}, info=INFO
        )
        async with in_loop(upstream) as base:
            served = Served(
                upstream=f"{base}/mcp",
                client_revisions=mcpbind.REVISIONS,
                server_revisions=(server_revision,),
            )
            async with served.running():
                found = await asyncio.gather(
                    *(one_client(served, revision) for revision in mcpbind.REVISIONS)
                )
            return dict(zip(mcpbind.REVISIONS, found, strict=True))

    found = run(main())
    for revision, (echoed, told, asked, invalid) in found.items():
        assert echoed == f"echo {revision} from {server_revision}", revision
        assert told == f"{server_revision} was told from the client", revision
        assert [method for method, _ in asked] == ["sampling/createMessage"], revision
        assert invalid == [], revision


async def one_client(served: Served, revision: str) -> tuple[str, str, list[Any], list[str]]:
    asked, on_request = asked_log()
    session = client(revision, capabilities={"sampling": {}})
    mark = {"x-wire": revision}  # its messages recorded apart
    transport: Any = (
        SSEClient(served.sse_url, session, on_request=on_request, headers=mark)
        if revision == "2024-11-05"
        else StreamableHTTPClient(served.url, session, on_request=on_request, headers=mark)
    )
    try:
        await transport.connect()
        echoed = await transport.call(
            "tools/call", {"name": "echo", "arguments": {"message": revision}}
        )
        told = await transport.call("tools/call", {"name": "ask", "arguments": {}})
        invalid = served.wire.invalid(revision, revision)
    finally:
        await transport.close()
    return echoed.content[0].text, sampled_text(told), asked, invalid


def test_an_http_server_that_dies_fails_the_pending_calls_of_every_client() -> None:
    """Two clients each have a call in flight on the HTTP server (it waits for their answer to
    its elicitation); the server is killed: both calls end with -32000 naming the failure."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "examples/everything_server.py", "--port", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_port(port, process)

    async def main() -> list[Any]:
        served = Served(upstream=f"http://127.0.0.1:{port}/mcp", server_revisions=("2025-11-25",))
        killed = asyncio.Event()
        asked: list[str] = []

        async def on_request(event: Any) -> Any:
            asked.append(event.method)
            await killed.wait()  # answered only once the server is gone
            return {"action": "accept", "content": {}}

        async with served.running():
            sessions = [
                StreamableHTTPClient(
                    served.url,
                    client("2025-11-25", capabilities={"elicitation": {}}),
                    on_request=on_request,
                )
                for _ in range(2)
            ]
            for session in sessions:
                await session.connect()

            async def outcome(session: StreamableHTTPClient) -> Any:
                try:
                    return await session.call(
                        "tools/call", {"name": "test_elicitation", "arguments": {"message": "?"}}
                    )
                except mcpbind.ProtocolError as error:
                    return error

            calls = [asyncio.ensure_future(outcome(s)) for s in sessions]
            await eventually(lambda: len(asked) == 2, "both clients asked")
            process.send_signal(signal.SIGKILL)
            process.wait(10)
            killed.set()
            return await asyncio.gather(*calls)

    try:
        errors = run(main())
    finally:
        if process.poll() is None:
            process.kill()
    assert [type(e) for e in errors] == [mcpbind.ProtocolError] * 2
    assert [e.code for e in errors] == [CONNECTION_CLOSED] * 2
    assert all("Connection closed: the connection to the server at" in e.message for e in errors)


def test_an_answer_over_max_line_fails_its_request_and_the_link_goes_on() -> None:
    async def main() -> tuple[Any, Any]:
        served = Served(
            command=[*FAILING, "long-answer", "5000"],
            server_revisions=("2025-06-18",),
            max_line=1000,
        )
        async with served.running():
            session = StreamableHTTPClient(served.url, client("2025-11-25"))
            await session.connect()
            try:
                await session.call("tools/call", {"name": "x", "arguments": {}})
            except mcpbind.ProtocolError as error:
                failed = error
            links = [link.why for link in served.gateway.sessions.values()]
            await session.close()
            return failed, links

    failed, links = run(main())
    assert failed.code == -32603
    assert failed.message.startswith(
        "Internal error: the server's answer to 'tools/call' cannot be passed on: a message of "
    )
    assert failed.message.endswith("bytes exceeds the limit of 1000 bytes")
    assert links == [None]  # the session's link (its child) goes on


def test_a_server_of_the_older_http_transport_is_reached_over_http_sse() -> None:
    """``--upstream`` names an HTTP+SSE server (it refuses the opening POST with 405): the
    gateway falls back to that transport, and clients of both eras reach it, the server's
    sampling request included."""
    from mcpbind.transports.sse_server import SSEServer

    async def main() -> list[Any]:
        upstream = SSEServer(
            upstream_handler, revisions=("2024-11-05",), capabilities={"tools": {}}, info=INFO
        )
        async with in_loop(upstream) as base:
            served = Served(upstream=f"{base}/sse")
            async with served.running():
                found = await asyncio.gather(
                    one_client(served, "2025-11-25"), one_client(served, "2026-07-28")
                )
                kind = type(next(iter(served.gateway.shared.values())).transport).__name__
            return [*found, kind]

    new, modern, kind = run(main())
    assert kind == "SseUpstream"
    for revision, (echoed, told, asked, invalid) in (("2025-11-25", new), ("2026-07-28", modern)):
        assert echoed == f"echo {revision} from 2024-11-05"
        assert told == "2024-11-05 was told from the client"
        assert [method for method, _ in asked] == ["sampling/createMessage"]
        assert invalid == []


def test_the_pool_keeps_its_connection_to_the_server_alive_and_sends_no_broken_header() -> None:
    """The gateway's POSTs to an HTTP server (``Pool``) go over one kept-alive connection, one
    exchange after the other; a header holding a line break is refused before anything is
    sent."""
    from mcpbind.transports.http_pool import HttpPool as Pool
    from mcpbind.transports.http_server import StreamableHTTPServer
    from mcpbind.transports.http_wire import HttpError

    async def main() -> tuple[list[Any], list[int], str]:
        upstream = StreamableHTTPServer(
            upstream_handler, revisions=("2025-11-25",), capabilities={"tools": {}}, info=INFO
        )
        headers = dict(ACCEPT)
        used: list[Any] = []
        statuses: list[int] = []
        async with in_loop(upstream) as base:
            pool = Pool(f"{base}/mcp")
            try:
                for n in range(3):
                    body = json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode()
                    async with pool.post(headers, body) as answer:
                        statuses.append(answer.status)
                        await answer.read()
                        used.append(answer._connection)
                with pytest.raises(HttpError) as refused:
                    async with pool.post({**headers, "x-evil": "a\r\nx-injected: 1"}, b"{}"):
                        pass
            finally:
                pool.close()
        return used, statuses, str(refused.value)

    used, statuses, refused = run(main())
    assert len(statuses) == 3 and all(status < 500 for status in statuses), statuses
    assert used[0] is used[1] is used[2]  # one connection, kept alive between the exchanges
    assert "'x-evil' holds a line break" in refused


def test_the_heads_the_pool_keeps_follow_the_tool_name_and_are_bounded() -> None:
    """A link's POST heads are encoded once and kept by the pool (per session, method, name and
    version): through the gateway, calls naming one tool, another, then the first again each
    reach a 2026-07-28 server (which refuses a request whose Mcp-Name disagrees with its body)
    with their own name; the pool keeps at most MAX_HEADS heads, and a header holding a line
    break is refused, not kept."""
    from mcpbind.transports.http_pool import MAX_HEADS
    from mcpbind.transports.http_pool import HttpPool as Pool
    from mcpbind.transports.http_server import StreamableHTTPServer
    from mcpbind.transports.http_wire import HttpError

    names = ["echo", "ask", "echo", "ask"]

    async def named(call: Any) -> Any:
        if call.method == "tools/list":
            return {"tools": TOOLS}
        return text(f"called {call.params.name}")

    async def main() -> list[str]:
        upstream = StreamableHTTPServer(
            named, revisions=("2026-07-28",), capabilities={"tools": {}}, info=INFO
        )
        async with in_loop(upstream) as base:
            served = Served(
                upstream=f"{base}/mcp",
                client_revisions=("2025-11-25",),
                server_revisions=("2026-07-28",),
            )
            async with served.running():
                transport = StreamableHTTPClient(served.url, client("2025-11-25"))
                await transport.connect()
                try:
                    found = []
                    for name in names:
                        result = await transport.call("tools/call", {"name": name})
                        found.append(result.content[0].text)
                finally:
                    await transport.close()
            return found

    assert run(main()) == [f"called {name}" for name in names]
    pool = Pool("http://127.0.0.1:9/mcp")
    first = pool.head("POST", pool.url, {"mcp-name": "t0"}, ("t0",))
    assert pool.kept(("t0",)) == first and b"mcp-name: t0\r\n" in first
    for n in range(1, MAX_HEADS + 1):
        pool.head("POST", pool.url, {"mcp-name": f"t{n}"}, (f"t{n}",))
    assert len(pool._heads) <= MAX_HEADS and pool.kept(("t0",)) is None
    with pytest.raises(HttpError):
        pool.head("POST", pool.url, {"mcp-name": "a\r\nx-injected: 1"}, ("bad",))
    assert pool.kept(("bad",)) is None


def test_the_serving_process_freezes_the_built_gateway_out_of_garbage_collection() -> None:
    """``mcpbind bridge --listen`` builds its gateway with the heap it holds from then on frozen
    out of the cyclic collector, which starts a young collection only every GC_THRESHOLD
    allocations (in a process of its own here: the settings are the process's)."""
    script = (
        "import gc, json\n"
        "from mcpbind.bridge import gateway\n"
        "before = (gc.get_threshold()[0], gc.get_freeze_count())\n"
        "built = gateway.serving({'command': ['true'], 'upstream': None}, None)\n"
        "print(json.dumps([before, [gc.get_threshold()[0], gc.get_freeze_count()],\n"
        "    gateway.GC_THRESHOLD, type(built).__name__]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    before, after, threshold, built = json.loads(done.stdout)
    assert before == [700, 0] and built == "Gateway"
    assert after[0] == threshold == 10_000 and after[1] > 10_000  # the whole heap frozen


def test_an_answer_head_past_max_head_fails_the_post_with_why() -> None:
    """A hostile HTTP server answering with a header of 70,000 bytes: the pool stops reading at
    MAX_HEAD and the POST fails naming it, on a fresh connection and on a kept one."""
    from mcpbind.transports.http_pool import MAX_HEAD
    from mcpbind.transports.http_pool import HttpPool as Pool
    from mcpbind.transports.http_wire import HttpError

    def big_or_small(body: bytes) -> bytes:
        big = b"x" * 70_000 if body == b"big" else b"small"
        return b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-big: " + big + b"\r\n\r\n{}"

    async def main() -> list[str]:
        found = []
        async with raw_server(replying(big_or_small)) as url:
            pool = Pool(url)
            try:
                for body in (b"big", b"ok", b"big"):  # fresh, then kept, then kept again
                    try:
                        async with pool.post({"content-type": "application/json"}, body) as reply:
                            found.append(f"{reply.status} {(await reply.read()).decode()}")
                    except HttpError as error:
                        found.append(str(error))
            finally:
                pool.close()
        return found

    found = run(main())
    refused = f"the server's answer cannot be read: the answer's head exceeds {MAX_HEAD} bytes"
    assert found == [refused, "200 {}", refused]


def test_the_pools_exchanges_past_its_limit_wait_and_a_cancelled_wait_loses_no_slot() -> None:
    """A pool of one connection: exchanges past the first wait for it to be released; one
    cancelled while it waits is passed over, one cancelled just as it was given the connection
    hands it on, and an exchange after them all still gets one."""
    from mcpbind.transports.http_pool import HttpPool as Pool

    def echo(body: bytes) -> bytes:
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body

    async def main() -> list[str]:
        headers = {"content-type": "application/json"}
        found = []
        async with raw_server(replying(echo)) as url:
            pool = Pool(url, limit=1)
            head = pool.head("POST", url, headers)
            try:
                first = await pool.exchange(head, b"1")
                waits = [asyncio.ensure_future(pool.exchange(head, b"%d" % n)) for n in (2, 3, 4)]
                for _ in range(20):
                    await asyncio.sleep(0)
                found.append(f"waiting: {[not w.done() for w in waits]}")
                waits[0].cancel()  # while it waits
                for _ in range(5):
                    await asyncio.sleep(0)
                found.append((await first.read()).decode())
                pool.release(first)  # the connection goes to the next waiting: 3
                waits[1].cancel()  # just given it, not yet running: it goes on to 4
                fourth = await asyncio.wait_for(waits[2], 10)
                found.append((await fourth.read()).decode())
                pool.release(fourth)
                fifth = await asyncio.wait_for(pool.exchange(head, b"5"), 10)
                found.append((await fifth.read()).decode())
                pool.release(fifth)
                found.append(f"cancelled: {waits[0].cancelled()} {waits[1].cancelled()}")
            finally:
                pool.close()
        return found

    assert run(main()) == ["waiting: [True, True, True]", "1", "4", "5", "cancelled: True True"]


def test_a_call_awaiting_the_server_hears_why_when_its_link_ends() -> None:
    """A client's call is in flight on the HTTP server (its tool never answers) when the gateway
    shuts down: the call ends at once with the error naming why, not when the server answers
    (the handler of a call waits for the server's answer on the pool's connection itself, and
    the link's end aborts that wait)."""
    from mcpbind.transports.http_server import StreamableHTTPServer

    started = asyncio.Event()
    never = asyncio.Event()

    async def hanging(call: Any) -> Any:
        started.set()
        await never.wait()
        return text("too late")

    async def main() -> Any:
        upstream = StreamableHTTPServer(
            hanging, revisions=("2026-07-28",), capabilities={"tools": {}}, info=INFO
        )
        async with in_loop(upstream) as base:
            served = Served(upstream=f"{base}/mcp")
            try:
                async with served.running():
                    transport = StreamableHTTPClient(served.url, client("2025-11-25"))
                    await transport.connect()
                    call = asyncio.ensure_future(
                        transport.call("tools/call", {"name": "hang", "arguments": {}})
                    )
                    await started.wait()
                    await served.gateway.aclose()
                    try:
                        # A hang guard, not a timing check: without the abort the call would wait
                        # for an answer that never comes.
                        await asyncio.wait_for(call, 30)
                    except mcpbind.ProtocolError as error:
                        return error
                    finally:
                        await transport.close()
                    return None
            finally:
                never.set()  # the handler ends: the server can stop

    error = run(main())
    assert isinstance(error, mcpbind.ProtocolError), error
    assert "the gateway is shutting down" in error.message, error.message


def test_the_pool_stops_reading_an_answer_nobody_reads_and_resumes_when_read() -> None:
    """A server answers with 8 MiB the gateway does not read yet (a stream's consumer busy
    elsewhere): the pool holds at most about a read's worth of it (it pauses reading past
    64 KiB unread, the rest waits in the sockets), and hands over every byte once read."""
    from mcpbind.transports.http_pool import HttpPool as Pool

    size = 8 << 20

    async def main() -> tuple[int, int, bytes]:
        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size)
            for n in range(size // 65536):
                writer.write(bytes([n % 251]) * 65536)
                await writer.drain()
            writer.close()

        async with raw_server(answer) as url:
            pool = Pool(url)
            try:
                async with pool.post({"content-type": "application/json"}, b"{}") as reply:
                    connection = reply._connection
                    await eventually(lambda: connection.paused, "the pool paused reading")
                    for _ in range(20):  # the loop turns: were it still reading, it would read on
                        await asyncio.sleep(0.01)
                    held = connection.buffered
                    body = await reply.read()
            finally:
                pool.close()
        return held, len(body), body[-1:]

    held, read, last = run(main())
    assert held <= 1 << 20, held  # not the 8 MiB sent
    assert read == size and last == bytes([(size // 65536 - 1) % 251])
