"""HTTP+SSE for clients (the HTTP transport of MCP 2024-11-05): a ``ClientSession`` driven over
HTTP (``http_wire``, as ``StreamableHTTPClient``), the event stream read by ``sse_events``; and
``connect_http``, which picks Streamable HTTP or HTTP+SSE the way the 2025-03-26 specification's
backwards-compatibility section says.

``SSEClient(url, session)`` GETs ``url``, an event stream whose first event, ``endpoint``, names
the URL to POST messages to (it must be on the same origin as ``url``). Each message the session
queues is POSTed there; everything the server sends, answers included, arrives on the stream and
is fed to the session. Requests from the server are answered by ``on_request(event)``, an async
function returning the result, as with ``StreamableHTTPClient``. When the stream ends, every
request still waiting gets error -32000 saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urljoin, urlsplit

import msgspec

from ..errors import CONNECTION_CLOSED, ProtocolError
from ..events import (
    ANSWERS,
    ErrorReceived,
    Event,
    MessageRejected,
    Negotiated,
    NegotiationFailed,
    RequestReceived,
    ResultReceived,
    TaskCreated,
)
from ..session import ClientSession
from ._answer import MAX_ROUNDS, answer_request, answer_rounds
from .http_client import StreamableHTTPClient
from .http_pool import wire_for
from .http_wire import HttpError, HttpWire, Reply, closing
from .sse_events import ServerEvent, events

if TYPE_CHECKING:
    import httpx

__all__ = ["CONNECTION_CLOSED", "SSEClient", "connect_http"]

# The error of a request whose answer can no longer come (the stream ended, a POST failed), and
# of a server request refused past ``max_in_flight``: a server error of the implementation range,
# as the stdio bridge answers a closed connection.

# Statuses that say the endpoint exists and the credentials or the rate are the problem: a
# Streamable HTTP server answering them is not an HTTP+SSE server.
_NOT_LEGACY = frozenset((401, 403, 429))


class _ErrorBody(msgspec.Struct, gc=False):
    """The JSON-RPC error a refused POST's body may carry (None where it has none)."""

    error: Any = None


_error_body = msgspec.json.Decoder(_ErrorBody)


class SSEClient:
    """One MCP connection over HTTP+SSE, for the given ``ClientSession``.

    ``events`` holds the last ``max_events`` events the session reported (1000), in order;
    ``on_event`` is called with each as it comes. ``endpoint_timeout`` bounds the wait for the
    stream's ``endpoint`` event (30 s). ``max_in_flight`` bounds the server's requests being
    answered at once (100); one past it is answered with error -32000. ``max_rounds`` bounds the
    input rounds of one multi-round-trip request (16): a server asking for input once more fails
    the call with ``ProtocolError`` -32603 rather than keep it going. ``endpoint`` is the URL
    messages go to, and ``session_id`` its ``session_id`` (or ``sessionId``) query parameter,
    once connected. ``http`` is what the requests go through, as for ``StreamableHTTPClient``.
    """

    def __init__(
        self,
        url: str,
        session: ClientSession,
        *,
        http: httpx.AsyncClient | HttpWire | None = None,
        headers: dict[str, str] | None = None,
        on_request: Callable[[RequestReceived], Awaitable[Any]] | None = None,
        on_event: Callable[[Event], None] | None = None,
        endpoint_timeout: float = 30.0,
        max_in_flight: int = 100,
        max_events: int = 1000,
        max_rounds: int = MAX_ROUNDS,
    ) -> None:
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, not {max_rounds}")
        self.url = url
        self.session = session
        self.wire, self._own_wire = wire_for(http, url)
        self.headers = dict(headers or {})
        self.on_request = on_request
        self.on_event = on_event
        self.endpoint_timeout = endpoint_timeout
        self.max_in_flight = max_in_flight
        self.max_rounds = max_rounds
        self.endpoint: str | None = None
        self.session_id: str | None = None
        self.events: deque[Event] = deque(maxlen=max_events)
        self._waiting: dict[Any, asyncio.Future[Event]] = {}
        self._negotiation: asyncio.Future[Event] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._answering: set[asyncio.Task[None]] = set()
        self._sending = asyncio.Lock()  # one POST at a time: messages keep the session's order
        self._ended: str | None = None  # why the connection ended, once it has

    @property
    def closed(self) -> str | None:
        """Why the connection ended (the stream closed, a POST the answers needed failed, the
        client closed it), or None while it is open."""
        return self._ended

    async def __aenter__(self) -> SSEClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the stream (which ends the session on the server) and the HTTP client."""
        self._end("the client closed the connection")
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._own_wire:
            await self.wire.aclose()

    # -- the conversation ----------------------------------------------------------------------

    async def connect(self, *, unsent: Sequence[bytes] = ()) -> Negotiated:
        """Open the stream, then the session (its handshake, with the session's fall-backs), and
        return the ``Negotiated`` event; ``ProtocolError`` when the server is not an HTTP+SSE
        server or no revision could be agreed.

        ``unsent`` are messages the session already gave out that reached no server (a
        Streamable HTTP attempt refused, see ``connect_http``): they are POSTed first, and the
        session, already negotiating, is not opened again."""
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[str] = loop.create_future()
        self._negotiation = loop.create_future()
        self._reader = asyncio.ensure_future(self._read(opened))
        try:
            async with asyncio.timeout(self.endpoint_timeout):  # (not wait_for: see client/http.py)
                endpoint = await asyncio.shield(opened)
        except TimeoutError:
            raise ProtocolError(
                CONNECTION_CLOSED,
                f"GET {self.url}: no endpoint event within {self.endpoint_timeout} s "
                "(endpoint_timeout): not an HTTP+SSE server",
            ) from None
        self.endpoint = endpoint
        query = parse_qs(urlsplit(endpoint).query)
        ids = query.get("session_id") or query.get("sessionId")
        self.session_id = ids[0] if ids else None
        if self.session.state == "idle":
            self.session.connect()
        async with self._sending:
            for message in unsent:
                await self._post(message)
        await self.flush()
        event = await self._negotiation
        if isinstance(event, NegotiationFailed):
            raise event.error
        assert isinstance(event, Negotiated)
        await self.flush()  # the initialized notification
        return event

    async def call(self, method: str, params: Any = None, *, progress: bool = False) -> Any:
        """Send a request and return its result (a task-augmented request: the created task's
        result); an error response raises ``ProtocolError``, as does the end of the stream
        before the answer.

        A result asking for input (a multi-round-trip request) is answered: each input request
        goes to ``on_request`` and the request is retried with the responses, until a final
        result arrives; a server asking once more after ``max_rounds`` rounds ends the call with
        ``ProtocolError`` -32603."""
        event = await answer_rounds(
            self.session,
            await self._ask(self.session.request(method, params, progress=progress)),
            self.on_request,
            self._ask,
            method,
            self.max_rounds,
        )
        if isinstance(event, ErrorReceived):
            raise ProtocolError(event.code, event.message, event.data, event.id)
        if isinstance(event, MessageRejected):
            raise event.error
        assert isinstance(event, ResultReceived | TaskCreated)
        return event.result

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        self.session.notify(method, params)
        await self.flush()

    async def flush(self) -> None:
        """POST everything the session queued, in order (answers arrive on the stream); a POST
        the server refuses raises ``ProtocolError``."""
        async with self._sending:
            while out := self.session.data_to_send():
                for message in out:
                    await self._post(message)

    async def _ask(self, rid: Any) -> Event:
        """POST the request ``rid`` the session queued and await the event answering it."""
        if self._ended is not None:
            self._waiting.pop(rid, None)
            raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {self._ended}", id=rid)
        future: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = future
        try:
            try:
                await self.flush()
            except (ProtocolError, HttpError):
                if not future.done():
                    raise
            # Answered, or failed by the end of the stream (which says more than the refusal of
            # a POST to a session that is gone).
            return await future
        finally:
            self._waiting.pop(rid, None)

    # -- HTTP ------------------------------------------------------------------------------------

    async def _post(self, message: bytes) -> None:
        if self.endpoint is None or self._ended is not None:
            raise ProtocolError(
                CONNECTION_CLOSED, f"Connection closed: {self._ended or 'not connected'}"
            )
        headers = {**self.headers, "Content-Type": "application/json"}
        reply = await self.wire.exchange(self.wire.head("POST", self.endpoint, headers), message)
        async with closing(reply):
            body = await reply.read()
        if 200 <= reply.status < 300:
            return
        code, text = CONNECTION_CLOSED, body[:800].decode("utf-8", "replace")[:200]
        with contextlib.suppress(msgspec.DecodeError, ValueError):
            error = _error_body.decode(body).error
            if isinstance(error, dict) and isinstance(error.get("code"), int):
                code, text = error["code"], str(error.get("message", text))
        raise ProtocolError(code, f"POST {self.endpoint}: HTTP {reply.status}: {text}")

    async def _read(self, opened: asyncio.Future[str]) -> None:
        """Read the stream: its endpoint event settles ``opened``, each message goes to the
        session; when it ends, whatever waits is told why."""
        why = "the server closed the event stream"
        headers = {**self.headers, "Accept": "text/event-stream", "Cache-Control": "no-cache"}
        try:
            # A quiet stream is not a failure: no read timeout on it (``stream``).
            head = self.wire.head("GET", self.url, headers)
            async with closing(await self.wire.exchange(head, stream=True)) as r:
                kind = r.headers.get("content-type", "")
                if r.status != 200 or not kind.startswith("text/event-stream"):
                    body = (await r.read())[:200]
                    why = f"GET {self.url}: HTTP {r.status} {kind!r}, not an event stream"
                    opened.set_exception(ProtocolError(CONNECTION_CLOSED, f"{why}: {body!r}"))
                    return
                async with contextlib.aclosing(events(r)) as stream:
                    async for sse in stream:
                        if not opened.done():
                            self._opened(sse, opened)
                            if opened.exception() is not None:
                                return
                        elif sse.event == "message" and sse.data:
                            await self._receive(sse.data)
        except HttpError as error:
            why = f"the event stream failed: {error!r}"
        except ProtocolError as error:  # a POST the answers needed was refused
            why = error.message
        finally:
            if not opened.done():
                opened.set_exception(
                    ProtocolError(CONNECTION_CLOSED, f"GET {self.url}: {why} before its endpoint")
                )
            self._end(why)

    def _opened(self, sse: ServerEvent, opened: asyncio.Future[str]) -> None:
        """Settle ``opened`` with the first event: the endpoint URL, on the stream's origin."""
        if sse.event != "endpoint":
            opened.set_exception(
                ProtocolError(
                    CONNECTION_CLOSED,
                    f"GET {self.url}: the first event is {sse.event!r}, not 'endpoint': not an "
                    "HTTP+SSE server",
                )
            )
            return
        endpoint = urljoin(self.url, sse.data.decode("utf-8", "replace").strip())
        mine, theirs = urlsplit(self.url), urlsplit(endpoint)
        if (mine.scheme, mine.netloc) != (theirs.scheme, theirs.netloc):
            # Messages (and the credentials in ``headers``) never go to another origin.
            opened.set_exception(
                ProtocolError(
                    CONNECTION_CLOSED,
                    f"GET {self.url}: the endpoint {endpoint!r} is on another origin",
                )
            )
            return
        opened.set_result(endpoint)

    async def _receive(self, data: bytes) -> None:
        for event in self.session.receive(data):
            self.events.append(event)
            if self.on_event is not None:
                self.on_event(event)
            if isinstance(event, ANSWERS):
                self._settle(event.id, event)
            elif isinstance(event, MessageRejected) and not event.answered:
                # A response that could not be read still answers its request: with why.
                self._settle(event.error.id, event)
            elif isinstance(event, Negotiated | NegotiationFailed):
                if self._negotiation is not None and not self._negotiation.done():
                    self._negotiation.set_result(event)
            elif isinstance(event, RequestReceived):
                self._answer(event)
        try:
            await self.flush()  # what the session answered itself (pings, refusals, initialized)
        except HttpError as error:
            raise ProtocolError(CONNECTION_CLOSED, f"a POST failed: {error!r}") from error

    def _settle(self, rid: Any, event: Event) -> None:
        future = self._waiting.get(rid)
        if future is not None and not future.done():
            future.set_result(event)

    def _answer(self, event: RequestReceived) -> None:
        """Answer a request from the server in a task of its own (the stream keeps being read
        meanwhile: the answer may need more of it)."""
        if len(self._answering) >= self.max_in_flight:
            self.session.respond_error(
                event.id,
                CONNECTION_CLOSED,
                f"Too many requests in flight: the client is answering {self.max_in_flight} "
                "requests of the server (max_in_flight)",
            )
            return
        task = asyncio.ensure_future(self._respond(event))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    async def _respond(self, event: RequestReceived) -> None:
        await answer_request(self.session, event, self.on_request)
        try:
            await self.flush()
        except (ProtocolError, HttpError) as error:
            # The server will not get the answer: the connection is of no further use.
            self._end(f"the answer to the server's {event.method!r} was not delivered: {error}")
            if self._reader is not None:
                self._reader.cancel()

    def _end(self, why: str) -> None:
        """The connection is over: every request waiting, and the handshake, get the error."""
        if self._ended is None:
            self._ended = why
        error = ProtocolError(CONNECTION_CLOSED, f"Connection closed: {self._ended}")
        for rid, future in self._waiting.items():
            if not future.done():
                future.set_exception(
                    ProtocolError(error.code, error.message, {"reason": self._ended}, rid)
                )
        if self._negotiation is not None and not self._negotiation.done():
            self._negotiation.set_exception(error)
        for task in self._answering:
            task.cancel()


class _Legacy(Exception):
    """The Streamable HTTP POST of the opening was refused as an HTTP+SSE server refuses it."""

    def __init__(self, status: int, message: bytes) -> None:
        super().__init__(f"HTTP {status}")
        self.status = status
        self.message = message


class _Watching:
    """The wire of the opening's POST: its first POST's reply, when it is an HTTP+SSE server's
    refusal (a 4xx that is not a JSON-RPC answer, nor 401, 403 or 429), raises ``_Legacy``."""

    def __init__(self, wire: HttpWire) -> None:
        self.wire = wire
        self.decided = False

    def head(
        self, method: str, url: str, headers: Mapping[str, str], key: Hashable | None = None
    ) -> Any:
        return method, self.wire.head(method, url, headers)

    def kept(self, key: Hashable) -> Any | None:
        return None

    async def exchange(
        self,
        head: Any,
        body: bytes | None = None,
        held: list[Any] | None = None,
        stream: bool = False,
    ) -> Reply:
        method, inner = head
        reply = await self.wire.exchange(inner, body, held=held, stream=stream)
        if self.decided or method != "POST":
            return reply
        self.decided = True
        kind = reply.headers.get("content-type", "")
        if (
            400 <= reply.status < 500
            and reply.status not in _NOT_LEGACY
            and not kind.startswith(("application/json", "text/event-stream"))
        ):
            await reply.aclose()
            raise _Legacy(reply.status, body or b"")
        return reply

    def abort(self, held: list[Any]) -> None:
        self.wire.abort(held)

    async def aclose(self) -> None:
        await self.wire.aclose()


async def connect_http(
    url: str,
    session: ClientSession,
    *,
    http: httpx.AsyncClient | HttpWire | None = None,
    headers: dict[str, str] | None = None,
    on_request: Callable[[RequestReceived], Awaitable[Any]] | None = None,
    max_rounds: int = MAX_ROUNDS,
) -> StreamableHTTPClient | SSEClient:
    """A connected client for the MCP server at ``url``, over whichever HTTP transport it
    speaks: the session's opening is POSTed there (Streamable HTTP); when that POST is refused
    with a 4xx that is not a JSON-RPC answer (an HTTP+SSE server has no POST there: 404, 405),
    ``url`` is opened as an HTTP+SSE stream instead and the same opening is sent through it.

    401, 403 and 429 are not taken for the old transport (they say the endpoint exists), nor is
    a 4xx carrying a JSON-RPC error (a Streamable HTTP server answering the message).
    ``max_rounds`` goes to either client (the input rounds of one request). Returns a
    ``StreamableHTTPClient`` or an ``SSEClient``, connected, sending through ``http`` (as they
    take it; one wire for the attempt and the client it gives); closing it closes the wire when
    ``http`` was not given.
    """
    wire, own = wire_for(http, url)
    common: dict[str, Any] = {
        "headers": headers,
        "on_request": on_request,
        "max_rounds": max_rounds,
    }
    watching = _Watching(wire)
    modern = StreamableHTTPClient(url, session, http=watching, **common)
    try:
        await modern.connect()
    except _Legacy as refused:
        opening = refused.message
    except BaseException:
        await modern.close()
        if own:
            await wire.aclose()
        raise
    else:
        modern.wire, modern._own_wire = wire, own  # the opening is past: no more watching
        return modern
    old = SSEClient(url, session, http=wire, **common)
    old._own_wire = own
    try:
        await old.connect(unsent=[opening])
    except BaseException:
        await old.close()
        raise
    return old
