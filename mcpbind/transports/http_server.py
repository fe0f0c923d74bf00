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

Everything a client can make grow is bounded by an option with a documented default (docs/limits.md
lists them with what the client gets past each): the body of a POST (``max_body_size``, and
``body_timeout`` for it to arrive), the sessions kept (``max_sessions``; idle ones expire after
``session_idle_timeout``, and only a session that is not in use may be evicted to make room), the
requests in flight on one session (``max_in_flight``), and the messages waiting on a stream its
client does not read (``max_queued``). A client that leaves a POST takes its handlers with it:
they are cancelled. No exception becomes a traceback: a body that cannot be read gets a JSON-RPC
error, and anything unexpected is logged and answered -32603. The connection-level bounds (a
connection cap, deadlines for a request head and for a client that stops reading) belong to the
HTTP server, not to an ASGI application: ``mcpbind.transports.serving`` runs this one under
uvicorn with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .. import bindings
from ..auth.resource import AuthInfo, ResourceServer
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

_log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")

# The defaults of the limits (docs/limits.md).
MAX_BODY_SIZE = 4 * 1024 * 1024
BODY_TIMEOUT = 30.0
MAX_SESSIONS = 1024
SESSION_IDLE_TIMEOUT = 30 * 60.0
SESSION_EVICTABLE_AFTER = 60.0
MAX_IN_FLIGHT = 128
MAX_QUEUED = 1000

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
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) else None


@dataclass
class _Stream:
    """The messages bound for one POST's response (or the GET stream): a queue the response body
    reads, closed once every request it carries has been answered, and given up when more than
    ``max_queued`` messages wait on it (its client is not reading)."""

    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    pending: set[Any] = field(default_factory=set)
    asked: dict[Any, asyncio.Future[Any]] = field(default_factory=dict)  # requests sent on it
    # The handlers of the requests it answers.
    handlers: dict[Any, asyncio.Task[None]] = field(default_factory=dict)
    counter: int = 0
    closed: bool = False
    max_queued: int = MAX_QUEUED
    given_up: bool = False
    auth: AuthInfo | None = None  # the verified token of the request that opened it

    def put(self, messages: Iterable[bytes]) -> None:
        for message in messages:
            if self.given_up:
                return  # nothing more goes on a stream given up
            if self.queue.qsize() >= self.max_queued:
                # The client is not reading: end the stream after what waits, rather than hold
                # more and more for it; what it carried is cancelled as if the client had left.
                self.given_up = True
                self.abandon()
                self.queue.put_nowait(None)
                return
            self.queue.put_nowait(message)

    def abandon(self) -> None:
        """The client went away: the requests sent on this stream will not be answered here, and
        the answers of its handlers could not reach the client any more, so they are cancelled."""
        for rid, future in self.asked.items():
            if not future.done():
                future.set_exception(
                    ConnectionError(f"the stream closed before the client answered request {rid!r}")
                )
        # Cancelled a step later: a handler awaiting one of those answers hears why first.
        loop = asyncio.get_running_loop()
        for task in self.handlers.values():
            loop.call_soon(task.cancel)

    def done(self, request_id: Any) -> None:
        self.pending.discard(request_id)
        self.handlers.pop(request_id, None)
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
        self.last_used = 0.0  # time.monotonic() of its last use

    @property
    def in_use(self) -> bool:
        """A request of the client is in flight, or its GET stream is open."""
        return bool(self.tasks) or self.standalone is not None


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
        return await _ask(self._live, self._stream, method, params)


Handler = Callable[[Call], Awaitable[Any]]


async def _ask(live: _Live, stream: _Stream, method: str, params: Any) -> Any:
    """Send a request to the client on ``stream`` and await its result."""
    if stream.given_up:
        raise ConnectionError("the stream was given up: its client is not reading it")
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

    The limits (each answered past its bound as docs/limits.md says):

    - ``max_body_size`` (4 MiB): the largest POST body read; a larger one is refused with 413
      as soon as its ``Content-Length`` or the bytes read so far pass the bound.
    - ``body_timeout`` (30 s): how long a POST body may take to arrive (408 past it).
    - ``max_sessions`` (1024): the stateful sessions kept. To make room for a new one, the least
      recently used session that is not in use (no request in flight, no GET stream open) and
      has been idle for ``session_evictable_after`` (60 s) is evicted; when there is none, the
      initialize is refused with 503.
    - ``session_idle_timeout`` (30 min): a session not in use and idle this long expires.
    - ``max_in_flight`` (128): requests of one session being handled at once; one more is
      answered with a -32603 error.
    - ``max_queued`` (1000): messages waiting on one response stream or GET stream for a client
      that does not read them; past it the stream is given up: it ends after what waits, and
      the requests it carries are cancelled as if the client had left.
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
        max_body_size: int = MAX_BODY_SIZE,
        body_timeout: float = BODY_TIMEOUT,
        max_sessions: int = MAX_SESSIONS,
        session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
        session_evictable_after: float = SESSION_EVICTABLE_AFTER,
        max_in_flight: int = MAX_IN_FLIGHT,
        max_queued: int = MAX_QUEUED,
        on_event: Callable[[ServerSession, Event], None] | None = None,
        auth: ResourceServer | None = None,
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
        self.max_body_size = max_body_size
        self.body_timeout = body_timeout
        self.max_sessions = max_sessions
        self.session_idle_timeout = session_idle_timeout
        self.session_evictable_after = session_evictable_after
        self.max_in_flight = max_in_flight
        self.max_queued = max_queued
        self.on_event = on_event
        self.auth = auth  # bearer tokens checked before any session work (docs/auth.md)
        # By Mcp-Session-Id, least recently used first (every use moves a session to the end).
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
            + ([auth.metadata_route] if auth is not None else [])
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    # -- checks -----------------------------------------------------------------------------------

    def _host_allowed(self, request: Request) -> bool:
        host = request.headers.get("host")
        if host is not None and _authority_host(host) not in self.allowed_hosts:
            return False
        origin = request.headers.get("origin")
        return origin is None or _origin_host(origin) in self.allowed_hosts

    async def _endpoint(self, request: Request) -> Response:
        if not self._host_allowed(request):
            return _plain_error(403, "Forbidden: Host or Origin is not an allowed host")
        request.state.auth = None
        if self.auth is not None:
            checked = await self.auth.check(request.headers)
            if isinstance(checked, Response):
                return checked  # 401/403/503 with its challenge
            request.state.auth = checked
        try:
            if request.method == "POST":
                return await self._post(request)
            if request.method == "GET":
                return await self._get(request)
            return self._delete(request)
        except Exception:  # a bug of ours or of a hook is the client's internal error, not a crash
            _log.exception("internal error answering %s %s", request.method, request.url.path)
            return _plain_error(
                500, "Internal error: the server failed to answer this request", INTERNAL_ERROR
            )

    # -- POST -------------------------------------------------------------------------------------

    async def _post(self, request: Request) -> Response:
        if not {"application/json", "text/event-stream"} <= _media_types(
            request.headers.get("accept", "")
        ):
            return _plain_error(
                406, "Not Acceptable: Accept must list application/json and text/event-stream"
            )
        if _media_types(request.headers.get("content-type", "")) != {"application/json"}:
            return _plain_error(
                415, "Unsupported Media Type: Content-Type must be application/json"
            )
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        sid = request.headers.get(SESSION_HEADER)
        if sid is not None:
            live = self._session(sid)
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
        try:
            events = session.receive(body)
        except RecursionError:  # msgspec's bound on nesting: the body cannot be read
            return self._too_deep(live.stateful)
        direct = session.data_to_send()
        new_sid: str | None = None
        if sid is None and session.state == "initializing":
            # An initialize was answered: the connection is a session of its own from now on.
            new_sid = self._register(live)
            if new_sid is None:
                return self._no_room(direct)
            live.stateful = True
        stream = _Stream(max_queued=self.max_queued, auth=request.state.auth)
        for event in events:
            self._observe(live, event, stream)
        direct += session.data_to_send()  # what _observe answered itself (past max_in_flight)
        headers = {SESSION_HEADER: new_sid} if new_sid is not None else {}
        if not stream.pending:
            return self._direct(live, direct, headers)
        stream.put(direct)
        return await self._respond(request, stream, headers, stateful=live.stateful)

    async def _body(self, request: Request) -> bytes | Response:
        """The body of a POST, read in chunks up to ``max_body_size`` within ``body_timeout``;
        else the response refusing it."""
        declared = request.headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                return _plain_error(400, "Bad Request: Content-Length is not a number")
            if int(declared) > self.max_body_size:
                return self._too_large()
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                async with contextlib.aclosing(request.stream()) as stream:
                    async for chunk in stream:
                        size += len(chunk)
                        if size > self.max_body_size:
                            return self._too_large()
                        chunks.append(chunk)
        except TimeoutError:
            return _plain_error(
                408,
                f"Request Timeout: the body did not arrive within {self.body_timeout:g} s",
                headers={"connection": "close"},
            )
        except ClientDisconnect:
            return _Gone()
        return b"".join(chunks)

    def _too_large(self) -> Response:
        # Without Connection: close the client, still sending, can read this answer: uvicorn
        # drops what is left of the body unread (and the connection guard of
        # mcpbind.transports.serving bounds for how long), where closing at once would reset
        # the connection under the client before it read anything.
        return _plain_error(
            413, f"Payload Too Large: the body is over max_body_size ({self.max_body_size} bytes)"
        )

    def _too_deep(self, stateful: bool) -> Response:
        return _plain_error(
            200 if stateful else 400,
            "Parse error: the body nests deeper than the server reads",
            PARSE_ERROR,
        )

    def _no_room(self, answered: list[bytes]) -> Response:
        """The refusal of an initialize when every session kept is in use or recently used."""
        try:
            rid = _peek.decode(answered[0]).id if answered else None
        except (msgspec.DecodeError, ValueError):
            rid = None
        message = (
            f"Service Unavailable: the server holds max_sessions ({self.max_sessions}) sessions, "
            "none idle long enough to be evicted; try again later"
        )
        return JSONResponse(
            {
                "jsonrpc": "2.0",
                "id": rid if type(rid) in (str, int) else None,
                "error": {"code": INTERNAL_ERROR, "message": message},
            },
            status_code=503,
        )

    def _header_mismatch(self, request: Request, body: bytes) -> Response | None:
        """A stateless POST's protocol version header must name the version the request's
        ``_meta`` names (absent counts as a mismatch); a request that disagrees is refused with
        the header-mismatch error before the session reads it."""
        try:
            peek = _peek.decode(body)
        except RecursionError:
            return self._too_deep(stateful=False)
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

    # -- the session table ------------------------------------------------------------------------

    def _session(self, sid: str) -> _Live | None:
        """The session named ``sid`` (now used), unless it expired or never was."""
        now = time.monotonic()
        self._expire(now)
        live = self.sessions.get(sid)
        if live is not None:
            self._touch(live, now)
        return live

    def _touch(self, live: _Live, now: float) -> None:
        live.last_used = now
        if live.sid is not None and live.sid in self.sessions:
            self.sessions[live.sid] = self.sessions.pop(live.sid)  # to the end: used last

    def _expire(self, now: float) -> None:
        """Drop the sessions idle past ``session_idle_timeout``: the table is in order of use,
        so this looks at the least recently used ones only, and stops at the first recent one."""
        for _ in range(len(self.sessions)):
            live = next(iter(self.sessions.values()))
            if now - live.last_used < self.session_idle_timeout:
                return
            if live.in_use:  # in use now, so not idle: its clock starts again
                self._touch(live, now)
                continue
            self._end(live)

    def _evict(self, now: float) -> bool:
        """Make room for one session by evicting the least recently used one not in use and idle
        for ``session_evictable_after``; False when there is none."""
        for _ in range(len(self.sessions)):
            live = next(iter(self.sessions.values()))
            if live.in_use:
                self._touch(live, now)
                continue
            if now - live.last_used < self.session_evictable_after:
                return False  # the least recently used one is too recent: so are all the others
            self._end(live)
            return True
        return False

    def _register(self, live: _Live) -> str | None:
        """Keep ``live`` as a session of its own: its new id, or None when there is no room."""
        now = time.monotonic()
        self._expire(now)
        if len(self.sessions) >= self.max_sessions and not self._evict(now):
            return None
        sid = live.sid = secrets.token_hex(16)
        live.last_used = now
        self.sessions[sid] = live
        return sid

    def _end(self, live: _Live) -> None:
        if live.sid is not None:
            self.sessions.pop(live.sid, None)
        self._close(live)

    # -- handlers ---------------------------------------------------------------------------------

    def _observe(self, live: _Live, event: Event, stream: _Stream) -> None:
        """Act on one event of a POST: start a handler, settle an awaited client answer."""
        if self.on_event is not None:
            self.on_event(live.session, event)
        if isinstance(event, RequestReceived):
            if len(live.tasks) >= self.max_in_flight:
                _answer_error(
                    live.session,
                    event.id,
                    INTERNAL_ERROR,
                    f"Server busy: {len(live.tasks)} requests of this session are in flight, "
                    f"the most it handles at once (max_in_flight)",
                    None,
                )
                return
            stream.pending.add(event.id)
            call = Call(live, stream, event)
            task = asyncio.ensure_future(self._run(live, stream, call))
            live.tasks[event.id] = stream.handlers[event.id] = task
        elif isinstance(event, ResultReceived):
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

    async def _run(self, live: _Live, stream: _Stream, call: Call) -> None:
        session = live.session
        try:
            result = await self.handler(call)
        except asyncio.CancelledError:
            # Cancelled by the client (nothing is owed then), or because it left the stream or
            # the session ended: the session forgets the request, so its id may come again.
            _answer_error(session, call.id, INTERNAL_ERROR, "Request cancelled", None)
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
        if live.stateful:
            self._touch(live, time.monotonic())  # idle from the end of its last request
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

    async def _respond(
        self, request: Request, stream: _Stream, headers: dict[str, str], stateful: bool
    ) -> Response:
        """A POST's response: JSON when its one answer is all there is to send, else an event
        stream carrying everything the handlers send before their answers."""
        first = await _first_or_gone(stream, request.receive)
        if first is _GONE:
            stream.abandon()
            return _Gone()
        if first is None:
            return Response(status_code=202, headers=headers)
        assert isinstance(first, bytes)
        if stream.closed and stream.queue.qsize() == 1:  # only the end of the stream is left
            status = 200
            code = _error_code(first)
            if code is not None and not stateful:
                status = _STATUS.get(code, 500 if code == INTERNAL_ERROR else 400)
            return Response(
                first, status_code=status, media_type="application/json", headers=headers
            )
        return _EventStream(
            _sse(first, stream),
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache"},
        )

    # -- GET and DELETE ---------------------------------------------------------------------------

    async def _get(self, request: Request) -> Response:
        if "text/event-stream" not in _media_types(request.headers.get("accept", "")):
            return _plain_error(406, "Not Acceptable: a GET stream needs Accept: text/event-stream")
        sid = request.headers.get(SESSION_HEADER)
        live = self._session(sid) if sid is not None else None
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
        stream = live.standalone = _Stream(max_queued=self.max_queued)
        stream.pending.add(object())  # open until the session closes

        async def body() -> AsyncIterator[bytes]:
            try:
                yield b": stream open\n\n"
                while (message := await stream.queue.get()) is not None:
                    yield b"event: message\ndata: " + message + b"\n\n"
            finally:
                live.standalone = None
                stream.abandon()
                self._touch(live, time.monotonic())

        return _EventStream(
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
        if live is None or live.standalone is None or live.standalone.given_up:
            return False
        live.session.notify(method, params)
        live.standalone.put(live.session.data_to_send())
        return not live.standalone.given_up


_GONE = object()  # the client left before the first message of its response


async def _first_or_gone(stream: _Stream, receive: Receive) -> bytes | None | object:
    """The first message of a POST's response, or ``_GONE`` when the client disconnects before it:
    a handler that sends nothing before its answer is watched for its client leaving too."""
    get = asyncio.ensure_future(stream.queue.get())
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait((get, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        get.cancel()
        gone.cancel()
    if get.done() and not get.cancelled():
        return get.result()
    return _GONE


async def _disconnected(receive: Receive) -> None:
    """Return once the client of a request whose body was read disconnects."""
    while (await receive())["type"] != "http.disconnect":
        pass


class _Gone(Response):
    """The response to a client that left: nothing is sent, there is no one to send it to."""

    def __init__(self) -> None:
        super().__init__(status_code=499)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None


class _EventStream(StreamingResponse):
    """An event stream whose generator is closed however the response ends (the client leaving
    included), so that its clean-up runs at once rather than when it is collected."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            events = self.body_iterator
            if isinstance(events, AsyncGenerator):
                await events.aclose()


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


def _media_types(header: str) -> set[str]:
    """The media types a header lists (``Accept``, or ``Content-Type`` with its one), lower case
    and without their parameters."""
    return {part.split(";", 1)[0].strip().lower() for part in header.split(",")}


def _authority_host(authority: str) -> str | None:
    """The host of ``host[:port]`` (a Host header, or an origin's authority) in lower case, IPv6
    literals in their brackets; None when it is anything else, such as text after the ``]`` of
    a literal, a port that is not a number, or user information."""
    if authority.startswith("["):
        end = authority.find("]") + 1
        if end == 0:
            return None
        name, rest = authority[:end], authority[end:]
    else:
        name, colon, port = authority.partition(":")
        rest = colon + port
    if rest and not (
        rest[0] == ":" and 1 < len(rest) <= 6 and rest[1:].isascii() and rest[1:].isdigit()
    ):
        return None
    if not name or any(c in name for c in "@/\\?# "):
        return None
    return name.lower()


def _origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` header (``scheme://host[:port]``, nothing more); None for
    ``null`` or anything that is not such an origin."""
    scheme, sep, authority = origin.partition("://")
    if not sep or not scheme:
        return None
    return _authority_host(authority)


def _plain_error(
    status: int,
    message: str,
    code: int = INVALID_REQUEST,
    headers: dict[str, str] | None = None,
) -> Response:
    """An HTTP error that is also a JSON-RPC error without id, so either kind of client reads it."""
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}},
        status_code=status,
        headers=headers,
    )
