"""The default ``http_wire.HttpWire``: keep-alive HTTP/1.1 connections to one origin, the request
head written here, the answer read by httptools (the C HTTP parser uvicorn serves with), fed by
the event loop's protocol callbacks.

Written for the gateway, which sends every request of every client to its server over HTTP:
httpx spends about 2 ms of CPU on one such POST, more than the whole gateway may spend on a
request (docs/bridge.md, "Cost"), and h11 (pure Python) about a fifth of the gateway's time. This
does an exchange (a request, its answer read as it comes) in a small fraction of that, and
carries every request of mcpbind's HTTP clients (POST, the GET of an event stream, DELETE).

Bounds: ``limit`` exchanges at once (``MAX_EXCHANGES``; one past it waits for one to end), and
apart from them ``max_streams`` event streams (``MAX_STREAMS``; one past it fails at once), which
may stay open for as long as the server keeps them; an answer's head of at most ``MAX_HEAD``
bytes; an answer read whole (``read``; an event stream's events are bounded by ``sse_events``)
of at most ``max_answer`` bytes (``MAX_ANSWER``; past it ``HttpError``, the connection closed);
at most ``MAX_HEADS`` request heads kept encoded; a connection stops reading while more than
64 KiB of an answer wait unread. ``connect_timeout`` bounds a connection's opening,
``read_timeout`` (None: no bound) each wait for more of an answer that is not an event stream.
Failures are ``http_wire.HttpError`` (``ServerUnreachable``, ``HttpTimeout``), the socket's mapped.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import deque
from collections.abc import AsyncIterator, Hashable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import httptools

from .http_wire import MAX_ANSWER, HttpError, HttpTimeout, HttpWire, ServerUnreachable, wrapped

if TYPE_CHECKING:
    import httpx

__all__ = [
    "MAX_ANSWER",
    "MAX_EXCHANGES",
    "MAX_HEAD",
    "MAX_HEADS",
    "MAX_STREAMS",
    "Answer",
    "HttpPool",
    "wire_for",
]

MAX_EXCHANGES = 256  # exchanges with the server at once, each on a connection (more wait)
MAX_STREAMS = 4096  # event streams open at once besides them (more fail): a gateway's links' GETs
MAX_HEAD = 65536  # bytes of an answer's status line and headers, at most
MAX_HEADS = 1024  # request heads kept encoded for the next request with the same headers
_READ = 65536
# An answer's headers as text, by their bytes as read: a server sends mostly the same ones on
# every answer (its content type, session id, server name), decoded once. Only short ones are
# kept, at most _TEXTS_MAX (then the table starts again: a date changes every second).
_TEXTS: dict[tuple[bytes, bytes], tuple[str, str]] = {}
_TEXTS_MAX = 256
_TEXT_LONGEST = 128  # bytes of a header's name and value, at most, for it to be kept


class _Connection(asyncio.Protocol):
    """One connection, read by the event loop straight into httptools (no stream reader between:
    a small answer arrives in one read and is parsed whole there), and what it has read of the
    answer in hand. Reading pauses while more than ``_READ`` bytes of body wait unread."""

    def __init__(self, pool: HttpPool) -> None:
        self.pool = pool
        # Its loop, kept: asyncio.get_running_loop() is a getpid() system call on Python 3.11.
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[None] | None = None  # what a reader of the answer awaits
        self.timeout: float | None = None  # seconds a wait for more of the answer may take
        self.stream = False  # its exchange is an event stream (counted apart)
        self.answer: Answer | None = None  # the answer it carries until released
        self.error: BaseException | None = None  # why the connection cannot go on
        self.paused = False
        self.abandoned = False  # ended by ``HttpPool.abort``: not to be tried again
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
        self._fail(HttpError("the server closed the connection mid-answer"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        error = HttpError(f"the connection failed ({type(exc).__name__}: {exc})") if exc else None
        self._fail(error or HttpError("the server closed the connection mid-answer"))

    # httptools' callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.head += len(name) + len(value)
        if self.head > MAX_HEAD:
            self.failure = f"the answer's head exceeds {MAX_HEAD} bytes"
            raise HttpError(self.failure)  # httptools stops parsing, raising HttpParserError
        self.raw.append((name, value))

    def on_headers_complete(self) -> None:
        headers = self.headers
        texts = _TEXTS
        for pair in self.raw:
            found = texts.get(pair)
            if found is None:
                name, value = pair
                found = (name.decode("latin-1").lower(), value.decode("latin-1"))
                if len(name) + len(value) <= _TEXT_LONGEST:
                    if len(texts) >= _TEXTS_MAX:
                        texts.clear()
                    texts[pair] = found
            key, text = found
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
        """Wait for the server to send more (raises why, when it cannot; ``HttpTimeout`` when
        nothing comes within ``timeout``)."""
        if self.error is not None:
            raise self.error
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self.waiter = self.loop.create_future()
        if self.timeout is not None:
            await self._timed(self.waiter, self.timeout)
            return
        try:
            await self.waiter
        finally:
            self.waiter = None

    async def _timed(self, waiter: asyncio.Future[None], timeout: float) -> None:
        timer = self.loop.call_later(timeout, self._late)
        try:
            await waiter
        finally:
            self.waiter = None
            timer.cancel()

    def _late(self) -> None:
        self._fail(HttpTimeout(f"the server sent nothing for {self.timeout:g} s (read timeout)"))

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
            self.error = HttpError("the connection was closed")


class Answer:
    """The answer to one request (an ``http_wire.Reply``): ``status``, ``headers`` (lower-case
    names), and its body as it comes (``chunks``, or ``read`` for all of it); ``release`` (or
    ``aclose``) gives its connection back."""

    __slots__ = ("_connection", "headers", "status")

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection
        self.status = connection.status
        self.headers = connection.headers
        connection.answer = self

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
        """All of the body (``HttpError`` past the pool's ``max_answer`` bytes: the connection is
        closed, the rest of the answer never read)."""
        connection = self._connection
        limit = connection.pool.max_answer
        parts: list[bytes] = []
        size = 0
        while True:
            size += connection.buffered
            if size > limit:
                connection.close()
                raise HttpError(f"the server's answer exceeds {limit} bytes (max_answer)")
            parts += connection.take()
            if connection.complete:
                return parts[0] if len(parts) == 1 else b"".join(parts)
            await connection.more()

    def release(self) -> None:
        """The exchange is over: its connection is kept for the next one when its answer was
        read whole and the server keeps it open, else closed (once: again, it does nothing)."""
        connection = self._connection
        if connection.answer is not self:
            return  # released already
        connection.answer = None
        pool = connection.pool
        if connection.reusable():
            connection._start()  # (the parser goes on with the next answer)
            if connection.stream:
                connection.stream, connection.timeout = False, pool.read_timeout
                pool._streams -= 1
                pool._idle.append(connection)
                return
            pool._idle.append(connection)
        else:
            connection.close()
            if connection.stream:
                pool._streams -= 1
                return
        pool._free_slot()

    async def aclose(self) -> None:
        self.release()


class HttpPool:
    """At most ``limit`` keep-alive connections to the origin of ``url`` (its scheme, host and
    port) for exchanges, reused one exchange at a time, and at most ``max_streams`` more for
    event streams (module docstring)."""

    def __init__(
        self,
        url: str,
        limit: int = MAX_EXCHANGES,
        *,
        max_streams: int = MAX_STREAMS,
        max_answer: int = MAX_ANSWER,
        connect_timeout: float = 30.0,
        read_timeout: float | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.url = url
        self.origin = (parts.scheme, parts.netloc)
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if parts.scheme == "https" else None
        self._authority = parts.netloc.rpartition("@")[2]
        self.max_streams = max_streams
        self.max_answer = max_answer
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._streams = 0  # event streams open
        self._lines: dict[tuple[str, str], str] = {}  # (method, url) -> its request line and host
        self._idle: list[_Connection] = []
        # Exchanges at once, at most ``limit`` (a semaphore's work, without its coroutine):
        # slots free, and the exchanges waiting for one.
        self._free = limit
        self._waiting: deque[asyncio.Future[None]] = deque()
        # Encoded heads by their caller's key (``head``): building and checking one costs a
        # POST about 25k instructions, and a session sends the same few again and again.
        self._heads: dict[Hashable, bytes] = {}

    def head(
        self, method: str, url: str, headers: Mapping[str, str], key: Hashable | None = None
    ) -> bytes:
        """The head of a ``method`` request to ``url`` (on the pool's origin) with ``headers``,
        checked and encoded, up to its content-length (raises ``HttpError`` when a header would
        break it). With ``key`` (which must stand for exactly these method, url and headers) it
        is kept for ``kept(key)``, at most ``MAX_HEADS`` of them (all forgotten when that many
        are kept: recomputing one is what it saves)."""
        line = self._lines.get((method, url)) or self._line(method, url)
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        # One line per header, or a name or value holds a line break (or a NUL): one scan each.
        if lines.count("\n") != len(headers) or lines.count("\r") != len(headers) or "\0" in lines:
            bad = next(n for n, v in headers.items() if any(c in n + v for c in "\r\n\0"))
            raise HttpError(f"the header {bad!r} holds a line break or NUL: not sent")
        try:
            head = f"{line}{lines}".encode("latin-1")
        except UnicodeEncodeError as error:
            raise HttpError(f"a header holds what HTTP/1.1 cannot carry: {error}") from None
        if key is not None:
            if len(self._heads) >= MAX_HEADS:
                self._heads.clear()
            self._heads[key] = head
        return head

    def _line(self, method: str, url: str) -> str:
        """The request line and host header of ``method`` to ``url``, kept for the next."""
        parts = urlsplit(url)
        if (parts.scheme, parts.netloc) != self.origin:
            raise HttpError(f"{url!r} is not on the origin of this pool ({self.url!r})")
        if not (method.isascii() and method.isalpha()):
            raise HttpError(f"{method!r} is not an HTTP method")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        # Percent-encoded where it must be (spaces, line breaks, what is not ASCII), as httpx
        # sends it: what is left can only be one request target.
        target = quote(target, safe="!#$%&'()*+,/:;=?@[]~")
        line = f"{method} {target} HTTP/1.1\r\nhost: {self._authority}\r\n"
        if len(self._lines) >= MAX_HEADS:
            self._lines.clear()
        self._lines[method, url] = line
        return line

    def kept(self, key: Hashable) -> bytes | None:
        """The head ``head`` kept under ``key``, if it still is."""
        return self._heads.get(key)

    @contextlib.asynccontextmanager
    async def post(self, headers: Mapping[str, str], body: bytes) -> AsyncIterator[Answer]:
        """POST ``body`` to the pool's URL; the answer, its head read. The connection goes back
        to the pool when its body was read whole and the server keeps it open; else it is
        closed."""
        answer = await self.exchange(self.head("POST", self.url, headers), body)
        try:
            yield answer
        finally:
            self.release(answer)

    async def exchange(
        self,
        head: bytes,
        body: bytes | None = None,
        held: list[Any] | None = None,
        stream: bool = False,
    ) -> Answer:
        """Send a request (``head`` made by ``head``; ``body``, or none); the answer, whose
        connection is held until ``release(answer)`` (which must follow, whatever happens).
        ``held`` (a list) holds the connection while the exchange waits for the answer's head,
        so that ``abort(held)`` can end it. ``stream``: an event stream, counted apart (at most
        ``max_streams``, past it ``HttpError`` at once) and read without a timeout."""
        if body is None:
            data = head + b"\r\n"
        else:
            data = head + b"content-length: %d\r\n\r\n" % len(body) + body
        if stream:
            if self._streams >= self.max_streams:
                raise HttpError(
                    f"{self.max_streams} event streams to {self.url} are open already "
                    "(max_streams)"
                )
            self._streams += 1
        elif self._free > 0:  # (none waits then: a slot freed goes to a waiter first)
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
            if stream:
                connection.stream, connection.timeout = True, None
            try:
                return await self._exchange(connection, data, held)
            except HttpError:
                connection.close()
                if fresh or connection.abandoned:
                    raise
                # A kept connection the server had closed meanwhile: once more on a new one.
                connection = await self._connection()
                if stream:
                    connection.stream, connection.timeout = True, None
                try:
                    return await self._exchange(connection, data, held)
                except BaseException:
                    connection.close()
                    raise
            except BaseException:
                connection.close()
                raise
        except BaseException:
            if stream:
                self._streams -= 1
            else:
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
        """End the exchanges waiting in ``held``: each fails with ``HttpError``."""
        for connection in list(held):
            connection.abandoned = True
            connection._fail(HttpError("the exchange was abandoned"))
        held.clear()

    @staticmethod
    def release(answer: Answer) -> None:
        """The exchange of ``answer`` is over (``answer.release()``)."""
        answer.release()

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, connection = await loop.create_connection(
                    self._protocol, self.host, self.port, ssl=self.ssl
                )
        except TimeoutError:
            raise ServerUnreachable(
                f"no connection to {self.host}:{self.port} within {self.connect_timeout:g} s"
            ) from None
        except OSError as error:
            raise ServerUnreachable(f"{type(error).__name__}: {error}") from error
        connection.timeout = self.read_timeout
        return connection

    def _protocol(self) -> _Connection:
        return _Connection(self)

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

    async def aclose(self) -> None:
        self.close()


def wire_for(
    http: httpx.AsyncClient | HttpWire | None, url: str, read_timeout: float | None = 30.0
) -> tuple[HttpWire, bool]:
    """The wire a client of ``url`` sends through, and whether it is the client's own (to close
    with it): ``http`` as it is when it is a wire, an ``httpx.AsyncClient`` through
    ``HttpxWire``, else a ``HttpPool`` of its own (connect and read timeouts of 30 s, as an
    ``httpx.AsyncClient``'s default, unless ``read_timeout`` says otherwise)."""
    if http is None:
        return HttpPool(url, read_timeout=read_timeout), True
    return wrapped(http), False
