"""HTTP+SSE for servers (the HTTP transport of MCP 2024-11-05): an ASGI application serving one
``ServerSession`` per event stream.

``SSEServer(handler, ...)`` answers ``GET /sse`` with an event stream whose first event,
``endpoint``, names the URL to POST messages to (``/messages?session_id=...``). Every POST is
answered 202 at once; everything the server sends, answers included, travels on the event stream
as ``message`` events. Requests go to ``handler(call)`` with the same ``Call`` as
``StreamableHTTPServer`` (``notify``, ``progress``, ``request``), whose messages travel on that
stream too. The session lives as long as its stream: when the stream closes (the client went
away, the session was idle too long, or the client stopped reading) the session ends and its
requests in flight are cancelled.

Every amount a client can make grow is bounded by an option with a default (docs/http.md lists
them with the answer past each): sessions, the size and the time of a POST body, the messages
waiting on one stream, requests in flight, idle time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncGenerator, Callable, Iterable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..errors import INTERNAL_ERROR, ProtocolError
from ..events import Event, RequestReceived
from ..packages import bindings
from ..session import ServerSession

# Shared with the Streamable HTTP server (_http_calls): the handler's view of a request (Call),
# the session record it reads (Live), how the server asks the client something (ask), how an
# answer or a cancellation settles what awaits it (settle); a stream's queue and the requests sent
# on it (Stream), the Host and Origin check (host_allowed), the defaults of the limits (one value
# for both transports), and the small helpers around them.
from ._http_answers import plain_error
from ._http_calls import Call, Handler, Live, answer_error, ask, read_client, settle
from ._http_head import LOCAL_HOSTS, host_allowed, media_types
from ._http_streams import Stream
from .http_limits import (
    BODY_TIMEOUT,
    MAX_BODY_SIZE,
    MAX_IN_FLIGHT,
    MAX_QUEUED,
    MAX_SESSIONS,
    SESSION_EVICTABLE_AFTER,
    SESSION_IDLE_TIMEOUT,
    check_limits,
    too_many_in_flight,
)

__all__ = ["SSEServer"]

log = logging.getLogger(__name__)


class _Overrun(ConnectionError):
    """A stream's queue is full: the client is not reading it."""


class _Feed(Stream):
    """A session's event stream: the queue its response body reads, bounded by ``max_queued``.
    Unlike a POST's stream it is the session's only way to the client, so a full queue ends the
    session (``overrun``) and a closed one refuses more with ``ConnectionError``."""

    def __init__(self, max_queued: int, last: float = 0.0) -> None:
        super().__init__(max_queued=max_queued)
        # Ends the session when the queue is full, given the messages that did not fit.
        self.overrun: Callable[[list[bytes]], None] | None = None
        self.last = last  # when a message last went either way (the idle clock)

    def put(self, messages: Iterable[bytes]) -> None:
        batch = list(messages)
        for index, message in enumerate(batch):
            if self.closed:
                raise ConnectionError("the session's event stream is closed")
            if self.qsize() >= self.max_queued:
                if self.overrun is not None:
                    self.overrun(batch[index:])
                raise _Overrun(
                    f"the client is not reading its event stream: {self.max_queued} messages "
                    "are waiting (max_queued)"
                )
            self.put_nowait(message)
            self.last = asyncio.get_running_loop().time()


class _SSESession(Live):
    """One HTTP+SSE session: a ``ServerSession``, its stream, the handlers running for it."""

    def __init__(self, session: ServerSession, sid: str, feed: _Feed) -> None:
        super().__init__(session, stateful=True)
        self.sid = sid
        self.feed = feed
        self.standalone = feed  # everything travels on the one stream
        self.ended = False

    def busy(self) -> bool:
        """A request in flight either way: the session is in use, however quiet."""
        return bool(self.tasks or self.waiting)


class SSEServer:
    """An ASGI application serving MCP over HTTP+SSE: ``GET sse_path`` opens a session's event
    stream, ``POST messages_path?session_id=...`` carries the client's messages.

    ``revisions`` (by default every released revision with the initialize handshake: the
    transport carries sessions), ``capabilities``, ``info`` and ``instructions`` configure every
    ``ServerSession``. ``allowed_hosts`` are the host names accepted in ``Host`` and ``Origin``
    (the loopback names by default). ``routes`` are the two routes, to mount beside others (a
    Streamable HTTP endpoint) in one application.

    The limits, each past its bound answered as docs/http.md says: ``max_sessions`` sessions at
    once (1024; past it a session quiet for ``session_evictable_after`` seconds (60) with nothing
    in flight makes room, else 503); ``session_idle_timeout`` seconds without a message either
    way and nothing in flight end a session (1800); ``max_body_size`` bytes per POST (4 MiB, 413)
    read within ``body_timeout`` seconds (30, 408); ``max_queued`` messages waiting on one stream
    (1000; past it the client is not reading, and the session ends); ``max_in_flight`` requests
    of one session handled at once (128; past it answered with error -32603).
    ``ping_interval`` is the time between keep-alive comments on a quiet stream (15 s).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        revisions: Iterable[str] | None = None,
        capabilities: Any = None,
        info: Any = None,
        instructions: str | None = None,
        sse_path: str = "/sse",
        messages_path: str = "/messages",
        allowed_hosts: Iterable[str] = LOCAL_HOSTS,
        max_sessions: int = MAX_SESSIONS,
        session_idle_timeout: float = SESSION_IDLE_TIMEOUT,
        session_evictable_after: float = SESSION_EVICTABLE_AFTER,
        max_body_size: int = MAX_BODY_SIZE,
        body_timeout: float = BODY_TIMEOUT,
        max_queued: int = MAX_QUEUED,
        max_in_flight: int = MAX_IN_FLIGHT,
        ping_interval: float = 15.0,
        on_event: Callable[[ServerSession, Event], None] | None = None,
        session_class: Callable[..., ServerSession] = ServerSession,
        on_close: Callable[[str], None] | None = None,
    ) -> None:
        check_limits(
            {
                "max_sessions": max_sessions,
                "session_idle_timeout": session_idle_timeout,
                "max_body_size": max_body_size,
                "body_timeout": body_timeout,
                "max_queued": max_queued,
                "max_in_flight": max_in_flight,
                "ping_interval": ping_interval,
            },
            {"session_evictable_after": session_evictable_after},
        )
        self.handler = handler
        self._config: dict[str, Any] = {
            "capabilities": capabilities,
            "info": info,
            "instructions": instructions,
            "revisions": _session_revisions(revisions),
        }
        self.revisions: tuple[str, ...] = self._config["revisions"]
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        self.max_sessions = max_sessions
        self.session_idle_timeout = session_idle_timeout
        self.session_evictable_after = session_evictable_after
        self.max_body_size = max_body_size
        self.body_timeout = body_timeout
        self.max_queued = max_queued
        self.max_in_flight = max_in_flight
        self.ping_interval = ping_interval
        self.on_event = on_event
        self.session_class = session_class  # builds each ServerSession from the config
        self.on_close = on_close  # told the id of each session that ends
        self.messages_path = messages_path
        self.sessions: dict[str, _SSESession] = {}
        self.routes = [
            Route(sse_path, self._get, methods=["GET"]),
            Route(messages_path, self._post, methods=["POST"]),
        ]
        self.app = Starlette(routes=self.routes)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)

    # -- GET: the event stream --------------------------------------------------------------------

    async def _get(self, request: Request) -> Response:
        if request.method != "GET":  # a HEAD would open a session nobody can read
            return plain_error(405, "Method Not Allowed: the event stream is opened with GET")
        if not host_allowed(request.headers, self.allowed_hosts):
            return plain_error(403, "Forbidden: Host or Origin is not an allowed host")
        if not {"text/event-stream", "text/*", "*/*"} & media_types(
            request.headers.get("accept", "*/*")
        ):
            return plain_error(406, "Not Acceptable: the stream needs Accept: text/event-stream")
        now = asyncio.get_running_loop().time()
        if len(self.sessions) >= self.max_sessions and not self._evict(now):
            response = plain_error(
                503,
                f"Service Unavailable: {self.max_sessions} sessions are open and none is idle "
                "(max_sessions)",
                INTERNAL_ERROR,
            )
            response.headers["retry-after"] = str(max(1, round(self.session_evictable_after)))
            return response
        sid = secrets.token_hex(16)
        feed = _Feed(max_queued=self.max_queued, last=now)
        live = _SSESession(self.session_class(**self._config), sid, feed)
        feed.overrun = lambda rest: self._overrun(live, rest)
        self.sessions[sid] = live
        endpoint = f"{request.scope.get('root_path', '')}{self.messages_path}?session_id={sid}"
        return _SessionStream(
            self._events(live, endpoint),
            lambda: self._end(live),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    def _evict(self, now: float) -> bool:
        """Make room by ending the session quiet longest, when one has nothing in flight and has
        been quiet for ``session_evictable_after`` seconds; False when none may go."""
        quiet = [s for s in self.sessions.values() if not s.busy()]
        if not quiet:
            return False
        oldest = min(quiet, key=lambda s: s.feed.last)
        if now - oldest.feed.last < self.session_evictable_after:
            return False
        self._end(oldest)
        return True

    async def _events(self, live: _SSESession, endpoint: str) -> AsyncGenerator[bytes, None]:
        """The body of a session's stream: the endpoint, then every message, with keep-alive
        comments while quiet; ending it (for whatever reason) ends the session."""
        loop = asyncio.get_running_loop()
        queue = live.feed  # (its own queue)
        try:
            yield b"event: endpoint\ndata: " + endpoint.encode() + b"\n\n"
            wrote = loop.time()
            while True:
                deadline = wrote + self.ping_interval
                if not live.busy():  # only then may it become idle
                    deadline = min(deadline, live.feed.last + self.session_idle_timeout)
                try:  # (asyncio.timeout: on 3.11 wait_for may drop a cancellation)
                    async with asyncio.timeout(max(deadline - loop.time(), 0)):
                        message = await queue.get()
                except TimeoutError:
                    now = loop.time()
                    if not live.busy() and now - live.feed.last >= self.session_idle_timeout:
                        return
                    if now - wrote >= self.ping_interval:
                        wrote = now
                        yield b": ping\n\n"
                    continue
                if message is None:
                    return
                wrote = loop.time()
                yield b"event: message\ndata: " + message + b"\n\n"
        finally:
            self._end(live)

    # -- POST: the client's messages --------------------------------------------------------------

    async def _post(self, request: Request) -> Response:
        if not host_allowed(request.headers, self.allowed_hosts):
            return plain_error(403, "Forbidden: Host or Origin is not an allowed host")
        sid = request.query_params.get("session_id")
        if sid is None:
            return plain_error(400, "Bad Request: the session_id query parameter is missing")
        live = self.sessions.get(sid)
        if live is None:
            return _gone(sid)
        if media_types(request.headers.get("content-type", "")) != {"application/json"}:
            return plain_error(415, "Unsupported Media Type: Content-Type must be application/json")
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await _read_body(request, self.max_body_size)
        except TimeoutError:
            return _closing(
                plain_error(
                    408,
                    f"Request Timeout: the body did not arrive within {self.body_timeout} s "
                    "(body_timeout)",
                )
            )
        if body is None:
            # Not closing the connection: the HTTP server discards the rest of the body (uvicorn
            # until its keep-alive timeout), where closing with the body unread could reset the
            # connection before the client has read this answer.
            return plain_error(
                413,
                f"Payload Too Large: a message may have at most {self.max_body_size} bytes "
                "(max_body_size)",
            )
        if live.ended:  # it ended while the body was read
            return _gone(sid)
        try:
            self._receive(live, body)
        except Exception:  # a bug (of an on_event hook, say): logged, answered, not a traceback
            log.exception("SSEServer: reading a POST of session %s failed", sid)
            return plain_error(500, "Internal error while reading the message", INTERNAL_ERROR)
        return Response(b"Accepted", status_code=202, media_type="text/plain")

    def _receive(self, live: _SSESession, body: bytes) -> None:
        """Give the session one POST's message; what it answers itself goes on the stream."""
        live.feed.last = asyncio.get_running_loop().time()
        session = live.session
        events = session.receive(body)
        with contextlib.suppress(ConnectionError):  # an overrun ended the session: said on it
            live.feed.put(session.data_to_send())
            for event in events:
                self._observe(live, event)

    def _observe(self, live: _SSESession, event: Event) -> None:
        """Act on one event of a POST: start a handler, settle an awaited client answer."""
        if self.on_event is not None:
            self.on_event(live.session, event)
        if isinstance(event, RequestReceived):
            if len(live.tasks) >= self.max_in_flight:
                busy = too_many_in_flight(event.id, self.max_in_flight)
                answer_error(live.session, event.id, busy.code, busy.message, busy.data)
                live.feed.put(live.session.data_to_send())
                return
            call = Call(live, live.feed, event)
            live.tasks[event.id] = asyncio.ensure_future(self._run(live, call))
        else:
            settle(live, event)

    async def _run(self, live: _SSESession, call: Call) -> None:
        session = live.session
        try:
            result = await self.handler(call)
        except asyncio.CancelledError:  # the client cancelled it, or the session ended
            live.tasks.pop(call.id, None)
            return
        except ProtocolError as error:
            answer_error(session, call.id, error.code, error.message, error.data)
        except Exception as error:  # a handler's bug is the client's internal error, not a crash
            if live.ended:  # it failed talking on a stream that is gone: nobody to answer
                live.tasks.pop(call.id, None)
                return
            log.exception("SSEServer: the handler of %r failed", call.method)
            answer_error(session, call.id, INTERNAL_ERROR, f"Internal error: {error}", None)
        else:
            try:
                session.respond(call.id, result)
            except ProtocolError as error:
                answer_error(session, call.id, INTERNAL_ERROR, error.message, None)
        live.tasks.pop(call.id, None)
        with contextlib.suppress(ConnectionError):  # the session ended meanwhile
            live.feed.put(session.data_to_send())

    # -- the end of a session ---------------------------------------------------------------------

    def _end(self, live: _SSESession) -> None:
        """End a session: forget it, cancel its handlers, fail the requests it awaits from the
        client, and close its stream (what is queued is still written)."""
        if live.ended:
            return
        live.ended = True
        if self.sessions.get(live.sid or "") is live:
            del self.sessions[live.sid or ""]
        if self.on_close is not None and live.sid is not None:
            self.on_close(live.sid)
        for task in list(live.tasks.values()):
            task.cancel()
        live.feed.abandon()
        live.feed.closed = True
        live.feed.put_nowait(None)

    def _overrun(self, live: _SSESession, rest: list[bytes]) -> None:
        """The client stopped reading: what waits is still written, what did not fit is not, and
        every request of the client still owed an answer (in flight, or answered by a message
        that did not fit) is answered with an error saying why; then the session ends."""
        queue = live.feed  # (its own queue)
        owed: dict[Any, None] = dict.fromkeys(live.tasks)
        for message in rest:
            try:
                peek = read_client.decode(message)
            except (msgspec.DecodeError, ValueError):
                continue
            if peek.method is None and type(peek.id) in (str, int):  # a response
                owed[peek.id] = None
        why = (
            f"Session closed: the client did not read its event stream and "
            f"{self.max_queued} messages were waiting (max_queued)"
        )
        data = {"limit": "max_queued", "max": self.max_queued}
        # Built here, not by the session: it counts some of these requests answered already,
        # and nothing follows on this session. They go past the bound: at most one per request
        # in flight (max_in_flight) and one per message of the batch that did not fit.
        for rid in owed:
            queue.put_nowait(ProtocolError(INTERNAL_ERROR, why, data, rid).to_json())
        self._end(live)

    # -- what the server sends of its own ---------------------------------------------------------

    async def request(self, sid: str, method: str, params: Any = None) -> Any:
        """Send a request of the server's own (``roots/list``, a sampling) on session ``sid``'s
        stream and await the client's result, of the generated result class of the session's
        revision.

        An error response raises ``ProtocolError``; a request the session cannot send (the client
        did not advertise its capability) raises it before anything is sent. ``LookupError`` when
        there is no such session; ``ConnectionError`` when the stream closes before the answer.
        """
        live = self.sessions.get(sid)
        if live is None:
            raise LookupError(f"no MCP session {sid!r} to send a request on")
        return await ask(live, live.feed, method, params)

    def notify(self, sid: str, method: str, params: Any = None) -> bool:
        """Send a notification on session ``sid``'s stream; False when there is no such session
        (the notification is then not sent)."""
        live = self.sessions.get(sid)
        if live is None:
            return False
        live.session.notify(method, params)
        try:
            live.feed.put(live.session.data_to_send())
        except ConnectionError:
            return False
        return True

    def close(self, sid: str) -> bool:
        """End session ``sid`` (its stream closes); False when there is no such session."""
        live = self.sessions.get(sid)
        if live is None:
            return False
        self._end(live)
        return True


class _SessionStream(StreamingResponse):
    """A session's event stream, whose session ends however the response ends: the client
    leaving while a message is being written included (the generator, stopped at a ``yield``,
    would otherwise run its clean-up only when collected)."""

    def __init__(
        self, events: AsyncGenerator[bytes, None], end: Callable[[], None], **kwargs: Any
    ) -> None:
        super().__init__(events, **kwargs)
        self._generator = events
        self._end = end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._end()
            await self._generator.aclose()


def _session_revisions(revisions: Iterable[str] | None) -> tuple[str, ...]:
    """The revisions to serve: those given, or every released one; each must open a session
    with initialize, which is what this transport carries."""
    offered = ServerSession(revisions=revisions) if revisions is not None else ServerSession()
    sessionless = [r for r in offered.revisions if bindings(r).FACTS.handshake != "initialize"]
    if revisions is None:
        return tuple(r for r in offered.revisions if r not in sessionless)
    if sessionless:
        raise ValueError(
            f"HTTP+SSE carries sessions opened by initialize; {', '.join(sessionless)} open "
            "none (serve them with StreamableHTTPServer)"
        )
    return offered.revisions


async def _read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it is longer than ``limit`` bytes (read no further)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _gone(sid: str) -> Response:
    return plain_error(404, f"Not Found: no MCP session {sid!r} (it ended, or never was)")


def _closing(response: Response) -> Response:
    """A refusal before the body was read whole: the connection is closed after it, so what is
    left of the body is never read."""
    response.headers["connection"] = "close"
    return response
