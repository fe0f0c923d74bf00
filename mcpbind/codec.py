"""The runtime codec: JSON-RPC messages of one revision <-> the generated Structs.

Every fact about a revision comes from its generated ``FACTS`` record and ``METHODS`` table;
this module names no revision and no method. See docs/design.md, "Runtime codec".
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ._revisions import REVISIONS
from ._support import Facts, dec_hook, join_path
from ._tables import Method, tables_for
from .capabilities import Advertised
from .errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, ProtocolError
from .messages import ErrorObject, ErrorResponse, Request, RequestId, Response

# isort: off
from ._nonfinite import SCAN_MAX, refuse_nonfinite
from ._nonfinite import encode_json as encode_json  # (the sessions import it from here)

# isort: on

__all__ = ["Codec", "ErrorObject", "ErrorResponse", "Request", "Response"]


class _ErrorEnvelope(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    error: ErrorObject
    id: RequestId | None | UnsetType = UNSET


class _Envelope(msgspec.Struct, gc=False):
    """Any JSON-RPC message, members kept raw: read by the classifier of what the fast paths
    refuse."""

    jsonrpc: Raw = Raw(b"")
    id: Raw = Raw(b"")
    method: Raw = Raw(b"")
    result: Raw = Raw(b"")
    error: Raw = Raw(b"")


class _Id(msgspec.Struct, gc=False):
    id: Any = None


class _NoMethod:
    """What decode's fast path reads when no one pending request is the one to try."""

    response = None


_encode = msgspec.json.encode
_HEAD = 512  # bytes of a message searched for "result" while a request is pending
_ENVELOPE = msgspec.json.Decoder(Union[_Envelope, list[Raw]])  # noqa: UP007
_ERROR = msgspec.json.Decoder(_ErrorEnvelope)
_ID = msgspec.json.Decoder(_Id)
_ANY = msgspec.json.Decoder()
_FAILED = (msgspec.DecodeError, RecursionError, ValueError, TypeError)
_IDS = (str, int)  # the types of a JSON-RPC request id (a bool is neither)
_NAME_MAX = 80  # characters of a peer's method name quoted back in an error
_TASKS_MAX = 1024  # open tasks a codec remembers
_NO_METHOD = _NoMethod()


def _failure(exc: Exception, code: int, what: str, id_: Any = None) -> ProtocolError:
    """The one classifier of decode failures: a value of the wrong shape is ``code``, anything
    else is a parse error."""
    if isinstance(exc, msgspec.ValidationError):
        return ProtocolError(code, f"{what}: {join_path(str(exc))}", id=id_)
    reason = "nesting too deep" if isinstance(exc, RecursionError) else str(exc)
    return ProtocolError(PARSE_ERROR, f"Parse error: {reason}", id=id_)


def _senders(sender: str) -> str:
    return "client and server" if sender == "both" else sender


class Codec:
    """Encode and decode the JSON-RPC messages of one revision, for one side of a session.

    ``role`` is the side this process plays (``"client"`` or ``"server"``): it decides which
    methods may be received (a request the peer may not send is -32601) and sent.

    ``requires`` (revisions with the per-request ``_meta`` envelope, server side): method name ->
    the client capabilities a request needs beyond the generated gates; a request whose ``_meta``
    lacks them gets the revision's missing-capability error.

    Capability gates (``MethodSpec.gates``): once the codec knows what a side advertised, a message
    that needs a capability that side did not advertise is refused with -32601, on decode when it
    is this side's capability and on encode when it is the peer's. The codec learns both sides'
    capabilities from the messages that carry them, or from ``capabilities`` and
    ``peer_capabilities``. It reads a capabilities object once: assign a new one to change them.

    ``wire_results=True`` (sessions use it: they build an event of their own from it): a result
    response that ``decode`` reads in its one pass comes back as it decoded, in the response
    class of its method's ``FACTS.wires`` entry (``jsonrpc``, ``id`` and ``result``, of the
    method's own result class), without the ``Response`` built around it; every other message
    decodes as without it.

    Task-augmented requests (where ``FACTS.tasks``): a request sent with a task (or told of with
    ``expect_request``) is answered by the task's creation result; the payload request of that
    task by the result of the method that created it. The codec remembers up to 1,024 open tasks.
    """

    def __init__(
        self,
        revision: str,
        role: str = "client",
        *,
        requires: dict[str, Any] | None = None,
        capabilities: Any = None,
        peer_capabilities: Any = None,
        wire_results: bool = False,
    ) -> None:
        if role not in ("client", "server"):
            raise ValueError(f"role must be 'client' or 'server', not {role!r}")
        self._t = tables_for(revision, role)  # UnknownRevisionError for a revision not pinned
        self.module = self._t.module
        self.revision, self.role = revision, role
        self.peer = "server" if role == "client" else "client"
        self.facts: Facts = self._t.facts
        self._fast, self._by_wire, self._send = self._t.fast, self._t.by_wire, self._t.send
        # what a message ``_fast`` refused is read with, where ``_fast`` reads closed twins
        # (``_tables._closed``); once it reads one, ``_fast`` itself (``_open_wire``)
        self._open, self._open_at = self._t.open, self._t.open_at
        self._learners, self._methods = self._t.learners, self._t.methods
        kinds = self.facts.result_kinds
        self._own_kind = kinds.own if kinds is not None else None
        self._task_when = self.facts.tasks.when if self.facts.tasks is not None else ""
        # id of a request sent -> its method's table entry (its name, for a method not in them)
        self._pending: dict[Any, Method | str] = {}
        self._last: Any = None  # the id last added to it: the one, when one is pending
        # id -> (the method whose result answers it, None for a task's creation; the task id)
        self._answers: dict[Any, tuple[str | None, Any]] = {}
        self._tasks: dict[Any, str] = {}  # task id -> the method that created it
        self._in_batch = False  # decoding the members of a batch
        self._gates = Advertised(self._t, revision, role, requires)
        self._check_meta = self._gates.meta_checked
        self._requires = self._gates.requires  # method -> the client capabilities it needs
        # the gates' own dicts and sets, read on the hot paths without another attribute hop
        self._caps, self._passed = self._gates.caps, self._gates.passed
        self._light = self._gates.light
        self._passed_in, self._light_in = self._passed[True], self._light[True]  # (received)
        self.wire_results = wire_results
        if capabilities is not None:  # (a new codec knows none: None changes nothing)
            self.capabilities = capabilities
        if peer_capabilities is not None:
            self.peer_capabilities = peer_capabilities

    def __repr__(self) -> str:
        return f"Codec({self.revision!r}, role={self.role!r})"

    def expect(self, id: RequestId, method: str) -> None:
        """Tell the codec that the response with ``id`` answers a ``method`` request."""
        try:  # (a subscript: cheaper than get)
            self._pending[id] = self._methods[method]
        except KeyError:  # a method not in the tables: kept by its name
            self._pending[id] = method
        self._last = id

    def expect_request(self, request: Any) -> None:
        """Tell the codec that a response will answer ``request``, one it did not encode itself
        (a request a proxy forwards, a recorder or a validator saw): ``expect`` with what the
        request's params decide as well, as ``encode`` learns it (``FACTS.tasks``): a request
        asking for a task is answered by the task's creation result, the payload request of a
        task whose creation this codec decoded by the result of the method that created it.

        ``request``: a request of this revision as ``decode`` returns it (a ``Request``, the
        message class itself, or its wire class), or the plain dict of its JSON (``id``,
        ``method``, ``params``; its params a dict or the generated params Struct). Anything else
        raises ``TypeError``; a dict without a string ``method`` or a valid ``id``, ``ValueError``.
        """
        id_, method, params = self._request_parts(request, "expect_request")
        _check_id(id_)
        m = self._t.methods.get(method)
        self._pending[id_] = method if m is None else m
        self._last = id_
        if m is not None and m.tasked:
            self._expect_task(m, id_, params)

    def requested_task(self, request: Any) -> str | None:
        """The method that created the task ``request`` names (in its params, as ``tasks/get``
        and the payload request do), when this side asked for that task and has not had its
        payload yet; otherwise None. Only a task's requester polls it, cancels it and asks for
        its payload, so this tells which side sends such a request. ``request`` as
        ``expect_request`` takes it (its id is not looked at)."""
        _, method, params = self._request_parts(request, "requested_task")
        m = self._t.methods.get(method)
        if m is None or not self._tasks:
            return None
        try:
            return self._tasks.get(self._named_task(m, params))
        except TypeError:  # a list or an object where the task id belongs
            return None

    def _request_parts(self, request: Any, what: str) -> tuple[Any, str, Any]:
        """(id, method, params) of a request as ``expect_request`` takes it."""
        t = type(request)
        if t is dict:
            method = request.get("method")
            if type(method) is not str:
                raise ValueError(f"a request has a string 'method', not {method!r}")
            return request.get("id"), method, request.get("params")
        m = self._t.by_message.get(type(request.message) if t is Request else t)
        if m is None or not m.request or (t is Request) is not m.wrapped:
            raise TypeError(
                f"Codec.{what} takes a request of MCP {self.revision} with its id, "
                f"or the dict of its JSON, not {t.__name__}"
            )
        return request.id, m.name, _params(request)

    @property
    def pending(self) -> dict[Any, str]:
        """Ids of requests awaiting a response, with their methods (a copy)."""
        return {k: m.name if isinstance(m, Method) else m for k, m in self._pending.items()}

    # -- decode ---------------------------------------------------------------------------------

    def decode(self, data: bytes | bytearray | memoryview | str) -> Any:
        """Decode one JSON-RPC message (or a batch, to a list, where the revision has them).

        Requests and notifications decode in one pass as the tagged union of every method this
        side may receive, a response to a pending request in one pass as its precise result.
        Everything else goes through one classifier that says exactly what is wrong. Bad input
        raises ``ProtocolError``, never another exception.
        """
        if type(data) is not bytes:
            data = _as_bytes(data)
        if not data.isascii():
            _check_utf8(data)  # msgspec skips the values it does not keep without checking them
        # partition: cheaper than find (which parses its bounds) and ``in`` (which tries the
        # needle as an integer first); on a long message only its head is searched
        pending = self._pending
        if pending:
            # (a slice of the whole is the message itself: no copy for a short one)
            head = data[:_HEAD]
            if head.partition(b'"result"')[1]:
                id_ = self._last
                m: Any = _NO_METHOD
                if len(pending) == 1 and not self._answers:
                    try:  # noqa: SIM105 (a subscript: cheaper than get, and suppress than both)
                        m = pending[id_]
                    except KeyError:  # (the last one added was answered before an earlier one)
                        pass
                try:
                    response = m.response
                except AttributeError:  # (a method not in the tables, pending by its name)
                    response = None
                if response is not None:
                    # _fast_response's usual case written out here (a Python call is 500
                    # instructions): the one pending request, the last sent, answered
                    try:
                        env = response.decode(data)
                    except _FAILED:
                        env = None
                    if (
                        env is not None
                        # (the pending dict's own equality: see _fast_response; the id read once,
                        # as every attribute of a class that changes from call to call is read
                        # the slow way)
                        and (got := env.id) == id_
                        and (
                            m.kind_attr is None
                            or getattr(env.result, m.kind_attr) == self._own_kind
                        )
                    ):
                        del pending[id_]
                        if m.result_learns:
                            self._gates.learn(env.result)
                        return env if self.wire_results else Response(id=got, result=env.result)
                else:
                    found = self._fast_response(data)
                    if found is not None:
                        return found
            elif head.partition(b'"error"')[1]:
                error = self._fast_error(data)
                if error is not None:
                    return error
        fast = self._fast
        try:
            wire = fast.decode(data)
        except _FAILED as exc:
            # read again with the wire Structs: a refusal by the twins at their _meta itself
            wire = (
                self._open_wire(data)
                if self._open_at and fast is not self._open and str(exc).endswith(self._open_at)
                else None
            )
            if wire is None:
                # an error response nobody awaits (one with an id of null among them), or else
                error = self._fast_error(data) if data.partition(b'"error"')[1] else None
                return error if error is not None else self._classify(data)
        m = self._by_wire[type(wire)]
        if not m.request and data.partition(b'"id"')[1]:
            return self._classify(data)  # a notification with an id is refused there
        if m.enveloped:
            msg = wire
        elif (restore := m.restore) is not None:
            # read as its closed twin (_tables._closed), an enveloped message whose entry says
            # it is not, so that the test above is the only one of the usual path: its classes
            wire.__class__, params_class, from_fields = restore
            params = wire.params
            params.__class__ = params_class
            params.meta = from_fields(params.meta)
            msg = wire
        elif m.request:  # m.build written out (a call less)
            message = m.message  # (read as an attribute: a method call's lookup is the slow one)
            msg = Request(id=wire.id, message=message(params=wire.params))
        else:
            message = m.message
            msg = message(params=wire.params)
        if m.gated and self._caps and m.name not in self._passed_in and self._gated(m, msg):
            return msg
        if m.learns:
            self._received(m, msg)
        elif self._check_meta and m.request:
            # The envelope's usual case read here, without the two calls of the full check: a
            # _meta of its class naming a supported version, for a method needing no capability.
            t = self._t
            try:  # (no params, params without _meta, or _meta without a version: the full check)
                meta = msg.params.meta
                usual = type(meta) is t.meta_class and meta[t.version_key] in t.versions
            except (AttributeError, KeyError, TypeError):
                usual = False
            if not usual or m.name in self._requires:
                self._received(m, msg)
        return msg

    def _open_wire(self, data: bytes) -> Any:
        """A message the fast decoder's closed twins refused at their ``_meta`` itself
        (``_open_at``: a key the twin does not declare), read as the tagged union of the wire
        Structs themselves; None when that does not read it either.

        Only such a refusal is tried so: the twin reads the rest of a message as its wire Struct
        does, and a declared key of ``_meta`` as that object's hook does, so msgspec, which stops
        at the first error, stops at any other in both (a message refused there goes to
        ``_classify``, as before the twins).

        A message read so was refused by a twin alone: its peer sends ``_meta`` keys the schema
        does not declare, and likely will again. From then on this codec reads every message
        with the wire Structs themselves (a latch): the cost of a message before the twins, not
        that and a refusal. The latch is this codec's, not its revision's tables': a peer that
        sends such keys slows the codecs it is read with (a stateless server's spare codecs
        among them, which serve other peers next), not every codec of the process. Both
        decoders read a message to the same value, classes and errors (a ``_meta`` of declared
        keys only holds them in the peer's order, not the declared one), so the latch changes
        only what a message costs; and it is one attribute set to one of two immutable decoders,
        so a codec two threads share reads every message right whichever they see (decode tries
        this after the decoder it used, not whichever ``_fast`` is by then).
        """
        open_ = self._open
        assert open_ is not None  # (``_open_at`` is empty without twins)
        try:
            wire = open_.decode(data)
        except _FAILED:
            return None
        self._fast = open_
        return wire

    def _gated(self, m: Method, msg: Any) -> bool:
        """A received message of a method not yet let through its capability gates: checked by
        them and then as ``_received`` checks it (True), or nothing done when the method is
        settled but for one conditional gate whose value is absent (False)."""
        params = getattr(msg.message if m.wrapped else msg, "params", UNSET)
        light = self._light_in
        if (
            light
            and (found := light.get(m.name)) is not None
            and type(params) is found[0]
            and getattr(params, found[1]) is UNSET
        ):
            return False
        self._gates.check(m, params, msg, True)
        if self._check_meta and m.request:  # (what _received does after its gates)
            self._gates.check_meta(m, params, msg.id)
        if m.learns:
            self._gates.learn(params)
        return True

    def _fast_error(self, data: bytes) -> ErrorResponse | None:
        """An error response in one closed pass, as the classifier reads it once every other
        reading failed (no "method", no "result", an id that is a JSON-RPC id or null); None
        when it is not plainly that."""
        try:
            err = _ERROR.decode(data)
        except _FAILED:
            return None
        self._forget(err.id)
        return ErrorResponse(id=err.id, error=err.error)

    def _fast_response(self, data: bytes) -> Any:
        """A result response to a pending request in one closed pass (a ``Response``, or as it
        decoded with ``wire_results``); None when it is not plainly that (the classifier then
        decides, errors included)."""
        pending = self._pending
        m: Method | str | None
        if len(pending) == 1:
            id_ = self._last
            try:  # (a subscript: cheaper than get)
                m = pending[id_]
            except KeyError:  # (the last one added was answered before an earlier one)
                for id_, m in pending.items():  # noqa: B007 (cheaper than next(iter()))
                    break
        else:
            try:
                id_ = _ID.decode(data).id
            except _FAILED:
                return None
            m = pending.get(id_) if type(id_) in _IDS else None
        if type(m) is not Method or m.response is None or (self._answers and id_ in self._answers):
            return None  # a task's result, or one without a precise class: the classifier's
        try:
            env = m.response.decode(data)
        except _FAILED:
            return None
        got = env.id
        if got != id_:  # (the id decoded, an int or a string, equal to the pending key: as the
            return None  # classifier's dict lookup finds it, whatever the key's type)
        if m.kind_attr is not None and getattr(env.result, m.kind_attr) != self._own_kind:
            return None  # it says it is another kind of result: the classifier decides
        del pending[id_]
        if m.result_learns:
            self._gates.learn(env.result)
        return env if self.wire_results else Response(id=got, result=env.result)

    def _answered(self, id_: Any, method: str, result: Any) -> Response[Any]:
        """The response to the pending request ``id_`` of ``method``, with what it teaches."""
        del self._pending[id_]
        answers = self._answers.pop(id_, None)
        if answers is not None and self.facts.tasks is not None:
            if answers[0] is None:  # a task was created: its payload is this method's result
                if len(self._tasks) >= _TASKS_MAX:
                    del self._tasks[next(iter(self._tasks))]
                self._tasks[_get(result, self.facts.tasks.task_id)] = method
            else:
                self._tasks.pop(answers[1], None)  # the task ended with its payload
        else:
            m = self._t.methods.get(method)
            if m is not None and m.result_learns:
                self._gates.learn(result)
        return Response(id=id_, result=result)

    def _classify(self, data: bytes) -> Any:
        """Everything the fast paths refused: say exactly what it is, or what is wrong."""
        try:
            env = _ENVELOPE.decode(data)
        except _FAILED as exc:
            raise _failure(exc, INVALID_REQUEST, "Invalid Request") from None
        if isinstance(env, list):
            if not self.facts.batches:
                raise _invalid(f"JSON-RPC batches are not part of MCP {self.revision}")
            if not env or self._in_batch:
                raise _invalid("a batch inside a batch" if self._in_batch else "empty batch")
            self._in_batch = True  # its members come back through decode, one level deep
            try:
                return [self.decode(bytes(item)) for item in env]
            finally:
                self._in_batch = False
        id_ = _plain(env.id)
        id_ok = type(id_) is str or type(id_) is int
        if not id_ok:
            id_ = None
        if _plain(env.jsonrpc) != "2.0":
            raise _invalid('"jsonrpc" must be "2.0"', id_)
        if env.method:
            method = _plain(env.method)
            if not isinstance(method, str):
                raise _invalid('"method" must be a string', id_)
            if env.id and not id_ok:
                raise _invalid('"id" must be a string or an integer')
            return self._bad_message(method, bool(env.id), id_, data)
        if env.result and env.error:
            raise _invalid('a response has "result" or "error", not both', id_)
        if env.result:
            if not id_ok:
                raise _invalid('a result response needs a string or integer "id"')
            return self._result(id_, env.result)
        if not env.error:
            raise _invalid(
                'not a request, notification or response (no "method", "result" or "error")', id_
            )
        if env.id and not id_ok and _plain(env.id) is not None:
            raise _invalid('"id" must be a string, an integer or null')
        try:
            err = _ERROR.decode(data)
        except _FAILED as exc:
            raise _failure(
                exc, INVALID_REQUEST, "Invalid Request: bad error response", id_
            ) from None
        self._forget(err.id)
        return ErrorResponse(id=err.id, error=err.error)

    def _forget(self, id_: Any) -> None:
        """The request ``id_`` was answered without a result (an error, or one that could not be
        read): it is no longer pending, nor the task payload it asked for."""
        if self._pending.pop(id_, None) is not None:
            answers = self._answers.pop(id_, None)
            if answers is not None and answers[0] is not None:
                self._tasks.pop(answers[1], None)

    def _bad_message(self, method: str, has_id: bool, id_: Any, data: bytes) -> Any:
        """A request or notification the fast path refused: say exactly why."""
        m = self._t.methods.get(method)
        if m is None or method not in self._t.receive:
            short = method if len(method) <= _NAME_MAX else method[:_NAME_MAX] + "..."
            if m is None:
                why = f"{short!r} is not part of MCP {self.revision}; {_where(method)}"
            else:
                why = f"in MCP {self.revision} {method!r} is sent by the {_senders(m.spec.sender)}, so a {self.role} does not receive it"
            raise ProtocolError(
                METHOD_NOT_FOUND, f"Method not found: {why}", {"method": short}, id_
            )
        if (m.spec.kind == "request") != has_id:
            need = (
                'a request needs an "id"'
                if m.spec.kind == "request"
                else 'a notification has no "id"'
            )
            raise _invalid(f"{method!r} is a {m.spec.kind}; {need}", id_)
        try:
            wire = msgspec.json.decode(data, type=m.wire.wire, dec_hook=dec_hook)
        except _FAILED as exc:
            where = f"for {method!r} (MCP {self.revision})"
            failure = _failure(exc, INVALID_REQUEST, f"Invalid Request {where}", id_)
            if failure.code == INVALID_REQUEST and (
                "`$.params" in failure.message or "`params`" in failure.message
            ):
                failure = _failure(exc, INVALID_PARAMS, f"Invalid params {where}", id_)
            raise failure from None
        return self._received(m, m.build(wire))  # "id" in its params misled the fast path

    def _result(self, id_: Any, raw: Raw) -> Response[Any]:
        """A result response the fast path did not take: its class by the rules, or why not."""
        found = self._pending.get(id_)
        method = found.name if isinstance(found, Method) else found
        m = self._t.methods.get(method) if method is not None else None
        answers = self._answers.get(id_)
        kinds = self.facts.result_kinds
        target: Any = self.facts.result
        if answers is not None and answers[0] is None and self.facts.tasks is not None:
            target = self.facts.tasks.result
        elif answers is not None:
            target = self._t.methods[answers[0] or ""].wire.result
        elif m is not None and m.wire.result is not None:
            target = m.wire.result
        try:
            plain = _ANY.decode(raw)
            if kinds is not None and m is not None and answers is None and type(plain) is dict:
                value = plain.setdefault(kinds.key, kinds.own)  # absent means the method's own
                if value != kinds.own:
                    target = (
                        kinds.classes.get(value, self.facts.result)
                        if type(value) is str
                        else target
                    )
            result = msgspec.convert(plain, target, dec_hook=dec_hook)
        except _FAILED as exc:
            what = f"Invalid result: {f'the result of {method!r}' if method else 'a result'}{_task_note(answers)} (MCP {self.revision})"
            failure = _failure(exc, INVALID_PARAMS, what, id_)
            failure.message = failure.message.replace(" - at `$", " - at `$.result", 1)
            if failure.code == INVALID_PARAMS and " - at `" not in failure.message:
                failure.message += " - at `$.result`"
            self._forget(id_)  # that was its response: a later one with the id is unexpected
            raise failure from None
        return (
            Response(id=id_, result=result)
            if method is None
            else self._answered(id_, method, result)
        )

    # -- checks on what is received and sent ----------------------------------------------------

    def _received(self, m: Method, msg: Any) -> Any:
        params = getattr(msg.message if m.wrapped else msg, "params", UNSET)
        if m.gated and self._caps and m.name not in self._passed[True]:
            self._gates.check(m, params, msg, True)
        if self._check_meta and m.request:
            self._gates.check_meta(m, params, msg.id)
        if m.learns:
            self._gates.learn(params)
        return msg

    @property
    def capabilities(self) -> Any:
        """This side's capabilities (learned from the handshake, or given)."""
        return self._caps.get(self.role)

    @capabilities.setter
    def capabilities(self, caps: Any) -> None:
        self._gates.set(self.role, caps)

    @property
    def peer_capabilities(self) -> Any:
        """The peer's capabilities (learned from the handshake, or given)."""
        return self._caps.get(self.peer)

    @peer_capabilities.setter
    def peer_capabilities(self, caps: Any) -> None:
        self._gates.set(self.peer, caps)

    def knows_capabilities(self) -> bool:
        """Whether either side's capabilities are known: ``capabilities`` or
        ``peer_capabilities`` is not None (one call, where a session giving its codecs back
        asks it of each)."""
        caps = self._caps
        return caps.get(self.role) is not None or caps.get(self.peer) is not None

    # -- encode ---------------------------------------------------------------------------------

    def encode(self, msg: Any) -> bytes:
        """Encode a message (or, where the revision has batches, a list of them) to JSON bytes.

        Requests this side sends are remembered by id, so that their responses decode to the
        precise result class. A message that cannot be sent raises before anything is remembered.
        A request or notification may also come in its wire class (``FACTS.wires[method].wire``,
        which carries ``jsonrpc``, and a request's ``id``, in every revision), as sessions send them.
        """
        t = type(msg)
        if t is Response:
            if type(msg.id) not in _IDS:
                _check_id(msg.id)
            out = _encode(msg)
            if len(out) > SCAN_MAX or out.partition(b"null")[1]:
                refuse_nonfinite(msg, out)
            if type(msg.result) in self._learners:
                self._gates.learn(msg.result)
            return out
        m = self._send.get(type(msg.message) if t is Request else t)
        if m is None or (t is Request) is not m.wrapped:
            return self._encode_other(msg)
        if m.request and type(msg.id) not in _IDS:
            _check_id(msg.id)
        if m.gated and self._caps and m.name not in self._passed[False]:
            params = _params(msg)
            light = self._light[False].get(m.name)
            if (
                light is None
                or type(params) is not light[0]
                or getattr(params, light[1]) is not UNSET
            ):
                self._gates.check(m, params, msg, False)
        out = _encode(msg if m.enveloped else m.unbuild(msg))
        if len(out) > SCAN_MAX or out.partition(b"null")[1]:
            refuse_nonfinite(msg, out)
        if m.request:
            self._pending[msg.id] = m
            self._last = msg.id
            if m.tasked:  # the call only when a task rides on it (a Python call costs 1,000+)
                params = (msg.message if t is Request else msg).params
                if (
                    m.payload
                    or getattr(params, self._task_when, UNSET) is not UNSET
                    or type(params) is dict
                ):
                    self._expect_task(m, msg.id, params)
        if m.learns:
            self._gates.learn((msg.message if t is Request else msg).params)
        return out

    def _encode_other(self, msg: Any) -> bytes:
        """What ``encode`` takes besides a response and what this side sends: batches, error
        responses, errors; anything else is refused with what is wrong."""
        t = type(msg)
        if t is list:
            if not self.facts.batches or not msg:
                raise _invalid(
                    "empty batch"
                    if self.facts.batches
                    else f"JSON-RPC batches are not part of MCP {self.revision}"
                )
            return b"[" + b",".join([self.encode(x) for x in msg]) + b"]"
        if t is ErrorResponse:
            if msg.id is UNSET and not self.facts.error_id_optional:
                msg = msgspec.structs.replace(msg, id=None)  # JSON-RPC 2.0: null when unknown
            elif msg.id is not None and msg.id is not UNSET:
                _check_id(msg.id)
            out = _encode(msg)
            if len(out) > SCAN_MAX or out.partition(b"null")[1]:
                refuse_nonfinite(msg, out)
            return out
        if isinstance(msg, ProtocolError):
            return self.error_response(msg)
        m = self._t.by_message.get(type(msg.message) if t is Request else t)
        if m is not None and (t is Request) is m.wrapped:
            who = _senders(m.spec.sender)
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"in MCP {self.revision} {m.spec.method!r} is sent by the {who}, not the {self.role}",
            )
        raise TypeError(self._not_sendable(msg))

    def _expect_task(self, m: Method, id_: Any, params: Any) -> None:
        """The one place that learns what answers a request of ``m`` whose params decide it (one
        encoded, or told of by ``expect_request``): one asking for a task, the task's creation
        result; the payload request of a task created here, the result of the method that created
        the task. ``params``: the generated params Struct, or the plain dict of the wire."""
        tasks = self.facts.tasks
        assert tasks is not None  # only such methods are ``tasked``
        if (
            getattr(params, tasks.when, UNSET) is not UNSET
            if type(params) is not dict
            else m.task_keys[0] in params  # None where the params have no such field
        ):
            self._answers[id_] = (None, None)
        elif m.name == tasks.payload_method:
            task = self._named_task(m, params)
            try:
                created = self._tasks.get(task)
            except TypeError:  # a list or an object where the task id belongs
                return
            if created is not None:
                self._answers[id_] = (created, task)

    def _named_task(self, m: Method, params: Any) -> Any:
        """The task id the params of ``m`` (a Struct or the plain dict) name, or None."""
        key = m.task_keys[1]
        if key is None:
            return None
        if type(params) is dict:
            return params.get(key)
        assert self.facts.tasks is not None  # ``task_keys`` are None without it
        return getattr(params, self.facts.tasks.payload_task_id, None)

    def _not_sendable(self, msg: Any) -> str:
        t = type(msg.message) if type(msg) is Request else type(msg)
        if t in self._t.by_message:
            m = self._t.by_message[t]
            if m.spec.kind != "request":
                return f"in MCP {self.revision} {t.__name__} is a notification: encode it as it is, without an id"
            if m.enveloped:
                return f"in MCP {self.revision} {t.__name__} carries its id: encode it as it is, not in a Request"
            return f"in MCP {self.revision} a request needs an id: encode Request(id=..., message={t.__name__}(...))"
        where = getattr(t, "__module__", "")
        return f"cannot encode {t.__name__} (from {where}) as a message of MCP {self.revision}"

    def request(self, message: Any, id: RequestId) -> Any:
        """``message`` (a generated request of this revision) as a request with ``id``."""
        m = self._t.by_message.get(type(message))
        if m is None or m.spec.kind != "request":
            raise TypeError(f"{type(message).__name__} is not a request of MCP {self.revision}")
        _check_id(id)
        return (
            msgspec.structs.replace(message, id=id)
            if m.enveloped
            else Request(id=id, message=message)
        )

    def respond(self, id: RequestId, result: Any) -> bytes:
        """The response bytes for the request ``id``."""
        return self.encode(Response(id=id, result=result))

    def error_response(self, err: ProtocolError) -> bytes:
        """The JSON-RPC error response bytes for ``err``."""
        data = UNSET if err.data is None else err.data
        error = ErrorObject(code=err.code, message=err.message, data=data)
        return self.encode(ErrorResponse(id=err.id, error=error))

    def meta(self, capabilities: Any = None, **extra: Any) -> dict[str, Any]:
        """The reserved ``_meta`` keys a client puts in every request (where the revision has the
        per-request envelope): protocol version and client capabilities, then ``extra``."""
        facts = self.facts.request_meta
        if facts is None:
            raise ValueError(f"MCP {self.revision} has no per-request _meta envelope")
        caps = msgspec.to_builtins(capabilities or {})
        return {facts.version_key: self.facts.versions[0], facts.capabilities_key: caps, **extra}


def _invalid(why: str, id_: Any = None) -> ProtocolError:
    return ProtocolError(INVALID_REQUEST, f"Invalid Request: {why}", id=id_)


def _where(method: str) -> str:
    """Where else ``method`` exists, for the error message (read from the method tables)."""
    from .packages import bindings

    found = [
        f"{r} ({spec.kind} from {_senders(spec.sender)})"
        for r in REVISIONS
        if (spec := bindings(r).METHODS.get(method)) is not None
    ]
    return f"it is in {', '.join(found)}" if found else "it is not an MCP method in any revision"


def _task_note(answers: tuple[str | None, Any] | None) -> str:
    """What a task made of the result that failed (``Codec._answers``), for its error message."""
    if answers is None:
        return ""
    if answers[0] is None:
        return " asking for a task"
    return f" for a {answers[0]!r} task"


def _params(msg: Any) -> Any:
    return getattr(msg.message if type(msg) is Request else msg, "params", UNSET)


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        obj = getattr(obj, name)
    return obj


def _check_id(id_: Any) -> None:
    if type(id_) is not str and type(id_) is not int:
        raise ValueError(f"a JSON-RPC request id is a string or an integer, not {id_!r}")


def _as_bytes(data: Any) -> bytes:
    """A message given as str, bytearray or memoryview, as bytes (a TypeError for anything
    else)."""
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")  # a lone surrogate fails the UTF-8 check
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"Codec.decode takes the bytes or str of a message, not {type(data).__name__}")


def _check_utf8(data: bytes) -> None:
    """Refuse a message that is not UTF-8 (-32700)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(PARSE_ERROR, f"Parse error: invalid UTF-8 ({exc.reason})") from None


def _plain(raw: Raw) -> Any:
    try:
        return _ANY.decode(raw) if raw else UNSET
    except _FAILED:
        return UNSET
