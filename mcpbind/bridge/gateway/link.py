"""One client's link to the server: ``Link``, a ``Crossing`` (the translations both fronts share)
whose ``ClientSession`` talks to the server over an ``upstream`` transport, for one client
session or one client identity; ``Pending``, one client request sent down it. What a link asks
of the gateway that holds it is ``LinkHost``."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any, Protocol, cast

from msgspec import UNSET

from ...errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    ProtocolError,
)
from ...events import (
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
from ...session._common import speech
from ...transports.http_server import Call
from ...transports.http_wire import HttpError
from ...transports.stdio import Envelope
from ..crossing import Crossing
from ..limits import MAX_PAGES, NOT_SENT, STATE_PREFIX, too_many
from .pending import OwnCall, Pending
from .relay import Relay, RelayedCall
from .tasks_extension_to_core import LinkTasks, TaskAnswer
from .upstream import HttpUpstream, Upstream

if TYPE_CHECKING:
    from .surface import LinkSurface, SurfaceLock


__all__ = ["DROPPED_WITHIN", "MAX_DROPPED", "Link", "LinkHost", "Pending"]

# A link whose server sends more than MAX_DROPPED messages no client can take (no stream open, no
# request in flight to carry them) within DROPPED_WITHIN seconds is ended (its child terminated).
MAX_DROPPED = 1000
DROPPED_WITHIN = 10.0
# Tuples for isinstance, made once (``A | B`` in a call builds a union on every call).
_ANSWERED = (ResultReceived, ErrorReceived, InputRequired, TaskCreated)
_RESULTS = (ResultReceived, TaskCreated)


class LinkHost(Protocol):
    """What a link asks of the gateway that holds it."""

    @property
    def server_revisions(self) -> tuple[str, ...]: ...

    @property
    def strict(self) -> bool: ...

    @property
    def open_timeout(self) -> float: ...

    @property
    def max_in_flight(self) -> int: ...

    @property
    def max_dropped(self) -> int: ...

    @property
    def relay(self) -> Relay | None:
        """The relay to the other gateway processes sharing the store (None: none)."""
        ...

    @property
    def surface(self) -> SurfaceLock | None:
        """The surface lock links enforce (None: none)."""
        ...

    def upstream_for(self, link: Link) -> Upstream:
        """The transport of ``link`` to the server."""
        ...

    def timed_out(self) -> str:
        """Why the server's handshake failed when it outlasted ``open_timeout``."""
        ...

    def spawn(self, work: Any) -> None:
        """Run the coroutine ``work`` in the background until the gateway closes."""
        ...

    def forget(self, link: Link) -> None:
        """``link`` ended: take it out of the link table."""
        ...

    def hold(self, pending: Pending, link: Link) -> str:
        """Hold ``pending`` for a round-trip client's retry; the request state naming it."""
        ...

    def resume_held(self, state: str, call: Call | RelayedCall, link: Link | None) -> Pending:
        """The request held under ``state``, taken up again by the client's retry ``call``."""
        ...

    def say(self, lines: list[str]) -> None:
        """Log ``lines``."""
        ...


class Link(Crossing):
    """One connection to the server, for one client session or one client identity."""

    def __init__(
        self,
        gateway: LinkHost,
        key: Any,
        caps: Any,
        info: Any,
        *,
        front: Any = None,
        sid: str | None = None,
    ) -> None:
        super().__init__(gateway.server_revisions, strict=gateway.strict)
        self.gateway = gateway
        self.surface: LinkSurface | None = None  # the lock enforced, once the link is open
        if gateway.surface is not None:
            from .surface import GuardedBack  # (the surface's modules load only when used)

            self.back = GuardedBack(gateway.server_revisions)
        self.key = key
        self.caps, self.info = caps, info
        self.front, self.sid = front, sid  # the HTTP server and session id the client is on
        self.transport: Upstream = gateway.upstream_for(self)
        self.pending: dict[Any, Pending] = {}
        # requests in flight not in ``pending``: awaiting the link to open, or served by the
        # tasks translation of a core client (tasks_core_to_extension.py)
        self.counted = 0
        self.used = time.monotonic()
        self.why: str | None = None  # why it ended, once it has
        self._opening: asyncio.Future[None] | None = None
        self._negotiated: asyncio.Future[Negotiated] | None = None
        self._serving: set[asyncio.Task[Any]] = set()
        self._closing: str | None = None  # why the client side ended it
        self._trips: tuple[str, bool] | None = None  # whether the client's revision has retries
        self.tasks: LinkTasks | None = (
            None  # an extension client's tasks (tasks_extension_to_core.py)
        )
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
            self._guard(negotiated.revision)
            self.say()
            return
        self._end(why)
        await self.transport.close()
        raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}")

    def _guard(self, revision: str) -> None:
        """Enforce the gateway's surface lock on this link (the server speaks ``revision``),
        listening for list changes where the revision sends them only to listeners."""
        enforced = self.gateway.surface
        if enforced is None:
            return
        from .surface import GuardedBack, LinkSurface

        assert isinstance(self.back, GuardedBack)
        self.surface = LinkSurface(enforced, revision, self.back, self._log_line)
        wanted = self.surface.listen()
        if wanted is not None:
            self.gateway.spawn(self._listen(*wanted))

    def _log_line(self, line: str) -> None:
        self.log.append(line)  # (said with the link's other lines; take_log swaps the list)

    async def _listen(self, method: str, params: dict[str, Any]) -> None:
        """The link's own subscription stream: what it carries goes to the guard only."""
        with contextlib.suppress(ProtocolError, ConnectionError, HttpError):
            await self.ask(method, params, listen=True)

    async def ask(self, method: str, params: Any, *, listen: bool = False) -> Any:
        """The result of a request of the link's own (not a client's) to the server, raw events
        passing the guard as a client's do; ``listen``: the link's subscription stream."""
        if self.why is not None:
            raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {self.why}")
        rid = self.back.request(method, params)
        if listen and self.surface is not None:
            self.surface.listening = rid
        own = OwnCall(method, self.back.revision or "")
        pending = self.pending[rid] = Pending(rid, cast(Call, own))  # (what Link asks of one)
        out = self.back.data_to_send()
        if isinstance(self.transport, HttpUpstream) and out:
            message = out.pop()
            if out:
                self.transport.send(out)
            await self.transport.request(message)
        elif out:
            self.transport.send(out)
        await pending.wait(asks=False)
        event = pending.answer
        if isinstance(event, BaseException):
            raise event
        if isinstance(event, ErrorReceived):
            raise ProtocolError(event.code, event.message, event.data)
        if not isinstance(event, ResultReceived):
            raise ProtocolError(INTERNAL_ERROR, f"the server's answer to {method!r}: {event!r}")
        return event.result

    async def check_surface(self, call: Call) -> None:
        """Hold ``call`` to the lock before it goes down (``ProtocolError`` when refused); a
        use of an item whose list the guard has not seen reads that list first."""
        surface = self.surface
        assert surface is not None
        params, _ = self.down_params(call.method, call.params, call.revision)
        unverified = surface.check(call.method, params)
        if unverified is None:
            return
        method, cursor_key = surface.listing(unverified)
        cursor: Any = None
        for _ in range(MAX_PAGES):
            page = await self.ask(method, {cursor_key: cursor} if cursor else None)
            cursor = getattr(page, "next_cursor", None)
            if surface.verified(unverified) or not isinstance(cursor, str):
                break
        if surface.check(call.method, params) is not None:  # (an unlisted item goes on down)
            from ...surface.guard import unread

            raise unread(method, MAX_PAGES)

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
                # Held by another gateway process: asked there, answered here (relay.py).
                return await relay.forward(holder, state, repr(self.key), call)
            pending = self.gateway.resume_held(state, call, self)
            self._answer_asks(pending, answers)
        else:
            opening = self._opening
            if opening is None or not opening.done():
                await self._opened(call)
            else:
                opening.result()  # raises why it did not open
            if self.surface is not None:
                await self.check_surface(call)
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

    async def resume(self, pending: Pending, answers: dict[str, Any]) -> Any:
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

    def _send(self, call: Call) -> tuple[Pending, bytes | None]:
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
        pending = self.pending[rid] = Pending(rid, call)
        if self.surface is not None:
            self.surface.sent(rid, call.method, params)
        out = self.back.data_to_send()
        if isinstance(self.transport, HttpUpstream) and out:
            message = out.pop()  # the request just queued (the last)
            if out:
                self.transport.send(out)
            return pending, message
        if out:
            self.transport.send(out)
        return pending, None

    async def _outcome(self, pending: Pending) -> Any:
        """Wait for the server's answer to ``pending`` and give it in the client's revision;
        an input-required result instead when the server asks a round-trip client for input."""
        while True:
            await pending.wait()
            if pending.answer is None:  # the server's requests no retry has answered yet
                return self._ask_input(pending)
            event = pending.answer
            if isinstance(event, BaseException):
                raise event
            if (
                type(event) is TaskAnswer
            ):  # the task translation's own answer (tasks_extension_to_core.py)
                return event
            call = pending.call
            assert call is not None
            if isinstance(event, _RESULTS):
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

    async def _ask_older_client(self, pending: Pending, event: InputRequired) -> None:
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

    def _ask_input(self, pending: Pending) -> Any:
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

    def _answer_asks(self, pending: Pending, answers: dict[str, Any]) -> None:
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
        pending = self.pending[rid] = Pending(rid, call)
        self.flush()
        try:
            await pending.wait(asks=False)
        except asyncio.CancelledError:
            if self.pending.get(rid) is pending:
                self.cancel_pending(pending, "the client cancelled the request or went away")
                self.flush()
            raise
        return pending.answer

    def cancel_pending(self, pending: Pending, why: str) -> None:
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
            if isinstance(event, _ANSWERED):
                pending = self.pending.pop(event.id, None)
                if pending is not None:
                    surface = self.surface
                    self.settle(pending, event if surface is None else surface.answer(event))
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
                surface = self.surface
                if surface is not None:
                    surface.changed(event.method)
                    if related is not None and related == surface.listening:
                        continue  # the link's own subscription stream: for the guard only
                self._notify_up(event, related)
            elif isinstance(event, RequestCancelled):
                self.note("cancelled", f"server: cancelled its request {event.id!r}")
            elif isinstance(event, RequestReceived):  # a transport without its own answering
                task = asyncio.ensure_future(self._serve_and_answer(event, related))
                self._serving.add(task)
                task.add_done_callback(self._serving.discard)
        self.say()

    def settle(self, pending: Pending, event: Any) -> None:
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
            return await asked  # an input request of a task (tasks_extension_to_core.py)
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
