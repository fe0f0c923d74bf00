"""Keep-alive HTTP/1.1 connections to one server, for the gateway's POSTs to it: the request head
written here, the answer read by httptools (the C HTTP parser uvicorn serves with), fed by the
event loop's protocol callbacks.

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
from collections import deque
from collections.abc import AsyncIterator, Hashable
from typing import Any
from urllib.parse import urlsplit

import httptools

__all__ = ["MAX_CONNECTIONS", "MAX_HEAD", "MAX_HEADS", "Answer", "HttpError", "Pool"]

MAX_CONNECTIONS = 256  # connections to the server held at once (a request past it waits)
MAX_HEAD = 65536  # bytes of an answer's status line and headers, at most
MAX_HEADS = 1024  # request heads kept encoded for the next POST with the same headers
_READ = 65536


class HttpError(Exception):
    """The server's answer is not HTTP/1.1 the pool can read (or its head is over
    ``MAX_HEAD``), or a header to send would break the request head."""


class _Connection(asyncio.Protocol):
    """One connection, read by the event loop straight into httptools (no stream reader between:
    a small answer arrives in one read and is parsed whole there), and what it has read of the
    answer in hand. Reading pauses while more than ``_READ`` bytes of body wait unread."""

    def __init__(self) -> None:
        # Its loop, kept: asyncio.get_running_loop() is a getpid() system call on Python 3.11.
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[None] | None = None  # what a reader of the answer awaits
        self.error: BaseException | None = None  # why the connection cannot go on
        self.paused = False
        self.abandoned = False  # ended by ``Pool.abort``: not to be tried again
        self._start()

    def _start(self) -> None:
        self.status = 0
        self.head = 0  # bytes of header names and values read
        self.raw: list[tuple[bytes, bytes]] = []  # the head's headers as read
        self.headers: dict[str, str] = {}  # lower-case names (repeated ones joined by ", ")
        self.headed = False  # the head of a final (not 1xx) answer is read
        self.keep = False  # the server keeps the connection open after the answer
        self.complete = False
        self.body: list[bytes] = []
        self.buffered = 0  # bytes in ``body``
        self.failure: str | None = None  # why a callback stopped the parser

    # asyncio's callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as error:
            self._fail(HttpError(f"the server's answer cannot be read: {self.failure or error}"))
            return
        if self.buffered > _READ and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._fail(ConnectionError("the server closed the connection mid-answer"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc or ConnectionError("the server closed the connection mid-answer"))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.head += len(name) + len(value)
        if self.head > MAX_HEAD:
            self.failure = f"the answer's head exceeds {MAX_HEAD} bytes"
            raise HttpError(self.failure)  # httptools stops parsing, raising HttpParserError
        self.raw.append((name, value))

    def on_headers_complete(self) -> None:
        headers = self.headers
        for name, value in self.raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        self.status = self.parser.get_status_code()
        self.headed = self.status >= 200
        self.keep = self.parser.should_keep_alive()  # (said before the answer completes)

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.headed:
            self.complete = True
        else:  # an informational answer (100 Continue): the final one follows
            self._start()

    # the reader's side
    def _fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def more(self) -> None:
        """Wait for the server to send more (raises why, when it cannot)."""
        if self.error is not None:
            raise self.error
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self.waiter = self.loop.create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None

    def take(self) -> list[bytes]:
        """The body read so far, no longer kept here."""
        body, self.body, self.buffered = self.body, [], 0
        return body

    def usable(self) -> bool:
        return self.error is None and self.transport is not None and not self.transport.is_closing()

    def reusable(self) -> bool:
        """Whether the next exchange may use it: its answer read whole, and kept alive."""
        return self.complete and self.keep and not self.body and self.usable()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.error is None:
            self.error = ConnectionError("the connection was closed")


class Answer:
    """The answer to one POST: ``status``, ``headers`` (lower-case names), and its body as it
    comes (``chunks``, or ``read`` for all of it)."""

    __slots__ = ("_connection", "headers", "status")

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self.status = connection.status
        self.headers = connection.headers

    @property
    def complete(self) -> bool:
        return self._connection.complete

    def take(self) -> bytes:
        """The body read so far (all of it once ``complete``), no longer kept."""
        body = self._connection.take()
        return body[0] if len(body) == 1 else b"".join(body)

    async def chunks(self) -> AsyncIterator[bytes]:
        connection = self._connection
        while True:
            if connection.body:
                for chunk in connection.take():
                    yield chunk
            elif connection.complete:
                return
            else:
                await connection.more()

    async def read(self) -> bytes:
        connection = self._connection
        parts: list[bytes] = []
        while not connection.complete:
            parts += connection.take()
            await connection.more()
        parts += connection.take()
        return parts[0] if len(parts) == 1 else b"".join(parts)


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
        # Exchanges at once, at most ``limit`` (a semaphore's work, without its coroutine):
        # slots free, and the exchanges waiting for one.
        self._free = limit
        self._waiting: deque[asyncio.Future[None]] = deque()
        # Encoded heads by their caller's key (``head``): building and checking one costs a
        # POST about 25k instructions, and a session sends the same few again and again.
        self._heads: dict[Hashable, bytes] = {}

    def head(self, headers: dict[str, str], key: Hashable | None = None) -> bytes:
        """The head of a POST with ``headers``, checked and encoded, up to its content-length
        (raises ``HttpError`` when a header would break it). With ``key`` (which must stand for
        exactly these headers) it is kept for ``kept(key)``, at most ``MAX_HEADS`` of them (all
        forgotten when that many are kept: recomputing one is what it saves)."""
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        # One line per header, or a name or value holds a line break (or a NUL): one scan each.
        if lines.count("\n") != len(headers) or lines.count("\r") != len(headers) or "\0" in lines:
            bad = next(n for n, v in headers.items() if any(c in n + v for c in "\r\n\0"))
            raise HttpError(f"the header {bad!r} holds a line break or NUL: not sent")
        try:
            head = f"{self._line}{lines}".encode("latin-1")
        except UnicodeEncodeError as error:
            raise HttpError(f"a header holds what HTTP/1.1 cannot carry: {error}") from None
        if key is not None:
            if len(self._heads) >= MAX_HEADS:
                self._heads.clear()
            self._heads[key] = head
        return head

    def kept(self, key: Hashable) -> bytes | None:
        """The head ``head`` kept under ``key``, if it still is."""
        return self._heads.get(key)

    @contextlib.asynccontextmanager
    async def post(self, headers: dict[str, str], body: bytes) -> AsyncIterator[Answer]:
        """POST ``body``; the answer, its head read. The connection goes back to the pool when
        its body was read whole and the server keeps it open; else it is closed."""
        answer = await self.exchange(headers, body)
        try:
            yield answer
        finally:
            self.release(answer)

    async def exchange(
        self, headers: dict[str, str] | bytes, body: bytes, held: list[Any] | None = None
    ) -> Answer:
        """``post`` without the context manager: the answer, whose connection is held until
        ``release(answer)`` (which must follow, whatever happens). ``headers``: a dict, or a
        head made by ``head``. ``held`` (a list) holds the connection while the exchange waits
        for the answer's head, so that ``abort(held)`` can end it."""
        if not isinstance(headers, bytes):
            headers = self.head(headers)
        data = headers + b"content-length: %d\r\n\r\n" % len(body) + body
        if self._free > 0:  # (none waits then: a slot freed goes to a waiter first)
            self._free -= 1
        else:
            await self._slot()
        try:
            connection: _Connection | None = None
            while self._idle:
                kept = self._idle.pop()
                if kept.usable():
                    connection = kept
                    break
                kept.close()
            fresh = connection is None
            if connection is None:
                connection = await self._connection()
            try:
                return await self._exchange(connection, data, held)
            except (ConnectionError, OSError, HttpError):
                connection.close()
                if fresh or connection.abandoned:
                    raise
                # A kept connection the server had closed meanwhile: once more on a new one.
                connection = await self._connection()
                try:
                    return await self._exchange(connection, data, held)
                except BaseException:
                    connection.close()
                    raise
            except BaseException:
                connection.close()
                raise
        except BaseException:
            self._free_slot()
            raise

    async def _slot(self) -> None:
        """Wait for one of the ``limit`` exchanges to end."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._free_slot()  # given the slot as it was cancelled: the next one's
            raise

    def _free_slot(self) -> None:
        """An exchange is over: its slot goes to the first waiting (not cancelled), if any."""
        waiting = self._waiting
        while waiting:
            waiter = waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    @staticmethod
    def abort(held: list[Any]) -> None:
        """End the exchanges waiting in ``held``: each fails with ConnectionError."""
        for connection in list(held):
            connection.abandoned = True
            connection._fail(ConnectionError("the exchange was abandoned"))
        held.clear()

    def release(self, answer: Answer) -> None:
        """The exchange of ``answer`` is over: its connection is kept for the next one when its
        answer was read whole and the server keeps it open, else closed."""
        connection = answer._connection
        if connection.reusable():
            connection._start()  # (the parser goes on with the next answer)
            self._idle.append(connection)
        else:
            connection.close()
        self._free_slot()

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(
            _Connection, self.host, self.port, ssl=self.ssl
        )
        return connection

    @staticmethod
    async def _exchange(connection: _Connection, data: bytes, held: list[Any] | None) -> Answer:
        assert connection.transport is not None
        connection.transport.write(data)
        if not connection.headed:
            if held is not None:
                held.append(connection)
            try:
                while not connection.headed:
                    await connection.more()
            finally:
                if held is not None and connection in held:
                    held.remove(connection)
        return Answer(connection)

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
