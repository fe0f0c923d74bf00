"""One client of an App over a message channel (stdio, or in memory for tests): a
``ServerSession``, a task per request being answered, and the requests the server sent the client
awaiting their answers. Framing belongs to the caller: ``receive`` takes one message, ``write``
gets one message."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import ProtocolError
from ..events import (
    ErrorReceived,
    Event,
    MessageRejected,
    Negotiated,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
)
from ..session import ServerSession
from ..tasks import error_object, read_request
from .reply import reply
from .serve import Server

if TYPE_CHECKING:
    from ..tasks import Tasks

__all__ = ["Connection"]

log = logging.getLogger("mcpbind.app")
_JSON = msgspec.json.Encoder()


class _Exchange(msgspec.Struct):
    """One request of the connection being answered (what ``Server.serve`` reads): the fields
    of its ``RequestReceived``, and the connection. A Struct: one is made per request."""

    conn: Connection
    id: Any
    method: str
    params: Any
    message: Any
    revision: str
    auth: Any = None  # a message channel (stdio) carries no bearer token
    # The params as sent (plain JSON) when the tasks layer read the request: a subscription
    # stream's filter names tasks in a key the revision's own filter class does not keep.
    sent: Any = None

    @classmethod
    def of(cls, conn: Connection, event: RequestReceived) -> _Exchange:
        return cls(conn, event.id, event.method, event.params, event.message, event.revision)

    @property
    def session(self) -> ServerSession:
        return self.conn.session

    def notify(self, method: str, params: Any = None) -> None:
        self.conn.notify(method, params)

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self.conn.session.progress(self.id, progress, total, message)
        self.conn.flush()

    async def request(self, method: str, params: Any = None) -> Any:
        return await self.conn.request(method, params)

    def close_stream(self) -> bool:
        return False  # a message channel has no response stream to end early


class Connection:
    """The server side of one connection: feed it each message with ``receive``; what it sends
    goes to ``write`` (one JSON-RPC message each, unframed). ``tasks``: the tasks layer
    (``mcpbind.tasks``) answering the extension's requests and the calls of its tools, and
    serving the subscription streams that follow tasks (``Tasks.follow``), as the HTTP server's
    does (a message channel carries no token: its tasks have one owner)."""

    def __init__(
        self,
        server: Server,
        session: ServerSession,
        write: Callable[[bytes], Any],
        tasks: Tasks | None = None,
    ):
        self.server = server
        self.session = session
        self._write = write
        self.tasks = tasks
        self._tasks: dict[Any, asyncio.Task[None]] = {}
        self._waiting: dict[Any, asyncio.Future[Any]] = {}
        self.closed = False
        server.subscriptions.peers.add(self)

    def connections(self) -> Iterable[tuple[ServerSession, Callable[[str, Any], None]]]:
        """What the server reaches outside any request: this connection's session."""
        return () if self.closed else ((self.session, self.notify),)

    # -- in ------------------------------------------------------------------------------------

    def receive(self, data: bytes) -> None:
        """Take one message from the client."""
        read = None
        if self.tasks is not None:
            read = read_request(data, self.tasks.speaks)
            if read is not None and self._tasked(*read):
                return
        for event in self.session.receive(data):
            self._on(event, read)
        self.flush()

    def _tasked(self, rid: Any, method: str, params: dict[str, Any]) -> bool:
        """Whether the tasks layer answered the request (a stateless request it owns: one of the
        extension's methods, or a call of one of its tools it runs as a task or refuses)."""
        tasks = self.tasks
        assert tasks is not None
        if method == tasks.listen_method or not tasks.owns(method, params.get("name")):
            return False  # a subscription stream is a request of the session (``_serve``)
        try:
            result = tasks.answer(method, params)
        except ProtocolError as error:
            self._send({"jsonrpc": "2.0", "id": rid, "error": error_object(error)})
            return True
        if result is None:  # a call the layer leaves to the App after all
            return False
        self._send({"jsonrpc": "2.0", "id": rid, "result": result})
        return True

    def _send(self, message: dict[str, Any]) -> None:
        if not self.closed:
            self._write(_JSON.encode(message))

    def _on(self, event: Event, read: tuple[Any, str, dict[str, Any]] | None = None) -> None:
        """Act on one event of the session; ``read``: the message as the tasks layer read it."""
        t = type(event)
        if t is RequestReceived:
            assert isinstance(event, RequestReceived)
            exchange = _Exchange.of(self, event)
            if read is not None and read[0] == event.id:
                exchange.sent = read[2]
            self._tasks[event.id] = asyncio.ensure_future(self._answer(exchange))
        elif t is RequestCancelled:
            task = self._tasks.get(event.id)  # type: ignore[union-attr]
            if task is not None:
                task.cancel()
        elif t is ResultReceived:
            self._settle(event.id, event.result, None)  # type: ignore[union-attr]
        elif t is ErrorReceived:
            assert isinstance(event, ErrorReceived)
            error = ProtocolError(event.code, event.message, event.data)
            self._settle(event.id, None, error)
        elif t is MessageRejected:
            assert isinstance(event, MessageRejected)
            log.warning("%s", event.error.message)
            if not event.answered and event.error.id in self._waiting:
                self._settle(event.error.id, None, event.error)
        elif t is Negotiated:
            assert isinstance(event, Negotiated)
            caps = event.capabilities
            self.server.clients[self.session] = msgspec.to_builtins(caps) if caps else {}

    def _settle(self, request_id: Any, result: Any, error: Exception | None) -> None:
        future = self._waiting.pop(request_id, None)
        if future is None or future.done():
            return
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)

    async def _answer(self, exchange: _Exchange) -> None:
        what = f"answering {exchange.method!r}"
        try:
            await reply(self.session, exchange.id, self._serve(exchange), log, what)
        except asyncio.CancelledError:
            self._tasks.pop(exchange.id, None)
            return
        self._tasks.pop(exchange.id, None)
        self.flush()

    async def _serve(self, exchange: _Exchange) -> Any:
        """The result of one request: a subscription stream following tasks is the tasks
        layer's (its notifications written as they come, its result the request's; the stream
        ends when the client cancels the request or the connection closes), anything else the
        App's. The request went through the session, which keeps its id until it is answered."""
        tasks = self.tasks
        if tasks is not None and exchange.method == tasks.listen_method and exchange.sent:
            messages = tasks.follow(exchange.id, exchange.sent)
            if messages is not None:
                try:
                    async for message in messages:
                        if "id" in message:  # the response: the session sends it
                            return message["result"]
                        self._send(message)
                finally:
                    await messages.aclose()
        return await self.server.serve(exchange)

    # -- out -----------------------------------------------------------------------------------

    def flush(self) -> None:
        """Write everything the session queued."""
        if self.closed:
            return
        for data in self.session.data_to_send():
            self._write(data)

    def notify(self, method: str, params: Any = None) -> None:
        self.session.notify(method, params)
        self.flush()

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request to the client and await its result (``ProtocolError`` for an error
        response, ``ConnectionError`` when the connection closes first)."""
        if self.closed:
            raise ConnectionError("the client connection is closed")
        rid = self.session.request(method, params)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        self.flush()
        try:
            return await future
        finally:
            self._waiting.pop(rid, None)

    async def close(self) -> None:
        """The client went away: stop the handlers, fail what awaits the client."""
        self.closed = True
        self.server.subscriptions.peers.discard(self)
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionError("the client connection closed"))
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
