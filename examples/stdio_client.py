"""An asyncio MCP client on stdio, built on mcpbind's sans-IO ``ClientSession``.

    python examples/stdio_client.py COMMAND [ARG ...]

Starts the server COMMAND, negotiates the newest revision both speak, lists the tools and calls
the first one with no arguments. ``StdioClient`` is the reusable part: one awaitable per request.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any

import mcpbind
from mcpbind import events
from mcpbind.errors import INVALID_REQUEST
from mcpbind.transports.stdio import LineReader, Overlong

# The events that end a request: its answer, or the peer's response that could not be read.
FINAL = (events.ResultReceived, events.ErrorReceived, events.TaskCreated, events.InputRequired)
OPENING = "opening"  # what the handshake's waiter is filed under


class StdioClient:
    """A server process spoken to through ``session``; ``on_request`` answers its requests (a
    result as plain JSON or a generated Struct). Every event received is kept in ``events``."""

    def __init__(
        self,
        session: mcpbind.ClientSession,
        on_request: Callable[[events.RequestReceived], Any] | None = None,
    ) -> None:
        self.session, self.on_request = session, on_request
        self.events: list[events.Event] = []
        self._waiting: dict[Any, asyncio.Future[events.Event]] = {}

    async def start(self, *argv: str) -> events.Event:
        """Start the server and negotiate: a ``Negotiated`` or ``NegotiationFailed`` event."""
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 20
        )
        self._reader = asyncio.create_task(self._read())
        self.session.connect()
        return await self._wait(OPENING)

    async def request(self, method: str, params: Any = None, **options: Any) -> events.Event:
        """Send a request and await the event that answers it."""
        return await self._wait(self.session.request(method, params, **options))

    async def answer(self, needed: events.InputRequired, responses: dict[str, Any]) -> events.Event:
        """Retry a request that needs input, carrying ``responses``."""
        return await self._wait(self.session.answer(needed, responses))

    async def close(self, grace: float = 5.0) -> None:
        """Close the server's input and wait for it to exit (stopping it after ``grace`` s)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), grace)
        except TimeoutError:
            self.proc.terminate()
            await self.proc.wait()
        await self._reader

    async def _wait(self, key: Any) -> events.Event:
        waiter = self._waiting[key] = asyncio.get_running_loop().create_future()
        await self._flush()
        return await asyncio.wait_for(waiter, 30)

    async def _flush(self) -> None:
        assert self.proc.stdin is not None
        out = self.session.data_to_send()
        if self.proc.stdin.is_closing():
            return  # closed by close(): what the server still asks goes unanswered
        for data in out:
            self.proc.stdin.write(data + b"\n")
        await self.proc.stdin.drain()

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        lines = LineReader(self.proc.stdout)  # at most 16 MiB a line, longer ones dropped unread
        try:
            while (line := await lines.read()) is not None:
                if isinstance(line, Overlong):
                    self._dropped(line, lines.max_line)
                elif line and not line.isspace():
                    self._receive(line)
                await self._flush()
        finally:  # the server is gone (or this reader failed): nothing more will be answered
            for waiter in self._waiting.values():
                if not waiter.done():
                    waiter.set_exception(ConnectionError("the server closed its output"))

    def _receive(self, line: bytes) -> None:
        for event in self.session.receive(line):
            self.events.append(event)
            key: Any = None
            if isinstance(event, (events.Negotiated, events.NegotiationFailed)):
                key = OPENING
            elif isinstance(event, FINAL):
                key = event.id
            elif isinstance(event, events.MessageRejected) and not event.answered:
                key = event.error.id  # a response to that request, unreadable
            elif isinstance(event, events.RequestReceived):
                self._serve(event)
            if key is not None and (waiter := self._waiting.pop(key, None)) is not None:
                waiter.set_result(event)

    def _dropped(self, line: Overlong, limit: int) -> None:
        """A line over the limit, dropped unread: its request is refused, or its answer's
        waiter fails (and the session stops waiting for it)."""
        why = f"a message of {line.size} bytes exceeds the limit of {limit} bytes"
        message = line.envelope
        waiter = self._waiting.pop(message.id, None) if message.kind == "response" else None
        if waiter is not None and message.id is not None:
            self.session.cancel(message.id, why)
            waiter.set_exception(ValueError(f"the answer to request {message.id!r}: {why}"))
        elif (answer := message.answer(INVALID_REQUEST, f"Invalid Request: {why}")) is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.write(answer + b"\n")

    def _serve(self, request: events.RequestReceived) -> None:
        if self.on_request is None:
            self.session.respond_error(request.id, -32601, f"Method not found: {request.method}")
        else:
            self.session.respond(request.id, self.on_request(request))


async def main(argv: list[str]) -> None:
    client = StdioClient(mcpbind.ClientSession(info={"name": "example", "version": "1.0"}))
    opened = await client.start(*argv)
    print("negotiated:", client.session.revision or opened)
    listed = await client.request("tools/list")
    if isinstance(listed, events.ResultReceived) and listed.result.tools:
        print("tools:", [tool.name for tool in listed.result.tools])
        print(await client.request("tools/call", {"name": listed.result.tools[0].name}))
    await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
