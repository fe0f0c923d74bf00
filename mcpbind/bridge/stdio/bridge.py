"""The bridge's protocol core, sans-IO: a ``ServerSession`` facing the client, a
``ClientSession`` facing the server, and projection (with ``[[loss]]`` rules) between them.

Bytes from either peer go in (``from_client``, ``from_server``); bytes for each come out
(``to_client``, ``to_server``); what the bridge has to say (losses, peers' mistakes) accumulates
in ``log``. Each side negotiates its own revision; the server side is opened when the client's
first message arrives, with that client's capabilities and info, and the client's handshake is
answered once the server's is done, from what the server said. Every fact about a revision comes
from the generated ``FACTS``/``METHODS`` (through the sessions' ``speech``); no method or
revision is named here.

Every request the bridge accepts from either side is answered, whatever happens: by the other
side, or with an error when the other side's answer cannot be passed on, when the bridge itself
fails on it, past the bound of requests in flight, or when the other side is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from msgspec import UNSET

from ..._revisions import RELEASED
from ...errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    ProtocolError,
)
from ...events import (
    ErrorReceived,
    Event,
    Initialized,
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
from ...transports.stdio import Envelope, envelope
from ..crossing import Back, Edge
from ..limits import INPUT_TIMEOUT, LOSSY, MAX_IN_FLIGHT_PER_SIDE, NOT_SENT, STATE_PREFIX, too_many
from .front import Held, HeldFront
from .requests import Forwarded, Hold, Round
from .rounds import RoundTrips
from .tasks_core_to_extension import StdioTasks
from .tasks_extension_to_core import StdioTaskBridge

__all__ = ["CONNECTION_CLOSED", "INPUT_TIMEOUT", "LOSSY", "MAX_IN_FLIGHT_PER_SIDE", "Bridge"]


class Bridge(RoundTrips):
    """One client connected through one bridge to one server, sans-IO.

    ``client_revisions`` are what the client side may agree on, ``server_revisions`` what the
    server side may (newest first wins; ``RELEASED`` by default). ``strict``: a message that
    cannot cross without a loss is answered with a JSON-RPC error (``LOSSY``, the paths in
    ``data``) instead of crossing with the loss logged. ``max_in_flight``: how many requests
    from each side may await the other side's answer at once; a request past it is answered
    with -32603 (``Server busy``), as the HTTP server answers past its own.
    ``input_timeout``: seconds a server's request asked of a round-trip client waits for its
    retry (``expire``).
    """

    def __init__(
        self,
        client_revisions: Iterable[str] | str = RELEASED,
        server_revisions: Iterable[str] | str = RELEASED,
        *,
        strict: bool = False,
        max_in_flight: int = MAX_IN_FLIGHT_PER_SIDE,
        input_timeout: float = INPUT_TIMEOUT,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if input_timeout <= 0:
            raise ValueError(f"input_timeout must be positive, not {input_timeout!r}")
        super().__init__(server_revisions, strict=strict)
        self.front = HeldFront(client_revisions, max_in_flight)
        self.max_in_flight = max_in_flight
        self.input_timeout = input_timeout
        self.closed = False
        self.why: str | None = None  # why close() ended it
        self._closing: ProtocolError | None = None  # ... as the error that answers from then on
        self._down: dict[Any, Forwarded] = {}  # id to the server -> the client's request
        self._up: dict[Any, Any] = {}  # the client's request id -> id to the server
        self._served: dict[Any, Forwarded] = {}  # id to the client -> the server's request
        self._rounds: dict[Any, Round] = {}  # id to the client -> the input round it serves
        self._held: dict[str, Hold] = {}  # request state -> a round-trip client's request
        self._held_down: dict[Any, str] = {}  # id to the server -> the state holding it
        self._asked = 0  # the server's requests held for a round-trip client's retry
        self._client_waiting: list[Event] = []  # client events until the server side is ready
        self._server_waiting: list[Event] = []  # server events until the client side is ready
        # Tasks translated between the sides: an extension client's (tasks_extension_to_core.py),
        # a core revision client's (tasks_core_to_extension.py, only with ``wake``).
        self.tasks: StdioTaskBridge | StdioTasks | None = None
        # Set by a driver that runs the bridge on an asyncio event loop (``stdio.serve``): the
        # bridge may then run coroutines of its own there (a core client's tasks polled), which
        # call ``wake`` once they queued messages for either side. None: sans-IO only.
        self.wake: Callable[[], None] | None = None
        self._trips: tuple[str, bool] | None = None  # whether the client's revision has retries

    # -- the two transports -----------------------------------------------------------------

    def from_client(self, data: bytes) -> None:
        """One message (a line) from the client. A request the bridge cannot pass on is
        answered with an error, whatever the reason."""
        if self._closing is not None:
            self._after_close(envelope(data), self.front)
            return
        try:
            if self.tasks is not None and self.tasks.from_client(data):
                return
            events = self.front.receive(data)
            if self.front.held and self.back.state == "idle":
                self._connect(self.front.held[0])
            for e in events:
                if type(e) is not RequestReceived:
                    self._client_event(e)
                    continue
                # Requests from the client awaiting the server (an upper bound; the handshakes
                # held are bounded by the front itself), counted inline: it is on every request.
                if (
                    len(self._up) + len(self._rounds) + len(self._held) + len(self._client_waiting)
                    >= self.max_in_flight
                ):
                    self.answer_error(
                        e.id, too_many(e.id, self.max_in_flight, "the client", "the server")
                    )
                elif self.back.state == "ready":
                    self._client_request(e)  # the common case, without the dispatch
                else:
                    self._client_event(e)
            if self.front.held and self._failed is not None:
                self.front.refuse(self._failed)
        except Exception as exc:  # noqa: BLE001 - a fault of the bridge's own: still an answer
            self._client_fault(data, exc)

    def from_server(self, data: bytes) -> None:
        """One message (a line) from the server; as ``from_client``, the other way."""
        if self._closing is not None:
            self._after_close(envelope(data), self.back)
            return
        if self.back.state == "idle":  # nothing can be passed on before the client's handshake
            message = envelope(data)
            if message.kind in ("request", "invalid"):
                self.back.reject(
                    ProtocolError(
                        INVALID_REQUEST,
                        "Invalid Request: the server spoke before the client's handshake",
                        id=message.id,
                    )
                )
            return
        try:
            for e in self.back.receive(data):
                # Requests from the server awaiting the client (an upper bound).
                if (
                    type(e) is RequestReceived
                    and len(self._served) + self._asked + len(self._server_waiting)
                    >= self.max_in_flight
                ):
                    self.quietly(
                        self.back.respond_error,
                        e.id,
                        INTERNAL_ERROR,
                        too_many(e.id, self.max_in_flight, "the server", "the client").message,
                    )
                    continue
                if type(e) is ResultReceived and self.tasks is None:
                    self._server_result(e.id, e.result)  # the common case, without the dispatch
                else:
                    self._server_event(e)
        except Exception as exc:  # noqa: BLE001 - a fault of the bridge's own: still an answer
            self._server_fault(data, exc)

    def discarded_from_client(self, message: Envelope, why: str) -> None:
        """The client sent a message the transport dropped unread (``why``: too long), of
        which only ``message``'s kind and id are known: a request is answered with -32600, an
        answer to the server's request ends that request with an error."""
        if self._closing is not None:
            self._after_close(message, self.front)
        elif message.kind == "response":
            self._client_answer_lost(message.id, why)
        elif message.kind == "notification":
            self.note("client long notification", f"client: a notification was dropped: {why}")
        else:  # never read by the session: answered as it stands
            self.note(
                "client long request",
                f"client: a message was dropped and answered with an error: {why}",
            )
            self.front.reject(
                ProtocolError(INVALID_REQUEST, f"Invalid Request: {why}", id=message.id)
            )

    def discarded_from_server(self, message: Envelope, why: str) -> None:
        """As ``discarded_from_client``, from the server; a message that is neither a request, a
        notification nor an answer to a request in flight ends the connection (``close``): it
        may have been the answer to any pending request, which would then wait forever."""
        if self._closing is not None:
            self._after_close(message, self.back)
        elif message.kind == "response" and message.id in self._down:
            self._server_answer_lost(message.id, why)
        elif (
            message.kind == "response"
            and self.tasks is not None
            and self.tasks.answer_lost(message.id, why)
        ):
            if self.back.awaits(message.id):  # the session never read it: it stops waiting too
                self.quietly(self.back.cancel, message.id, why)
        elif message.kind == "notification":
            self.note("server long notification", f"server: a notification was dropped: {why}")
        elif message.kind == "request":
            self.note(
                "server long request",
                f"server: a request was dropped and answered with an error: {why}",
            )
            self.back.reject(
                ProtocolError(INVALID_REQUEST, f"Invalid Request: {why}", id=message.id)
            )
        else:
            self.close(f"the server sent a message that could not be read: {why}")

    def to_client(self) -> list[bytes]:
        return self.front.data_to_send()

    def to_server(self) -> list[bytes]:
        return self.back.data_to_send()

    # -- opening ----------------------------------------------------------------------------

    def claim_forwarded(self, id: Any, revision: str) -> Forwarded | None:
        """The client's request forwarded as ``id`` to the server when the client is of
        ``revision``, no longer awaited here (the tasks translation answers it), else None."""
        up = self._down.get(id)
        if up is None or up.revision != revision:
            return None
        del self._down[id]
        self._up.pop(up.id, None)
        return up

    def _connect(self, held: Any) -> None:
        """Open the server side with what the client's first message says about it."""
        sp = held.speech if isinstance(held, Held) else speech(held.revision)
        self._open_back(*self.client_identity(sp, held.message))

    def _server_ready(self, e: Negotiated) -> None:
        self._back_agreed(e)
        revision = next((r for h in self.front.held if (r := self.front.revision_of(h))), None)
        upstream = StdioTasks.between(self, e, revision)
        self.tasks_translated = upstream is not None
        try:
            face = self.server_face(e, revision)
        except ProtocolError as error:
            self.front.refuse(error)
            return
        for one in self.front.open(*face):
            self._client_event(one)
        self.tasks = upstream or StdioTaskBridge.between(self)
        waiting, self._client_waiting = self._client_waiting, []
        for one in waiting:
            self._client_event(one)

    # -- what the client did ----------------------------------------------------------------

    def _client_event(self, e: Event) -> None:
        if self.tasks is not None and self.tasks.client_event(e):
            return
        if isinstance(e, MessageRejected):
            self.note("client rejected", f"client: {e.error.message}")
            rid = e.error.id
            if not e.answered and rid is not None and not self.front.awaits(rid):
                self._client_answer_lost(rid, e.error.message)  # an unreadable response
            return
        if isinstance(e, (Negotiated, Initialized)):
            self._flush_server()
            return
        if self.back.state != "ready":
            if isinstance(e, RequestReceived) and self._failed is not None:
                self.answer_error(e.id, self._failed)
                return
            if isinstance(e, RequestReceived) and self.back.state == "idle":
                self._connect(e)
            if len(self._client_waiting) >= self.max_in_flight and not isinstance(
                e, RequestReceived  # requests are bounded in from_client
            ):
                self.note(
                    "client early", f"client: {type(e).__name__} dropped: the server is not ready"
                )
                return
            self._client_waiting.append(e)
            return
        if isinstance(e, RequestReceived):
            self._client_request(e)
        elif isinstance(e, NotificationReceived):
            self._client_notification(e)
        elif isinstance(e, RequestCancelled):
            self._client_cancelled(e)
        elif isinstance(e, ResultReceived):
            self._client_result(e)
        elif isinstance(e, ErrorReceived):
            self._client_error(e)
        elif isinstance(e, ProgressReceived):
            served = self._served.get(e.id)
            if served is not None:
                self.quietly(self.back.progress, served.id, e.progress, e.total, e.message)

    def _client_request(self, e: RequestReceived) -> None:
        trips = self._trips
        if trips is None or trips[0] != e.revision:  # (the client's revision: one, once agreed)
            trips = self._trips = (e.revision, speech(e.revision).facts.round_trip is not None)
        if trips[1]:  # a revision whose requests may be retries carrying input
            state, answers = self.round_trip_retry(e.params, e.revision)
            if state is not None and state.startswith(STATE_PREFIX):
                self._resume(e, state, answers)
                return
        if self.tasks is not None and self.tasks.client_request(e):
            return
        try:
            params, token = self.down_params(e.method, e.params, e.revision)
            if self.tasks is not None:
                params = self.tasks.down(e, params)
            down = self.back.request(
                e.method, None if params is UNSET else params, progress=token is not None
            )
        except ProtocolError as err:
            self.answer_error(e.id, err)
            return
        self._down[down] = Forwarded(e.id, e.method, e.revision)
        self._up[e.id] = down

    def _client_notification(self, e: NotificationReceived) -> None:
        target = self.back.revision
        assert target is not None
        self.quietly(self._notify, self.back, e.method, e.params, target, "the client's")

    def _notify(self, session: Any, method: str, params: Any, target: str, whose: str) -> None:
        params = self._notification(method, params, target, whose)
        if params is not NOT_SENT:
            session.notify(method, params)

    def _client_cancelled(self, e: RequestCancelled) -> None:
        down = self._up.pop(e.id, None)
        if down is not None:
            del self._down[down]
            self.quietly(self.back.cancel, down, e.reason)

    def _client_result(self, e: ResultReceived) -> None:
        round = self._rounds.pop(e.id, None)
        if round is not None:
            self._round_answer(e.id, round, e.result)
            return
        served = self._served.pop(e.id, None)
        if served is None:
            return
        try:
            self.back.respond(
                served.id, self._client_answer(e.result, served.revision, served.method)
            )
        except ProtocolError as err:
            self.quietly(self.back.respond_error, served.id, err.code, err.message, err.data)

    def _client_error(self, e: ErrorReceived) -> None:
        round = self._rounds.pop(e.id, None)
        if round is not None:
            for other in round.pending:
                self._rounds.pop(other, None)
            self.answer_error(
                round.front.id,
                ProtocolError(
                    e.code, f"the client refused input the server asked for: {e.message}", e.data
                ),
            )
            return
        served = self._served.pop(e.id, None)
        if served is not None:
            self.quietly(self.back.respond_error, served.id, e.code, e.message, e.data)

    # -- what the server did ----------------------------------------------------------------

    def _server_event(self, e: Event) -> None:
        if self.tasks is not None and self.tasks.server_event(e):
            return
        if isinstance(e, Negotiated):
            self._server_ready(e)
        elif isinstance(e, NegotiationFailed):
            self._server_failed(e)
        elif isinstance(e, MessageRejected):
            self.note("server rejected", f"server: {e.error.message}")
            rid = e.error.id
            if not e.answered and rid in self._down and not self.back.awaits(rid):
                self._server_answer_lost(rid, e.error.message)  # an unreadable response
        elif isinstance(e, (ResultReceived, TaskCreated)):
            self._server_result(e.id, e.result)
        elif isinstance(e, ErrorReceived):
            self._server_error(e)
        elif isinstance(e, InputRequired):
            self._input_required(e)
        elif isinstance(e, ProgressReceived):
            up = self._down.get(e.id)
            if up is not None:
                self._progress(up, e)
        elif self.front.state != "ready":  # the client's handshake is not done yet
            if len(self._server_waiting) >= self.max_in_flight and not isinstance(
                e, RequestReceived  # requests are bounded in from_server
            ):
                self.note(
                    "server early", f"server: {type(e).__name__} dropped: the client is not ready"
                )
                return
            self._server_waiting.append(e)
        elif isinstance(e, RequestReceived):
            self._server_event_request(e)
        elif isinstance(e, NotificationReceived):
            self._server_notification(e)
        elif isinstance(e, RequestCancelled):
            for fid, served in list(self._served.items()):
                if served.id == e.id:
                    del self._served[fid]
                    self.quietly(self.front.cancel, fid, e.reason)

    def _server_failed(self, e: NegotiationFailed) -> None:
        self._failed = e.error
        self.log.append(f"server: {e.error.message}")
        self.front.refuse(e.error)
        waiting, self._client_waiting = self._client_waiting, []
        for one in waiting:
            if isinstance(one, RequestReceived):
                self.answer_error(one.id, e.error)

    def _server_error(self, e: ErrorReceived) -> None:
        up = self._down.pop(e.id, None)
        if up is None:
            if e.id in self._held_down:  # the client answers it on its retry
                error = ProtocolError(e.code, e.message, e.data)
                self._held[self._held_down[e.id]].answer = (None, error)
                return
            self.note("server error", f"server: error {e.code}: {e.message}")
            return
        self._up.pop(up.id, None)
        self.answer_error(up.id, ProtocolError(e.code, e.message, e.data))

    def _server_notification(self, e: NotificationReceived) -> None:
        target = self.front.revision
        assert target is not None
        self.quietly(self._notify, self.front, e.method, e.params, target, "the server's")

    def _progress(self, up: Forwarded, e: ProgressReceived) -> None:
        message = self._progress_message(up.revision, e.message)
        self.quietly(self.front.progress, up.id, e.progress, e.total, message)

    def _flush_server(self) -> None:
        if self.front.state != "ready":
            return
        waiting, self._server_waiting = self._server_waiting, []
        for one in waiting:
            self._server_event(one)

    def _server_result(self, id: Any, result: Any) -> None:
        up = self._down.pop(id, None)
        if up is None:
            if id in self._held_down:  # the client answers it on its retry
                self._held[self._held_down[id]].answer = (result, None)
            return
        self._up.pop(up.id, None)
        try:
            self.front.respond(up.id, self.up_result(result, up.revision, up.method))
        except ProtocolError as err:
            self.answer_error(up.id, err)

    def _server_event_request(self, e: RequestReceived) -> None:
        target = self.front.revision
        assert target is not None
        if self.asks_through(e.method, target):
            self._ask_through(e, target)
            return
        try:
            up = self.front.request(e.method, self._server_request(e.method, e.params, target))
        except ProtocolError as err:
            self.quietly(self.back.respond_error, e.id, err.code, err.message, err.data)
            return
        self._served[up] = Forwarded(e.id, e.method, e.revision)

    def _input_required(self, e: InputRequired) -> None:
        up = self._down.pop(e.id, None)
        if up is None:
            return
        self._up.pop(up.id, None)
        if speech(up.revision).facts.round_trip is not None:
            self._down[e.id] = up  # the client's revision asks for input itself
            self._up[up.id] = e.id
            self._server_result(e.id, e.result)
            return
        # An older client: ask it with its own requests, then retry with its answers.
        round = Round(up, e, {}, {})
        try:
            for name, request in (e.input_requests or {}).items():
                method = request.method
                params = self._input_request(method, request.params, up.method, up.revision)
                try:
                    asked = self.front.request(method, params)
                except ProtocolError as err:
                    raise ProtocolError(
                        err.code,
                        f"the server needs {method!r} input to answer {up.method!r}, and the "
                        f"client cannot take it: {err.message}",
                        err.data,
                    ) from None
                round.pending[asked] = name
                self._rounds[asked] = round
        except ProtocolError as err:
            for asked in round.pending:
                self._rounds.pop(asked, None)
            self.answer_error(up.id, err)
            return
        if not round.pending:
            self._retry(round)

    def _round_answer(self, id: Any, round: Round, result: Any) -> None:
        name = round.pending.pop(id)
        round.responses[name] = self._input_answer(result)
        if not round.pending:
            self._retry(round)

    def _retry(self, round: Round) -> None:
        try:
            down = self.back.answer(round.event, round.responses)
        except ProtocolError as err:
            self.answer_error(round.front.id, err)
            return
        self._down[down] = round.front
        self._up[round.front.id] = down

    # -- the end ----------------------------------------------------------------------------

    def close(self, why: str) -> None:
        """One side is gone: every request still waiting for it gets an error, on both sides,
        and so does every request that arrives from then on (``CONNECTION_CLOSED``)."""
        if self.closed:
            return
        self.flush_notes()
        self.log.append(f"{why}; {self.pending()} pending requests answered with an error")
        self.closed = True
        self.why = why
        error = self._closing = ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}")
        self.front.refuse(error)
        for up in list(self._down.values()):
            self.answer_error(up.id, error)
        for round in list(self._rounds.values()):
            self.answer_error(round.front.id, error)
        for e in self._client_waiting:
            if type(e) is RequestReceived:
                self.answer_error(e.id, error)
        for served in list(self._served.values()):
            self.quietly(self.back.respond_error, served.id, error.code, error.message)
        for e in self._server_waiting:
            if type(e) is RequestReceived:
                self.quietly(self.back.respond_error, e.id, error.code, error.message)
        if self.tasks is not None:
            self.tasks.close(error)
        for hold in self._held.values():
            self._drop(hold, error)
        self._held.clear()
        self._held_down.clear()
        self._down.clear()
        self._up.clear()
        self._rounds.clear()
        self._served.clear()
        self._client_waiting.clear()
        self._server_waiting.clear()

    def pending(self) -> int:
        """How many requests await an answer across the bridge (either way)."""
        waiting = (*self._client_waiting, *self._server_waiting)
        return (
            len(self._down)
            + len(self._served)
            + len({id(r) for r in self._rounds.values()})
            + len(self.front.held)
            + len(self._held)
            + self._asked
            + sum(type(e) is RequestReceived for e in waiting)
            + (sum(1 for _ in self.tasks.pending()) if self.tasks is not None else 0)
        )

    # -- failures ---------------------------------------------------------------------------

    def _server_answer_lost(self, id: Any, why: str) -> None:
        """The server's answer to the request ``id`` in flight cannot be passed on (``why``):
        the client's request gets an error at once."""
        up = self._down.pop(id)
        self._up.pop(up.id, None)
        if self.back.awaits(id):  # the session never read it: it stops waiting too
            self.quietly(self.back.cancel, id, why)
        self.answer_error(
            up.id,
            ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server's answer to {up.method!r} cannot be passed on: "
                + why.removeprefix("from the server: "),
            ),
        )

    def _client_answer_lost(self, id: Any, why: str) -> None:
        """The client's answer to the request ``id`` the bridge sent it cannot be passed on:
        the request it serves (the server's, or the client's own in an input round) gets an
        error at once."""
        why = why.removeprefix("from the client: ")
        if self.tasks is not None and self.tasks.answer_lost(id, why):
            if self.front.awaits(id):  # the session never read it: it stops waiting too
                self.quietly(self.front.cancel, id, why)
            return
        round = self._rounds.pop(id, None)
        served = self._served.pop(id, None) if round is None else None
        if round is None and served is None:
            return  # not an answer to the bridge's request
        if self.front.awaits(id):  # the session never read it: it stops waiting too
            self.quietly(self.front.cancel, id, why)
        if round is not None:
            for other in round.pending:
                self._rounds.pop(other, None)
            self.answer_error(
                round.front.id,
                ProtocolError(
                    INTERNAL_ERROR,
                    f"Internal error: the client's answer to the input the server asked for "
                    f"cannot be passed on: {why}",
                ),
            )
            return
        assert served is not None
        self.quietly(
            self.back.respond_error,
            served.id,
            INTERNAL_ERROR,
            f"Internal error: the client's answer to {served.method!r} cannot be passed on: {why}",
        )

    def _client_fault(self, data: bytes, exc: Exception) -> None:
        """The bridge failed on a message from the client: its sender still hears of it."""
        why = f"internal error ({type(exc).__name__}: {exc})"
        self.log.append(f"{why} on a message from the client")
        message = envelope(data)
        if message.kind == "response":
            self._client_answer_lost(message.id, why)
        elif message.kind == "invalid":
            self._refuse_client(
                message.id, ProtocolError(INVALID_REQUEST, "Invalid Request: it cannot be read")
            )
        elif message.kind == "request" and message.id not in self._up:
            self._refuse_client(
                message.id,
                ProtocolError(
                    INTERNAL_ERROR, f"Internal error: the request cannot be passed on: {why}"
                ),
            )

    def _server_fault(self, data: bytes, exc: Exception) -> None:
        """The bridge failed on a message from the server: as ``_client_fault``."""
        why = f"internal error ({type(exc).__name__}: {exc})"
        self.log.append(f"{why} on a message from the server")
        message = envelope(data)
        if message.kind == "response" and message.id in self._down:
            self._server_answer_lost(message.id, why)
        elif message.kind == "response" and self.tasks is not None:
            self.tasks.answer_lost(message.id, why)
        elif message.kind == "invalid":
            self._refuse_server(
                message.id, ProtocolError(INVALID_REQUEST, "Invalid Request: it cannot be read")
            )
        elif message.kind == "request" and all(
            s.id != message.id for s in self._served.values()  # else its answer will come
        ):
            self._refuse_server(
                message.id,
                ProtocolError(
                    INTERNAL_ERROR, f"Internal error: the request cannot be passed on: {why}"
                ),
            )

    def _refuse_client(self, id: Any, error: ProtocolError) -> None:
        """Answer the client's message ``id`` with ``error``, read by the session or not."""
        _refuse(self.front, id, error)

    def _refuse_server(self, id: Any, error: ProtocolError) -> None:
        """Answer the server's message ``id`` with ``error``, read by the session or not."""
        _refuse(self.back, id, error)

    def _after_close(self, message: Envelope, side: Edge) -> None:
        """A message after ``close``: a request gets the error of the close."""
        error = self._closing
        assert error is not None
        if message.kind in ("request", "invalid"):
            side.reject(ProtocolError(error.code, error.message, error.data, message.id))

    def _noted_later(self) -> None:
        if self.wake is not None:
            self.wake()


def _refuse(side: HeldFront | Back, id: Any, error: ProtocolError) -> None:
    try:
        side.respond_error(id, error.code, error.message, error.data)
    except ProtocolError:  # the session never read it (or its id could not be read)
        side.reject(ProtocolError(error.code, error.message, error.data, id))
