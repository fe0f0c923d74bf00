"""The HTTP+SSE transport (MCP 2024-11-05's HTTP transport) with real peers (`make interop`):

- our ``SSEClient``, reached through ``connect_http`` (whose Streamable HTTP POST the old server
  refuses), against ``@modelcontextprotocol/server-everything`` run in its ``sse`` mode;
- the official ``mcp`` package's SSE client (``mcp.client.sse``) against our ``SSEServer``.

In each pair a tool call, notifications and the server's own requests (roots, sampling) cross,
in every revision with the initialize handshake, and the transcript of the whole session
validates against that revision's schema (``mcpbind.validate``, the codec of each side)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind.transports.http_server import Call
from mcpbind.transports.sse_client import SSEClient, connect_http
from mcpbind.transports.sse_server import SSEServer
from mcpbind.validate import validate_lines

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402

from tests._net import free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

INFO = {"name": "mcpbind-sse", "version": "1.0"}
HANDSHAKE = driver.EVERYTHING_REVISIONS  # the revisions with initialize, which HTTP+SSE carries
ROOTS = {"roots": [{"uri": "file:///tmp/mcpbind-sse", "name": "sse"}]}
SAMPLED = {
    "role": "assistant",
    "content": {"type": "text", "text": "sampled over sse"},
    "model": "m",
}

# server-everything's `sse` mode listens on $PORT on every interface; this preload binds a server
# that names only a port to 127.0.0.1 (the tests use loopback addresses only).
LOOPBACK = """
const net = require("net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  return listen.apply(this, args);
};
"""


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """server-everything in its HTTP+SSE mode on a loopback port: the URL of its stream."""
    if shutil.which("node") is None or not driver.EVERYTHING.exists():
        pytest.fail(
            "server-everything is not installed: run `make interop` (npm ci in tests/interop)"
        )
    preload = tmp_path_factory.mktemp("sse") / "loopback.cjs"
    preload.write_text(LOOPBACK)
    port = free_port()
    log = open(preload.with_name("everything.log"), "w+")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        ["node", "--require", str(preload), str(driver.EVERYTHING), "sse"],
        env={**os.environ, "PORT": str(port)},
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=driver.HERE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"server-everything exited: {log.read()}")
            assert time.monotonic() < deadline, "server-everything did not listen within 30 s"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Recording(mcpbind.ClientSession):
    """A client session keeping every message it sends and receives (its transcript)."""

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


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.02)


# -- our client, server-everything's server -----------------------------------------------------


async def with_everything(
    url: str, revision: str
) -> tuple[Any, Recording, list[str], dict[str, Any]]:
    asked: list[str] = []

    async def on_request(event: ev.RequestReceived) -> Any:
        asked.append(event.method)
        return ROOTS if event.method == "roots/list" else SAMPLED

    caps = {"roots": {"listChanged": True}, "sampling": {}}
    session = Recording(revisions=(revision,), capabilities=caps, info=INFO)
    client = await connect_http(url, session, on_request=on_request)
    texts: dict[str, Any] = {}
    try:
        assert type(client) is SSEClient  # its POST to the stream's URL was refused with a 4xx
        tools = await client.call("tools/list")
        texts["tools"] = {t.name for t in tools.tools}
        for name, arguments in [
            ("echo", {"message": "over sse"}),
            ("get-roots-list", {}),  # the server asks roots/list
            ("trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}),  # and a sampling
        ]:
            result = await client.call("tools/call", {"name": name, "arguments": arguments})
            texts[name] = " ".join(c.text for c in result.content)
        await client.call(
            "tools/call",
            {"name": "trigger-long-running-operation", "arguments": {"duration": 0.2, "steps": 2}},
            progress=True,
        )
        roots_asked = asked.count("roots/list")
        await client.notify("notifications/roots/list_changed")  # the server asks again
        await until(lambda: asked.count("roots/list") > roots_asked)
        events = list(client.events)
    finally:
        await client.close()
    return events, session, asked, texts


@pytest.mark.parametrize("revision", HANDSHAKE)
def test_our_sse_client_with_server_everything(everything: str, revision: str) -> None:
    events, session, asked, texts = asyncio.run(
        asyncio.wait_for(with_everything(everything, revision), 60)
    )
    assert session.revision == revision
    assert {"echo", "get-roots-list", "trigger-sampling-request"} <= texts["tools"]
    assert texts["echo"] == "Echo: over sse"
    assert "file:///tmp/mcpbind-sse" in texts["get-roots-list"]
    assert "sampled over sse" in texts["trigger-sampling-request"]
    assert {"roots/list", "sampling/createMessage"} <= set(asked)
    progress = [e for e in events if isinstance(e, ev.ProgressReceived)]
    assert [e.progress for e in progress] == [1, 2]
    assert not [e for e in events if isinstance(e, ev.MessageRejected)]
    assert list(validate_lines(session.wire, revision)) == []


# -- the official client, our server ------------------------------------------------------------


class Tap:
    """An ASGI wrapper keeping the transcript of an HTTP+SSE server: each POSTed message and each
    ``message`` event of the streams, in the order they crossed."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.lines: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        pending = bytearray()

        async def tapped_receive() -> Any:
            message = await receive()
            if scope["method"] == "POST" and message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body"):
                    self.lines.append(body.decode())
            return message

        async def tapped_send(message: Any) -> None:
            if scope["method"] == "GET" and message["type"] == "http.response.body":
                pending.extend(message.get("body", b""))
                while b"\n\n" in pending:
                    event, _, rest = bytes(pending).partition(b"\n\n")
                    pending[:] = rest
                    fields = dict(
                        line.split(": ", 1)
                        for line in event.decode().split("\n")
                        if ": " in line and not line.startswith(":")
                    )
                    if fields.get("event") == "message":
                        self.lines.append(fields["data"])
            await send(message)

        await self.app(scope, tapped_receive, tapped_send)


async def with_the_official_client(revision: str) -> dict[str, Any]:
    import uvicorn
    from mcp import Client, types
    from mcp.client.sse import sse_client

    heard: list[str] = []

    async def handler(call: Call) -> Any:
        if call.method == "tools/list":
            return {"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]}
        if call.method != "tools/call":
            raise mcpbind.ProtocolError(-32601, f"Method not found: {call.method!r}")
        roots = await call.request("roots/list")
        sampled = await call.request(
            "sampling/createMessage",
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                "maxTokens": 5,
            },
        )
        call.notify("notifications/message", {"level": "info", "data": "asked"})
        return {
            "content": [
                {"type": "text", "text": json.dumps([roots.roots[0].uri, sampled.content.text])}
            ]
        }

    server = SSEServer(
        handler,
        revisions=(revision,),
        capabilities={"tools": {}, "logging": {}},
        info=INFO,
        on_event=lambda session, event: heard.append(getattr(event, "method", "")),
    )
    tap = Tap(server)
    port = free_port()
    web = uvicorn.Server(uvicorn.Config(tap, host="127.0.0.1", port=port, log_level="warning"))
    serving = asyncio.ensure_future(web.serve())
    logged: list[Any] = []

    async def list_roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    async def sample(context: Any, params: Any) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled"), model="m"
        )

    async def log(params: Any) -> None:
        logged.append(params.data)

    seen: dict[str, Any] = {}
    try:
        while not web.started:
            await asyncio.sleep(0.02)
        async with Client(
            sse_client(f"http://127.0.0.1:{port}/sse"),
            mode="legacy",
            list_roots_callback=list_roots,
            sampling_callback=sample,
            logging_callback=log,
        ) as client:
            seen["agreed"] = client.protocol_version
            result = await client.call_tool("ask", {})
            seen["text"] = result.content[0].text  # type: ignore[union-attr]
            await client.send_roots_list_changed()
            await until(lambda: "notifications/roots/list_changed" in heard)
            (sid,) = server.sessions
            seen["roots"] = await server.request(sid, "roots/list")  # outside any call
            await until(lambda: logged)
        await until(lambda: not server.sessions)  # its stream closed: so did its session
    finally:
        web.should_exit = True
        await serving
    seen["logged"] = logged
    seen["lines"] = tap.lines
    return seen


@pytest.mark.parametrize("revision", HANDSHAKE)
@pytest.mark.filterwarnings("ignore:The roots capability is deprecated")  # from 2026-07-28 on
def test_the_official_sse_client_with_our_sse_server(revision: str) -> None:
    pytest.importorskip("mcp.client.sse", reason="the pinned `mcp` package (dev extras) is needed")
    seen = asyncio.run(asyncio.wait_for(with_the_official_client(revision), 60))
    assert seen["agreed"] == revision
    assert json.loads(seen["text"]) == ["file:///work", "sampled"]
    assert seen["logged"] == ["asked"]
    M = mcpbind.bindings(revision)
    assert type(seen["roots"]) is M.ListRootsResult and seen["roots"].roots[0].name == "work"
    methods = [json.loads(line).get("method") for line in seen["lines"]]
    assert {"initialize", "tools/call", "roots/list", "sampling/createMessage"} <= set(methods)
    assert "notifications/message" in methods and "notifications/roots/list_changed" in methods
    assert list(validate_lines(seen["lines"], revision)) == []
