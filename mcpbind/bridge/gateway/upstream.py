"""How the HTTP gateway reaches the server behind it: a child process on stdio, or an MCP server
over Streamable HTTP (or HTTP+SSE, when the server answers the opening POST with a 4xx).

Each transport carries one upstream connection of one ``Link`` (``link.py``): ``send`` takes
the messages the link's ``ClientSession`` queued, and what the server sends goes back to the
link (``Link.received``, with the id of the request whose response carried it when the transport
knows it; ``Link.serve`` for a request of the server's, whose answer the transport sends;
``Link.gone`` when the connection is over). The protocol work is the link's; this is plumbing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from ...auth.client import OAuthClient
from ...errors import INTERNAL_ERROR, ProtocolError
from ...events import (
    ANSWERS,
    Event,
    MessageRejected,
    Negotiated,
    NegotiationFailed,
    RequestReceived,
)
from ...session import ClientSession
from ...transports.http_client import (
    SESSION_HEADER,
    StreamableHTTPClient,
    error_with_id,
    meta_version,
    owed_ids,
    peek_message,
)
from ...transports.http_wire import HttpError, HttpWire, Reply, ServerUnreachable, needs_auth, send
from ...transports.sse_client import SSEClient, connect_http
from ...transports.sse_events import read_stream
from ...transports.stdio import MAX_LINE, Envelope, LineReader, Overlong

__all__ = ["GRACE", "HttpUpstream", "SseUpstream", "StdioUpstream", "Upstream", "upstream_kind"]

GRACE = 2.0  # seconds a child gets to exit after its input closes, before it is terminated
_CHUNK = 1 << 20  # bytes a reader takes from a pipe at once (longer lines are put together)
_NOTHING_KEPT: deque[Event] = deque(maxlen=0)  # an event window that keeps nothing (shared)
# Tuples for isinstance, made once (``A | B`` in a call builds a union on every call).
_IDS = (str, int)
_OPENINGS = (Negotiated, NegotiationFailed)
_SESSION_KEY = SESSION_HEADER.lower()  # (an answer's header names are lower-case)


class Peer(Protocol):
    """What a transport tells the link it carries."""

    @property
    def back(self) -> ClientSession: ...

    def received(self, events: list[Event], related: Any) -> None: ...

    def discarded(self, message: Envelope, why: str) -> None: ...

    def failed(self, id: Any, why: str) -> None: ...

    async def serve(self, event: RequestReceived, related: Any) -> Any: ...

    def gone(self, why: str) -> None: ...


class Upstream(Protocol):
    """One connection to the server, for one link."""

    async def open(self) -> None:
        """Connect and open the link's session on it (its handshake goes out; the link hears
        of ``Negotiated``); raises ``ProtocolError``, ``OSError`` or ``http_wire.HttpError``
        when the server cannot be reached or refuses it."""

    def send(self, messages: Sequence[bytes]) -> None:
        """Send messages (in order where the transport has an order)."""

    async def close(self) -> None:
        """End the connection (the child exits; the HTTP session is deleted)."""


class StdioUpstream:
    """A child process speaking MCP on its stdin/stdout, one message a line of at most
    ``max_line`` bytes; when it exits, closes its output or stops reading, the link is told why
    (with its exit status when it exits within ``GRACE`` seconds)."""

    def __init__(self, argv: Sequence[str], peer: Peer, max_line: int = MAX_LINE) -> None:
        self.argv = list(argv)
        self.peer = peer
        self.max_line = max_line
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ended = False

    async def open(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=min(self.max_line, _CHUNK),
        )
        self._reader = asyncio.ensure_future(self._read())
        self.peer.back.connect()
        self.send(self.peer.back.data_to_send())

    def send(self, messages: Sequence[bytes]) -> None:
        process = self.process
        if not messages or process is None or process.stdin is None:
            return
        if process.stdin.is_closing():
            return
        try:
            process.stdin.write(b"".join(m + b"\n" for m in messages))
        except (ConnectionError, RuntimeError):
            self._end("the server stopped reading its input")

    async def _read(self) -> None:
        process = self.process
        assert process is not None and process.stdout is not None
        lines = LineReader(process.stdout, self.max_line)
        why: str | None = None
        try:
            while True:
                line = await lines.read()
                if line is None:
                    break
                if isinstance(line, Overlong):
                    self.peer.discarded(
                        line.envelope,
                        f"a message of {line.size} bytes exceeds the limit of {self.max_line} "
                        "bytes",
                    )
                elif line and not line.isspace():
                    self.peer.received(self.peer.back.receive(line), None)
                    self.send(self.peer.back.data_to_send())
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - the link's fault: said, and the end
            why = f"internal error reading the server ({error!r})"
        if why is None:
            # Its status follows the end of its output at once, unless it hangs on.
            try:
                status = await asyncio.wait_for(process.wait(), GRACE)
                why = f"the server exited (status {status})"
            except TimeoutError:
                why = "the server closed its output"
        self._end(why)

    def _end(self, why: str) -> None:
        if not self._ended:
            self._ended = True
            self.peer.gone(why)

    async def close(self) -> None:
        self._ended = True
        process = self.process
        if process is None:
            return
        if process.stdin is not None:
            with contextlib.suppress(ConnectionError, RuntimeError):
                process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), GRACE)
        except TimeoutError:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), GRACE)
            except TimeoutError:
                process.kill()
                await process.wait()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader


class _IdMethod(msgspec.Struct, gc=False):
    """Which request a message is (its id and method), or that it is an answer (no method)."""

    id: Any = None
    method: Any = None


_peek = msgspec.json.Decoder(_IdMethod)


class HttpUpstream(StreamableHTTPClient):
    """A Streamable HTTP connection to the server. Each message is POSTed in a task of its own
    on the wire every link shares (``http_pool.HttpPool``'s keep-alive connections, unless the
    gateway was given an ``httpx.AsyncClient``; ``StreamableHTTPClient`` does the rest: the
    headers, the handshake, resuming a stream, DELETE), so any number of requests are in
    flight; what a POST's answer
    carries goes to the link with the id of the request it answers (its notifications, progress
    and requests belong to that request). A POST that fails, or ends without the answers it
    owes, fails those requests.

    Once the server gave the session an ``Mcp-Session-Id`` (a handshake-era server), the
    session's standalone GET stream is opened as ``StreamableHTTPClient`` opens it (authorized
    like the POSTs, resumed with ``Last-Event-ID`` at most ``max_resumptions`` times, closed with
    the link): what the server sends on it outside any request goes to the link as a POST
    stream's messages do, related to no request. A server without sessions (2026-07-28) offers
    no such stream: its clients subscribe with ``subscriptions/listen``.

    ``auth`` (an ``OAuthClient`` of the gateway's own) authorizes every request: a 401, or a 403
    with a challenge, goes to it and the POST is sent again, at most ``auth.max_attempts``
    times; when it cannot help, the request fails with its ``AuthorizationError``. Without
    ``auth`` such an answer fails the request at once. A client's own credentials never reach
    the server."""

    def __init__(
        self,
        url: str,
        peer: Peer,
        wire: HttpWire,
        auth: OAuthClient | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, peer.back, http=wire, listen=True, auth=auth, **options)
        self.peer = peer
        self._posting: set[asyncio.Task[None]] = set()
        # The connections of ``request``s awaiting their answer (a list: every idle session's
        # link has one, and an empty list is a quarter of an empty set).
        self._held: list[Any] = []
        self._closed = False
        self._forgotten = False  # the server answered 404 to the session's id

    async def open(self) -> None:
        # The handshake: StreamableHTTPClient.connect (which opens the session itself).
        await self.connect()
        # Read: from now on nothing is kept (a gateway keeps no event log, and a window of its
        # own is 760 bytes on every idle session's link).
        self.events = _NOTHING_KEPT

    def send(self, messages: Sequence[bytes]) -> None:
        for message in messages:
            task = asyncio.ensure_future(self._send(message))
            self._posting.add(task)
            task.add_done_callback(self._posting.discard)

    async def request(self, message: bytes) -> None:
        """POST the link's request ``message`` from the calling task (the handler of the
        client's request, which awaits its answer next): a JSON answer, the common case, is
        read and given to the link here, sparing a task and a wake-up per request; any other
        (an event stream, which may carry the server's own requests, whose answers that handler
        may have to give first; a challenge) is read in a task of its own, as ``send`` does."""
        peek = peek_message(message)
        try:
            head = self._head(message, peek)
            if head is not None:
                answer = await self.wire.exchange(head, message, self._held)
            else:
                answer = await self._authorized_post(message, peek, self._held)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - as _send says it, in its own task
            self._failed(message, error)
            return
        if answer.status < 300 and answer.headers.get("content-type", "").startswith(
            "application/json"
        ):
            if answer.complete:  # all of it read already: given to the link at once
                body = answer.take()
                answer.release()
                owed = owed_ids(message, peek)
                try:
                    if answer.status == 200 and owed and body:
                        # the common case, as _json_answer takes it (its checks made here)
                        sid = answer.headers.get(_SESSION_KEY)
                        if sid is not None:
                            self.session_id = sid
                        self._json_events(body, owed)
                    else:
                        self._json_answer(answer, body, owed)
                except Exception as error:  # noqa: BLE001 - as _send says it
                    self._failed(message, error)
                    return
                if owed:
                    self._unanswered(
                        message, f"the server at {self.url} ended its answer without it"
                    )
                return
            await self._send(message, answer, peek)
        else:
            self.send_answered(message, answer)

    def _head(self, message: bytes, peek: Any) -> Any:
        """The head of the POST of ``message`` (read as ``peek``): ``_headers``'s, encoded by
        the wire once for every request of this session, revision, method, name and ``_meta``
        version (what they depend on), and kept; None when they also depend on a token, extra
        headers or arguments mirrored in ``Mcp-Param-*`` headers (``_authorized_post``)."""
        method, params = peek.method, peek.params
        if self.auth is not None or self.headers or type(method) is not str:
            return None
        name = version = None
        if type(params) is dict:
            name = params.get("name")
            if type(name) is str and self.designated.get(name):
                return None  # its arguments may go in headers
            if type(name) is not str:
                name = params.get("uri")
                name = name if type(name) is str else None
            meta = self._request_meta(params)  # (under the facts' key of the revisions)
            if meta is not None:
                version = meta_version(meta, self.session)
        key = (self.session_id, self.session.revision, method, name, version)
        head = self.wire.kept(key)
        if head is None:
            head = self.wire.head("POST", self.url, self._headers(message, peek), key)
        return head

    async def _authorized_post(
        self, message: bytes, peek: Any, held: list[Any] | None = None
    ) -> Reply:
        """The POST of ``message`` with headers of its own, authorized (``http_wire.send``)."""
        return await send(
            self.wire,
            "POST",
            self.url,
            message,
            headers=self._headers(message, peek),
            auth=self.auth,
            held=held,
            unauthorized=self._unauthorized,
        )

    def _unauthorized(self, status: int, challenge: str | None) -> Exception:
        return ProtocolError(
            INTERNAL_ERROR,
            f"HTTP {status} from {self.url}: the server requires authorization, and the gateway "
            f"has no credentials for it ({challenge or 'no challenge'})",
        )

    def send_answered(self, message: bytes, answer: Reply) -> None:
        """Read ``answer`` to the POST of ``message`` in a task of its own."""
        task = asyncio.ensure_future(self._send(message, answer))
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def _send(self, message: bytes, answer: Reply | None = None, peek: Any = None) -> None:
        try:
            owed = await self._post_owed(message, answer, peek)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - the request still hears why
            self._failed(message, error)
        else:
            if owed:
                self._unanswered(message, f"the server at {self.url} ended its answer without it")
        if self._forgotten and not self._closed:
            self._closed = True
            self.peer.gone(f"the server at {self.url} no longer knows the session (HTTP 404)")

    def _failed(self, message: bytes, error: Exception) -> None:
        """The POST of ``message`` failed with ``error``: the request it carried hears why."""
        if isinstance(error, HttpError | ProtocolError):  # (the wire maps what it meets)
            self._unanswered(message, f"{_reason(error, self.url)} (sending {_what(message)})")
        else:  # a fault of ours
            self._unanswered(message, f"internal error ({error!r})")

    async def _post(self, message: bytes) -> None:
        await self._post_owed(message)

    async def _post_owed(
        self, message: bytes, answer: Reply | None = None, peek: Any = None
    ) -> set[Any]:
        """POST one message (``answer``: it was, and this is its answer, the head read;
        ``peek``: the message read by ``peek_message``) and give what its answer carries to the
        link (a JSON body, or an event stream read as it comes, resumed with ``Last-Event-ID``
        when it ends before the answers it owes); a challenge went to ``auth`` and the POST
        again (``http_wire.send``). The ids of the requests it carried left unanswered."""
        if peek is None:
            peek = peek_message(message)
        owed = owed_ids(message, peek)
        if answer is None:
            head = self._head(message, peek)
            if head is not None:
                answer = await self.wire.exchange(head, message)
            else:
                answer = await self._authorized_post(message, peek)
        try:
            if needs_auth(answer):  # (only without auth: send answers a challenge with it)
                raise self._unauthorized(answer.status, answer.headers.get("www-authenticate"))
            last = await self._read(answer, owed)
        finally:
            await answer.aclose()
        if last is not None and owed:
            await self._resume_post(last, owed)
        return owed

    def _retry(self, ms: int) -> None:
        self.retry_ms = ms

    async def _read(self, answer: Reply, owed: set[Any]) -> str | None:
        """Read one POST's answer; the last event id of its stream when it is one."""
        sid = answer.headers.get(_SESSION_KEY)
        if sid is not None:
            self.session_id = sid
        status = answer.status
        if status == 404 and self.session_id is not None:
            self._forgotten = True
        if status == 403:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"HTTP 403 from {self.url}: the server refused the gateway's request, without "
                "an authorization challenge",
            )
        kind = answer.headers.get("content-type", "")
        if status == 202 or (not owed and status < 300):
            await answer.read()
            return None
        if kind.startswith("text/event-stream"):
            return await read_stream(answer, owed, self._receive, self._retry)
        self._json_answer(answer, await answer.read(), owed)
        return None

    def _json_answer(self, answer: Reply, body: bytes, owed: set[Any]) -> None:
        """What a POST's answer other than an event stream (read whole: ``body``) gives the
        link; a request of the server's in it is answered in a task of its own (this may run in
        the very handler that request may have to wait for)."""
        sid = answer.headers.get(_SESSION_KEY)
        if sid is not None:
            self.session_id = sid
        if answer.status == 202 or (not owed and answer.status < 300):
            return
        if answer.headers.get("content-type", "").startswith("application/json") and body:
            if answer.status >= 400 and len(owed) == 1:
                body = error_with_id(body, next(iter(owed)))
            self._json_events(body, owed)
        elif owed:
            raise ProtocolError(
                INTERNAL_ERROR, f"HTTP {answer.status} without a JSON-RPC answer: {body[:200]!r}"
            )

    def _json_events(self, body: bytes, owed: set[Any]) -> None:
        """What a JSON answer's ``body`` carries goes to the link (``_json_answer``)."""
        rest, asked, related = self._sort(body, owed)
        for event in asked:
            self._answer_later(event, related)
        self._deliver(rest, related)

    def _unanswered(self, message: bytes, why: str) -> None:
        """The request ``message`` carried, if still unanswered, fails with ``why``."""
        try:
            peek = _peek.decode(message)
        except (msgspec.DecodeError, ValueError):
            return
        if isinstance(peek.method, str) and peek.id is not None:
            self.peer.failed(peek.id, why)

    async def _receive(self, data: bytes, owed: set[Any]) -> None:
        """What an event stream (a POST's, or the GET stream) carries goes to the link: the base
        class's bookkeeping of what is owed, without its event log (a gateway keeps none); a
        request of the server's is answered before the stream goes on."""
        rest, asked, related = self._sort(data, owed)
        for event in asked:
            await self._answer_server(event, related)
        self._deliver(rest, related)

    def _sort(self, data: bytes, owed: set[Any]) -> tuple[list[Event], list[RequestReceived], Any]:
        """The events of ``data`` for the link, the server's requests in it, and the id of the
        request they relate to (if one); what is owed is settled."""
        # The GET stream owes no request (its ``owed`` holds a marker that is no JSON-RPC id).
        related = next(iter(owed)) if len(owed) == 1 else None
        if not isinstance(related, _IDS):
            related = None
        rest: list[Event] = []
        asked: list[RequestReceived] = []
        for event in self.session.receive(data):
            if isinstance(event, ANSWERS):
                owed.discard(event.id)
                self._arrived.set()
            elif isinstance(event, MessageRejected) and event.error.id in owed:
                owed.discard(event.error.id)
                self._arrived.set()
            elif isinstance(event, _OPENINGS):
                owed.clear()
                self._report(event)  # what connect() reads; nothing else is kept
            elif isinstance(event, RequestReceived):
                asked.append(event)
                continue
            rest.append(event)
        return rest, asked, related

    def _deliver(self, events: list[Event], related: Any) -> None:
        if events:
            self.peer.received(events, related)
        if self.session.state == "negotiating":
            return  # the next opening (initialize after a refused probe): connect() sends it
        out = self.session.data_to_send()
        if out:
            self.send(out)

    def _answer_later(self, event: RequestReceived, related: Any) -> None:
        async def answer() -> None:
            await self._answer_server(event, related)
            out = self.session.data_to_send()
            if out:
                self.send(out)

        task = asyncio.ensure_future(answer())
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def _answer_server(self, event: RequestReceived, related: Any) -> None:
        """Answer a request of the server's through the link (the stream that carried it waits
        for the answer), in the request's own revision."""
        try:
            result = await self.peer.serve(event, related)
        except ProtocolError as error:
            _quietly(self.session.respond_error, event.id, error.code, error.message, error.data)
        else:
            try:
                self.session.respond(event.id, result)
            except ProtocolError as error:
                _quietly(self.session.respond_error, event.id, -32603, error.message)

    async def close(self) -> None:
        self.wire.abort(self._held)  # the handlers of their requests hear why from the link
        if self._closed:
            # Gone already (the server forgot the session): no DELETE, but the GET stream ends.
            listener, self._listener = self._listener, None
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await listener
            return
        self._closed = True
        for task in list(self._posting):
            task.cancel()
        await super().close()  # DELETE of the session; the shared HTTP client stays open


class SseUpstream(SSEClient):
    """An HTTP+SSE connection to the server (the older transport, when the server refused the
    opening POST with a 4xx): one event stream per link, messages POSTed in order."""

    def __init__(self, url: str, peer: Peer, wire: HttpWire, **options: Any) -> None:
        super().__init__(url, peer.back, http=wire, on_request=self._serve, **options)
        self.peer = peer
        self._closed = False
        self._sender: asyncio.Task[None] | None = None
        self._queue: list[bytes] = []

    async def open(self) -> None:
        await self.connect()

    def send(self, messages: Sequence[bytes]) -> None:
        self._queue.extend(messages)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.ensure_future(self._drain())

    async def _drain(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            for message in batch:
                try:
                    async with self._sending:
                        await self._post(message)
                except (HttpError, ProtocolError) as error:
                    self._end(_reason(error, self.url))
                    return

    async def _serve(self, event: RequestReceived) -> Any:
        return await self.peer.serve(event, None)

    async def _receive(self, data: bytes) -> None:
        events = self.session.receive(data)
        rest: list[Event] = []
        for event in events:
            if isinstance(event, Negotiated | NegotiationFailed):
                if self._negotiation is not None and not self._negotiation.done():
                    self._negotiation.set_result(event)
                self.events.append(event)
                rest.append(event)
            elif isinstance(event, RequestReceived):
                self._answer(event)
            else:
                rest.append(event)
        if rest:
            self.peer.received(rest, None)
        out = self.session.data_to_send()
        if out:
            self.send(out)

    def _end(self, why: str) -> None:
        first = self._ended is None
        super()._end(why)
        if first and not self._closed:
            self.peer.gone(self._ended or why)

    async def close(self) -> None:
        self._closed = True
        if self._sender is not None:
            self._sender.cancel()
        await super().close()


async def upstream_kind(
    url: str, wire: HttpWire, session: ClientSession, auth: OAuthClient | None = None
) -> Any:
    """Which HTTP transport the server at ``url`` speaks (``HttpUpstream`` or ``SseUpstream``),
    found the way ``connect_http`` finds it, with ``session`` opened (and closed again); and
    the ``Negotiated`` event of that handshake. With ``auth`` the server is taken for a
    Streamable HTTP one (authorization is not defined for HTTP+SSE), and the handshake is
    authorized: the token it obtains is kept in ``auth``'s store for the links."""
    client: StreamableHTTPClient | SSEClient
    if auth is not None:
        client = StreamableHTTPClient(url, session, http=wire, listen=False, auth=auth)
        try:
            await client.connect()
        except BaseException:
            await client.close()
            raise
    else:
        client = await connect_http(url, session, http=wire)
    try:
        negotiated = next(e for e in client.events if isinstance(e, Negotiated))
        kind = SseUpstream if isinstance(client, SSEClient) else HttpUpstream
        return kind, negotiated
    finally:
        await client.close()


def _reason(error: BaseException, url: str) -> str:
    if isinstance(error, ProtocolError):
        return error.message
    if isinstance(error, ServerUnreachable):
        return f"the server at {url} cannot be reached ({error})"
    return f"the connection to the server at {url} failed ({type(error).__name__}: {error})"


def _what(message: bytes) -> str:
    try:
        peek = _peek.decode(message)
    except (msgspec.DecodeError, ValueError):
        return "a message"
    return f"{peek.method!r}" if isinstance(peek.method, str) else "an answer"


def _quietly(call: Any, *args: Any) -> None:
    with contextlib.suppress(ProtocolError):
        call(*args)
