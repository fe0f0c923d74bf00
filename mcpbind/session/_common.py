"""What client and server sessions share: sending by method name, receiving into events,
responses, cancellation and progress. Every fact about a revision comes from its generated
``FACTS`` record and ``METHODS`` table (through ``SessionSpeech``); no revision or method is named here.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Union

import msgspec
from msgspec import UNSET

from .._revisions import REVISIONS
from ..codec import Codec, ErrorObject, ErrorResponse, Request, Response
from ..errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, ProtocolError
from ..events import (
    ErrorReceived,
    Event,
    InputRequired,
    MessageRejected,
    NotificationReceived,
    PingReceived,
    ProgressReceived,
    RequestCancelled,
    RequestReceived,
    ResponseDropped,
    ResultReceived,
    TaskCreated,
)
from .states import IDLE, READY, IllegalTransition, SessionState

if TYPE_CHECKING:
    pass

# isort: off
# What the bridge imports from here (checked, speech, wire_fields) is _speech's.
from ._speech import (
    NOT_READY as NOT_READY,
    SendPlan,
    SessionSpeech as SessionSpeech,
    checked as checked,
    make as make,
    open_get as open_get,
    speech as speech,
    wire_fields as wire_fields,
)

# isort: on

RequestId = Union[str, int]  # noqa: UP007

_RAW = msgspec.json.Encoder()  # respond_unchecked's
_REMEMBERED = 1024  # answered, cancelled and task ids a session keeps for its error messages


# A request this side sent, awaiting its response: (method, the SessionSpeech it was sent in, its
# params, the progress token put in its _meta or None). A tuple:
# one is built on every request, and a tuple costs a tenth of a Struct (some 70 instructions,
# not 700).
Outgoing = tuple[str, SessionSpeech, Any, Any]


class _Incoming(msgspec.Struct, gc=False):
    method: str
    codec: Codec
    speech: SessionSpeech
    params: Any
    token: Any


def _instance(params: Any, send: SendPlan) -> bool:
    return isinstance(send.params, type) and isinstance(params, send.params)


def _remember(store: dict[Any, Any], key: Any, value: Any) -> None:
    if len(store) >= _REMEMBERED:
        del store[next(iter(store))]
    store[key] = value


@functools.lru_cache(maxsize=64)  # a stateless HTTP server builds a session per request
def _newest_first(offered: tuple[str, ...]) -> tuple[str, ...]:
    """The revisions offered, known ones only (ValueError otherwise), newest first: the order a
    client prefers them in."""
    unknown = [r for r in offered if r not in REVISIONS]
    if unknown or not offered:
        raise ValueError(
            f"unknown MCP revision(s) {unknown}; known revisions: {', '.join(REVISIONS)}"
            if unknown
            else "a session needs at least one revision"
        )
    return tuple(sorted(set(offered), key=REVISIONS.index, reverse=True))


class Session:
    """The part of a client or server session that does not depend on the handshake."""

    role = ""
    peer = ""
    _connecting = False  # (a client, while it sends its handshake request)
    # Which state may follow which (``states.CLIENT`` or ``states.SERVER``).
    _transitions: ClassVar[Mapping[SessionState, frozenset[SessionState]]] = {}

    def __init__(self, revisions: Any, capabilities: Any, info: Any) -> None:
        offered = (revisions,) if isinstance(revisions, str) else tuple(revisions)
        try:
            self.revisions: tuple[str, ...] = _newest_first(offered)
        except TypeError:  # an unhashable revision: refused as unknown, uncached
            self.revisions = _newest_first.__wrapped__(offered)
        self.capabilities = msgspec.to_builtins(capabilities) if capabilities is not None else {}
        self.info = msgspec.to_builtins(info) if info is not None else None
        self._begin()

    def _begin(self) -> None:
        """The state of a connection that has not started (everything but the configuration)."""
        self.state = IDLE  # (where every session starts: ``_move`` changes it from here)
        self._requests: dict[str, SendPlan] = NOT_READY  # ``SessionSpeech.requests`` once "ready"
        self.revision: str | None = None
        self._codec: Codec | None = None  # the codec of what this side sends now
        self._speech: SessionSpeech | None = None
        self._codecs: dict[str, Codec] = {}
        self._out: list[bytes] = []
        self._outgoing: dict[Any, Outgoing] = {}
        self._incoming: dict[Any, _Incoming] = {}
        self._answered: dict[Any, str] = {}  # ids answered -> method, for error messages
        self._cancelled: dict[Any, str] = {}  # ids this side cancelled -> method
        self._cancelled_by_peer: dict[Any, str] = {}  # ids the peer cancelled
        self._tokens: dict[Any, Any] = {}  # progress token -> id of the request it reports on
        self._tasks: dict[Any, str] = {}  # task id this side created -> the method that created it
        self._next_id = 0
        self._handshake: Any = None  # id of the handshake request awaiting its answer
        self._asked = False  # this side sent a request (its codecs remember it)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(state={self.state!r}, revision={self.revision!r})"

    def _move(self, new: SessionState) -> None:
        """The one code that changes ``state``: to ``new``, when the session's table allows it
        from where it is (``IllegalTransition`` otherwise)."""
        if new not in self._transitions.get(self.state, ()):
            raise IllegalTransition(type(self).__name__, self.state, new)
        self.state = new

    # -- output ---------------------------------------------------------------------------------

    def data_to_send(self) -> list[bytes]:
        """The messages queued since the last call, in order, one JSON-RPC message each."""
        out, self._out = self._out, []
        return out

    # -- codecs ---------------------------------------------------------------------------------

    def _codec_for(self, revision: str) -> Codec:
        codec = self._codecs.get(revision)
        if codec is None:
            codec = self._codecs[revision] = Codec(revision, role=self.role, wire_results=True)
        return codec

    def _use(self, revision: str) -> Codec:
        """Send in ``revision`` from now on."""
        codec = self._codec_for(revision)
        self._codec, self._speech = codec, speech(revision)
        return codec

    def _sending(self, what: str) -> tuple[Codec, SessionSpeech]:
        if self._codec is None or self._speech is None or self.state is not READY:
            raise ProtocolError(
                INVALID_REQUEST,
                f"{type(self).__name__} is in state {self.state!r}: it cannot {what} "
                "until a revision is agreed",
            )
        return self._codec, self._speech

    # -- sending --------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        params: Any = None,
        *,
        id: RequestId | None = None,
        progress: bool = False,
    ) -> RequestId:
        """Queue a ``method`` request and return its id.

        ``params`` is the generated params Struct of the agreed revision, or plain JSON (a dict,
        checked and converted). The session allocates the id (unless given), fills the revision's
        per-request ``_meta`` envelope and, with ``progress=True``, a progress token. Raises
        ``ProtocolError`` and queues nothing when the request cannot be sent.
        """
        try:  # the checks of state and method made once: one subscript (none before "ready")
            send = self._requests[method]
        except KeyError:
            sent = self._extension_request(method, params, id, progress)
            if sent is not None:
                return sent
            send = self._request_plan(method)  # or why it cannot be sent
        outgoing = self._outgoing
        if id is None:
            id = self._new_id()
        elif id in outgoing:
            raise ProtocolError(
                INVALID_REQUEST,
                f"duplicate request id {id!r}: a {outgoing[id][0]!r} request with it "
                "awaits its response",
            )
        codec: Codec = self._codec  # type: ignore[assignment]  # (set: the state allows it)
        if (
            not progress
            and type(params) is send.params  # the fast path: a Struct with what it needs
            and (send.version_key is None or send.version_key in (params.meta or ()))
        ):
            data = codec.encode(send.wire(id=id, jsonrpc="2.0", params=params))
            outgoing[id] = (method, send.speech, params, None)
        else:
            token = id if progress else None
            params = self._params(send.speech, send, params, token)
            data = codec.encode(send.wire(id=id, jsonrpc="2.0", params=params))
            outgoing[id] = (method, send.speech, params, token)
            if token is not None:
                self._tokens[token] = id
        self._asked = True
        self._out.append(data)
        return id

    def _extension_request(
        self, method: str, params: Any, id: RequestId | None, progress: bool
    ) -> RequestId | None:
        """Queue a request of an extension this side sends, or None when ``method`` is none."""
        return None

    def _request_plan(self, method: str) -> SendPlan:
        """How to send a ``method`` request now, when ``_requests`` does not say: before the
        state is "ready" (only the client's handshake request may go then, ``_connecting``),
        the request that opens a session, a method not sent yet. Raises ``ProtocolError`` when
        it cannot be sent."""
        sp = self._speech
        if self._codec is None or sp is None or (self.state is not READY and not self._connecting):
            _, sp = self._sending(f"send {method!r}")  # raises, naming the state
        send = sp.send(method)
        if not send.request:
            raise ProtocolError(
                INVALID_REQUEST, f"{method!r} is a notification in MCP {sp.revision}: use notify"
            )
        if not send.opening:
            if method not in sp.extended:  # (those go by ``_extension_request`` each time)
                sp.requests[method] = send
        elif self.state is READY:  # before, it is connect()'s own handshake
            raise ProtocolError(
                INVALID_REQUEST,
                f"{type(self).__name__} is in state 'ready': {method!r} opens a session, and "
                f"only connect() sends it, once (MCP {sp.revision})",
            )
        return send

    def _ready(self) -> None:
        """State "ready": requests go out in ``_speech``'s revision, with ``_codec``."""
        self._move(READY)
        assert self._speech is not None and self._codec is not None
        self._requests = self._speech.requests

    def _new_id(self) -> int:
        self._next_id += 1
        while self._next_id in self._outgoing:
            self._next_id += 1
        return self._next_id

    def notify(self, method: str, params: Any = None) -> None:
        """Queue a ``method`` notification (params as for ``request``)."""
        codec, sp = self._sending(f"send {method!r}")
        self._notify(codec, sp, method, params)

    def _notify(self, codec: Codec, sp: SessionSpeech, method: str, params: Any) -> None:
        send = sp.send(method)
        if send.request:
            raise ProtocolError(
                INVALID_REQUEST, f"{method!r} is a request in MCP {sp.revision}: use request"
            )
        params = self._params(sp, send, params, None, envelope=False)
        self._out.append(codec.encode(send.wire(jsonrpc="2.0", params=params)))

    def _params(
        self, sp: SessionSpeech, send: SendPlan, params: Any, token: Any, envelope: bool = True
    ) -> Any:
        """The params Struct to send: the caller's own when it needs nothing added."""
        meta = sp.facts.request_meta if envelope else None
        if type(params) is send.params and token is None:
            if meta is None or meta.version_key in (params.meta or ()):
                return params  # the fast path: a Struct of this revision with what it needs
        elif params is not None and not isinstance(params, dict) and not _instance(params, send):
            where = getattr(type(params), "__module__", "")
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params for {send.spec.method!r}: {type(params).__name__} (from "
                f"{where}) is not {getattr(send.params, '__name__', send.params)} of "
                f"MCP {sp.revision}",
            )
        if (
            params is None
            and meta is None
            and token is None
            and (not send.spec.params_required or send.params is None)
        ):
            return UNSET
        if send.params is None:
            raise ProtocolError(
                INVALID_PARAMS, f"{send.spec.method!r} takes no params in MCP {sp.revision}"
            )
        data = dict(msgspec.to_builtins(params)) if params is not None else {}
        if send.meta_key is not None and (meta is not None or token is not None):
            extra = dict(data.get(send.meta_key) or {})
            if meta is not None:
                extra.setdefault(meta.version_key, sp.version)
                extra.setdefault(meta.capabilities_key, self._client_capabilities())
                info = self._client_info()
                if info is not None:
                    extra.setdefault(meta.info_key, info)
            if token is not None and sp.progress_key is not None:
                extra[sp.progress_key] = token
            data[send.meta_key] = extra
        return checked(data, send.params, sp.revision, "$.params")

    def _client_capabilities(self) -> Any:
        return self.capabilities

    def _client_info(self) -> Any:
        return self.info

    # -- responding -----------------------------------------------------------------------------

    def respond(self, request_id: RequestId, result: Any) -> None:
        """Queue the result of the request ``request_id`` the peer sent.

        ``result`` is a generated result Struct of the request's revision, or plain JSON. Raises
        ``ProtocolError`` and queues nothing when the id was not received or was already
        answered, or the result does not fit the request's method. A request the peer cancelled
        gets no response (the call queues nothing).
        """
        incoming = self._incoming.get(request_id)
        if incoming is None:
            self._no_request(request_id)
            return
        sp = incoming.speech
        result = self._result(incoming, result)
        data = incoming.codec.encode(Response(id=request_id, result=result))  # (respond's own)
        tasks = sp.facts.tasks
        if tasks is not None and type(result) is tasks.result:
            task = result
            for name in tasks.task_id:
                task = getattr(task, name)
            _remember(self._tasks, task, incoming.method)
        self._answer(request_id, incoming)
        self._out.append(data)

    def respond_error(
        self, request_id: RequestId, code: int, message: str, data: Any = None
    ) -> None:
        """Queue an error response to the request ``request_id`` the peer sent."""
        incoming = self._incoming.get(request_id)
        if incoming is None:
            self._no_request(request_id)
            return
        out = incoming.codec.encode(
            ErrorResponse(
                id=request_id,
                error=ErrorObject(code=code, message=message, data=UNSET if data is None else data),
            )
        )
        self._answer(request_id, incoming)
        self._out.append(out)

    def respond_unchecked(self, request_id: RequestId, result: Any, read: bool = False) -> None:
        """Queue ``result`` (plain JSON, not checked: an answer no class of the session's revision
        has, as a bridge translating an extension gives) as the response to ``request_id``;
        ``read``: a request this session read, which then stops awaiting its answer (nothing is
        queued when it no longer awaits one: the peer cancelled it)."""
        if read:
            incoming = self._incoming.get(request_id)
            if incoming is None:
                return
            self._answer(request_id, incoming)
        self._out.append(_RAW.encode({"jsonrpc": "2.0", "id": request_id, "result": result}))

    def _answer(self, request_id: RequestId, incoming: _Incoming) -> None:
        del self._incoming[request_id]
        _remember(self._answered, request_id, incoming.method)

    def _no_request(self, request_id: Any) -> None:
        if request_id in self._cancelled_by_peer:
            return
        method = self._answered.get(request_id)
        why = (
            f"was already answered (a {method!r} request)"
            if method is not None
            else f"was not received from the {self.peer}"
        )
        raise ProtocolError(INVALID_REQUEST, f"cannot respond: request id {request_id!r} {why}")

    def _result(self, incoming: _Incoming, result: Any) -> Any:
        """The result Struct answering ``incoming``: checked, or converted from plain JSON."""
        sp = incoming.speech
        facts = sp.facts
        method = incoming.method
        own = facts.wires[method].result
        tasks = facts.tasks
        if tasks is not None and method == tasks.payload_method:
            created = self._tasks.get(getattr(incoming.params, tasks.payload_task_id, None))
            if created is not None:
                own = facts.wires[created].result
        if type(result) is own:  # the common case: the method's own result class
            return result
        allowed = [own]
        augmented = tasks is not None and getattr(incoming.params, tasks.when, UNSET) is not UNSET
        if augmented and tasks is not None:
            allowed.append(tasks.result)
        kinds = facts.result_kinds
        if kinds is not None:
            allowed += kinds.classes.values()
        if type(result) is dict:
            target = tasks.result if augmented and tasks is not None else own
            if kinds is not None:
                value = result.setdefault(kinds.key, kinds.own)
                target = kinds.classes.get(value, target) if type(value) is str else target
            return checked(result, target, sp.revision, "$.result")
        if any(isinstance(result, a) for a in allowed):
            return result
        names = " or ".join(getattr(a, "__name__", str(a)) for a in allowed)
        raise ProtocolError(
            INVALID_PARAMS,
            f"Invalid result for {method!r}: {type(result).__name__} (from "
            f"{getattr(type(result), '__module__', '')}) is not {names} of MCP {sp.revision}",
        )

    # -- cancelling and progress ----------------------------------------------------------------

    def cancel(self, request_id: RequestId, reason: str | None = None) -> None:
        """Cancel the request ``request_id`` this side sent: queue the cancelled notification;
        a response that still arrives is dropped (a ``ResponseDropped`` event)."""
        outgoing = self._outgoing.get(request_id)
        if outgoing is None:
            raise ProtocolError(
                INVALID_REQUEST,
                f"cannot cancel: no request with id {request_id!r} awaits a response",
            )
        codec, sp = self._sending("cancel a request")
        method = sp.facts.lifecycle.get("cancelled")
        if method is None:
            raise ProtocolError(METHOD_NOT_FOUND, f"MCP {sp.revision} has no cancellation")
        params = sp.send(method).params(
            request_id=request_id, reason=UNSET if reason is None else reason
        )
        self._notify(codec, sp, method, params)
        del self._outgoing[request_id]
        self._tokens.pop(outgoing[3], None)
        _remember(self._cancelled, request_id, outgoing[0])

    def progress(
        self,
        request_id: RequestId,
        progress: float,
        total: float | None = None,
        message: str | None = None,
    ) -> None:
        """Report progress on the request ``request_id`` the peer sent with a progress token."""
        incoming = self._incoming.get(request_id)
        if incoming is None or incoming.token is None:
            raise ProtocolError(
                INVALID_REQUEST,
                f"cannot report progress: request {request_id!r} is not in flight with a "
                "progress token",
            )
        sp = incoming.speech
        method = sp.facts.lifecycle["progress"]
        cls = sp.send(method).params
        values: dict[str, Any] = {"progress_token": incoming.token, "progress": progress}
        if total is not None:
            values["total"] = total
        if message is not None:
            if "message" not in wire_fields(cls):  # 2024-11-05's progress has no message
                raise ProtocolError(
                    INVALID_PARAMS, f"a progress notification of MCP {sp.revision} has no message"
                )
            values["message"] = message
        self._notify(incoming.codec, sp, method, cls(**values))

    # -- receiving ------------------------------------------------------------------------------

    def _receive(self, codec: Codec, sp: SessionSpeech, raw: Any, events: list[Event]) -> None:
        """Decode one message (or a batch) from the peer in ``sp``'s revision, into events."""
        if sp.batches and _ARRAY(raw) is not None and self._batch(codec, sp, raw, events):
            return
        try:
            msg = codec.decode(raw)
        except ProtocolError as err:
            self._refuse(raw, err, events)
            return
        self._dispatch(codec, sp, msg, events)

    def _batch(self, codec: Codec, sp: SessionSpeech, raw: Any, events: list[Event]) -> bool:
        """Receive a batch member by member, as JSON-RPC asks: a member that cannot be read is
        refused on its own and the others still count (the codec refuses a whole batch, after
        some members may have ended their requests). False when it is not a readable, non-empty
        array: the codec then says what is wrong with it."""
        try:
            members = _MEMBERS.decode(raw)
        except (msgspec.DecodeError, ValueError, RecursionError):
            return False
        if not members:
            return False
        for member in members:
            one = bytes(member)
            if _ARRAY(one) is not None:
                self._refuse(one, ProtocolError(INVALID_REQUEST, _NESTED), events)
            else:
                self._receive(codec, sp, one, events)
        return True

    def _dispatch(self, codec: Codec, sp: SessionSpeech, msg: Any, events: list[Event]) -> None:
        """Turn one decoded message into events (and automatic answers)."""
        t = type(msg)
        if t is Response:
            self._on_response(msg, self._outgoing.pop(msg.id, None), events)
        elif t in sp.answers:  # a result the codec read in one pass (``wire_results``)
            answer = Response(id=msg.id, result=msg.result)
            self._on_response(answer, self._outgoing.pop(msg.id, None), events)
        elif t is ErrorResponse:
            self._on_error(msg, events)
        elif t is Request:
            self._on_request(codec, sp, msg.id, msg.message, events)
        else:
            _, is_request = sp.kinds[t]
            if is_request:
                self._on_request(codec, sp, msg.id, msg, events)
            else:
                self._on_notification(codec, sp, msg, events)

    def _on_request(
        self, codec: Codec, sp: SessionSpeech, id: Any, message: Any, events: list[Event]
    ) -> None:
        method = message.method
        params = message.params
        if id in self._incoming:
            events.append(
                self._rejected(
                    ProtocolError(
                        INVALID_REQUEST,
                        f"duplicate request id {id!r}: a {self._incoming[id].method!r} request "
                        "with it is still unanswered",
                        id=id,
                    )
                )
            )
            return
        token = None
        if sp.progress_key is not None and params is not UNSET:
            meta = getattr(params, "meta", UNSET)
            if isinstance(meta, dict):
                token = meta.get(sp.progress_key)
        self._incoming[id] = _Incoming(method, codec, sp, params, token)
        if sp.roles.get(method) == "ping":
            self.respond(id, {})
            events.append(PingReceived(id=id))
            return
        events.append(
            RequestReceived(
                id=id, method=method, params=params, message=message, revision=sp.revision
            )
        )

    def _on_notification(
        self, codec: Codec, sp: SessionSpeech, msg: Any, events: list[Event]
    ) -> None:
        role = sp.roles.get(msg.method)
        params = msg.params
        if role == "cancelled":
            rid = params.request_id
            reason = None if params.reason is UNSET else params.reason
            # A side cancels only requests it sent: the id is one of the peer's requests (never
            # one of this side's, which the peer could otherwise make it forget, the handshake
            # too). None in flight: it crossed the response, nothing is left to cancel.
            if self._incoming.pop(rid, None) is not None:
                _remember(self._cancelled_by_peer, rid, "")
                events.append(RequestCancelled(id=rid, reason=reason))
            return
        if role == "progress":
            token = params.progress_token
            events.append(
                ProgressReceived(
                    id=self._tokens.get(token),
                    token=token,
                    progress=params.progress,
                    total=None if params.total is UNSET else params.total,
                    message=None if getattr(params, "message", UNSET) is UNSET else params.message,
                )
            )
            return
        self._notification(codec, sp, msg, role, events)

    def _notification(
        self, codec: Codec, sp: SessionSpeech, msg: Any, role: str | None, events: list[Event]
    ) -> None:
        events.append(
            NotificationReceived(
                method=msg.method, params=msg.params, message=msg, revision=sp.revision
            )
        )

    def _on_response(
        self, msg: Response[Any], outgoing: Outgoing | None, events: list[Event]
    ) -> None:
        """The events of a result response; ``outgoing``: the request it answers, taken out of
        those awaiting one (None when none awaited it)."""
        id = msg.id
        if outgoing is None:
            self._unexpected(id, events)
            return
        method, sp, params, token = outgoing
        if token is not None:
            del self._tokens[token]
        result = msg.result
        handshake = self._handshake
        if handshake is not None and id == handshake and type(id) is type(handshake):
            self._handshake = None
            self._handshake_answer(outgoing, result, None, events)
            return
        tasks = sp.facts.tasks
        if (
            tasks is not None
            and type(result) is tasks.result
            and getattr(params, tasks.when, UNSET) is not UNSET  # it was sent as a task
        ):
            task = result
            for name in tasks.task_id:
                task = getattr(task, name)
            events.append(TaskCreated(id=id, method=method, task_id=task, result=result))
            return
        if type(result) is sp.open_result and sp.ext is not None:
            try:
                answer = sp.ext.answer(id, method, params, result)
            except ProtocolError as err:
                events.append(self._rejected(err))
                return
            if answer is not None:
                events.append(answer)
                return
        if type(result) is sp.input_required:
            events.append(
                InputRequired(
                    id=id,
                    method=method,
                    params=params,
                    input_requests=result.input_requests,
                    request_state=result.request_state,
                    result=result,
                )
            )
            return
        events.append(ResultReceived(id=id, method=method, result=result))

    def _on_error(self, msg: ErrorResponse, events: list[Event]) -> None:
        id = msg.id
        err = msg.error
        data = None if err.data is UNSET else err.data
        outgoing = self._outgoing.pop(id, None) if id is not None and id is not UNSET else None
        if outgoing is None:
            if id in self._cancelled:
                events.append(ResponseDropped(id=id, method=self._cancelled.pop(id)))  # type: ignore[arg-type]
                return
            events.append(
                ErrorReceived(
                    id=None if id is UNSET else id,
                    method=None,
                    code=err.code,
                    message=err.message,
                    data=data,
                )
            )
            return
        if outgoing[3] is not None:
            del self._tokens[outgoing[3]]
        if id == self._handshake and type(id) is type(self._handshake):
            self._handshake = None
            self._handshake_answer(outgoing, None, err, events)
            return
        events.append(
            ErrorReceived(id=id, method=outgoing[0], code=err.code, message=err.message, data=data)  # type: ignore[arg-type]
        )

    def _handshake_answer(
        self, outgoing: Outgoing, result: Any, error: ErrorObject | None, events: list[Event]
    ) -> None:
        """Handle the answer (a result, or an error) to this side's handshake request."""
        raise NotImplementedError

    def _unexpected(self, id: Any, events: list[Event]) -> None:
        if id in self._cancelled:
            events.append(ResponseDropped(id=id, method=self._cancelled.pop(id)))
            return
        events.append(
            self._rejected(
                ProtocolError(
                    INVALID_REQUEST,
                    f"unexpected response: the {self.role} sent no request with id {id!r} "
                    "that awaits one",
                    id=id,
                )
            )
        )

    def _rejected(self, error: ProtocolError, answered: bool = False) -> MessageRejected:
        """The event of a peer's mistake; the error message says which side made it."""
        error.message = f"from the {self.peer}: {error.message}"
        error.args = (error.message,)
        return MessageRejected(error=error, sender=self.peer, answered=answered)

    def _reject_request(self, codec: Codec, error: ProtocolError, events: list[Event]) -> None:
        """A request the session refuses although it decoded: the error response, and an event."""
        self._out.append(codec.error_response(error))
        events.append(self._rejected(error, answered=True))

    def _refuse(self, data: bytes, error: ProtocolError, events: list[Event]) -> None:
        """An undecodable message: an event, and the error response when it was a request."""
        if error.code == METHOD_NOT_FOUND and self._extension_message(data, events):
            return
        answer = _answerable(data, error)
        if answer:
            codec = self._codec or next(iter(self._codecs.values()), None)
            out = codec.error_response(error) if codec is not None else error.to_json()
            self._out.append(out)
        elif error.id is not None:
            # An unreadable response still ends its request (the codec forgot it too): nothing
            # else will answer it, and its id, progress token and cancel() are free again.
            outgoing = self._outgoing.pop(error.id, None)
            if outgoing is not None and outgoing[3] is not None:
                self._tokens.pop(outgoing[3], None)
        events.append(self._rejected(error, answered=answer))
        handshake = self._handshake
        if (
            handshake is not None
            and not answer
            and error.id == handshake
            and type(error.id) is type(handshake)
        ):
            self._handshake = None  # nothing else will answer it: the session cannot open
            self._handshake_unreadable(error, events)

    def _handshake_unreadable(self, error: ProtocolError, events: list[Event]) -> None:
        """The answer to this side's handshake request could not be read."""
        raise NotImplementedError

    def _extension_message(self, data: bytes, events: list[Event]) -> bool:
        """Whether ``data``, a message whose method the revision's codec does not know, is one
        of an extension this side receives (its events appended then)."""
        return False


_ARRAY = re.compile(rb"[ \t\r\n]*\[").match  # a batch: JSON whose first token is [
_MEMBERS = msgspec.json.Decoder(list[msgspec.Raw])
_NESTED = "Invalid Request: a batch inside a batch"


class _RefusedShape(msgspec.Struct, gc=False):
    """Which kind of message a refused one was meant to be (keys present, values raw)."""

    id: msgspec.Raw = msgspec.Raw(b"")
    method: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: msgspec.Raw = msgspec.Raw(b"")


_REFUSED_SHAPE = msgspec.json.Decoder(_RefusedShape)


def _answerable(data: bytes, error: ProtocolError) -> bool:
    """Whether a refused message gets an error response: a request (an id and a method), or a
    message too broken to say, as JSON-RPC asks; never a response or a notification."""
    try:
        peek = _REFUSED_SHAPE.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return True  # not JSON, or not an object: a parse or invalid-request error, id null
    if peek.result or peek.error:
        return False
    return bool(peek.id) or not peek.method  # a notification gets none
