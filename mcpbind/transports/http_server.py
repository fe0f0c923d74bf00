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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import secrets
import time
from collections import deque
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Mapping,
)
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._repeats import Repeats
from ..auth.resource import AuthInfo, ResourceServer, principal
from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    ProtocolError,
)
from ..events import (
    Event,
    Initialized,
    RequestReceived,
)
from ..packages import bindings
from ..session import ServerSession
from . import header_check
from ._http_answers import NO_CACHE, EventStream, Gone, JSONAnswer, as_events, plain_error
from ._http_calls import Call, Handler, Live, answer_error, ask, read_client, settle
from ._http_head import ACCEPTED, JSON_ONLY, LOCAL_HOSTS, ASGIRequest, host_allowed, media_types
from .header_check import METHOD_HEADER, NAME_HEADER, param_mismatch, standard_mismatch
from .http_client import designations

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
    busy,
    check_limits,
    too_many_in_flight,
)

# isort: on
from ._http_streams import (
    CLOSE,
    GONE,
    Stop,
    Stream,
    first_or_gone,
    next_message,
    quiet,
    stream_events,
)
from .store import Entry, FailureLog, NotIssued, Store, StoreError, store_from

if TYPE_CHECKING:
    from ..tasks import Tasks

__all__ = ["Call", "Handler", "StreamableHTTPServer"]

_log = logging.getLogger(__name__)
_store_failed = FailureLog(_log)  # a store's failures: a warning every 10 s at most

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"


# The stream id of a session's GET stream in event ids (``get:<position>``); a POST's stream is
# named by 16 hex digits.
STANDALONE = "get"
# How long one read of an event log waits before a reader looks again (a reader is also woken when
# its stream is closed or its session ends).
_READ_BLOCK = 5.0
# How long a reader that follows its stream from memory (the store failing to read it back)
# waits before it asks the store again.
_REREAD = 0.5


# The header-mismatch error of the per-request envelope revisions' HTTP transport: the MCP
# schema defines no such error, so the facts record does not carry it (see the report).
HEADER_MISMATCH = -32020

# HTTP status of a JSON-RPC error answered on a stateless POST (the envelope revisions' transport
# rule); a session-bound POST answers every JSON-RPC error with 200.
_STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, METHOD_NOT_FOUND: 404, INVALID_PARAMS: 400}


class _PeekAnswer(msgspec.Struct, gc=False):
    """Enough of a client's message to tell an answer (to a request of some worker) apart."""

    id: Any = None
    method: Any = None
    result: msgspec.Raw = msgspec.Raw()  # empty when absent
    error: msgspec.Raw = msgspec.Raw()


_peek_answer = msgspec.json.Decoder(_PeekAnswer)


class _Record(msgspec.Struct, array_like=True):
    """What rebuilds a session on another worker (a shared store's session record): the client's
    initialize request as it was sent, whether its initialized notification came, and the
    principal that opened it (``auth.resource.principal``; None without ``auth=``)."""

    initialize: bytes
    ready: bool = False
    owner: str | None = None


class _Note(msgspec.Struct, array_like=True):
    """A message between workers about one session: ``kind`` is ``answer`` (a client's response
    to a request some worker sent), ``note`` (a client's notification), ``ended``,
    ``attached`` or ``detached`` (a reader of the stream named by ``data``)."""

    origin: str
    kind: str
    data: bytes = b""


def _answer_status(data: bytes, stateful: bool) -> int:
    """The HTTP status of a POST answered by ``data`` alone: 503 when it is a busy server's error
    (``http_limits.busy``), in a session or not; else 200 in a session, where every JSON-RPC
    error travels in a 200, and a stateless POST's error its own status."""
    if data.find(b'"error"') < 0:  # cheaper than reading it: most answers are results
        return 200
    try:
        error = read_client.decode(data).error
    except (msgspec.DecodeError, ValueError, RecursionError):
        return 200
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, int):
        return 200
    return _error_status(code, error.get("message"), stateful)


def _error_status(code: int, message: Any, stateful: bool) -> int:
    if code == INTERNAL_ERROR and busy(message):
        return 503
    if stateful:
        return 200
    return _STATUS.get(code, 500 if code == INTERNAL_ERROR else 400)


def _json_answer(answer: bytes, stateful: bool, headers: dict[str, str]) -> Response:
    """A POST answered by one JSON-RPC response; a busy server's error with ``Retry-After``."""
    status = _answer_status(answer, stateful)
    if status == 503:
        headers = {**headers, "retry-after": RETRY_AFTER}
    return JSONAnswer(answer, status, headers)


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
        self.store = store_from(store)
        if tasks is not None:
            tasks.share(self.store)  # its tasks seen by every worker of a shared store
        self._owns_store = not isinstance(store, Store)  # closed with the app
        self._shared = self.store.shared
        self.retry_ms = retry_ms
        self.resume_timeout = resume_timeout
        self.worker = secrets.token_hex(8)  # names this worker in the ids it gives requests
        self._note = Repeats(_log.warning)  # unreadable messages of other workers, logged
        self._ids = (f"{self.worker}-{n}" for n in itertools.count(1)) if self._shared else None
        self._started: asyncio.Future[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
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
        # By Mcp-Session-Id, least recently used first (every use moves a session to the end).
        self.sessions: dict[str, Live] = {}
        probe = self.session_class(**self._config)
        # A POST without a session id gets a session spawned from this one (ServerSession.spawn:
        # the configuration is not worked out again, codecs are reused); a session class of
        # the caller's own is called instead, as it may keep state of its own.
        self._template = probe if self.session_class is ServerSession else None
        # The _meta keys naming a request's protocol version, from the facts of the revisions
        # served that carry the per-request envelope.
        self._version_keys = tuple(
            dict.fromkeys(
                meta.version_key
                for r in probe.revisions
                if (meta := bindings(r).FACTS.request_meta) is not None
            )
        )
        # The versions whose requests carry the envelope, each with its revision; and the
        # x-mcp-header designations of the tools this server listed, by tool name.
        self._by_version = {
            v: r
            for r in probe.revisions
            if bindings(r).FACTS.request_meta is not None
            for v in bindings(r).FACTS.versions
        }
        # By version, the methods of its revision (whose Mcp-Name is checked) and the method of
        # a tool call (whose Mcp-Param-* are): read per request, worked out here once.
        self._mirrored = {
            v: (frozenset(bindings(r).FACTS.wires), bindings(r).FACTS.features.get("call_tool"))
            for v, r in self._by_version.items()
        }
        self._designated: dict[str, dict[str, str]] = {}
        # The kinds of request (method, and the name a tool call gives) whose handler was seen
        # to wait, run in a task of their own (_inline); at most _WAITS_MAX, then forgotten
        self._waits: set[tuple[str, str | None]] = set()
        # By revision served, its protocol versions (a session's Mcp-Protocol-Version must be one)
        self._versions_of = {r: frozenset(bindings(r).FACTS.versions) for r in probe.revisions}
        # By revision, its tool list method, whose results are learned from while some revision
        # served checks Mcp-Param-* headers (has the envelope).
        self._lists = (
            {r: bindings(r).FACTS.features.get("list_tools") for r in probe.revisions}
            if self._by_version
            else {}
        )
        self.path = path
        self.app = Starlette(
            routes=[Route(path, self._endpoint, methods=["GET", "POST", "DELETE"])]
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
            response = await self._endpoint(ASGIRequest(scope, receive, send))
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

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

    async def _start(self) -> None:
        """Listen to the other workers sharing the store (once, on the first request, or the
        first ``request`` of the server's own)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            try:
                await self.store.start(self._on_message)
            except BaseException as error:
                self._started.set_exception(error)
                self._started.exception()  # (retrieved: those awaiting it hear it, or no one)
                self._started = None
                raise
            self._started.set_result(None)
        await self._started

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``work`` in the background, keeping a reference until it is done."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _publish(self, sid: str, kind: str, data: bytes = b"") -> None:
        try:
            await self.store.publish(
                sid, msgspec.msgpack.encode(_Note(origin=self.worker, kind=kind, data=data))
            )
        except Exception as error:  # the store is down: the other workers learn it from it later
            _store_failed(f"publishing {kind} of session {sid}", error)

    # -- checks -----------------------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> Response:
        if not host_allowed(request.headers, self.allowed_hosts):
            return plain_error(403, "Forbidden: Host or Origin is not an allowed host")
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
        try:
            if request.method == "POST":
                return await self._post(request, auth)
            if request.method == "GET":
                return await self._get(request, auth)
            return await self._delete(request, auth)
        except StoreError as error:
            return self._unavailable(request, error)
        except Exception:  # a bug of ours or of a hook is the client's internal error, not a crash
            _log.exception("internal error answering %s %s", request.method, request.url.path)
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
        _store_failed(f"the store, answering {request.method} {request.url.path}", error)
        return _store_error(error)

    # -- POST -------------------------------------------------------------------------------------

    async def _post(self, request: Request, auth: AuthInfo | None) -> Response:
        """A POST; ``auth``: its verified token (with ``auth=``)."""
        if not media_types(request.headers.get("accept", "")) >= ACCEPTED:
            return plain_error(
                406, "Not Acceptable: Accept must list application/json and text/event-stream"
            )
        if media_types(request.headers.get("content-type", "")) != JSON_ONLY:
            return plain_error(415, "Unsupported Media Type: Content-Type must be application/json")
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        sid = request.headers.get(SESSION_HEADER)
        version: str | None = None  # what a stateless request's _meta names, read once
        if sid is not None:
            found = await self._lookup(sid, auth)
            if isinstance(found, Response):
                return found
            if found is None:
                return plain_error(404, f"Not Found: no MCP session {sid!r}", INVALID_REQUEST)
            live = found
            header = request.headers.get(VERSION_HEADER)
            revision = live.session.revision
            if (
                header is not None
                and revision is not None
                and header
                not in (self._versions_of.get(revision) or bindings(revision).FACTS.versions)
            ):
                return plain_error(
                    400,
                    f"Bad Request: {VERSION_HEADER} {header!r} is not the negotiated "
                    f"version of this session",
                    INVALID_REQUEST,
                )
            if self._shared and await self._forwarded(live, body):
                return Response(status_code=202)
        else:
            mismatch, version = self._header_mismatch(request, body)
            if mismatch is not None:
                return mismatch
            if self.tasks is not None and self.tasks.owns(
                request.headers.get(METHOD_HEADER), request.headers.get(NAME_HEADER)
            ):
                answered = await self._tasks_answer(body, auth)
                if answered is not None:
                    return answered
            template = self._template
            live = Live(
                template.spawn() if template is not None else self.session_class(**self._config),
                stateful=False,
            )
        session = live.session
        try:
            events = session.receive(body, version=version) if version else session.receive(body)
        except RecursionError:  # msgspec's bound on nesting: the body cannot be read
            return self._too_deep(live.stateful)
        direct = session.data_to_send()
        new_sid: str | None = None
        if sid is None and session.state == "initializing":
            # An initialize was answered: the connection is a session of its own from now on.
            live.owner = principal(auth)
            new_sid = self._register(live)
            if new_sid is None or (self._shared and not await self._opened(live, body)):
                return self._no_room(direct)
            live.stateful = True
        stream = Stream(max_queued=self.max_queued, auth=auth)
        # The handler of a POST's one request runs in this task (_inline), unless its kind of
        # request was seen to wait (_waits); a batch's, a task each
        inline: _Inline | None = None
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
        stream.put(direct)
        if inline is not None:
            answered = self._inline(request, live, stream, headers, inline)
            if answered is not None:
                return answered
        return await self._respond(request, live, stream, headers)

    def _inline(
        self,
        request: Request,
        live: Live,
        stream: Stream,
        headers: dict[str, str],
        inline: _Inline,
    ) -> Response | None:
        """The POST's one handler, run in the request's own task: one that answers without
        waiting costs no task of its own, nor a wait for it (a loop turn, the watch of the
        client leaving); one that waits goes on in this task while another writes the response
        (``_Handled``). Either way ``asyncio.current_task()`` is the same one all along, so a
        timeout or task group the handler enters cancels what it means to. None: it is done,
        and ``_respond`` makes the response of what it sent."""
        run = self._run(live, stream, inline.call)
        try:
            step = run.send(None)
        except StopIteration:
            queue = stream.queue
            if stream.closed and queue.qsize() == 2:  # its answer, and the end of the stream
                first = queue.get_nowait()
                if isinstance(first, bytes):
                    return _json_answer(
                        first, live.stateful, headers
                    )  # (what _respond makes of it)
                queue._items.appendleft(first)
            return None
        inline.run, inline.step = run, step
        # It waits: requests of its kind get a task of their own from now on, which costs less
        # than the response's task and the handler's relays (_Inline) a waiting handler needs
        if len(self._waits) >= _WAITS_MAX:
            self._waits.clear()
        self._waits.add(inline.kind)
        return _Handled(self._respond(request, live, stream, headers), inline)

    async def _body(self, request: Request) -> bytes | Response:
        """The body of a POST, read in chunks up to ``max_body_size`` within ``body_timeout``;
        else the response refusing it."""
        declared = request.headers.get("content-length")
        if declared is not None:
            if not (declared.isascii() and declared.isdigit()):
                return plain_error(400, "Bad Request: Content-Length is not a number")
            if int(declared) > self.max_body_size:
                return self._too_large()
        chunks: list[bytes] = []
        size = 0
        receive = request.receive
        deadline: float | None = None  # set once a read waits (the usual body came with the head)
        try:
            while True:
                message, waiting = next_message(receive)
                if waiting is not None:
                    if deadline is None:
                        deadline = asyncio.get_running_loop().time() + self.body_timeout
                    async with asyncio.timeout_at(deadline):
                        message = await waiting
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

    def _too_deep(self, stateful: bool) -> Response:
        return plain_error(
            200 if stateful else 400,
            "Parse error: the body nests deeper than the server reads",
            PARSE_ERROR,
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

    def _header_mismatch(self, request: Request, body: bytes) -> tuple[Response | None, str | None]:
        """A stateless POST's protocol version header must name the version the request's
        ``_meta`` names (absent counts as a mismatch), and its ``Mcp-Method``, ``Mcp-Name`` and
        ``Mcp-Param-*`` headers must agree with the body (``header_check``); a request that
        disagrees is refused with the header-mismatch error before the session reads it. With
        the response refusing it (or None), the version its ``_meta`` names when it is a string
        (for the session, which need not read it again)."""
        if not self._version_keys:
            return None, None  # no revision served has the envelope: nothing to mirror
        try:
            peek = header_check.decode(body)
        except RecursionError:
            return self._too_deep(stateful=False), None
        except (msgspec.DecodeError, ValueError):
            return None, None  # the session answers what cannot be read
        params = peek.params
        meta = params.meta if params is not None else None
        if meta is None:
            return None, None
        version = header_check.version(meta, self._version_keys)
        if version is None:
            return None, None
        headers = request.headers
        header = headers.get(VERSION_HEADER)
        rid = peek.id if type(peek.id) in (str, int) else None
        if header == version:  # a string, then
            # Mcp-Name is checked for the methods of the revision only: one it does not know is
            # answered method-not-found by the session, whatever its headers say.
            method = peek.method
            mirrored = self._mirrored.get(version)
            known = type(method) is str and (
                (mirrored is not None and method in mirrored[0])
                or (self.tasks is not None and method in self.tasks.methods)
            )
            name = header_check.target_name(params)
            wrong = standard_mismatch(headers, method, name, named=known)
            if (
                wrong is None
                and self._designated
                and mirrored is not None
                and method == mirrored[1]
                and params is not None
            ):
                wrong = self._param_mismatch(headers, params.name, params)
            if wrong is None:
                return None, version
            message = f"Header mismatch: {wrong}"
        else:
            message = (
                f"Header mismatch: {VERSION_HEADER} is {header!r} but the request's _meta names "
                f"{version!r}"
            )
        return (
            JSONResponse(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {"code": HEADER_MISMATCH, "message": message},
                },
                status_code=400,
            ),
            None,
        )

    async def _tasks_answer(self, body: bytes, auth: AuthInfo | None) -> Response | None:
        """The tasks layer's answer to a stateless request it owns, or None for the session to
        read it (not a request of the revision the extension extends, or a tool call the
        layer leaves to the handler). A task belongs to the token's principal (docs/auth.md)."""
        assert self.tasks is not None
        from ..tasks import error_object, read_request

        read = read_request(body, self.tasks.speaks)
        if read is None:
            return None
        rid, method, params = read
        try:
            owner = principal(auth)
            stream = self.tasks.listen(rid, params, owner)  # task status notifications
            if stream is not None:
                return EventStream(
                    as_events(stream), media_type="text/event-stream", headers=NO_CACHE
                )
            result = await self.tasks.respond(method, params, owner)
        except ProtocolError as error:
            status = _error_status(error.code, error.message, stateful=False)
            failure = error_object(error)
            return JSONResponse(
                {"jsonrpc": "2.0", "id": rid, "error": failure},
                status_code=status,
                headers={"retry-after": RETRY_AFTER} if status == 503 else None,
            )
        if result is None:
            return None
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": result})

    def _param_mismatch(self, headers: Mapping[str, str], name: Any, params: Any) -> str | None:
        """What is wrong with the ``Mcp-Param-*`` headers of a call of the tool ``name``, by the
        designations of the tool as this server last listed it (a tool it has not listed is not
        checked)."""
        designated = self._designated.get(name) if type(name) is str else None
        if not designated:
            return None
        return param_mismatch(headers, designated, header_check.arguments(params))

    def _learn_tools(self, call: Call, result: Any) -> None:
        """Remember the ``x-mcp-header`` designations of the tools a tool list result names (at
        most ``MAX_DESIGNATED`` tools, the least recently listed forgotten first); a tool whose
        designations are invalid is not checked."""
        tools = msgspec.to_builtins(result).get("tools") if result is not None else None
        for tool in tools if isinstance(tools, list) else ():
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            designated, problem = designations(tool.get("inputSchema"))
            self._designated.pop(tool["name"], None)
            if problem is None and designated:
                self._designated[tool["name"]] = designated
                while len(self._designated) > MAX_DESIGNATED:
                    del self._designated[next(iter(self._designated))]

    # -- the session table ------------------------------------------------------------------------

    async def _lookup(self, sid: str, auth: AuthInfo | None) -> Live | Response | None:
        """The session ``sid`` when the principal of the request's token opened it: another
        principal's is None (404) exactly as an id never issued (docs/auth.md)."""
        owner = principal(auth)
        if self._shared:
            return await self._find(sid, owner)
        live = self.sessions.get(sid)
        if live is not None and live.owner != owner:
            return None  # not touched: another principal does not keep it alive
        return self._session(sid)

    def _session(self, sid: str) -> Live | None:
        """The session named ``sid`` (now used), unless it expired or never was."""
        now = time.monotonic()
        self._expire(now)
        live = self.sessions.get(sid)
        if live is not None:
            self._touch(live, now)
        return live

    def _touch(self, live: Live, now: float) -> None:
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

    def _evict(self, now: float, copies: bool = False) -> bool:
        """Make room for one session by evicting the least recently used one not in use and idle
        for ``session_evictable_after`` (any not in use, when ``copies`` of a shared store's
        sessions are evicted); False when there is none."""
        for _ in range(len(self.sessions)):
            live = next(iter(self.sessions.values()))
            if live.in_use:
                self._touch(live, now)
                continue
            if not copies and now - live.last_used < self.session_evictable_after:
                return False  # the least recently used one is too recent: so are all the others
            self._end(live)
            return True
        return False

    def _register(self, live: Live) -> str | None:
        """Keep ``live`` as a session of its own: its new id, or None when there is no room."""
        now = time.monotonic()
        self._expire(now)
        if len(self.sessions) >= self.max_sessions and not self._evict(now, self._shared):
            return None
        sid = live.sid = secrets.token_hex(16)
        live.last_used = now
        self.sessions[sid] = live
        return sid

    def _end(self, live: Live) -> None:
        """Forget a session here: expired or evicted (with a shared store, only this worker's
        copy, which any worker rebuilds from the store's record while it lasts)."""
        if live.sid is not None:
            self.sessions.pop(live.sid, None)
            if not self._shared:  # its event logs go with it
                self._spawn(self.store.end_session(live.sid))
        self._close(live)

    # -- sessions in a shared store ---------------------------------------------------------------

    async def _find(
        self, sid: str, owner: str | None = None, anyone: bool = False
    ) -> Live | Response | None:
        """The session ``sid`` if the shared store still holds it (its idle time restarted),
        rebuilt from its record when this worker has no copy; None when it ended or expired
        (this worker's copy is dropped then) or another principal than ``owner`` opened it
        (unless ``anyone``), a 503 when there is no room for a copy. A ready copy the store
        confirmed less than ``SESSION_RECHECK`` seconds ago is not asked about."""
        copy = self.sessions.get(sid)
        if copy is not None and not anyone and copy.owner != owner:
            return None  # the copy's owner is the record's: another principal's session
        live = self._session(sid)
        now = time.monotonic()
        if live is not None and live.ready and now - live.checked < SESSION_RECHECK:
            return live
        record = await self.store.load_session(sid, self.session_idle_timeout + SESSION_RECHECK)
        if record is None:
            live = self.sessions.pop(sid, None)
            if live is not None:
                self._close(live)
            return None
        try:
            kept = msgspec.msgpack.decode(record, type=_Record)
        except msgspec.DecodeError:
            _log.error("the record of session %s cannot be read: it is ended", sid)
            return None
        if not anyone and kept.owner != owner:
            return None  # another principal's session: as unknown, and no copy made here
        live = self.sessions.get(sid)  # a request may have rebuilt it while this one waited
        if live is None:
            live = self._rebuild(sid, kept)
            if live is None:
                return None
            now = time.monotonic()
            self._expire(now)
            if len(self.sessions) >= self.max_sessions and not self._evict(now, copies=True):
                return plain_error(
                    503,
                    f"Service Unavailable: this worker holds max_sessions ({self.max_sessions}) "
                    "sessions, all in use; try again later",
                    INTERNAL_ERROR,
                    {"retry-after": RETRY_AFTER},
                )
            live.last_used = now
            self.sessions[sid] = live
        elif kept.ready and not live.ready:
            self._initialized(live)
        live.checked = now
        return live

    def _rebuild(self, sid: str, kept: _Record) -> Live | None:
        """A copy of a session opened on another worker: a new ``ServerSession`` that reads the
        client's initialize again (and its initialized notification, when it came)."""
        session = self.session_class(**self._config)
        session.receive(kept.initialize)
        session.data_to_send()
        if session.state != "initializing":
            _log.error("session %s cannot be rebuilt from its initialize: it is ended", sid)
            return None
        live = Live(session, stateful=True)
        live.sid = sid
        live.owner = kept.owner
        if kept.ready:
            self._initialized(live)
        return live

    def _initialized(self, live: Live) -> None:
        """Tell a rebuilt session what the client told the worker that has its record: the
        initialized notification (its method from the agreed revision's facts)."""
        revision = live.session.revision
        if revision is not None and live.session.state == "initializing":
            method = bindings(revision).FACTS.lifecycle.get("initialized")
            if method is not None:
                live.session.receive(msgspec.json.encode({"jsonrpc": "2.0", "method": method}))
                live.session.data_to_send()
        live.ready = True

    async def _opened(self, live: Live, initialize: bytes) -> bool:
        """Keep a new session's record in the shared store; False (the session forgotten here
        too) when the store holds ``max_sessions`` already."""
        assert live.sid is not None
        record = msgspec.msgpack.encode(_Record(initialize=initialize, owner=live.owner))
        live.record = record
        try:
            await self._start()  # (a POST without a session did not wait for the listener)
            if await self.store.open_session(
                live.sid, record, self.session_idle_timeout, self.max_sessions
            ):
                return True
        except StoreError:
            self.sessions.pop(live.sid, None)
            raise
        self.sessions.pop(live.sid, None)
        return False

    async def _became_ready(self, live: Live, events: list[Event]) -> None:
        """The client's initialized notification came (``events``, or a POST before whose record
        the store failed to save: the session's state says so): every worker's copy learns it
        from the record."""
        if live.session.state != "ready" or live.sid is None:
            return
        kept = msgspec.msgpack.decode(live.record or b"", type=_Record) if live.record else None
        if kept is None:
            found = await self.store.load_session(live.sid, self.session_idle_timeout)
            kept = msgspec.msgpack.decode(found, type=_Record) if found else None
        if kept is not None:
            kept.ready = True
            record = msgspec.msgpack.encode(kept)
            await self.store.save_session(
                live.sid, record, self.session_idle_timeout + SESSION_RECHECK
            )
            live.record = record
        live.ready = True

    async def _forwarded(self, live: Live, body: bytes) -> bool:
        """With a shared store: a client's answer to a request this worker did not send goes to
        the worker that sent it (True: nothing more to do here); a client's notification is also
        told to the other workers, where the request it cancels may run."""
        try:
            peek = _peek_answer.decode(body)
        except (msgspec.DecodeError, ValueError, RecursionError):
            return False  # a batch, or what cannot be read: this worker's session answers it
        assert live.sid is not None
        if peek.method is None and peek.id is not None:
            if not peek.result and not peek.error:
                return False
            if peek.id in live.waiting:
                return False
            await self._publish(live.sid, "answer", body)
            return True
        if isinstance(peek.method, str) and peek.id is None:
            await self._publish(live.sid, "note", body)
        return False

    def _on_message(self, sid: str, data: bytes) -> None:
        """What another worker said about a session this worker may hold a copy of."""
        try:
            note = msgspec.msgpack.decode(data, type=_Note)
        except msgspec.DecodeError:
            self._note(
                "unreadable", f"an unreadable message from another worker about session {sid}"
            )
            return
        if note.origin == self.worker:
            return
        live = self.sessions.get(sid)
        if live is None:
            return
        if note.kind == "ended":
            self.sessions.pop(sid, None)
            self._close(live)
        elif note.kind in ("answer", "note"):
            try:
                peek = read_client.decode(note.data)
            except (msgspec.DecodeError, ValueError, RecursionError):
                return
            if note.kind == "answer" and peek.id not in live.waiting:
                return
            for event in live.session.receive(note.data):
                if isinstance(event, Initialized):
                    live.ready = True
                elif not isinstance(event, RequestReceived):
                    settle(live, event)
            live.session.data_to_send()  # what a copy would say is said by the one asked
        elif note.kind in ("attached", "detached"):
            stream = live.streams.get(note.data.decode(errors="replace"))
            if stream is None:
                return
            if note.kind == "attached":
                stream.remote += 1
                stream.attached()
            else:
                stream.remote = max(0, stream.remote - 1)
                stream.detached()

    # -- resumable event streams ------------------------------------------------------------------

    def _resumable(self, live: Live, stream: Stream, key: str, first: list[Any]) -> None:
        """Make ``stream`` one of the session's logged streams: what is queued on it goes to the
        store's log under ``key``, where its readers (on any worker) read it."""
        stream.key = key
        stream.resume_timeout = self.resume_timeout
        stream.readers = set()
        if key != STANDALONE:  # (a POST's stream has one writer: this worker's pump)
            stream.logged = deque(maxlen=self.store.max_events)
        live.streams[key] = stream
        stream.pump = self._spawn(self._pump(live, stream, first))

    async def _pump(self, live: Live, stream: Stream, batch: list[Any]) -> None:
        """Move what is queued on ``stream`` to its log, in order, until the stream ends; a
        ``Call.close_stream`` on the way stops its readers after what came before it. When the
        store fails, the stream is given up: its requests are cancelled, and its readers here
        end their responses with what was logged and an error answering each (``_failed``)."""
        sid, key = live.sid, stream.key
        assert sid is not None and key is not None
        last: str | None = None  # the position of the last entry appended
        logged = stream.logged if stream.logged is not None else deque(maxlen=0)
        try:
            while True:
                while not stream.queue.empty():
                    batch.append(stream.queue.get_nowait())
                items: list[bytes | None] = []
                ended = False
                for item in batch:
                    if item is CLOSE:
                        if items:
                            positions = await self.store.append(
                                sid, key, items, self.session_idle_timeout
                            )
                            logged.extend(zip(positions, items, strict=True))
                            last, items = positions[-1], []
                        stream.stop_readers("close", last)
                        continue
                    items.append(item)
                    ended = ended or item is None
                if items:
                    positions = await self.store.append(sid, key, items, self.session_idle_timeout)
                    logged.extend(zip(positions, items, strict=True))
                    last = positions[-1]
                if ended:
                    return
                batch = [await stream.queue.get()]
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the store failed: the stream cannot carry anything any more
            _store_failed(f"logging the events of session {sid} stream {key}", error)
            self._failed(stream, batch, error)
            if live.streams.get(key) is stream:  # (the GET stream too: a new one next time)
                del live.streams[key]
        finally:
            if live.streams.get(key) is stream and key != STANDALONE:
                del live.streams[key]

    def _failed(self, stream: Stream, batch: list[Any], error: Exception) -> None:
        """The store failed to log ``stream`` (``batch``: what the pump held): it is given up.
        Each request it owed an answer (still being handled, or answered by a message not
        logged) gets a JSON-RPC error naming the store, which this worker's readers send after
        what was logged; its handlers are cancelled, its requests to the client fail."""
        while not stream.queue.empty():
            batch.append(stream.queue.get_nowait())
        kept = {id(message) for _, message in stream.logged or ()}
        owed = dict.fromkeys(rid for rid in stream.pending if type(rid) in (str, int))
        for message in batch:
            if not isinstance(message, bytes) or not message or id(message) in kept:
                continue
            try:
                peek = read_client.decode(message)
            except (msgspec.DecodeError, ValueError, RecursionError):
                continue
            if peek.method is None and type(peek.id) in (str, int):  # an answer, not logged
                owed[peek.id] = None
        why, data = _store_failure(error)
        message = (
            f"Internal error: {why} while this request's answer was being logged: the request "
            "was given up, and no event after the last one sent can be resumed; send it again"
        )
        stream.failure = [
            ProtocolError(INTERNAL_ERROR, message, data, rid).to_json() for rid in owed
        ]
        stream.given_up = True
        stream.stop_readers("failed")
        stream.abandon(" (the event log failed)")

    def _attach(self, live: Live, key: str, local: Stream | None) -> asyncio.Future[Stop]:
        """Count a new reader of stream ``key`` (``local``: its ``Stream`` on this worker, if
        any) before its response starts, so that a ``close_stream`` already on its way stops it;
        its "stop now" future."""
        assert live.sid is not None
        stop: asyncio.Future[Stop] = asyncio.get_running_loop().create_future()
        live.readers.add(stop)
        before = live.reading.get(key)
        if before is not None and not before.done():  # one reader a stream: the new one reads
            before.set_result(Stop("end"))
        live.reading[key] = stop
        if local is not None:
            local.readers = local.readers or set()
            local.readers.add(stop)
            local.attached()
        if self._shared:
            self._spawn(self._publish(live.sid, "attached", key.encode()))
        return stop

    def _release(
        self, live: Live, key: str, local: Stream | None, stop: asyncio.Future[Stop]
    ) -> None:
        """The reader of ``stop`` is gone (once, however its response ended)."""
        if stop not in live.readers:
            return
        live.readers.discard(stop)
        if live.reading.get(key) is stop:
            del live.reading[key]
        if local is not None and local.readers is not None:
            local.readers.discard(stop)
            if live.standalone is local and not local.readers:
                live.standalone = None
                self._touch(live, time.monotonic())
            local.detached()
        if self._shared and live.sid is not None:
            self._spawn(self._publish(live.sid, "detached", key.encode()))

    def _stream_response(
        self,
        live: Live,
        key: str,
        after: str | None,
        local: Stream | None,
        entries: list[Entry] | None = None,
        greet: bool = False,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The event-stream response of a reader of stream ``key`` from ``after`` on."""
        stop = self._attach(live, key, local)
        return EventStream(
            self._events(live, key, after, stop, entries, greet, local),
            media_type="text/event-stream",
            headers={**(headers or {}), "cache-control": "no-cache"},
            on_close=functools.partial(self._release, live, key, local, stop),
        )

    async def _events(
        self,
        live: Live,
        key: str,
        after: str | None,
        stop: asyncio.Future[Stop],
        entries: list[Entry] | None = None,
        greet: bool = False,
        local: Stream | None = None,
    ) -> AsyncIterator[bytes]:
        """The server-sent events of one stream's log from position ``after`` on, as they come,
        until the stream ends, its session ends (``stop``: "end"), or its handler closes the
        response (``stop``: "close"); ``greet``: a comment first, so that the response starts
        at once. When the store fails, a reader of a POST's stream on the worker that logs it
        (``local``) goes on with what that worker logged, and once the store failed to log it
        (``stop``: "failed"), ends with the errors answering what the stream owed; any other
        reader ends, and its client may resume the stream later."""
        sid = live.sid
        assert sid is not None
        prefix = key.encode() + b":"
        cursor = after
        read: asyncio.Future[list[Entry] | None] | None = None
        if greet:
            yield b": stream open\n\n"
        try:
            while True:
                if entries is None:
                    read = asyncio.ensure_future(self.store.read(sid, key, cursor, _READ_BLOCK))
                    await asyncio.wait((read, stop), return_when=asyncio.FIRST_COMPLETED)
                    if read.done():
                        failed = read.exception()
                        if failed is None:
                            entries = read.result()
                        elif isinstance(failed, NotIssued):  # the log was dropped, and begun again
                            entries = None
                        elif local is None or local.logged is None:
                            raise failed
                        else:  # follow what this worker logged, from memory
                            _store_failed(
                                f"reading the events of session {sid} stream {key}", failed
                            )
                            entries = _logged_after(local, cursor)
                            if entries is None:
                                return  # no longer remembered that far: the client resumes
                            if not entries:
                                await asyncio.wait((stop,), timeout=_REREAD)
                    else:
                        read.cancel()
                        # (a read failing as it is cancelled: what stopped it says what follows)
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await read
                        entries = []
                    if entries is None:
                        _log.warning(
                            "session %s stream %s: the events after %s are no longer kept, so "
                            "its reader is ended",
                            sid,
                            key,
                            cursor,
                        )
                        return
                for position, message in entries:
                    if message is None:  # the stream ended
                        return
                    cursor = position
                    yield self._event(prefix, position, message)
                    if stop.done() and stop.result() == ("close", position):
                        break  # what follows the close is for the client's next GET
                entries = None
                if stop.done():
                    why, until = stop.result()
                    if why == "failed" and local is not None:
                        for event in self._after_failure(local, prefix, cursor):
                            yield event
                    if why != "close":
                        return
                    # Closed for polling: what was logged before the close, then the retry.
                    while cursor != until:
                        more = await self.store.read(sid, key, cursor)
                        if not more:
                            break
                        for position, message in more:
                            if message is None:
                                return
                            cursor = position
                            yield self._event(prefix, position, message)
                            if position == until:
                                break
                    yield b"retry: %d\n\n" % self.retry_ms
                    return
        except StoreError as error:  # the client may resume the stream later
            _store_failed(f"reading the events of session {sid} stream {key}", error)
        except Exception:  # a bug of ours: the client may resume the stream later
            _log.exception("reading the events of session %s stream %s", sid, key)
        finally:
            if read is not None and not read.done():
                read.cancel()  # the response ended while it waited
                read.add_done_callback(quiet)

    def _after_failure(self, local: Stream, prefix: bytes, cursor: str | None) -> list[bytes]:
        """What a reader at ``cursor`` of a stream the store failed to log still sends: what this
        worker logged after the cursor, then the errors answering what the stream owed (these
        are in no log: events without an id)."""
        events = []
        for position, message in _logged_after(local, cursor) or ():
            if message is None:
                break
            events.append(self._event(prefix, position, message))
        for answer in local.failure or ():
            events.append(b"event: message\ndata: " + answer + b"\n\n")
        return events

    # -- handlers ---------------------------------------------------------------------------------

    def _observe(
        self, live: Live, event: Event, stream: Stream, inline: bool = False
    ) -> _Inline | None:
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
                handler = _Inline(call, kind)
                live.tasks[event.id] = stream.handlers[event.id] = handler  # type: ignore[assignment]
                return handler
            task = asyncio.get_running_loop().create_task(self._run(live, stream, call))
            live.tasks[event.id] = stream.handlers[event.id] = task
        else:
            settle(live, event)
        return None

    async def _run(self, live: Live, stream: Stream, call: Call) -> None:
        session = live.session
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
            except ProtocolError as error:
                answer_error(session, call.id, INTERNAL_ERROR, error.message, None)
        live.tasks.pop(call.id, None)
        if live.stateful:
            self._touch(live, time.monotonic())  # idle from the end of its last request
        stream.put(session.data_to_send())
        stream.done(call.id)
        if not live.stateful and not live.tasks:
            session.release()  # every request answered: its codecs may serve the next POST

    def _direct(self, live: Live, direct: list[bytes], headers: dict[str, str]) -> Response:
        """The answer to a POST that started no handler: the session's own reply, or 202."""
        if not direct:
            return Response(status_code=202, headers=headers)
        if len(direct) == 1:
            return _json_answer(direct[0], live.stateful, headers)
        status = 200 if live.stateful else _answer_status(direct[0], False)  # (a batch)
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
        if isinstance(first, bytes) and stream.closed and stream.queue.qsize() == 1:
            return _json_answer(first, live.stateful, headers)  # only the end of the stream is left
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

    def _event(self, prefix: bytes, position: str, message: bytes) -> bytes:
        """One server-sent event of a logged stream (empty: the priming event, with the retry
        delay)."""
        head = b"id: " + prefix + position.encode()
        if not message:
            return head + b"\nretry: %d\ndata: \n\n" % self.retry_ms
        return head + b"\nevent: message\ndata: " + message + b"\n\n"

    # -- GET and DELETE ---------------------------------------------------------------------------

    async def _get(self, request: Request, auth: AuthInfo | None = None) -> Response:
        if "text/event-stream" not in media_types(request.headers.get("accept", "")):
            return plain_error(406, "Not Acceptable: a GET stream needs Accept: text/event-stream")
        sid = request.headers.get(SESSION_HEADER)
        if sid is None:
            return plain_error(405, "no MCP session for a standalone stream")
        found = await self._lookup(sid, auth)
        if isinstance(found, Response):
            return found
        if found is None:
            return plain_error(404, f"Not Found: no MCP session {sid!r}")
        live = found
        last = request.headers.get("last-event-id")
        if last is not None:
            return await self._resume(live, last)
        if live.standalone is not None:
            return plain_error(409, "Conflict: this session already has a GET stream")
        stream = self._standalone(live)
        after = await self.store.last(sid, STANDALONE)  # only what comes from now on
        if live.standalone is not None:
            return plain_error(409, "Conflict: this session already has a GET stream")
        live.standalone = stream
        return self._stream_response(live, STANDALONE, after, stream, greet=True)

    async def _resume(self, live: Live, last: str) -> Response:
        """A GET with ``Last-Event-ID``: the rest of the stream that event belongs to."""
        assert live.sid is not None
        key, sep, position = last.partition(":")
        if not (sep and position and len(last) <= 64 and _stream_key(key)):
            return plain_error(
                400, f"Bad Request: Last-Event-ID {last[:64]!r} is no event id of this server"
            )
        try:
            entries = await self.store.read(live.sid, key, position)
        except NotIssued:
            return plain_error(
                400, f"Bad Request: Last-Event-ID {last[:64]!r} is no event id of this server"
            )
        if entries is None:
            return plain_error(
                410,
                f"Gone: the events after {last!r} are no longer kept (max_events, "
                "event_max_age), or this session has no such stream",
            )
        local = live.streams.get(key)
        if key == STANDALONE:
            if live.standalone is not None:
                return plain_error(409, "Conflict: this session already has a GET stream")
            local = live.standalone = self._standalone(live)
        return self._stream_response(live, key, position, local, entries)

    def _standalone(self, live: Live) -> Stream:
        """The session's GET stream on this worker: what belongs to no request goes to its log
        through it (read by a GET stream open on any worker)."""
        stream = live.streams.get(STANDALONE)
        if stream is None:
            stream = Stream(max_queued=self.max_queued)
            stream.pending.add(object())  # open until the session closes
            self._resumable(live, stream, STANDALONE, [])
        return stream

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

    async def _owner_of(self, sid: str) -> tuple[str | None, ...]:
        """(the principal that opened session ``sid``,), or () when there is no such session."""
        live = self.sessions.get(sid)
        if live is not None or not self._shared:
            return () if live is None else (live.owner,)
        record = await self.store.load_session(sid, self.session_idle_timeout + SESSION_RECHECK)
        try:
            return () if record is None else (msgspec.msgpack.decode(record, type=_Record).owner,)
        except msgspec.DecodeError:
            return ()

    def _close(self, live: Live) -> None:
        """The session ended here: its handlers are cancelled, its readers end, what its
        streams awaited from the client raises ``ConnectionError``, and ``on_close`` hears."""
        if self.on_close is not None and live.sid is not None:
            self.on_close(live.sid)
        for task in live.tasks.values():
            task.cancel()
        for reader in live.readers:
            if not reader.done():
                reader.set_result(Stop("end"))
        for stream in list(live.streams.values()):
            stream.abandon()
            if stream.orphaned is not None:
                stream.orphaned.cancel()
                stream.orphaned = None
            if stream.pump is not None:
                stream.pump.cancel()
        live.streams.clear()
        live.standalone = None

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


def _store_failure(error: Exception) -> tuple[str, dict[str, str]]:
    """What an error answer says of a store that failed (``error``), and its ``data``."""
    if isinstance(error, StoreError):
        return f"the session store failed ({error})", {
            "reason": "store failed",
            "store": error.store,
        }
    return f"the session store failed ({error!r})", {"reason": "store failed"}


def _logged_after(stream: Stream, cursor: str | None) -> list[Entry] | None:
    """What the pump of ``stream`` logged after position ``cursor`` (None: from the start), as
    this worker remembers it; None when it no longer remembers that far back."""
    logged = list(stream.logged or ())
    if cursor is None:
        kept = stream.logged
        return logged if kept is None or len(logged) < (kept.maxlen or 0) else None
    for at, (position, _) in enumerate(logged):
        if position == cursor:
            return logged[at + 1 :]
    return None


def _stream_key(key: str) -> bool:
    """Whether ``key`` names a stream in this server's event ids."""
    return key == STANDALONE or (len(key) == 16 and all(c in "0123456789abcdef" for c in key))


_WAITS_MAX = 256  # kinds of request remembered to wait (names come from clients: bounded)


class _Inline:
    """The handler of a POST's one request, run in the request's task rather than a task of its
    own (``StreamableHTTPServer._inline``): ``asyncio.current_task()`` is that task all along,
    so a timeout or task group the handler enters cancels the handler, as it would in a task of
    its own. What else cancels it is what cancelled its task before (``cancel``: the client
    cancelled the request or left, the session ended): what it awaits is cancelled, as
    ``Task.cancel`` does, or when it awaits nothing, a cancellation is thrown in at its next
    step.

    The request's task waits on a future of its own (``_Relay``) for each of the handler's, so
    that a cancellation of that task by another task (an in-process client leaving, a server
    shutting down) never reaches what the handler awaits: the response ends, and the handler is
    handed over to a task of its own, where it goes on as it did when it had one from the start.
    A cancellation requested outside any task (a timer's or a callback's, as a timeout or a
    task group requests it) reaches the handler."""

    __slots__ = ("call", "kind", "run", "step", "cancelled", "later")

    def __init__(self, call: Call, kind: tuple[str, str | None]) -> None:
        self.call = call
        self.kind = kind  # its method, and the name its params give (a tool's)
        self.run: Coroutine[Any, Any, None] | None = None  # (set once it waits; None once done)
        self.step: Any = None  # what it awaits: a future, or None for a bare yield
        self.cancelled = False  # a cancellation to throw in at its next step
        self.later = False  # a cancellation for what it awaits after what it hears now

    def cancel(self, msg: Any = None) -> bool:
        if self.run is None:
            return False  # it has not waited yet, or it is done: nothing to cancel
        step = self.step
        if not asyncio.isfuture(step):
            self.cancelled = True  # a bare yield: thrown in as it resumes
        elif step.done():
            # What it awaited came first (a task would have been woken before this): it hears
            # that, and what it awaits next is cancelled.
            self.later = True
        else:
            step.cancel(msg)
        return True

    def __await__(self) -> Generator[Any, Any, None]:
        """The handler, on from where it waits, in the task awaiting this."""
        run = self.run
        assert run is not None
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        try:
            while True:
                step = self.step
                relay: _Relay | None = None
                if step is not None:
                    if not asyncio.isfuture(step) or not step._asyncio_future_blocking:
                        self.step = run.throw(RuntimeError(f"bad yield: {step!r}"))
                        continue
                    step._asyncio_future_blocking = False  # as a task takes it
                    relay = _Relay(loop=loop)
                    relay.owner = task
                    step.add_done_callback(relay.wake)
                    relay._asyncio_future_blocking = True
                try:
                    yield relay
                except GeneratorExit:
                    run.close()
                    raise
                except BaseException as error:
                    if relay is None or not relay.by_task:  # the handler's own: it hears it
                        self.step = run.throw(error)
                        continue
                    # Another task cancelled this one: the response ends, the handler goes on.
                    step.remove_done_callback(relay.wake)
                    step._asyncio_future_blocking = True  # (as it yielded it)
                    loop.create_task(_handed_over(self))
                    run = None
                    raise
                if self.cancelled:
                    self.cancelled = False
                    self.step = run.throw(asyncio.CancelledError())
                else:
                    self.step = run.send(None)
                if self.later:
                    self.later = False
                    self.cancel()
        except StopIteration:
            return
        finally:
            if run is not None:
                self.run = None


class _Relay(asyncio.Future[None]):
    """What the request's task (``owner``) awaits for one of its inline handler's futures: done
    when that one is; cancelled with the task, saying whether another task asked (``by_task``)."""

    owner: asyncio.Task[Any] | None = None
    by_task = False

    def wake(self, step: asyncio.Future[Any]) -> None:
        if not self.done():
            self.set_result(None)

    def cancel(self, msg: Any = None) -> bool:
        self.by_task = asyncio.current_task() not in (None, self.owner)
        return super().cancel(msg)


async def _handed_over(inline: _Inline) -> None:
    await inline


class _Handled(Response):
    """The response to a POST whose one handler (``_Inline``) waits: a task writes the response
    as ``respond`` makes it, while the request's task runs the handler to its end."""

    def __init__(self, respond: Coroutine[Any, Any, Response], inline: _Inline) -> None:
        self.status_code = 200
        self.background = None
        self._make = respond
        self._inline = inline

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        writer = asyncio.get_running_loop().create_task(self._write(scope, receive, send))
        try:
            await self._inline
        except BaseException:
            writer.cancel()
            raise
        await writer

    async def _write(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self._make
        await response(scope, receive, send)
