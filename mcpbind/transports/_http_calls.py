"""What the two HTTP servers share (``http_server``'s Streamable HTTP and ``sse_server``'s older
HTTP+SSE transport): a session as either serves it (``Live``), the handler's view of one request
(``Call``), how the server asks the client something on a stream (``ask``), how a client's answer
or cancellation settles what awaits it (``settle``), and the error answer of a request
(``answer_error``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgspec

from ..errors import ProtocolError
from ..events import ErrorReceived, Event, RequestCancelled, RequestReceived, ResultReceived
from ..packages import bindings
from ..session import ServerSession
from ._http_streams import CLOSE, Stop, Stream
from .http_limits import SESSION_RECHECK

__all__ = [
    "Call",
    "ClientMessage",
    "Handler",
    "Live",
    "answer_error",
    "ask",
    "read_client",
    "settle",
]


class ClientMessage(msgspec.Struct, gc=False):
    """A client's message as routing reads it: its id, method, params and error."""

    id: Any = None
    method: Any = None
    params: Any = None
    error: Any = None


read_client = msgspec.json.Decoder(ClientMessage)


class _Made:
    """A container attribute of a ``Live`` made (``make()``) when first read, then the instance's
    own (this descriptor defines no ``__set__``, so the instance's attribute is read from then on:
    no call per lookup): one is built per stateless POST, which reads none of them."""

    __slots__ = ("make", "name")

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, live: Any, owner: Any = None) -> Any:
        if live is None:
            return self
        made = live.__dict__[self.name] = self.make()
        return made


class Live:
    """One MCP session: its ``ServerSession``, the requests it awaits from the client, and the
    stream of messages that belong to no request (served by GET)."""

    # Until set on one: the values a new session starts with (one is built per stateless POST,
    # and each attribute set in __init__ costs a store)
    standalone: Stream | None = None  # its GET stream, while read on this worker
    sid: str | None = None  # its Mcp-Session-Id, once it has one
    last_used = 0.0  # time.monotonic() of its last use
    ready = False  # the client's initialized notification came (a shared record says)
    record: bytes | None = None  # its record in a shared store
    checked = -SESSION_RECHECK  # time.monotonic() the shared store last confirmed it
    owner: str | None = None  # the principal that opened it: only it reaches it

    # Made when first read (_Made): the client's answers it awaits, its resumable streams with
    # work on this worker, its event streams' readers here, by stream its one reader here
    waiting: dict[Any, asyncio.Future[Any]] = _Made(dict)  # type: ignore[assignment]
    streams: dict[str, Stream] = _Made(dict)  # type: ignore[assignment]
    readers: set[asyncio.Future[Stop]] = _Made(set)  # type: ignore[assignment]
    reading: dict[str, asyncio.Future[Stop]] = _Made(dict)  # type: ignore[assignment]

    def __init__(self, session: ServerSession, stateful: bool) -> None:
        self.session = session
        self.stateful = stateful
        self.tasks: dict[Any, asyncio.Task[Any]] = {}

    @property
    def in_use(self) -> bool:
        """A request of the client is in flight, or its GET stream is open."""
        return bool(self.tasks) or self.standalone is not None


class Call:
    """One request the server is answering: what was asked, and the ways to talk back on the
    stream that carries its response."""

    def __init__(
        self, live: Live, stream: Stream, event: RequestReceived, ids: Iterator[str] | None = None
    ) -> None:
        self._live = live
        self._stream = stream
        if ids is not None:  # (else the class's None: one store less on the hot path)
            self._ids = ids
        self.id = event.id
        self.method = event.method
        self.params = event.params
        self.message = event.message
        self.revision = event.revision
        #: The verified token (subject, client id, scopes) when the server has ``auth=``.
        self.auth = stream.auth

    @property
    def session(self) -> ServerSession:
        """The session the request arrived on (its revision, the client's capabilities)."""
        return self._live.session

    @property
    def session_id(self) -> str | None:
        """The ``Mcp-Session-Id`` of that session (None when stateless): what the server's own
        ``notify`` and ``request`` take to reach it on its GET stream, now or later."""
        return self._live.sid

    def _flush(self) -> None:
        self._stream.put(self._live.session.data_to_send())

    def notify(self, method: str, params: Any = None) -> None:
        """Send a notification on this request's stream."""
        self._live.session.notify(method, params)
        self._flush()

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress on this request (it must have carried a progress token)."""
        self._live.session.progress(self.id, progress, total, message)
        self._flush()

    async def request(self, method: str, params: Any = None) -> Any:
        """Send a request to the client on this request's stream and await its result; an
        error response raises ``ProtocolError`` with the client's code and message."""
        return await ask(self._live, self._stream, method, params, self._ids)

    _ids: Iterator[str] | None = None  # the ids of requests to the client, with a shared store

    def close_stream(self) -> bool:
        """End the HTTP response carrying this request's stream now, without ending the stream
        (polling, SEP-1699): the client resumes it with a GET carrying ``Last-Event-ID`` after
        the ``retry`` delay sent with it, on any worker, and receives what was sent meanwhile, the
        answer included. Only in a session whose revision has priming events
        (``FACTS.sse_priming``); False (nothing done) elsewhere."""
        session = self._live.session
        if not self._live.stateful or session.revision is None:
            return False
        if not bindings(session.revision).FACTS.sse_priming:
            return False
        self._stream.put_nowait(CLOSE)
        return True


Handler = Callable[[Call], Awaitable[Any]]


async def ask(
    live: Live, stream: Stream, method: str, params: Any, ids: Iterator[str] | None = None
) -> Any:
    """Send a request to the client on ``stream`` and await its result (with a shared store,
    under an id of this worker's own, so that workers never send the same id)."""
    if stream.given_up:
        raise ConnectionError("the stream was given up: its client is not reading it")
    rid = live.session.request(method, params, id=None if ids is None else next(ids))
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    live.waiting[rid] = stream.asked[rid] = future
    stream.put(live.session.data_to_send())
    try:
        return await future
    finally:
        live.waiting.pop(rid, None)
        stream.asked.pop(rid, None)


def settle(live: Live, event: Event) -> None:
    """Act on an event that answers or cancels: settle an awaited client answer, cancel the
    handler of a request the client cancelled."""
    if isinstance(event, ResultReceived):
        future = live.waiting.get(event.id)
        if future is not None and not future.done():
            future.set_result(event.result)
    elif isinstance(event, ErrorReceived):
        future = live.waiting.get(event.id)
        if future is not None and not future.done():
            future.set_exception(ProtocolError(event.code, event.message, event.data))
    elif isinstance(event, RequestCancelled):
        cancelled = live.tasks.get(event.id)
        if cancelled is not None:
            cancelled.cancel()


def answer_error(
    session: ServerSession, request_id: Any, code: int, message: str, data: Any
) -> None:
    # The client cancelled it, or it was answered already: nothing is owed then.
    with contextlib.suppress(ProtocolError):
        session.respond_error(request_id, code, message, data)
