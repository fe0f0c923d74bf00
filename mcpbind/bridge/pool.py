"""Keep-alive HTTP/1.1 connections to one server, for the gateway's POSTs to it: h11 (the sans-IO
HTTP/1.1 library uvicorn uses) over asyncio streams.

The gateway sends every request of every client to its server over HTTP; httpx spends about 2 ms
of CPU on one such POST, more than the whole gateway may spend on a request (docs/bridge.md,
"Cost"). This does the one exchange the gateway needs (a POST, its answer read as it comes) in a
small fraction of that. Everything else (deleting a session, resuming a stream with
``Last-Event-ID``, finding which transport a server speaks) still goes through httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import h11

__all__ = ["MAX_CONNECTIONS", "Answer", "Pool"]

MAX_CONNECTIONS = 256  # connections to the server held at once (a request past it waits)
_READ = 65536


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.h11 = h11.Connection(h11.CLIENT)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Answer:
    """The answer to one POST: ``status``, ``headers`` (lower-case names), and its body as it
    comes (``chunks``, or ``read`` for all of it)."""

    def __init__(self, connection: _Connection, response: h11.Response) -> None:
        self._connection = connection
        self.status = response.status_code
        self.headers = {k.decode().lower(): v.decode() for k, v in response.headers}
        self.complete = False

    async def chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while not self.complete:
            event = connection.h11.next_event()
            if event is h11.NEED_DATA:
                data = await connection.reader.read(_READ)
                if not data:
                    raise ConnectionError("the server closed the connection mid-answer")
                connection.h11.receive_data(data)
            elif isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.complete = True
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection mid-answer")

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


class Pool:
    """At most ``limit`` keep-alive connections to the server at ``url`` (its scheme, host and
    port), reused one exchange at a time."""

    def __init__(self, url: str, limit: int = MAX_CONNECTIONS) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = parts.netloc.rpartition("@")[2]
        self.base = [("host", authority)]
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def post(self, headers: dict[str, str], body: bytes) -> AsyncIterator[Answer]:
        """POST ``body``; the answer, its head read. The connection goes back to the pool when
        its body was read whole and the server keeps it open; else it is closed."""
        async with self._slots:
            connection, fresh = await self._connection()
            try:
                answer = await self._exchange(connection, headers, body)
            except (ConnectionError, OSError, h11.ProtocolError):
                connection.close()
                if fresh:
                    raise
                # A kept connection the server had closed meanwhile: once more on a new one.
                connection, _ = await self._connection(new=True)
                try:
                    answer = await self._exchange(connection, headers, body)
                except BaseException:
                    connection.close()
                    raise
            except BaseException:
                connection.close()
                raise
            try:
                yield answer
            finally:
                self._release(connection, answer)

    async def _connection(self, new: bool = False) -> tuple[_Connection, bool]:
        while self._idle and not new:
            connection = self._idle.pop()
            if not connection.writer.is_closing() and not connection.reader.at_eof():
                return connection, False
            connection.close()
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=self.ssl, limit=_READ
        )
        return _Connection(reader, writer), True

    async def _exchange(
        self, connection: _Connection, headers: dict[str, str], body: bytes
    ) -> Answer:
        conn = connection.h11
        request = h11.Request(
            method="POST",
            target=self.target,
            headers=[*self.base, *headers.items(), ("content-length", str(len(body)))],
        )
        connection.writer.write(
            conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage())
        )
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                data = await connection.reader.read(_READ)
                if not data:
                    raise ConnectionError("the server closed the connection")
                conn.receive_data(data)
            elif isinstance(event, h11.Response):
                return Answer(connection, event)
            elif isinstance(event, h11.ConnectionClosed):
                raise ConnectionError("the server closed the connection")
            # an informational response (100 Continue): read on

    def _release(self, connection: _Connection, answer: Answer) -> None:
        conn = connection.h11
        if answer.complete and conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            try:
                conn.start_next_cycle()
            except h11.LocalProtocolError:
                connection.close()
                return
            self._idle.append(connection)
        else:
            connection.close()

    def close(self) -> None:
        for connection in self._idle:
            connection.close()
        self._idle.clear()


def event_stream(buffer: bytearray, chunk: bytes) -> list[dict[str, Any]]:
    """The server-sent events complete once ``chunk`` is added to ``buffer`` (which keeps the
    rest): each a dict of its fields (``data`` lines joined)."""
    buffer += chunk.replace(b"\r\n", b"\n")
    events = []
    while (end := buffer.find(b"\n\n")) >= 0:
        block, buffer[:] = bytes(buffer[:end]), buffer[end + 2 :]
        fields: dict[str, Any] = {}
        for line in block.split(b"\n"):
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            key = name.decode(errors="replace")
            if key == "data" and "data" in fields:
                fields["data"] += b"\n" + value
            else:
                fields[key] = value
        if fields:
            events.append(fields)
    return events
