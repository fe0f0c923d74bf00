"""An asyncio MCP server on stdio, built on mcpbind's sans-IO ``ServerSession``.

    python examples/stdio_server.py [REVISION ...]

Serves two tools, ``echo`` and ``add``, in every revision given (all released ones by default):
one JSON-RPC message a line on stdin (at most 16 MiB: a longer request is answered with -32600),
answers a line each on stdout, peer mistakes on stderr.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgspec

import mcpbind
from mcpbind import events
from mcpbind.errors import INTERNAL_ERROR, INVALID_REQUEST
from mcpbind.transports.stdio import LineReader, Overlong, envelope

TOOLS = [
    {
        "name": "echo",
        "description": "Echo a message back.",
        "inputSchema": {
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"],
        },
    },
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
]


def call_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A ``tools/call`` result; a bad call is a tool error the model can read, not a crash."""
    try:
        text = str(arguments["message"]) if name == "echo" else str(arguments["a"] + arguments["b"])
    except (KeyError, TypeError) as error:
        return {"content": [{"type": "text", "text": f"bad call: {error!r}"}], "isError": True}
    return {"content": [{"type": "text", "text": text}]}


def handle(session: mcpbind.ServerSession, event: events.RequestReceived) -> None:
    if event.method == "tools/list":
        result: dict[str, Any] = {"tools": TOOLS}
        if "cache_scope" in mcpbind.bindings(event.revision).ListToolsResult.__struct_fields__:
            result |= {"cacheScope": "public", "ttlMs": 60_000}  # revisions with cache hints
        session.respond(event.id, result)
    elif event.method == "tools/call" and event.params.name in ("echo", "add"):
        arguments = event.params.arguments
        session.respond(
            event.id, call_tool(event.params.name, msgspec.to_builtins(arguments or {}))
        )
    else:
        session.respond_error(event.id, -32601, f"Method not found: {event.method}")


def receive(session: mcpbind.ServerSession, line: bytes) -> list[bytes]:
    """Handle one line; what to write back beyond the session's own output."""
    try:
        received = session.receive(line)
    except Exception as error:  # mcpbind's own mistake: the client still hears of it
        print(f"cannot read a message: {error!r}", file=sys.stderr, flush=True)
        message = envelope(line)
        if message.kind == "invalid":
            answer = message.answer(INVALID_REQUEST, "Invalid Request: it cannot be read")
        else:
            answer = message.answer(INTERNAL_ERROR, f"Internal error: {error}")
        return [answer] if answer is not None else []
    for event in received:
        if isinstance(event, events.RequestReceived):
            try:
                handle(session, event)
            except Exception as error:  # our own mistake: the client hears of it
                session.respond_error(event.id, INTERNAL_ERROR, f"Internal error: {error}")
        elif isinstance(event, events.MessageRejected):
            print(f"rejected: {event.error.message}", file=sys.stderr, flush=True)
    return []


async def serve(revisions: list[str]) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)  # how much is read at once, not the bound
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    out, proto = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(out, proto, None, loop)
    session = mcpbind.ServerSession(
        revisions=revisions or mcpbind.RELEASED,
        capabilities={"tools": {}},
        info={"name": "mcpbind-example-server", "version": "1.0"},
    )
    lines = LineReader(reader)  # at most 16 MiB a line, longer ones dropped unread
    while (line := await lines.read()) is not None:
        extra: list[bytes] = []
        if isinstance(line, Overlong):
            print(f"dropped a line of {line.size} bytes", file=sys.stderr, flush=True)
            why = f"Invalid Request: a message of {line.size} bytes exceeds the limit of "
            answer = line.envelope.answer(INVALID_REQUEST, f"{why}{lines.max_line} bytes")
            extra = [answer] if answer is not None else []
        elif line and not line.isspace():
            extra = receive(session, line)
        for data in [*session.data_to_send(), *extra]:
            writer.write(data + b"\n")
        await writer.drain()


if __name__ == "__main__":
    asyncio.run(serve(sys.argv[1:]))
