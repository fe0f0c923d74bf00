"""Streamable HTTP for servers: an ASGI application serving one ``ServerSession`` per MCP session.

``StreamableHTTPServer(handler, ...)`` is a Starlette application answering POST, GET and DELETE
on one path. A revision with the initialize handshake gets a session of its own, named by the
``Mcp-Session-Id`` header the initialize response carries; a revision with the per-request
``_meta`` envelope is stateless, each POST read by a fresh ``ServerSession``. Requests go to
``handler(call)``, an async function returning the result (a generated Struct or plain JSON) or
raising ``mcpbind.ProtocolError``; what it sends meanwhile through ``call`` (notifications,
progress, requests to the client) travels on the same POST's event stream. What belongs to no
request (``notify`` and ``request`` of the server, by the session's id) travels on the session's
GET stream. Host and Origin are checked against the allowed hosts before anything is read (DNS
rebinding protection).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import bindings
from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ProtocolError,
)
from ..events import ErrorReceived, Event, RequestCancelled, RequestReceived, ResultReceived
from ..session import ServerSession

__all__ = ["Call", "Handler", "StreamableHTTPServer"]

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")

# The header-mismatch error of the per-request envelope revisions' HTTP transport: the MCP
# schema defines no such error, so the facts record does not carry it (see the report).
HEADER_MISMATCH = -32020

# HTTP status of a JSON-RPC error answered on a stateless POST (the envelope revisions' transport
# rule); a session-bound POST answers every JSON-RPC error with 200.
_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, METHOD_NOT_FOUND: 404, INVALID_PARAMS: 400}


class _Peek(msgspec.Struct, gc=False):
    id: Any = None
    method: Any = None
    params: Any = None
    error: Any = None


_peek = msgspec.json.Decoder(_Peek)


def _error_code(data: bytes) -> int | None:
    """The error code of a JSON-RPC error response, else None."""
    try:
        error = _peek.decode(data).error
    except (msgspec.DecodeError, ValueError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) else None


@dataclass
class _Stream:
    """The messages bound for one POST's response (or the GET stream): a queue the response body
    reads, closed once every request it carries has been answered."""

    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    pending: set[Any] = field(default_factory=set)
    asked: dict[Any, asyncio.Future[Any]] = field(default_factory=dict)  # requests sent on it
    counter: int = 0
    closed: bool = False

    def put(self, messages: Iterable[bytes]) -> None:
        for message in messages:
            self.queue.put_nowait(message)

    def abandon(self) -> None:
        """The client went away: the requests sent on this stream will not be answered here."""
        for rid, future in self.asked.items():
            if not future.done():
                future.set_exception(
                    ConnectionError(f"the stream closed before the client answered request {rid!r}")
                )

    def done(self, request_id: Any) -> None:
        self.pending.discard(request_id)
        if not self.pending:
            self.closed = True
            self.queue.put_nowait(None)


class _Live:
    """One MCP session: its ``ServerSession``, the requests it awaits from the client, and the
    stream of messages that belong to no request (served by GET)."""

    def __init__(self, session: ServerSession, stateful: bool) -> None:
        self.session = session
        self.stateful = stateful
        self.waiting: dict[Any, asyncio.Future[Any]] = {}
        self.tasks: dict[Any, asyncio.Task[None]] = {}
        self.standalone: _Stream | None = None
        self.sid: str | None = None  # its Mcp-Session-Id, once it has one


class Call:
    """One request the server is answering: what was asked, and the ways to talk back on the
    stream that carries its response."""

    def __init__(self, live: _Live, stream: _Stream, event: RequestReceived) -> None:
        self._live = live
        self._stream = stream
        self.id = event.id
        self.method = event.method
        self.params = event.params
        self.message = event.message
        self.revision = event.revision

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
        return await _ask(self._live, self._stream, method, params)


Handler = Callable[[Call], Awaitable[Any]]


async def _ask(live: _Live, stream: _Stream, method: str, params: Any) -> Any:
    """Send a request to the client on ``stream`` and await its result."""
    rid = live.session.request(method, params)
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    live.waiting[rid] = stream.asked[rid] = future
    stream.put(live.session.data_to_send())
    try:
        return await future
    finally:
        live.waiting.pop(rid, None)
        stream.asked.pop(rid, None)


class StreamableHTTPServer:
    """An ASGI application serving MCP over Streamable HTTP at ``path``.

    ``revisions``, ``capabilities``, ``info`` and ``instructions`` configure every
    ``ServerSession`` it creates. ``allowed_hosts`` are the host names (without port) accepted in
    ``Host`` and ``Origin``; by default the loopback names only, as a server on localhost must.
    ``max_sessions`` bounds the stateful sessions kept (the oldest is dropped past it).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        revisions: Iterable[str] | None = None,
        capabilities: Any = None,
        info: Any = None,
        instructions: str | None = None,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] = LOCAL_HOSTS,
        max_sessions: int = 1024,
        on_event: Callable[[ServerSession, Event], None] | None = None,
    ) -> None:
        self.handler = handler
        self._config: dict[str, Any] = {
            "capabilities": capabilities,
            "info": info,
            "instructions": instructions,
        }
        if revisions is not None:
            self._config["revisions"] = tuple(revisions)
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        self.max_sessions = max_sessions
        self.on_event = on_event
        self.sessions: dict[str, _Live] = {}
        probe = ServerSession(**self._config)
        # The _meta keys naming a request's protocol version, from the facts of the revisions
        # served that carry the per-request envelope.
        self._version_keys = tuple(
            dict.fromkeys(
                meta.version_key
                for r in probe.revisions
                if (meta := bindings(r).FACTS.request_meta) is not None
            )
        )
        self.app = Starlette(
            routes=[Route(path, self._endpoint, methods=["GET", "POST", "DELETE"])]
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    # -- checks -----------------------------------------------------------------------------------

    def _host_allowed(self, request: Request) -> bool:
        host = request.headers.get("host")
        if host is not None and _hostname(host) not in self.allowed_hosts:
            return False
        origin = request.headers.get("origin")
        if origin is not None:
            parts = urlsplit(origin)
            name = parts.hostname or ""
            name = f"[{name}]" if ":" in name else name
            if name.lower() not in self.allowed_hosts:
                return False
        return True

    async def _endpoint(self, request: Request) -> Response:
        if not self._host_allowed(request):
            return _plain_error(403, "Forbidden: Host or Origin is not an allowed host")
        if request.method == "POST":
            return await self._post(request)
        if request.method == "GET":
            return await self._get(request)
        return self._delete(request)

    # -- POST -------------------------------------------------------------------------------------

    async def _post(self, request: Request) -> Response:
        accept = request.headers.get("accept", "")
        if "application/json" not in accept or "text/event-stream" not in accept:
            return _plain_error(
                406, "Not Acceptable: Accept must list application/json and text/event-stream"
            )
        if "application/json" not in request.headers.get("content-type", ""):
            return _plain_error(
                415, "Unsupported Media Type: Content-Type must be application/json"
            )
        body = await request.body()
        sid = request.headers.get(SESSION_HEADER)
        if sid is not None:
            live = self.sessions.get(sid)
            if live is None:
                return _plain_error(404, f"Not Found: no MCP session {sid!r}", INVALID_REQUEST)
            header = request.headers.get(VERSION_HEADER)
            revision = live.session.revision
            if (
                header is not None
                and revision is not None
                and header not in bindings(revision).FACTS.versions
            ):
                return _plain_error(
                    400,
                    f"Bad Request: {VERSION_HEADER} {header!r} is not the negotiated "
                    f"version of this session",
                    INVALID_REQUEST,
                )
        else:
            mismatch = self._header_mismatch(request, body)
            if mismatch is not None:
                return mismatch
            live = _Live(ServerSession(**self._config), stateful=False)
        session = live.session
        events = session.receive(body)
        direct = session.data_to_send()
        new_sid: str | None = None
        if sid is None and session.state == "initializing":
            # An initialize was answered: the connection is a session of its own from now on.
            live.stateful = True
            new_sid = self._register(live)
        stream = _Stream()
        for event in events:
            self._observe(live, event, stream)
        headers = {SESSION_HEADER: new_sid} if new_sid is not None else {}
        if not stream.pending:
            return self._direct(live, direct, headers)
        stream.put(direct)
        return await self._respond(stream, headers, stateful=live.stateful)

    def _header_mismatch(self, request: Request, body: bytes) -> Response | None:
        """A stateless POST's protocol version header must name the version the request's
        ``_meta`` names (absent counts as a mismatch); a request that disagrees is refused with
        the header-mismatch error before the session reads it."""
        try:
            peek = _peek.decode(body)
        except (msgspec.DecodeError, ValueError):
            return None  # the session answers what cannot be read
        meta = peek.params.get("_meta") if isinstance(peek.params, dict) else None
        if not isinstance(meta, dict):
            return None
        version = next((meta[k] for k in self._version_keys if k in meta), None)
        header = request.headers.get(VERSION_HEADER)
        if version is None or header == version:
            return None
        rid = peek.id if type(peek.id) in (str, int) else None
        message = (
            f"Header mismatch: {VERSION_HEADER} is {header!r} but the request's _meta names "
            f"{version!r}"
        )
        return JSONResponse(
            {"jsonrpc": "2.0", "id": rid, "error": {"code": HEADER_MISMATCH, "message": message}},
            status_code=400,
        )

    def _register(self, live: _Live) -> str:
        while len(self.sessions) >= self.max_sessions:
            oldest = next(iter(self.sessions))
            self._close(self.sessions.pop(oldest))
        sid = live.sid = secrets.token_hex(16)
        self.sessions[sid] = live
        return sid

    def _observe(self, live: _Live, event: Event, stream: _Stream) -> None:
        """Act on one event of a POST: start a handler, settle an awaited client answer."""
        if self.on_event is not None:
            self.on_event(live.session, event)
        if isinstance(event, RequestReceived):
            stream.pending.add(event.id)
            call = Call(live, stream, event)
            live.tasks[event.id] = asyncio.ensure_future(self._run(live, stream, call))
        elif isinstance(event, ResultReceived):
            future = live.waiting.get(event.id)
            if future is not None and not future.done():
                future.set_result(event.result)
        elif isinstance(event, ErrorReceived):
            future = live.waiting.get(event.id)
            if future is not None and not future.done():
                future.set_exception(ProtocolError(event.code, event.message, event.data))
        elif isinstance(event, RequestCancelled):
            task = live.tasks.get(event.id)
            if task is not None:
                task.cancel()

    async def _run(self, live: _Live, stream: _Stream, call: Call) -> None:
        session = live.session
        try:
            result = await self.handler(call)
        except asyncio.CancelledError:
            stream.done(call.id)
            live.tasks.pop(call.id, None)
            return
        except ProtocolError as error:
            _answer_error(session, call.id, error.code, error.message, error.data)
        except Exception as error:  # a handler's bug is the client's internal error, not a crash
            _answer_error(session, call.id, INTERNAL_ERROR, f"Internal error: {error}", None)
        else:
            try:
                session.respond(call.id, result)
            except ProtocolError as error:
                _answer_error(session, call.id, INTERNAL_ERROR, error.message, None)
        live.tasks.pop(call.id, None)
        stream.put(session.data_to_send())
        stream.done(call.id)

    def _direct(self, live: _Live, direct: list[bytes], headers: dict[str, str]) -> Response:
        """The answer to a POST that started no handler: the session's own reply, or 202."""
        if not direct:
            return Response(status_code=202, headers=headers)
        status = 200
        code = _error_code(direct[0])
        if code is not None and not live.stateful:
            status = _STATUS.get(code, 500 if code == INTERNAL_ERROR else 400)
        if len(direct) == 1:
            return Response(
                direct[0], status_code=status, media_type="application/json", headers=headers
            )
        return Response(
            b"[" + b",".join(direct) + b"]",
            status_code=status,
            media_type="application/json",
            headers=headers,
        )

    async def _respond(self, stream: _Stream, headers: dict[str, str], stateful: bool) -> Response:
        """A POST's response: JSON when its one answer is all there is to send, else an event
        stream carrying everything the handlers send before their answers."""
        first = await stream.queue.get()
        if first is None:
            return Response(status_code=202, headers=headers)
        if stream.closed and stream.queue.qsize() == 1:  # only the end of the stream is left
            status = 200
            code = _error_code(first)
            if code is not None and not stateful:
                status = _STATUS.get(code, 500 if code == INTERNAL_ERROR else 400)
            return Response(
                first, status_code=status, media_type="application/json", headers=headers
            )
        return StreamingResponse(
            _sse(first, stream),
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache"},
        )

    # -- GET and DELETE ---------------------------------------------------------------------------

    async def _get(self, request: Request) -> Response:
        if "text/event-stream" not in request.headers.get("accept", ""):
            return _plain_error(406, "Not Acceptable: a GET stream needs Accept: text/event-stream")
        sid = request.headers.get(SESSION_HEADER)
        live = self.sessions.get(sid) if sid is not None else None
        if live is None:
            return _plain_error(
                405 if sid is None else 404,
                (
                    "no MCP session for a standalone stream"
                    if sid is None
                    else f"Not Found: no MCP session {sid!r}"
                ),
            )
        if live.standalone is not None:
            return _plain_error(409, "Conflict: this session already has a GET stream")
        stream = live.standalone = _Stream()
        stream.pending.add(object())  # open until the session closes

        async def body() -> AsyncIterator[bytes]:
            try:
                yield b": stream open\n\n"
                while (message := await stream.queue.get()) is not None:
                    yield b"event: message\ndata: " + message + b"\n\n"
            finally:
                live.standalone = None
                stream.abandon()

        return StreamingResponse(
            body(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
        )

    def _delete(self, request: Request) -> Response:
        sid = request.headers.get(SESSION_HEADER)
        live = self.sessions.pop(sid, None) if sid is not None else None
        if live is None:
            return _plain_error(404 if sid is not None else 400, "no such MCP session")
        self._close(live)
        return Response(status_code=200)

    def _close(self, live: _Live) -> None:
        for task in live.tasks.values():
            task.cancel()
        if live.standalone is not None:
            live.standalone.queue.put_nowait(None)

    async def request(self, sid: str, method: str, params: Any = None) -> Any:
        """Send a request that belongs to no client request (``roots/list``, a sampling or an
        elicitation of the server's own) on session ``sid``'s GET stream, and await the client's
        result, of the generated result class of the session's revision.

        An error response raises ``ProtocolError`` with the client's code and message; a request
        the session cannot send (the client did not advertise its capability) raises it before
        anything is sent. ``LookupError`` when the session has no GET stream open;
        ``ConnectionError`` when the stream closes before the answer comes.
        """
        live = self.sessions.get(sid)
        if live is None or live.standalone is None:
            raise LookupError(f"MCP session {sid!r} has no GET stream open to send a request on")
        return await _ask(live, live.standalone, method, params)

    def notify(self, sid: str, method: str, params: Any = None) -> bool:
        """Send a notification that belongs to no request on a session's GET stream; False when
        the session has no such stream open (the notification is then not sent)."""
        live = self.sessions.get(sid)
        if live is None or live.standalone is None:
            return False
        live.session.notify(method, params)
        live.standalone.put(live.session.data_to_send())
        return True


async def _sse(first: bytes, stream: _Stream) -> AsyncIterator[bytes]:
    """Server-sent events of a POST stream: each message one ``message`` event with an id."""
    message: bytes | None = first
    try:
        while message is not None:
            stream.counter += 1
            yield b"id: %d\nevent: message\ndata: " % stream.counter + message + b"\n\n"
            message = await stream.queue.get()
    finally:
        stream.abandon()


def _answer_error(
    session: ServerSession, request_id: Any, code: int, message: str, data: Any
) -> None:
    # The client cancelled it, or it was answered already: nothing is owed then.
    with contextlib.suppress(ProtocolError):
        session.respond_error(request_id, code, message, data)


def _hostname(host: str) -> str:
    """The host name of a Host header, without its port (IPv6 literals keep their brackets)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if ":" in host else host


def _plain_error(status: int, message: str, code: int = INVALID_REQUEST) -> Response:
    """An HTTP error that is also a JSON-RPC error without id, so either kind of client reads it."""
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}},
        status_code=status,
    )
