"""``mcpbind bridge --listen``: the bridge as an HTTP gateway any MCP client can reach, each client
in its own revision, in front of one server of its own (docs/bridge.md, "The HTTP front").

The front is mcpbind's own HTTP servers on one port: ``StreamableHTTPServer`` (every revision) and
``SSEServer`` (HTTP+SSE, the transport of 2024-11-05 clients). Each request they hand over goes
down a ``Link``: a ``Crossing`` (the translations of the stdio bridge, shared) whose
``ClientSession`` talks to the server over an ``upstream`` transport: a child process per client
session (``--listen ... -- CMD``), or an MCP server over HTTP (``--upstream URL``).

- A client session of a revision with the initialize handshake gets a link of its own, opened on
  its first request with the client's capabilities and info and ended with the session (DELETE,
  idle expiry, the HTTP+SSE stream closed).
- Clients of the per-request ``_meta`` revisions have no session: their requests go down one link
  per client identity (its info, capabilities and authenticated principal), at most
  ``max_shared`` of them; the least recently used one with nothing in flight makes room.
- The server's handshake is learnt once, on the first request (a probe connection), and every
  client is answered from it in its own revision (``Face``).
- A server's own request (sampling, elicitation, roots) reaches a client that has the method as
  that request, and a client of a round-trip revision (which has none) as an input-required
  result of the request it belongs to; the client's retry carries the answer back (``_Pending``).
- Nothing is lost: every request gets the server's answer or an error naming why (the server is
  gone, past ``max_in_flight``, the link could not open); a client that leaves cancels its
  requests on the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import hashlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from .._revisions import RELEASED
from ..auth.client import OAuthClient
from ..auth.resource import principal
from ..errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    ProtocolError,
    UnsupportedRevision,
)
from ..events import (
    ErrorReceived,
    Event,
    InputRequired,
    MessageRejected,
    Negotiated,
    NegotiationFailed,
    NotificationReceived,
    ProgressReceived,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    TaskCreated,
)
from ..negotiate import negotiate
from ..packages import bindings
from ..session import ServerSession
from ..session._common import checked, speech
from ..transports.http_limits import MAX_IN_FLIGHT  # of one link: the HTTP server's own bound
from ..transports.http_pool import HttpPool
from ..transports.http_server import SESSION_IDLE_TIMEOUT, Call, StreamableHTTPServer
from ..transports.http_wire import HttpError, HttpWire, HttpxWire
from ..transports.sse_server import SSEServer
from ..transports.stdio import MAX_LINE, Envelope
from .crossing import INPUT_TIMEOUT, NOT_SENT, STATE_PREFIX, Crossing, too_many
from .relay import HOLDER_CHECK, HOLDER_SILENCE, MAX_RELAYED, RELAY_TIMEOUT, Relay, RelayedCall
from .tasks import GatewayTasks, LinkTasks, TaskAnswer
from .tasks_http import NOT_MINE, UpstreamTasks
from .upstream import HttpUpstream, SseUpstream, StdioUpstream, Upstream, upstream_kind

if TYPE_CHECKING:
    import httpx

__all__ = [
    "INPUT_TIMEOUT",
    "DROPPED_WITHIN",
    "MAX_DROPPED",
    "MAX_IN_FLIGHT",
    "MAX_RELAYED",
    "MAX_SHARED",
    "OPEN_TIMEOUT",
    "RELAY_TIMEOUT",
    "Gateway",
]

MAX_SHARED = 16  # links for clients without a session (one per client identity)
# A link whose server sends more than MAX_DROPPED messages no client can take (no stream open, no
# request in flight to carry them) within DROPPED_WITHIN seconds is ended (its child terminated).
MAX_DROPPED = 1000
DROPPED_WITHIN = 10.0
OPEN_TIMEOUT = 30.0  # seconds the server's handshake may take
CLIENT_INFO = {"name": "mcpbind-gateway", "version": "1"}  # the probe's own info
GC_THRESHOLD = 10_000  # allocations between the serving process's young collections (``run``)


class Face:
    """What every client is told of the server: its handshake (learnt once, ``learn``), crossed
    into each client revision on first use, with the losses logged once. A revision whose
    handshake would lose capabilities under --strict is refused (``of`` raises)."""

    def __init__(self, crossing: Crossing) -> None:
        self.crossing = crossing
        self.negotiated: Negotiated | None = None
        self._faces: dict[str, tuple[Any, Any, Any] | ProtocolError] = {}

    def learn(self, negotiated: Negotiated) -> None:
        self.negotiated = negotiated
        self._faces.clear()

    def of(self, revision: str) -> tuple[Any, Any, Any]:
        """(capabilities, info, instructions) for a client of ``revision``."""
        found = self._faces.get(revision)
        if found is None:
            assert self.negotiated is not None  # the gateway learns it before serving
            try:
                found = self.crossing.server_face(self.negotiated, revision)
            except ProtocolError as error:
                found = error
            self._faces[revision] = found
        if isinstance(found, ProtocolError):
            raise ProtocolError(found.code, found.message, found.data)
        return found


class _GatewayFront(ServerSession):
    """The session facing one client (or one stateless POST): its handshake is answered with the
    server's ``Face`` in the agreed revision; ``client`` keeps what its initialize said of it."""

    def __init__(self, *args: Any, face: Face, **options: Any) -> None:
        super().__init__(*args, **options)
        self.face = face
        self.client: tuple[Any, Any, Any] | None = None  # (capabilities, info, speech)
        self.link: Link | None = None  # the link its requests go down, once there is one

    def _on_initialize(self, codec: Any, sp: Any, id: Any, message: Any, events: Any) -> None:
        if not self._bound:
            try:
                revision: str | None = negotiate(
                    message.params.protocol_version, self._initialize_revisions
                )
            except ProtocolError:
                revision = None  # answered by the session: no revision fits
            if revision is not None and not self._face(revision, codec, id, events):
                return
            self.client = (message.params.capabilities, message.params.client_info, sp)
        super()._on_initialize(codec, sp, id, message, events)

    def _result(self, incoming: Any, result: Any) -> Any:
        if type(result) is TaskAnswer:  # the extension's, which the revision has no class for
            return dict(result)
        return super()._result(incoming, result)

    def _on_discover(self, codec: Any, sp: Any, id: Any, message: Any, events: Any) -> None:
        if self._face(sp.revision, codec, id, events):
            super()._on_discover(codec, sp, id, message, events)

    def _face(self, revision: str, codec: Any, id: Any, events: list[Event]) -> bool:
        """Take the server's face in ``revision``; False (the handshake answered with the
        error) when it cannot be shown there without loss (--strict)."""
        try:
            self.capabilities, self.info, self.instructions = self.face.of(revision)
        except ProtocolError as error:
            failed = UnsupportedRevision(revision, list(self.revisions), id, error.code)
            failed.message = error.message
            failed.args, failed.data = (error.message,), error.data
            self._out.append(codec.error_response(failed))
            events.append(NegotiationFailed(error=failed))
            return False
        return True


class _Pending:
    """One client request sent down a link: the request it serves now (``call``; None while it
    waits for a round-trip client's retry), how it ends (``answer``), and the server's requests
    waiting for that client's input (``asks``: name -> the request, and where its answer goes).
    """

    __slots__ = ("answer", "asks", "call", "method", "revision", "rid", "timer", "waiter")

    def __init__(self, rid: Any, call: Call) -> None:
        self.rid = rid
        self.call: Call | RelayedCall | None = call
        self.method = call.method
        self.revision = call.revision
        self.answer: Any = None  # the server's answer (an event), or the error it ended with
        self.asks: dict[str, tuple[RequestReceived, asyncio.Future[Any]]] = {}
        self.waiter: asyncio.Future[None] | None = None  # what its handler awaits, if anything
        self.timer: asyncio.TimerHandle | None = None

    def wake(self) -> None:
        """Its handler has something to act on: the answer, or the server asking for input."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait(self, asks: bool = True) -> None:
        """Until the server answered (``answer``) or, with ``asks``, asked its client for input
        (``asks``): what a handler of the request waits for, the one loop that waits for it."""
        while self.answer is None and not (asks and self.asks):
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None


class Link(Crossing):
    """One connection to the server, for one client session or one client identity."""

    def __init__(
        self,
        gateway: Gateway,
        key: Any,
        caps: Any,
        info: Any,
        *,
        front: Any = None,
        sid: str | None = None,
    ) -> None:
        super().__init__(gateway.server_revisions, strict=gateway.strict)
        self.gateway = gateway
        self.key = key
        self.caps, self.info = caps, info
        self.front, self.sid = front, sid  # the HTTP server and session id the client is on
        self.transport: Upstream = gateway.upstream_for(self)
        self.pending: dict[Any, _Pending] = {}
        # requests in flight not in ``pending``: awaiting the link to open, or served by the
        # tasks translation of a core client (tasks_http)
        self.counted = 0
        self.used = time.monotonic()
        self.why: str | None = None  # why it ended, once it has
        self._opening: asyncio.Future[None] | None = None
        self._negotiated: asyncio.Future[Negotiated] | None = None
        self._serving: set[asyncio.Task[Any]] = set()
        self._closing: str | None = None  # why the client side ended it
        self._trips: tuple[str, bool] | None = None  # whether the client's revision has retries
        self.tasks: LinkTasks | None = None  # an extension client's tasks (bridge/tasks.py)
        self._dropped_since = 0.0  # when the count of messages no client could take began
        self._dropped = 0  # ... and how many there were since

    # -- opening and closing ----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the connection once (every request before it is done waits for it)."""
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open())
        elif self._opening.done():
            self._opening.result()  # opened (or raises why not)
            return
        await asyncio.shield(self._opening)

    async def _open(self) -> None:
        loop = asyncio.get_running_loop()
        self._negotiated = loop.create_future()
        self._open_back(self.caps, self.info, connect=False)
        if self._failed is not None:
            self._end(self._failed.message)
            raise self._failed
        try:
            async with asyncio.timeout(self.gateway.open_timeout):
                await self.transport.open()
                negotiated = await self._negotiated
        except ProtocolError as error:
            why = f"the server refused the handshake: {error.message}"
        except TimeoutError:  # before OSError, which it is a kind of
            why = self.gateway.timed_out()
        except (OSError, HttpError) as error:
            why = f"the server cannot be reached: {error or type(error).__name__}"
        else:
            self._back_agreed(negotiated)
            self.say()
            return
        self._end(why)
        await self.transport.close()
        raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}")

    def agreement(self) -> Negotiated:
        """What the server agreed on (the link is open)."""
        assert self._negotiated is not None
        return self._negotiated.result()

    def gone(self, why: str) -> None:
        """The connection is over (``why``): every request on it gets an error, and the link is
        forgotten (a later request opens another)."""
        if self.why is None:
            self._end(why)
            self.gateway.spawn(self.transport.close())

    def _end(self, why: str) -> None:
        self.why = why
        self.gateway.forget(self)
        error = ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}", {"reason": why})
        count = 0
        for pending in list(self.pending.values()):
            count += 1
            self.settle(pending, error)
            for _, future in pending.asks.values():
                if not future.done():
                    future.set_exception(error)
            if pending.timer is not None:
                pending.timer.cancel()
        self.pending.clear()
        if self._negotiated is not None and not self._negotiated.done():
            self._negotiated.set_exception(ProtocolError(CONNECTION_CLOSED, why))
        if self.tasks is not None:
            self.tasks.close(error)
        for task in self._serving:
            task.cancel()
        self.flush_notes()
        if count or why is not self._closing:
            self.log.append(f"{why}; {count} pending requests answered with an error")
        self.say()

    async def close(self, why: str) -> None:
        """End the link because its client is gone: what it sent is cancelled on the server."""
        if self.why is not None:
            return
        for pending in list(self.pending.values()):
            self.cancel_pending(pending, why)
        self.flush()
        self._closing = why  # said only when it answers something with an error
        self._end(why)
        await self.transport.close()

    # -- the client's requests --------------------------------------------------------------------

    async def forward(self, call: Call) -> Any:
        """The answer to the client's request ``call``, from the server."""
        self.used = time.monotonic()
        trips = self._trips
        if trips is None or trips[0] != call.revision:
            trips = self._trips = (
                call.revision,
                speech(call.revision).facts.round_trip is not None,
            )
        state: str | None = None
        if trips[1]:  # a revision whose requests may be retries carrying input
            state, answers = self.round_trip_retry(call.params, call.revision)
        message: bytes | None = None
        if state is not None and state.startswith(STATE_PREFIX):
            relay = self.gateway.relay
            holder = relay.holder(state) if relay is not None else None
            if relay is not None and holder is not None and holder != relay.worker:
                # Held by another gateway process: asked there, answered here (bridge/relay.py).
                return await relay.forward(holder, state, repr(self.key), call)
            pending = self.gateway.resume_held(state, call, self)
            self._answer_asks(pending, answers)
        else:
            opening = self._opening
            if opening is None or not opening.done():
                await self._opened(call)
            else:
                opening.result()  # raises why it did not open
            pending, message = self._send(call)
        try:
            if message is not None:
                assert isinstance(self.transport, HttpUpstream)
                await self.transport.request(message)
                event = pending.answer
                if type(event) is ResultReceived:  # the common case, without _outcome's loop
                    return self.up_result(event.result, call.revision, call.method)
            return await self._outcome(pending)
        except asyncio.CancelledError:
            # The client cancelled it, or left: the server stops working on it too.
            if pending.call is call and self.pending.get(pending.rid) is pending:
                self.cancel_pending(pending, "the client cancelled the request or went away")
                self.flush()
            raise
        finally:
            self.say()

    async def resume(self, pending: _Pending, answers: dict[str, Any]) -> Any:
        """The answer to a retry that arrived at another gateway process (``pending`` resumed
        for it): as ``forward`` gives it, the request cancelled on the server if it is."""
        self._answer_asks(pending, answers)
        try:
            return await self._outcome(pending)
        except asyncio.CancelledError:
            if self.pending.get(pending.rid) is pending:
                self.cancel_pending(pending, "the client cancelled the request or went away")
                self.flush()
            raise
        finally:
            self.say()

    async def _opened(self, call: Call) -> None:
        """Wait for the link to open (counted among the requests in flight meanwhile)."""
        if self.why is not None:
            raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {self.why}")
        limit = self.gateway.max_in_flight
        if len(self.pending) + self.counted >= limit:
            raise too_many(call.id, limit, "the client", "the server")
        self.counted += 1
        try:
            await self.open()
        finally:
            self.counted -= 1

    def _send(self, call: Call) -> tuple[_Pending, bytes | None]:
        """Queue ``call`` for the server (the link open): its pending record, and the request's
        message when the transport sends it from the handler's own task
        (``HttpUpstream.request``), which ``forward`` does next; else it is sent already."""
        if self.why is None:
            limit = self.gateway.max_in_flight
            if len(self.pending) + self.counted >= limit:
                raise too_many(call.id, limit, "the client", "the server")
        else:
            raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {self.why}")
        params, token = self.down_params(call.method, call.params, call.revision)
        if self.tasks is not None:
            params = self.tasks.down(call, params)  # type: ignore[arg-type]
        rid = self.back.request(
            call.method, None if params is UNSET else params, progress=token is not None
        )
        pending = self.pending[rid] = _Pending(rid, call)
        out = self.back.data_to_send()
        if isinstance(self.transport, HttpUpstream) and out:
            message = out.pop()  # the request just queued (the last)
            if out:
                self.transport.send(out)
            return pending, message
        if out:
            self.transport.send(out)
        return pending, None

    async def _outcome(self, pending: _Pending) -> Any:
        """Wait for the server's answer to ``pending`` and give it in the client's revision;
        an input-required result instead when the server asks a round-trip client for input."""
        while True:
            await pending.wait()
            if pending.answer is None:  # the server's requests no retry has answered yet
                return self._ask_input(pending)
            event = pending.answer
            if isinstance(event, BaseException):
                raise event
            if type(event) is TaskAnswer:  # the task translation's own answer (tasks.py)
                return event
            call = pending.call
            assert call is not None
            if isinstance(event, ResultReceived | TaskCreated):
                return self.up_result(event.result, call.revision, call.method)
            if isinstance(event, ErrorReceived):
                raise ProtocolError(event.code, event.message, event.data)
            if isinstance(event, InputRequired):
                if speech(call.revision).facts.round_trip is not None:
                    return self.up_result(event.result, call.revision, call.method)
                await self._ask_older_client(pending, event)
                continue
            assert isinstance(event, MessageRejected)
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server's answer to {call.method!r} cannot be passed on: "
                + event.error.message,
            )

    async def _ask_older_client(self, pending: _Pending, event: InputRequired) -> None:
        """A server of the round-trip revisions asks an older client for input: the client gets
        its own requests, and the server the retry with the answers (``Bridge`` does the same)."""
        call = pending.call
        assert call is not None
        responses = {}
        for name, request in (event.input_requests or {}).items():
            method = request.method
            params = self._input_request(method, request.params, call.method, call.revision)
            try:
                result = await call.request(method, params)
            except ProtocolError as error:
                raise ProtocolError(
                    error.code,
                    f"the server needs {method!r} input to answer {call.method!r}, and the "
                    f"client cannot take it: {error.message}",
                    error.data,
                ) from None
            responses[name] = self._input_answer(result)
        if self.why is not None:
            raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {self.why}")
        pending.rid = self.back.answer(event, responses)
        pending.answer = None
        self.pending[pending.rid] = pending
        self.flush()

    def _ask_input(self, pending: _Pending) -> Any:
        """The input-required result carrying the server's requests waiting on ``pending`` to a
        round-trip client; the request waits (``input_timeout``) for the client's retry."""
        call = pending.call
        assert call is not None
        asked = {
            name: (event.method, event.params)
            for name, (event, future) in pending.asks.items()
            if not future.done()
        }
        state = self.gateway.hold(pending, self)
        result = self._round_trip_ask(asked, call.revision, state)
        pending.call = None
        return result

    def _answer_asks(self, pending: _Pending, answers: dict[str, Any]) -> None:
        """The round-trip client's retry: its responses answer the server's waiting requests."""
        for name, (event, future) in list(pending.asks.items()):
            if future.done():
                continue
            if name not in answers:
                continue  # asked again in the next input-required result
            del pending.asks[name]
            try:
                future.set_result(self._input_response(event.method, answers[name]))
            except ProtocolError as error:
                future.set_exception(error)

    async def answer_to(self, rid: Any, call: Call) -> Any:
        """The server's answer (an event, or the error the link ended with) to the request
        ``rid`` the link's session just queued for ``call`` (not one of the client's own: the
        gateway's, in its handling); cancelled on the server when the caller is."""
        pending = self.pending[rid] = _Pending(rid, call)
        self.flush()
        try:
            await pending.wait(asks=False)
        except asyncio.CancelledError:
            if self.pending.get(rid) is pending:
                self.cancel_pending(pending, "the client cancelled the request or went away")
                self.flush()
            raise
        return pending.answer

    def cancel_pending(self, pending: _Pending, why: str) -> None:
        self.pending.pop(pending.rid, None)
        if pending.timer is not None:
            pending.timer.cancel()
        if self.back.awaits(pending.rid):
            with contextlib.suppress(ProtocolError):
                self.back.cancel(pending.rid, why)
        error = ProtocolError(INTERNAL_ERROR, f"Request cancelled: {why}")
        self.settle(pending, error)  # a handler still waiting for it hears why
        for _, future in pending.asks.values():
            if not future.done():
                future.set_exception(error)

    # -- what the server sends --------------------------------------------------------------------

    def received(self, events: list[Event], related: Any) -> None:
        """Events of the server's messages (``related``: the id of the request whose response
        carried them, when the transport knows it)."""
        for event in events:
            if self.tasks is not None and self.tasks.server_event(event):
                continue
            if isinstance(event, ResultReceived | ErrorReceived | InputRequired | TaskCreated):
                pending = self.pending.pop(event.id, None)
                if pending is not None:
                    self.settle(pending, event)
                elif isinstance(event, ErrorReceived) and event.id is None:
                    self.note("error", f"server: error {event.code}: {event.message}")
            elif isinstance(event, MessageRejected):
                self.note("rejected", f"server: {event.error.message}")
                pending = self.pending.pop(event.error.id, None) if not event.answered else None
                if pending is not None:
                    self.settle(pending, event)
            elif isinstance(event, Negotiated):
                if self._negotiated is not None and not self._negotiated.done():
                    self._negotiated.set_result(event)
            elif isinstance(event, NegotiationFailed):
                if self._negotiated is not None and not self._negotiated.done():
                    self._negotiated.set_exception(event.error)
            elif isinstance(event, ProgressReceived):
                self._progress_up(event)
            elif isinstance(event, NotificationReceived):
                self._notify_up(event, related)
            elif isinstance(event, RequestCancelled):
                self.note("cancelled", f"server: cancelled its request {event.id!r}")
            elif isinstance(event, RequestReceived):  # a transport without its own answering
                task = asyncio.ensure_future(self._serve_and_answer(event, related))
                self._serving.add(task)
                task.add_done_callback(self._serving.discard)
        self.say()

    def settle(self, pending: _Pending, event: Any) -> None:
        """``pending`` is answered by ``event`` (or ends with an error), unless it was already."""
        if pending.answer is None:
            pending.answer = event
            pending.wake()

    def failed(self, id: Any, why: str) -> None:
        """The transport could not deliver request ``id`` or its answer (``why``)."""
        pending = self.pending.pop(id, None)
        if pending is not None and pending.answer is None:
            self.log.append(f"{why}: the request is answered with an error")
            self.settle(pending, ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}"))
            self.say()

    def discarded(self, message: Envelope, why: str) -> None:
        """A message from the server was dropped unread (over ``max_line``), of which only its
        kind and id are known: an answer fails the request it answers, a request is answered
        -32600; a message that cannot be told ends the link (it may have been any answer)."""
        rid = message.id
        if message.kind == "response" and rid is not None and rid in self.pending:
            pending = self.pending.pop(rid)
            if self.back.awaits(rid):  # the session never read it: it stops waiting too
                with contextlib.suppress(ProtocolError):
                    self.back.cancel(rid, why)
            self.settle(
                pending,
                ProtocolError(
                    INTERNAL_ERROR,
                    f"Internal error: the server's answer to {pending.method!r} cannot be passed "
                    f"on: {why}",
                ),
            )
        elif message.kind == "request":
            self.note(
                "long request", f"server: a request was dropped and answered with an error: {why}"
            )
            self.back.reject(
                ProtocolError(INVALID_REQUEST, f"Invalid Request: {why}", id=message.id)
            )
        elif message.kind == "notification":
            self.note("long notification", f"server: a notification was dropped: {why}")
        else:
            self.gone(f"the server sent a message that could not be read: {why}")
            return
        self.flush()
        self.say()

    def _progress_up(self, event: ProgressReceived) -> None:
        pending = self.pending.get(event.id)
        call = pending.call if pending is not None else None
        if call is None:
            if pending is None:
                self._drop(f"server: progress of {event.id!r} dropped: no request of that id")
            return
        message = self._progress_message(call.revision, event.message)
        with contextlib.suppress(ProtocolError):  # the client's request had no progress token
            call.progress(event.progress, event.total, message)

    def _notify_up(self, event: NotificationReceived, related: Any) -> None:
        """A notification of the server's: on the stream of the request it came with, else on
        the session's own stream, else on the stream of the newest request in flight."""
        pending = self.pending.get(related) if related is not None else None
        call = pending.call if pending is not None else None
        revision = call.revision if call is not None else self._client_revision()
        if revision is None:
            self._drop(f"server: {event.method!r} notification dropped: no client to carry it")
            return
        try:
            params = self._notification(event.method, event.params, revision, "the server's")
        except ProtocolError as error:
            self.note("uncrossed", f"bridge: {error.message}")
            return
        if params is NOT_SENT:
            return
        if call is None and self.sid is not None and self.front is not None:
            with contextlib.suppress(ProtocolError):
                if self.front.notify(self.sid, event.method, params):
                    return
        if call is None:
            call = self._newest_call()
        if call is None:
            self._drop(
                f"server: {event.method!r} notification dropped: the client has no stream open "
                "to carry it"
            )
            return
        with contextlib.suppress(ProtocolError, ConnectionError):
            call.notify(event.method, params)

    def _client_revision(self) -> str | None:
        call = self._newest_call()
        if call is not None:
            return call.revision
        if self.front is not None and self.sid is not None:
            live = self.front.sessions.get(self.sid)
            return live.session.revision if live is not None else None
        return None

    def _newest_call(self) -> Call | RelayedCall | None:
        for pending in reversed(self.pending.values()):
            if pending.call is not None:
                return pending.call
        return None

    async def serve(self, event: RequestReceived, related: Any) -> Any:
        """The client's answer to a request of the server's, in the server's revision: passed to
        a client that has the method, else asked of a round-trip client through the result of
        the request it belongs to (the related one, else the newest in flight)."""
        try:
            return await self._serve(event, related)
        finally:
            self.say()

    async def _serve(self, event: RequestReceived, related: Any) -> Any:
        if self.tasks is not None and (asked := self.tasks.asked(event)) is not None:
            return await asked  # an input request of a task (tasks.py)
        pending = self.pending.get(related) if related is not None else None
        if pending is None:
            pending = next(reversed(self.pending.values()), None)
        call = pending.call if pending is not None else None
        revision = pending.revision if pending is not None else self._client_revision()
        if revision is None:
            self._drop(f"server: {event.method!r} request refused: no client to ask")
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {event.method!r} cannot reach the client: it has no request "
                "in flight and no stream open",
            )
        if event.method in speech(revision).methods:
            params = self._server_request(event.method, event.params, revision)
            if call is not None:
                result = await call.request(event.method, params)
            elif self.sid is not None and self.front is not None:
                try:
                    result = await self.front.request(self.sid, event.method, params)
                except LookupError as error:  # no stream open
                    self._drop(f"server: {event.method!r} request refused: no client to ask")
                    raise ProtocolError(INTERNAL_ERROR, f"Internal error: {error}") from None
                except ConnectionError as error:
                    raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {error}") from None
            else:
                self._drop(f"server: {event.method!r} request refused: no client to ask")
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"Internal error: {event.method!r} cannot reach the client: no stream open",
                )
            return self._client_answer(result, event.revision, event.method)
        if pending is None or not self.asks_through(event.method, revision):
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {event.method!r} is not part of MCP {revision}, the revision "
                "the client speaks"
                + (
                    ""
                    if speech(revision).facts.round_trip is None
                    else ", and no request of it is in flight to ask through"
                ),
                {"method": event.method},
            )
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        pending.asks[self.input_name()] = (event, future)
        pending.wake()
        return await future

    async def _serve_and_answer(self, event: RequestReceived, related: Any) -> None:
        try:
            result = await self.serve(event, related)
        except ProtocolError as error:
            with contextlib.suppress(ProtocolError):
                self.back.respond_error(event.id, error.code, error.message, error.data)
        else:
            try:
                self.back.respond(event.id, result)
            except ProtocolError as error:
                with contextlib.suppress(ProtocolError):
                    self.back.respond_error(event.id, INTERNAL_ERROR, error.message)
        self.flush()

    # -- the client's notifications ---------------------------------------------------------------

    def notify_down(self, event: NotificationReceived) -> None:
        target = self.back.revision
        if target is None or self.back.state != "ready":
            return
        try:
            params = self._notification(event.method, event.params, target, "the client's")
            if params is not NOT_SENT:
                self.back.notify(event.method, params)
        except ProtocolError as error:
            self.note("uncrossed down", f"bridge: {error.message}")
        self.flush()
        self.say()

    def _drop(self, line: str) -> None:
        """A message of the server's that no client can take (``line`` says which), noted; past
        ``max_dropped`` of them within ``DROPPED_WITHIN`` seconds the link ends: a server that
        talks to nobody (its client left) would otherwise be read until the idle timeout."""
        if self.why is not None:
            return  # ending: what it still sends is not heard
        self.note("dropped", line)
        now = time.monotonic()
        if now - self._dropped_since >= DROPPED_WITHIN:
            self._dropped_since, self._dropped = now, 0
        self._dropped += 1
        limit = self.gateway.max_dropped
        if self._dropped > limit:
            self.gone(
                f"the server sent more than {limit:,} messages no client could take within "
                f"{DROPPED_WITHIN:g} s (the gateway's max_dropped): the link is ended"
            )

    # -- plumbing ---------------------------------------------------------------------------------

    def flush(self) -> None:
        out = self.back.data_to_send()
        if out:
            self.transport.send(out)

    def say(self) -> None:
        if self.log:
            self.gateway.say(self.take_log())

    def _noted_later(self) -> None:
        self.say()


class Gateway:
    """The ASGI application of ``mcpbind bridge --listen``: Streamable HTTP at ``path`` and
    HTTP+SSE at ``/sse`` and ``/messages``, in front of the server ``command`` (a child per
    client session) or the MCP server at ``upstream`` (a URL).

    Bounds (docs/bridge.md, "Limits"): ``max_sessions`` client sessions per front (each with a
    link of its own; past it the HTTP servers refuse or evict as they do), ``max_shared`` links
    of clients without a session, ``max_in_flight`` requests of one link awaiting the server,
    ``input_timeout`` seconds a server's request waits for a round-trip client's retry,
    ``open_timeout`` seconds for the server's handshake, ``max_line`` bytes of a child's line,
    ``max_dropped`` messages of a server that no client can take within ``DROPPED_WITHIN``
    seconds (past it the link ends);
    with a shared store, ``max_relayed`` retries carried to the process holding their input
    round and awaiting its answer, each for ``relay_timeout`` seconds at most, and for
    ``holder_silence`` seconds without a word from that process (more than its checks'
    ``HOLDER_CHECK``, 1 s; bridge/relay.py).
    ``store`` (a Redis URL) is the Streamable HTTP front's store (docs/http.md); ``auth`` (a
    ``ResourceServer``) makes its clients present tokens, and turns HTTP+SSE off, as does
    ``sse=False`` (HTTP+SSE sessions live in one process). The client's
    credentials never go to the server: each link is a connection of the gateway's own.
    ``upstream_auth`` (an ``OAuthClient``) gets the gateway's own tokens for a protected
    ``upstream``.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        upstream: str | None = None,
        client_revisions: Iterable[str] | str = RELEASED,
        server_revisions: Iterable[str] | str = RELEASED,
        strict: bool = False,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = None,
        max_sessions: int | None = None,
        max_shared: int = MAX_SHARED,
        max_in_flight: int = MAX_IN_FLIGHT,
        session_idle_timeout: float | None = None,
        input_timeout: float = INPUT_TIMEOUT,
        open_timeout: float = OPEN_TIMEOUT,
        max_line: int = MAX_LINE,
        max_dropped: int = MAX_DROPPED,
        max_relayed: int = MAX_RELAYED,
        relay_timeout: float = RELAY_TIMEOUT,
        holder_silence: float = HOLDER_SILENCE,
        store: Any = None,
        auth: Any = None,
        upstream_auth: OAuthClient | None = None,
        sse: bool = True,
        http: httpx.AsyncClient | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        if (command is None) == (upstream is None):
            raise ValueError("a gateway needs a command or an upstream URL, and only one")
        for name, value in (
            ("max_shared", max_shared),
            ("max_in_flight", max_in_flight),
            ("input_timeout", input_timeout),
            ("open_timeout", open_timeout),
            ("max_dropped", max_dropped),
            ("max_relayed", max_relayed),
            ("relay_timeout", relay_timeout),
        ):
            if value <= 0:
                raise ValueError(f"{name} must be positive, not {value!r}")
        if holder_silence <= HOLDER_CHECK:  # (the holder says it works every HOLDER_CHECK s)
            raise ValueError(
                f"holder_silence must be more than {HOLDER_CHECK:g} s, not {holder_silence!r}"
            )
        self.command = list(command) if command is not None else None
        self.upstream = upstream
        self.upstream_auth = upstream_auth
        self.server_revisions = (
            (server_revisions,) if isinstance(server_revisions, str) else tuple(server_revisions)
        )
        self.strict = strict
        self.max_shared = max_shared
        self.max_in_flight = max_in_flight
        self.input_timeout = input_timeout
        self.open_timeout = open_timeout
        self.max_line = max_line
        self.max_dropped = max_dropped
        self._log = log or _stderr
        self._http = http
        self._wire: HttpWire | None = (
            None  # what requests to an HTTP server go through, once probed
        )
        self._kind: Any = None  # the upstream transport class, once probed
        self._probed: asyncio.Future[None] | None = None
        self.face = Face(Crossing(self.server_revisions, strict=strict))
        self.tasks: UpstreamTasks | GatewayTasks | None = None  # tasks_http.py, tasks.py
        self.sessions: dict[tuple[int, str], Link] = {}  # (front, session id) -> its link
        self.shared: dict[str, Link] = {}  # client identity -> link, least recently used first
        self._holds: dict[str, tuple[Link, _Pending]] = {}
        self.max_relayed, self.relay_timeout = max_relayed, relay_timeout
        self.holder_silence = holder_silence
        self.relay: Relay | None = None  # with a shared store, once the server is learnt
        self._background: set[asyncio.Task[Any]] = set()
        self.idle_timeout = (
            session_idle_timeout if session_idle_timeout is not None else SESSION_IDLE_TIMEOUT
        )
        self._sweeper: asyncio.Task[None] | None = None
        clients = (
            (client_revisions,) if isinstance(client_revisions, str) else tuple(client_revisions)
        )
        session_class = functools.partial(_GatewayFront, face=self.face)
        # An extension client's tasks of a core revision server (bridge/tasks.py), once learnt.
        self._task_front = GatewayTasks.of(clients)
        limits: dict[str, Any] = {}
        if allowed_hosts is not None:
            limits["allowed_hosts"] = allowed_hosts
        if max_sessions is not None:
            limits["max_sessions"] = max_sessions
        if session_idle_timeout is not None:
            limits["session_idle_timeout"] = session_idle_timeout
        self.http = StreamableHTTPServer(
            self._handle_http,
            revisions=clients,
            path=path,
            store=store,
            session_class=session_class,
            on_event=self._on_event,
            on_close=functools.partial(self._on_close, 0),
            auth=auth,
            tasks=self._task_front,  # type: ignore[arg-type]
            **limits,
        )
        # HTTP+SSE has no authorization (with tokens required it is not served at all), and
        # keeps its sessions in the process (``sse=False`` where processes share a port).
        with_sessions = sse_revisions(clients, sse=sse, auth=auth is not None)
        self.sse = (
            SSEServer(
                self._handle_sse,
                revisions=with_sessions,
                session_class=session_class,
                on_event=self._on_event,
                on_close=functools.partial(self._on_close, 1),
                **limits,
            )
            if with_sessions
            else None
        )
        routes = list(self.http.app.routes) + (self.sse.routes if self.sse is not None else [])
        self.app = Starlette(routes=routes, lifespan=self._lifespan)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (self._probed is None or not self._probed.done()):
            try:
                await self._probe()
            except Exception as error:  # noqa: BLE001 - said to the client, and tried again
                why = (
                    error.message
                    if isinstance(error, ProtocolError)
                    else f"the server cannot be reached: {error or type(error).__name__}"
                )
                response = JSONResponse(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": INTERNAL_ERROR, "message": f"Bad Gateway: {why}"},
                    },
                    status_code=502,
                )
                await response(scope, receive, send)
                return
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == self.http.path
        ):
            # The hot path: the Streamable HTTP server takes its POSTs without Starlette's
            # routing (the routes below would find the same endpoint).
            await self.http(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        yield
        await self.aclose()

    async def aclose(self) -> None:
        """End every link (children exit, HTTP sessions are deleted) and the stores."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        links = list(self.sessions.values()) + list(self.shared.values())
        await asyncio.gather(
            *(link.close("the gateway is shutting down") for link in links),
            return_exceptions=True,
        )
        # Links ending on their own (a session that ended just before) finish ending first.
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.relay is not None:
            await self.relay.close()
            self.relay = None
        await self.http.aclose()
        if self._wire is not None and self._http is None:  # (its own; a given client stays open)
            await self._wire.aclose()

    # -- the server -------------------------------------------------------------------------------

    async def _probe(self) -> None:
        """Learn the server's handshake once (a connection opened and closed again)."""
        if self._probed is None:
            self._probed = asyncio.ensure_future(self._learn())
            self._probed.add_done_callback(self._probe_done)
        await asyncio.shield(self._probed)

    def _probe_done(self, probed: asyncio.Future[None]) -> None:
        if probed.cancelled() or probed.exception() is not None:
            self._probed = None  # the next request tries again

    async def _learn(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep())
        if self.relay is None and self.http.store.shared:
            # Other processes share the store: a retry may reach one of them (bridge/relay.py).
            relay = Relay(
                self.http.store,
                self._resume_relayed,
                max_relayed=self.max_relayed,
                timeout=self.relay_timeout,
                silence=self.holder_silence,
                log=self._log,
            )
            await relay.start()
            self.relay = relay
        if self.upstream is not None:
            wire = self._wire
            if wire is None:
                given = self._http
                wire = (
                    HttpPool(self.upstream, read_timeout=None)
                    if given is None
                    else HttpxWire(given)
                )
                self._wire = wire
            session = Crossing(self.server_revisions).back
            session.info = dict(CLIENT_INFO)
            try:
                async with asyncio.timeout(self.open_timeout):
                    self._kind, negotiated = await upstream_kind(
                        self.upstream, wire, session, self.upstream_auth
                    )
            except TimeoutError:
                why = self.timed_out()
                raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}") from None
            if self._kind is not SseUpstream:  # a core client's tasks, translated (tasks_http)
                self.tasks = UpstreamTasks.between(self, negotiated)
                self.face.crossing.tasks_translated = self.tasks is not None
        else:
            probe = Link(self, None, None, CLIENT_INFO)
            try:
                await probe.open()
                negotiated = probe.agreement()
            finally:
                await probe.close("the probe is done")
            # a core client's tasks, translated on the child's session (tasks_http)
            self.tasks = UpstreamTasks.between(self, negotiated)
            self.face.crossing.tasks_translated = self.tasks is not None
        front = self._task_front
        if self.tasks is None and front is not None and front.between(negotiated):
            self.tasks = front
        self.face.learn(negotiated)
        self.say(self.face.crossing.take_log())

    def timed_out(self) -> str:
        return f"the server did not complete its handshake within {self.open_timeout:g} s"

    def upstream_for(self, link: Link) -> Upstream:
        if self.command is not None:
            return StdioUpstream(self.command, link, self.max_line)
        assert self._wire is not None and self.upstream is not None
        if self._kind is SseUpstream:
            return SseUpstream(self.upstream, link, self._wire)
        return HttpUpstream(self.upstream, link, self._wire, self.upstream_auth)

    # -- the client's requests --------------------------------------------------------------------

    async def _handle_http(self, call: Call) -> Any:
        link = self._link(call, 0, self.http)
        if (
            self.tasks is not None
            and (done := await self.tasks.forward(link, call)) is not NOT_MINE
        ):
            return done
        return await link.forward(call)

    async def _handle_sse(self, call: Call) -> Any:
        return await self._handle(call, 1, self.sse)

    async def _handle(self, call: Call, which: int, front: Any) -> Any:
        link = self._link(call, which, front)
        if (
            self.tasks is not None
            and (done := await self.tasks.forward(link, call)) is not NOT_MINE
        ):
            return done
        return await link.forward(call)

    def _link(self, call: Call, which: int, front: Any) -> Link:
        """The link a request goes down: its session's, else its client identity's."""
        sid = call.session_id
        if sid is not None:
            key = (which, sid)
            link = self.sessions.get(key)
            if link is None:
                session = call.session
                caps = info = None
                if isinstance(session, _GatewayFront) and session.client is not None:
                    caps, info, _ = session.client
                link = Link(self, key, caps, info, front=front, sid=sid)
                self.sessions[key] = link
            if isinstance(call.session, _GatewayFront):
                call.session.link = link
            return link
        caps, info = Crossing.client_identity(speech(call.revision), call.message)
        identity = hashlib.sha256(
            msgspec.json.encode(
                [principal(call.auth), msgspec.to_builtins(info), msgspec.to_builtins(caps)],
                order="sorted",
            )
        ).hexdigest()
        link = self.shared.pop(identity, None)
        if link is None:
            if len(self.shared) >= self.max_shared and not self._evict_shared():
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"Server busy: {self.max_shared} client identities without a session have "
                    "requests in flight (the gateway's max_shared)",
                    {"max_shared": self.max_shared},
                )
            link = Link(self, identity, caps, info)
        self.shared[identity] = link  # to the end: used last
        return link

    async def _sweep(self) -> None:
        """End the links idle for ``session_idle_timeout`` (nothing in flight, no request for
        that long): their children exit, their HTTP sessions are deleted. A session that comes
        back later gets a new one."""
        every = min(max(self.idle_timeout / 4, 0.05), 30.0)
        why = f"idle for session_idle_timeout ({self.idle_timeout:g} s)"
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for link in [*self.sessions.values(), *self.shared.values()]:
                if not link.pending and not link.counted and now - link.used >= self.idle_timeout:
                    if link.tasks is not None and link.tasks.mine:
                        continue  # a task still running on it (tasks.py)
                    self.forget(link)
                    self.spawn(link.close(why))

    def _evict_shared(self) -> bool:
        for identity, link in self.shared.items():
            if not link.pending and not link.counted and not (link.tasks and link.tasks.mine):
                del self.shared[identity]
                self.spawn(link.close("its place went to another client identity (max_shared)"))
                return True
        return False

    def forget(self, link: Link) -> None:
        if isinstance(link.key, tuple):
            if self.sessions.get(link.key) is link:
                del self.sessions[link.key]
        elif link.key is not None and self.shared.get(link.key) is link:
            del self.shared[link.key]
        for state, (held, _) in list(self._holds.items()):
            if held is link:
                del self._holds[state]

    def _on_event(self, session: ServerSession, event: Event) -> None:
        """A client's notification goes down its link (requests come through the handlers)."""
        if type(event) is NotificationReceived and isinstance(session, _GatewayFront):
            link = session.link
            if link is not None and link.why is None:
                link.notify_down(event)

    def _on_close(self, which: int, sid: str) -> None:
        """A front forgot a session: its link ends, and what it had in flight is cancelled."""
        link = self.sessions.pop((which, sid), None)
        if link is not None:
            self.spawn(link.close("the client's session ended"))

    # -- input rounds with round-trip clients -----------------------------------------------------

    def hold(self, pending: _Pending, link: Link) -> str:
        """Keep ``pending`` for the client's retry; its request state."""
        state = Crossing.new_state()
        if self.relay is not None:
            state = self.relay.state(state)  # names this process, for a retry arriving elsewhere
        self._holds[state] = (link, pending)
        if pending.timer is not None:
            pending.timer.cancel()
        pending.timer = asyncio.get_running_loop().call_later(
            self.input_timeout, self._expire_hold, state
        )
        return state

    def _expire_hold(self, state: str) -> None:
        found = self._holds.pop(state, None)
        if found is None:
            return
        link, pending = found
        pending.timer = None
        link.cancel_pending(
            pending,
            f"the client did not retry within input_timeout ({self.input_timeout:g} s) with the "
            "input the server asked for",
        )
        link.flush()
        link.say()

    async def _resume_relayed(self, call: RelayedCall, state: str, identity: str) -> Any:
        """The answer to ``call``, a retry of the round ``state`` held here that arrived at
        another process from the client of ``identity`` (``Relay``)."""
        spec = speech(call.revision).methods.get(call.method)
        if spec is None:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {call.method!r}")
        params = checked(call.params, spec.params, call.revision, "$.params")
        _, answers = Crossing.round_trip_retry(params, call.revision)
        found = self._holds.get(state)
        link = found[0] if found is not None and repr(found[0].key) == identity else None
        pending = self.resume_held(state, call, link)
        assert link is not None
        return await link.resume(pending, answers)

    def resume_held(self, state: str, call: Call | RelayedCall, link: Link | None) -> _Pending:
        """The held request a retry's ``state`` names, now serving ``call``."""
        found = self._holds.pop(state, None) if link is not None else None
        if found is None or found[0] is not link or found[1].method != call.method:
            raise ProtocolError(
                INVALID_PARAMS,
                "Invalid params: requestState names no input round this gateway holds for this "
                f"client and method (it expired after input_timeout, {self.input_timeout:g} s, "
                "its server connection ended, or a gateway process not sharing this one's Redis "
                "issued it)",
            )
        pending = found[1]
        if pending.timer is not None:
            pending.timer.cancel()
            pending.timer = None
        pending.call = call
        pending.revision = call.revision
        return pending

    # -- plumbing ---------------------------------------------------------------------------------

    def spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def say(self, lines: list[str]) -> None:
        for line in lines:
            self._log(line)


def sse_revisions(clients: Iterable[str], *, sse: bool = True, auth: bool = False) -> list[str]:
    """The client revisions the HTTP+SSE front serves (at ``/sse``): those with the initialize
    handshake, unless clients present tokens (``auth``: HTTP+SSE has no authorization) or
    ``sse`` is off (processes sharing a port)."""
    if auth or not sse:
        return []
    return [r for r in clients if bindings(r).FACTS.handshake == "initialize"]


def _stderr(line: str) -> None:
    sys.stderr.write(f"mcpbind bridge: {line}\n")
    sys.stderr.flush()


def build(options: dict[str, Any], auth_server: str | None = None) -> Gateway:
    """The application one gateway process serves (``--workers`` builds one in each):
    ``Gateway(**options)``, with its Streamable HTTP front protected by ``auth_server``'s tokens
    when given (docs/auth.md; the HTTP+SSE front, which has no authorization, is then off), and
    its own client credentials for the upstream when ``options["upstream_client"]`` holds an
    ``(id, secret)`` pair."""
    options = dict(options)
    client = options.pop("upstream_client", None)
    if client is not None:
        # Built here, in the process serving: an OAuthClient holds a lock of its event loop.
        from ..auth.grants import ClientCredentials

        options["upstream_auth"] = OAuthClient(ClientCredentials(*client))
    if auth_server is not None:
        from ..auth.resource import ResourceServer

        options["auth"] = ResourceServer(options.pop("resource"), auth_server)
    else:
        options.pop("resource", None)
    return Gateway(**options)


def run(host: str, port: int, options: dict[str, Any], *, workers: int = 1, **extra: Any) -> None:
    """``mcpbind bridge --listen HOST:PORT``: serve ``build(options, ...)`` until interrupted,
    with the connection bounds of ``mcpbind.transports.serving`` (``workers`` processes on one
    port, each with its own gateway; they share sessions through the ``store``)."""
    from ..transports.serving import serve

    factory = functools.partial(_serving, options, extra.pop("auth_server", None))
    serve(
        factory() if workers == 1 else factory,
        host,
        port,
        workers=workers,
        log_level="warning",
        **extra,
    )


def _serving(options: dict[str, Any], auth_server: str | None) -> Gateway:
    """``build`` in the process that serves it, with the cyclic garbage collector told what a
    gateway's heap is: what exists once it is built (six revisions' bindings, its libraries)
    lives as long as the process, so it is frozen out of every collection (``gc.freeze``), and
    collections start after ``GC_THRESHOLD`` allocations rather than 700. Under load the
    collector otherwise spent about 6% of a gateway's CPU (perf, 16 connections), walking that
    heap again and again while nothing in it was garbage. What a request allocates and drops
    is freed by its reference counts; the collector only finds cycles, later."""
    gateway = build(options, auth_server)
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    gc.freeze()
    return gateway
