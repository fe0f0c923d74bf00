"""Keep-alive HTTP/1.1 connections to one server, for the gateway's POSTs to it: the request head
written here, the answer read by httptools (the C HTTP parser uvicorn serves with), over asyncio
streams.

The gateway sends every request of every client to its server over HTTP; httpx spends about 2 ms
of CPU on one such POST, more than the whole gateway may spend on a request (docs/bridge.md,
"Cost"), and h11 (pure Python) about a fifth of the gateway's time. This does the one exchange
the gateway needs (a POST, its answer read as it comes) in a small fraction of that. Everything
else (deleting a session, resuming a stream with ``Last-Event-ID``, finding which transport a
server speaks) still goes through httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httptools

__all__ = ["MAX_CONNECTIONS", "MAX_HEAD", "Answer", "HttpError", "Pool"]

MAX_CONNECTIONS = 256  # connections to the server held at once (a request past it waits)
MAX_HEAD = 65536  # bytes of an answer's status line and headers, at most
_READ = 65536


class HttpError(Exception):
    """The server's answer is not HTTP/1.1 the pool can read (or its head is over
    ``MAX_HEAD``), or a header to send would break the request head."""


class _Connection:
    """One connection and the parser of the answer being read on it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.parser = httptools.HttpResponseParser(self)
        self._start()

    def _start(self) -> None:
        self.status = 0
        self.head = 0  # bytes of header names and values read
        self.headers: dict[str, str] = {}
        self.headed = False  # the head of a final (not 1xx) answer is read
        self.keep = False  # the server keeps the connection open after the answer
        self.complete = False
        self.body: list[bytes] = []
        self.failure: str | None = None  # why a callback stopped the parser

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.head += len(name) + len(value)
        if self.head > MAX_HEAD:
            self.failure = f"the answer's head exceeds {MAX_HEAD} bytes"
            raise HttpError(self.failure)  # httptools stops parsing, raising HttpParserError
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.headed = self.status >= 200
        self.keep = self.parser.should_keep_alive()  # (said before the answer completes)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.headed:
            self.complete = True
        else:  # an informational answer (100 Continue): the final one follows
            self._start()

    async def more(self) -> None:
        """Feed what the server sends next to the parser."""
        data = await self.reader.read(_READ)
        if not data:
            raise ConnectionError("the server closed the connection mid-answer")
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            raise HttpError(
                f"the server's answer cannot be read: {self.failure or error}"
            ) from None

    def reusable(self) -> bool:
        """Whether the next exchange may use it: its answer read whole, and kept alive."""
        return (
            self.complete
            and self.keep
            and not self.writer.is_closing()
            and not self.reader.at_eof()
        )

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Answer:
    """The answer to one POST: ``status``, ``headers`` (lower-case names), and its body as it
    comes (``chunks``, or ``read`` for all of it)."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self.status = connection.status
        self.headers = connection.headers

    @property
    def complete(self) -> bool:
        return self._connection.complete

    async def chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            if connection.body:
                body, connection.body = connection.body, []
                for chunk in body:
                    yield chunk
            elif connection.complete:
                return
            else:
                await connection.more()

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
        self._line = f"POST {self.target} HTTP/1.1\r\nhost: {authority}\r\n"
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def post(self, headers: dict[str, str], body: bytes) -> AsyncIterator[Answer]:
        """POST ``body``; the answer, its head read. The connection goes back to the pool when
        its body was read whole and the server keeps it open; else it is closed."""
        head = self._head(headers, len(body))
        async with self._slots:
            connection, fresh = await self._connection()
            try:
                answer = await self._exchange(connection, head, body)
            except (ConnectionError, OSError, HttpError):
                connection.close()
                if fresh:
                    raise
                # A kept connection the server had closed meanwhile: once more on a new one.
                connection, _ = await self._connection(new=True)
                try:
                    answer = await self._exchange(connection, head, body)
                except BaseException:
                    connection.close()
                    raise
            except BaseException:
                connection.close()
                raise
            try:
                yield answer
            finally:
                self._release(connection)

    def _head(self, headers: dict[str, str], length: int) -> bytes:
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        # One line per header, or a name or value holds a line break (or a NUL): one scan each.
        if lines.count("\n") != len(headers) or lines.count("\r") != len(headers) or "\0" in lines:
            bad = next(n for n, v in headers.items() if any(c in n + v for c in "\r\n\0"))
            raise HttpError(f"the header {bad!r} holds a line break or NUL: not sent")
        try:
            return f"{self._line}{lines}content-length: {length}\r\n\r\n".encode("latin-1")
        except UnicodeEncodeError as error:
            raise HttpError(f"a header holds what HTTP/1.1 cannot carry: {error}") from None

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

    @staticmethod
    async def _exchange(connection: _Connection, head: bytes, body: bytes) -> Answer:
        connection.writer.write(head + body)
        while not connection.headed:
            await connection.more()
        return Answer(connection)

    def _release(self, connection: _Connection) -> None:
        if connection.reusable():
            connection.parser = httptools.HttpResponseParser(connection)
            connection._start()
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
