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

What outlives a connection lives in a store (``mcpbind.transports.store``): the event log of
every stream of a session (each event's id names its stream, so a GET with ``Last-Event-ID``
resumes that stream and receives what it missed), and, with a shared store such as Redis, the
session records that rebuild a session on any worker. Only the event streams of sessions use the
store; a POST answered with JSON never touches it, and with the memory store (the default) the
server keeps its sessions in its own table and never awaits the store for them.

``StreamableHTTPServer`` is built of layers, one job a module: its session table
(``_http_table.SessionTable``), the sessions' event streams and GET (``_http_events.EventStreams``),
the stateless path's header checks and tasks answers (``_http_stateless.StatelessPath``), and here
the checks of a request's head and body, POST and DELETE, and the handlers (run inline by
``_http_inline`` when they answer at once). What it shares with the HTTP+SSE server
(``sse_server``) is ``_http_calls``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message

from ..auth.resource import AuthInfo, ResourceServer, principal
from ..errors import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError
from ..events import Event, RequestReceived
from ..packages import bindings
from ..session import ServerSession
from ._http_answers import (
    EventStream,
    Gone,
    JSONAnswer,
    answer_status,
    json_answer,
    plain_error,
    too_deep,
)
from ._http_calls import Call, Handler, Live, answer_error, ask, read_client, settle
from ._http_events import SESSION_HEADER, EventStreams
from ._http_head import (
    ACCEPTED,
    JSON_ONLY,
    LOCAL_HOSTS,
    MEDIA_TYPES,
    ASGIRequest,
    allowed_host,
)
from ._http_inline import WAITS_MAX, HandledResponse, InlineHandler
from ._http_stateless import HEADER_MISMATCH as HEADER_MISMATCH
from ._http_stateless import VERSION_HEADER, StatelessPath
from ._http_streams import GONE, Stream, first_or_gone, next_message, stream_events
from ._http_table import log, store_failed
from .deadline import Deadline
from .header_check import METHOD_HEADER, NAME_HEADER

# isort: off
# The limits' defaults, named here too: they are the options' (docs/limits.md).
from .http_limits import (
    BODY_TIMEOUT as BODY_TIMEOUT,
    MAX_BODY_SIZE as MAX_BODY_SIZE,
    MAX_DESIGNATED as MAX_DESIGNATED,
    MAX_IN_FLIGHT as MAX_IN_FLIGHT,
    MAX_QUEUED as MAX_QUEUED,
    MAX_SESSIONS as MAX_SESSIONS,
    RESUME_TIMEOUT as RESUME_TIMEOUT,
    RETRY_AFTER,
    RETRY_MS as RETRY_MS,
    SESSION_EVICTABLE_AFTER as SESSION_EVICTABLE_AFTER,
    SESSION_IDLE_TIMEOUT as SESSION_IDLE_TIMEOUT,
    SESSION_RECHECK as SESSION_RECHECK,
    check_limits,
    too_many_in_flight,
)

# isort: on
from .store import Store, StoreError, store_from

if TYPE_CHECKING:
    from ..tasks import Tasks

__all__ = ["Call", "Handler", "StreamableHTTPServer"]

FORBIDDEN = "Forbidden: Host or Origin is not an allowed host"

# As _Headers.raw has them
_SESSION, _VERSION = SESSION_HEADER.encode(), VERSION_HEADER.encode()


class StreamableHTTPServer(StatelessPath, EventStreams):
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

    Resuming (docs/http.md): ``store`` (a ``Store``, a Redis URL, or None for a ``MemoryStore``)
    keeps the event log of every event stream of a session; each event's id is
    ``<stream>:<position>``, and a GET with ``Last-Event-ID`` receives what followed it on that
    stream, then the rest as it comes. A POST's event stream of a revision with priming
    (``FACTS.sse_priming``) starts with a priming event carrying ``retry`` (``retry_ms``, 1000);
    ``Call.close_stream`` ends its response for the client to poll. A client that leaves an
    event stream of a session does not cancel it: its handlers go on, and the requests sent on
    it await their answers, for ``resume_timeout`` (30 s) without a reader, after which they
    raise ``ConnectionError`` and the handlers are cancelled. With a shared store (Redis) any
    worker serves any session: it rebuilds the session from its record, a client's answer to a
    request another worker sent reaches that worker, and DELETE ends the session everywhere.
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
        store: Store | str | None = None,
        retry_ms: int = RETRY_MS,
        resume_timeout: float = RESUME_TIMEOUT,
        session_class: Callable[..., ServerSession] = ServerSession,
        on_close: Callable[[str], None] | None = None,
        tasks: Tasks | None = None,
    ) -> None:
        check_limits(
            {
                "max_body_size": max_body_size,
                "body_timeout": body_timeout,
                "max_sessions": max_sessions,
                "session_idle_timeout": session_idle_timeout,
                "max_in_flight": max_in_flight,
                "max_queued": max_queued,
                "resume_timeout": resume_timeout,
            },
            {"session_evictable_after": session_evictable_after, "retry_ms": retry_ms},
        )
        self.handler = handler
        # The tasks extension's layer (mcpbind.tasks): it answers the stateless requests it owns
        # before any session reads them, and the capabilities advertise the extension.
        self.tasks = tasks
        if tasks is not None:
            capabilities = tasks.advertise(capabilities)
        self._keep_sessions(store_from(store), owned=not isinstance(store, Store))
        if tasks is not None:
            tasks.share(self.store)  # its tasks seen by every worker of a shared store
        self.retry_ms = retry_ms
        self.resume_timeout = resume_timeout
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
        self.session_class = session_class  # builds each ServerSession from the config
        self.on_close = on_close  # told the id of each session this worker forgets
        self.auth = auth  # bearer tokens checked before any session work (docs/auth.md)
        probe = self.session_class(**self._config)
        # A POST without a session id gets a session spawned from this one (ServerSession.spawn:
        # the configuration is not worked out again, codecs are reused); a session class of
        # the caller's own is called instead, as it may keep state of its own.
        self._template = probe if self.session_class is ServerSession else None
        self._read_revisions(probe.revisions)
        # The kinds of request (method, and the name a tool call gives) whose handler was seen
        # to wait, run in a task of their own (_inline); at most WAITS_MAX, then forgotten
        self._waits: set[tuple[str, str | None]] = set()
        self.path = path
        self.app = self._application(path, auth)

    def _application(self, path: str, auth: ResourceServer | None) -> Starlette:
        """The Starlette application answering at ``path`` (and the metadata route of ``auth``)."""
        return Starlette(
            routes=[Route(path, self._routed, methods=["GET", "POST", "DELETE"])]
            + ([auth.metadata_route] if auth is not None else []),
            lifespan=self._lifespan,
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == self.path
            and not scope.get("root_path")
        ):
            # The hot path, straight to the endpoint: Starlette's routing and middleware would
            # find this same endpoint (and add nothing it uses) at about a sixth of a request's
            # instructions.
            request = ASGIRequest(scope, receive, send)
            response: Response
            if self.auth is None and not self._shared:
                # _endpoint written out for a POST that needs neither a token nor the store's
                # listener: a coroutine less
                if not allowed_host(request.raw_headers, self.allowed_hosts):
                    response = plain_error(403, FORBIDDEN)
                else:
                    try:
                        response = await self._post(request, None)
                    except Exception as error:  # (as in _endpoint)
                        response = self._raised(request, error)
            else:
                response = await self._endpoint(request)
            if type(response) is JSONAnswer:  # (Response.__call__ written out: a coroutine less)
                await send(
                    {
                        "type": "http.response.start",
                        "status": response.status_code,
                        "headers": response.raw_headers,
                    }
                )
                await send({"type": "http.response.body", "body": response.body})
                return
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _routed(self, request: Request) -> Response:
        """The endpoint as Starlette's routing calls it (what the hot path of ``__call__`` does
        not take): the same, on the request as ``ASGIRequest`` holds it."""
        return await self._endpoint(ASGIRequest.of(request))

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        yield
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening to other workers, and close the store when the server made it from a
        URL (run at the end of the ASGI lifespan); cancel the running tasks of its tasks layer."""
        if self.tasks is not None:
            await self.tasks.aclose()
        if self._owns_store:
            await self.store.close()
        self._started = None

    # -- checks -----------------------------------------------------------------------------------

    async def _endpoint(self, request: ASGIRequest) -> Response:
        if not allowed_host(request.raw_headers, self.allowed_hosts):
            return plain_error(403, FORBIDDEN)
        auth: AuthInfo | None = None  # a local, not request.state: that builds a State a request
        if self._shared and (self._started is None or not self._started.done()):
            refused = await self._listening(request)
            if refused is not None:
                return refused
        if self.auth is not None:
            checked = await self.auth.check(request.headers)
            if isinstance(checked, Response):
                return checked  # 401/403/503 with its challenge
            auth = checked
        method = request.scope["method"]  # (Request.method reads it, through a property)
        try:
            if method == "POST":
                return await self._post(request, auth)
            if method == "GET":
                return await self._get(request, auth)
            return await self._delete(request, auth)
        except Exception as error:  # (_raised answers it)
            return self._raised(request, error)

    def _raised(self, request: Request, error: Exception) -> Response:
        """The answer to a request whose handling raised ``error`` (called where it is caught):
        503 when the store failed, else 500, logged: a bug of ours or of a hook is the client's
        internal error, not a crash."""
        if isinstance(error, StoreError):
            return self._unavailable(request, error)
        log.exception("internal error answering %s %s", request.method, request.url.path)
        return plain_error(
            500, "Internal error: the server failed to answer this request", INTERNAL_ERROR
        )

    async def _listening(self, request: Request) -> Response | None:
        """Listen to the other workers before serving a request of a session; the 503 refusing
        it when the store fails. A POST without a session waits for nothing: a stateless one
        never needs the store (docs/http.md), and an initialize starts the listener when it
        opens its session (``_opened``)."""
        if request.method == "POST" and request.headers.get(SESSION_HEADER) is None:
            return None
        try:
            await self._start()
        except StoreError as error:
            return self._unavailable(request, error)
        return None

    def _unavailable(self, request: Request, error: StoreError) -> Response:
        """The answer to a request the store failed (Redis stopped, frozen, full, refusing the
        password): 503 with ``Retry-After``, and a JSON-RPC error naming the store and why."""
        store_failed(f"the store, answering {request.method} {request.url.path}", error)
        return _store_error(error)

    # -- POST -------------------------------------------------------------------------------------

    async def _post(self, request: ASGIRequest, auth: AuthInfo | None) -> Response:
        """A POST; ``auth``: its verified token (with ``auth=``). Its headers are read from their
        raw bytes (``_Headers.raw``), each once."""
        raw = request.raw_headers
        if not MEDIA_TYPES[raw.get(b"accept", b"")] >= ACCEPTED:
            return plain_error(
                406, "Not Acceptable: Accept must list application/json and text/event-stream"
            )
        if MEDIA_TYPES[raw.get(b"content-type", b"")] != JSON_ONLY:
            return plain_error(415, "Unsupported Media Type: Content-Type must be application/json")
        declared = raw.get(b"content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                return plain_error(400, "Bad Request: Content-Length is not a number")
            if int(declared) > self.max_body_size:
                return self._too_large()
        # The body: the usual one came with the head, whole (_body's first turn, without its
        # coroutine); else _body reads on
        message, waiting = next_message(request.receive)
        if (
            waiting is None
            and message is not None
            and message["type"] == "http.request"
            and not message.get("more_body", False)
        ):
            body = message.get("body", b"")
            if len(body) > self.max_body_size:
                return self._too_large()
        else:
            read = await self._body(request, message, waiting)
            if isinstance(read, Response):
                return read
            body = read
        named = raw.get(_SESSION)
        sid = None if named is None else named.decode("latin-1")
        version: str | None = None  # what a stateless request's _meta names, read once
        agreed: list[Event] | None = None  # its events, when read with its headers agreeing
        if sid is not None:
            bound = await self._bound(request, sid, auth, body)
            if isinstance(bound, Response):
                return bound
            live = bound
        else:
            template = self._template
            live = Live(  # (positional: a class called with a keyword builds a dict for it)
                template.spawn() if template is not None else self.session_class(**self._config),
                False,
            )
            # The body decoded once when its headers agree with it so (the usual request); else
            # the header check reads it, and the session after
            agreed = self._agreed(raw, live.session, body)
            if agreed is None:
                refused = await self._stateless_checks(request, raw, body, auth)
                if isinstance(refused, Response):
                    live.session.release()  # (it did nothing: its codecs serve the next POST)
                    return refused
                version = refused
        session = live.session
        try:
            if sid is None and agreed is not None:
                events = agreed
            elif version:
                events = session.receive(body, version=version)
            else:
                events = session.receive(body)
        except RecursionError:  # msgspec's bound on nesting: the body cannot be read
            return too_deep(live.stateful)
        direct = session.data_to_send()
        new_sid: str | None = None
        if sid is None and session.state == "initializing":
            # An initialize was answered: the connection is a session of its own from now on.
            live.owner = principal(auth)
            new_sid = self._register(live)
            if new_sid is None or (self._shared and not await self._opened(live, body)):
                return self._no_room(direct)
            live.stateful = True
        stream = Stream(self.max_queued, auth)
        # The handler of a POST's one request runs in this task (_inline), unless its kind of
        # request was seen to wait (_waits); a batch's, a task each
        inline: InlineHandler | None = None
        alone = len(events) == 1
        for event in events:
            inline = self._observe(live, event, stream, alone)
        direct += session.data_to_send()  # what _observe answered itself (past max_in_flight)
        if self._shared and live.sid is not None and not live.ready:
            await self._became_ready(live, events)
        headers = {SESSION_HEADER: new_sid} if new_sid is not None else {}
        if not stream.pending:
            if not live.stateful:
                session.release()  # answered: its codecs may serve the next stateless POST
            return self._direct(live, direct, headers)
        if direct:  # (put of nothing puts nothing)
            stream.put(direct)
        if inline is not None:
            answered = self._inline(request, live, stream, headers, inline)
            if answered is not None:
                return answered
        return await self._respond(request, live, stream, headers)

    async def _stateless_checks(
        self, request: ASGIRequest, raw: dict[bytes, bytes], body: bytes, auth: AuthInfo | None
    ) -> Response | str | None:
        """The header check of a stateless POST (``_header_mismatch``) and the tasks layer's
        answer: the response refusing or answering it, else the version its ``_meta`` names
        (for the session, which need not read it again; None when it names none)."""
        mismatch, version, mirror = self._header_mismatch(raw, body)
        if mismatch is not None:
            return mismatch
        if self.tasks is not None:
            if mirror is None:  # (not read by the check)
                mirror = request.headers.get(METHOD_HEADER), request.headers.get(NAME_HEADER)
            if self.tasks.owns(*mirror):
                answered = await self._tasks_answer(body, auth)
                if answered is not None:
                    return answered
        return version

    async def _bound(
        self, request: ASGIRequest, sid: str, auth: AuthInfo | None, body: bytes
    ) -> Live | Response:
        """The session of a POST naming one, or the response refusing it (no such session, a
        protocol version header not its own), or 202 for an answer forwarded to another worker."""
        found = await self._lookup(sid, auth)
        if isinstance(found, Response):
            return found
        if found is None:
            return plain_error(404, f"Not Found: no MCP session {sid!r}", INVALID_REQUEST)
        live = found
        named = request.raw_headers.get(_VERSION)
        header = None if named is None else named.decode("latin-1")
        revision = live.session.revision
        if (
            header is not None
            and revision is not None
            and header not in (self._versions_of.get(revision) or bindings(revision).FACTS.versions)
        ):
            return plain_error(
                400,
                f"Bad Request: {VERSION_HEADER} {header!r} is not the negotiated "
                f"version of this session",
                INVALID_REQUEST,
            )
        if self._shared and await self._forwarded(live, body):
            return Response(status_code=202)
        return live

    def _inline(
        self,
        request: Request,
        live: Live,
        stream: Stream,
        headers: dict[str, str],
        inline: InlineHandler,
    ) -> Response | None:
        """The POST's one handler, run in the request's own task: one that answers without
        waiting costs no task of its own, nor a wait for it (a loop turn, the watch of the
        client leaving); one that waits goes on in this task while another writes the response
        (``HandledResponse``). Either way ``asyncio.current_task()`` is the same one all along, so a
        timeout or task group the handler enters cancels what it means to. None: it is done,
        and ``_respond`` makes the response of what it sent."""
        run = self._run(live, stream, inline.call)
        try:
            step = run.send(None)
        except StopIteration as done:
            items = stream._items  # (its queue's qsize and get_nowait, without their calls)
            if stream.closed and len(items) == 2:  # its answer, and the end of the stream
                first = items.popleft()
                if isinstance(first, bytes):
                    # (what _respond makes of it; a result is a 200 without looking: no message
                    # but an error response has another status)
                    if done.value:
                        return JSONAnswer(first, 200, headers)
                    return json_answer(first, live.stateful, headers)
                items.appendleft(first)
            return None
        inline.run, inline.step = run, step
        # It waits: requests of its kind get a task of their own from now on, which costs less
        # than the response's task and the handler's relays (InlineHandler) a waiting handler needs
        if len(self._waits) >= WAITS_MAX:
            self._waits.clear()
        self._waits.add(inline.kind)
        return HandledResponse(self._respond(request, live, stream, headers), inline)

    async def _body(
        self, request: Request, message: Message | None, waiting: Awaitable[Message] | None
    ) -> bytes | Response:
        """The body of a POST, read in chunks up to ``max_body_size`` within ``body_timeout``;
        else the response refusing it. ``message``, ``waiting``: the first read of it
        (``next_message``), made by the caller."""
        chunks: list[bytes] = []
        size = 0
        receive = request.receive
        deadline: float | None = None  # set once a read waits (the usual body came with the head)
        first = True
        try:
            while True:
                if not first:
                    message, waiting = next_message(receive)
                first = False
                if waiting is not None:
                    loop = asyncio.get_running_loop()
                    if deadline is None:
                        deadline = loop.time() + self.body_timeout
                    # (asyncio.timeout_at's decision at a fraction of its cost: a body that does
                    # not come with the head, as Python's HTTP clients send it, is the usual one)
                    bound = Deadline(loop, deadline - loop.time())
                    try:
                        message = await waiting
                    except BaseException as error:
                        if bound.over(error):
                            raise TimeoutError from error
                        raise
                    bound.over(None)
                assert (
                    message is not None
                )  # (next_message gives the message or what to await for it)
                if message["type"] != "http.request":  # http.disconnect
                    return Gone()
                chunk: bytes = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body_size:
                    return self._too_large()
                if not message.get("more_body", False):
                    if not chunks:
                        return chunk  # all in one
                    chunks.append(chunk)
                    break
                chunks.append(chunk)
        except TimeoutError:
            return plain_error(
                408,
                f"Request Timeout: the body did not arrive within {self.body_timeout:g} s",
                headers={"connection": "close"},
            )
        return b"".join(chunks)

    def _too_large(self) -> Response:
        # Without Connection: close the client, still sending, can read this answer: uvicorn
        # drops what is left of the body unread (and the connection guard of
        # mcpbind.transports.serving bounds for how long), where closing at once would reset
        # the connection under the client before it read anything.
        return plain_error(
            413, f"Payload Too Large: the body is over max_body_size ({self.max_body_size} bytes)"
        )

    def _no_room(self, answered: list[bytes]) -> Response:
        """The refusal of an initialize when every session kept is in use or recently used."""
        try:
            rid = read_client.decode(answered[0]).id if answered else None
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
            headers={"retry-after": str(max(1, round(self.session_evictable_after)))},
        )

    # -- the session table ------------------------------------------------------------------------

    # -- sessions in a shared store ---------------------------------------------------------------

    # -- resumable event streams ------------------------------------------------------------------

    # -- handlers ---------------------------------------------------------------------------------

    def _observe(
        self, live: Live, event: Event, stream: Stream, inline: bool = False
    ) -> InlineHandler | None:
        """Act on one event of a POST: start a handler (``inline``: the caller runs it, in its
        own task), settle an awaited client answer."""
        if self.on_event is not None:
            self.on_event(live.session, event)
        if isinstance(event, RequestReceived):
            if len(live.tasks) >= self.max_in_flight:
                busy = too_many_in_flight(event.id, self.max_in_flight)
                answer_error(live.session, event.id, busy.code, busy.message, busy.data)
                return None
            stream.pending.add(event.id)
            call = Call(live, stream, event, self._ids)
            name = getattr(event.params, "name", None)
            kind = (event.method, name if type(name) is str else None)
            if inline and kind not in self._waits:
                handler = InlineHandler(call, kind)
                live.tasks[event.id] = stream.handlers[event.id] = handler  # type: ignore[assignment]
                return handler
            task = asyncio.get_running_loop().create_task(self._run(live, stream, call))
            live.tasks[event.id] = stream.handlers[event.id] = task
        else:
            settle(live, event)
        return None

    async def _run(self, live: Live, stream: Stream, call: Call) -> bool:
        """Run the handler of ``call`` and queue its answer; whether it was a result (True) or
        an error (False)."""
        session = live.session
        answered = False
        try:
            result = await self.handler(call)
        except asyncio.CancelledError:
            # Cancelled by the client (nothing is owed then), or because it left the stream or
            # the session ended: the session forgets the request, so its id may come again.
            answer_error(session, call.id, INTERNAL_ERROR, "Request cancelled", None)
        except ProtocolError as error:
            answer_error(session, call.id, error.code, error.message, error.data)
        except Exception as error:  # a handler's bug is the client's internal error, not a crash
            answer_error(session, call.id, INTERNAL_ERROR, f"Internal error: {error}", None)
        else:
            if self._lists.get(call.revision) == call.method:
                self._learn_tools(call, result)
            try:
                session.respond(call.id, result)
                answered = True
            except ProtocolError as error:
                answer_error(session, call.id, INTERNAL_ERROR, error.message, None)
        live.tasks.pop(call.id, None)
        if live.stateful:
            self._touch(live, time.monotonic())  # idle from the end of its last request
        stream.put(session.data_to_send())
        stream.done(call.id)
        if not live.stateful and not live.tasks:
            session.release()  # every request answered: its codecs may serve the next POST
        return answered

    def _direct(self, live: Live, direct: list[bytes], headers: dict[str, str]) -> Response:
        """The answer to a POST that started no handler: the session's own reply, or 202."""
        if not direct:
            return Response(status_code=202, headers=headers)
        if len(direct) == 1:
            return json_answer(direct[0], live.stateful, headers)
        status = 200 if live.stateful else answer_status(direct[0], False)  # (a batch)
        return JSONAnswer(b"[" + b",".join(direct) + b"]", status, headers)

    async def _respond(
        self, request: Request, live: Live, stream: Stream, headers: dict[str, str]
    ) -> Response:
        """A POST's response: JSON when its one answer is all there is to send, else an event
        stream carrying everything the handlers send before their answers (resumable in a
        session: its events are logged in the store)."""
        first = await first_or_gone(stream, request.receive)
        if first is GONE:
            stream.abandon()
            return Gone()
        if first is None:
            return Response(status_code=202, headers=headers)
        if isinstance(first, bytes) and stream.closed and stream.qsize() == 1:
            return json_answer(first, live.stateful, headers)  # only the end of the stream is left
        if live.sid is None:  # no session to resume it in
            assert isinstance(first, bytes)  # only a session's stream is closed for polling
            return EventStream(
                stream_events(first, stream),
                media_type="text/event-stream",
                headers={**headers, "cache-control": "no-cache"},
            )
        revision = live.session.revision
        primed = revision is not None and bindings(revision).FACTS.sse_priming
        key = secrets.token_hex(8)
        self._resumable(live, stream, key, ([b""] if primed else []) + [first])
        return self._stream_response(live, key, None, stream, headers=headers)

    # -- GET and DELETE ---------------------------------------------------------------------------

    async def _delete(self, request: Request, auth: AuthInfo | None = None) -> Response:
        sid = request.headers.get(SESSION_HEADER)
        if sid is None:
            return plain_error(400, "no such MCP session")
        if self.auth is not None and await self._owner_of(sid) != (principal(auth),):
            return plain_error(404, "no such MCP session")  # as unknown: another principal's
        live = self.sessions.pop(sid, None)
        if live is not None:
            self._close(live)
        if self._shared:  # ended in the store, and on every worker that holds a copy
            found = await self.store.end_session(sid)
            await self._publish(sid, "ended")
        else:
            found = live is not None
            if found:
                await self.store.end_session(sid)  # its event logs
        if not found:
            return plain_error(404, "no such MCP session")
        return Response(status_code=200)

    async def request(self, sid: str, method: str, params: Any = None) -> Any:
        """Send a request that belongs to no client request (``roots/list``, a sampling or an
        elicitation of the server's own) on session ``sid``'s GET stream, and await the client's
        result, of the generated result class of the session's revision.

        An error response raises ``ProtocolError`` with the client's code and message; a request
        the session cannot send (the client did not advertise its capability) raises it before
        anything is sent. ``LookupError`` when the session has no GET stream open (with a shared
        store: when there is no such session; the request then goes to the session's GET stream
        wherever it is read, and waits for one to be opened or resumed); ``ConnectionError``
        when the stream closes and is not resumed within ``resume_timeout`` before the answer
        comes, or the session ends; ``StoreError`` when a shared store fails.
        """
        if self._shared:
            await self._start()  # the client's answer may come through another worker
        live = self.sessions.get(sid)
        if live is None and self._shared:
            found = await self._find(sid, anyone=True)
            live = found if isinstance(found, Live) else None
        if live is None or (not self._shared and live.standalone is None):
            raise LookupError(f"MCP session {sid!r} has no GET stream open to send a request on")
        return await ask(live, self._standalone(live), method, params, self._ids)

    def notify(self, sid: str, method: str, params: Any = None) -> bool:
        """Send a notification that belongs to no request on a session's GET stream; False when
        the session has no such stream open (the notification is then not sent). With a shared
        store, it is sent whenever this worker holds the session, to the GET stream read on any
        worker."""
        live = self.sessions.get(sid)
        if live is None or (not self._shared and live.standalone is None):
            return False
        stream = self._standalone(live)
        if stream.given_up:
            return False
        live.session.notify(method, params)
        stream.put(live.session.data_to_send())
        return not stream.given_up


def _store_error(error: StoreError) -> Response:
    """503, ``Retry-After: 1``, and the JSON-RPC error saying which store failed and why."""
    return JSONResponse(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": INTERNAL_ERROR,
                "message": f"Service Unavailable: the session store failed ({error}); "
                "try again later",
                "data": {"reason": "store failed", "store": error.store},
            },
        },
        status_code=503,
        headers={"retry-after": RETRY_AFTER},
    )
