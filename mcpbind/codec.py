"""The runtime codec: JSON-RPC messages of one revision <-> the generated Structs.

Every fact about a revision comes from its generated ``FACTS`` record and ``METHODS`` table;
this module names no revision and no method. See docs/design.md, "Runtime codec".
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Generic, Literal, TypeVar, Union

import msgspec
from msgspec import UNSET, Raw, UnsetType

from ._revisions import REVISIONS
from ._support import Facts, Gate, MethodSpec, Wire, dec_hook, join_path
from .capabilities import missing_capabilities, supports
from .errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, ProtocolError

__all__ = ["Codec", "ErrorObject", "ErrorResponse", "Request", "Response"]

T = TypeVar("T")
RequestId = Union[str, int]  # noqa: UP007


class Request(msgspec.Struct, Generic[T], kw_only=True, gc=False):
    """A request of a revision whose generated request classes carry no ``id``: the JSON-RPC
    ``id`` beside the precise generated ``message``. Where the generated classes carry ``id``
    and ``jsonrpc`` themselves (``FACTS.enveloped``) the codec uses them directly."""

    id: RequestId
    message: T

    @property
    def method(self) -> str:
        return self.message.method  # type: ignore[attr-defined,no-any-return]

    @property
    def params(self) -> Any:
        return getattr(self.message, "params", UNSET)


class Response(msgspec.Struct, Generic[T], kw_only=True, gc=False):
    """A successful response; ``result`` is the precise result class of the request it answers
    when the codec knows that request's method, else the revision's generic ``Result``."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: T


class ErrorObject(msgspec.Struct, kw_only=True, gc=False):
    code: int
    message: str
    data: Any | UnsetType = UNSET  # absent and null differ on the wire


class ErrorResponse(msgspec.Struct, kw_only=True, gc=False):
    """An error response. ``id`` is ``None`` when the peer could not read the request's id, and
    ``UNSET`` when the response leaves it out (allowed where ``FACTS.error_id_optional``)."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None | UnsetType = UNSET
    error: ErrorObject


class _ErrorEnvelope(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    jsonrpc: Literal["2.0"]
    error: ErrorObject
    id: RequestId | None | UnsetType = UNSET


class _Envelope(msgspec.Struct, gc=False):
    """Any JSON-RPC message, members kept raw: the classifier of everything the fast paths refuse."""

    jsonrpc: Raw = Raw(b"")
    id: Raw = Raw(b"")
    method: Raw = Raw(b"")
    params: Raw = Raw(b"")
    result: Raw = Raw(b"")
    error: Raw = Raw(b"")


_encode = msgspec.json.encode
_ENVELOPE = msgspec.json.Decoder(Union[_Envelope, list[Raw]])  # noqa: UP007
_ERROR = msgspec.json.Decoder(_ErrorEnvelope)
_ANY = msgspec.json.Decoder()
_FAILED = (msgspec.DecodeError, RecursionError, ValueError, TypeError)
_NAME_MAX = 80  # characters of a peer's method name quoted back in an error
_TASKS_MAX = 1024  # tasks whose originating method a codec remembers


@dataclass(frozen=True)
class _Method:
    spec: MethodSpec
    wire: Wire
    enveloped: bool  # the generated message is the wire Struct itself
    response: msgspec.json.Decoder[Any] | None  # a result response to it, in one pass
    learns: bool  # its params may carry the sender's capabilities
    result_learns: bool  # its result may carry the responder's capabilities
    kind_attr: str | None  # attribute of the result discriminator in its own result class
    build: Callable[[Any], Any]  # wire Struct -> what decode returns
    unbuild: Callable[[Any], Any]  # what encode takes -> wire Struct


def _builders(spec: MethodSpec, wire: type) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """Between the wire Struct and what the codec hands out (a ``Request`` around the generated
    request where that carries no id). Spelled out for the usual ``params`` alone: it is faster."""
    cls, names, request = spec.message, spec.message.__struct_fields__, spec.kind == "request"
    if wire is cls:
        return _same, _same
    if names == ("params",):
        if request:
            return (
                lambda w: Request(id=w.id, message=cls(params=w.params)),
                lambda r: wire(id=r.id, jsonrpc="2.0", params=r.message.params),
            )
        return (lambda w: cls(params=w.params), lambda n: wire(jsonrpc="2.0", params=n.params))
    if request:
        return (
            lambda w: Request(id=w.id, message=cls(**{k: getattr(w, k) for k in names})),
            lambda r: wire(id=r.id, jsonrpc="2.0", **{k: getattr(r.message, k) for k in names}),
        )
    return (
        lambda w: cls(**{k: getattr(w, k) for k in names}),
        lambda n: wire(jsonrpc="2.0", **{k: getattr(n, k) for k in names}),
    )


def _same(x: Any) -> Any:
    return x


@dataclass(frozen=True)
class _Tables:
    """One revision's tables for one role, built once: msgspec builds nothing after this."""

    facts: Facts
    methods: dict[str, _Method]
    receive: dict[str, _Method]  # what this role may receive
    by_wire: dict[type, _Method]
    by_message: dict[type, _Method]  # every method, by the generated class the user holds
    fast: msgspec.json.Decoder[Any]  # the tagged union of every message this role receives
    generic: msgspec.json.Decoder[Any]  # a response with the generic result
    tasks: msgspec.json.Decoder[Any] | None  # a response creating a task


_BUILD_LOCK = threading.Lock()
_TABLES: dict[tuple[str, str], _Tables] = {}  # at most 2 per pinned revision


def _tables(revision: str, role: str) -> _Tables:
    found = _TABLES.get((revision, role))
    if found is None:
        with _BUILD_LOCK:  # msgspec must not build a type's internals from two threads at once
            found = _TABLES.get((revision, role))
            if found is None:
                found = _TABLES[revision, role] = _build(revision, role)
    return found


def _build(revision: str, role: str) -> _Tables:
    from . import bindings
    from ._support import prepare

    module = bindings(revision)
    prepare(module)
    facts: Facts = module.FACTS
    peer = "server" if role == "client" else "client"
    kinds = facts.result_kinds
    methods = {}
    for name, spec in module.METHODS.items():
        wire = facts.wires[name]
        result = wire.result
        methods[name] = _Method(
            spec,
            wire,
            wire.wire is spec.message,
            _decoder(wire.response) if wire.response is not None else None,
            spec.kind == "request" and _carries_capabilities(spec.params),
            _carries_capabilities(result),
            (
                _attribute(result, kinds.key)
                if kinds is not None and isinstance(result, type)
                else None
            ),
            *_builders(spec, wire.wire),
        )
    receive = {n: m for n, m in methods.items() if m.spec.sender in (peer, "both")}
    return _Tables(
        facts=facts,
        methods=methods,
        receive=receive,
        by_wire={m.wire.wire: m for m in receive.values()},
        by_message={m.spec.message: m for m in methods.values()},
        fast=_decoder(Union[tuple(m.wire.wire for m in receive.values())]),  # noqa: UP007
        generic=_decoder(facts.result_response),
        tasks=_decoder(facts.tasks.response) if facts.tasks is not None else None,
    )


def _decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp, dec_hook=dec_hook)


@lru_cache(maxsize=1024)  # gates ask it on every encode; msgspec.structs.fields is slow
def _attribute(cls: type, key: str) -> str | None:
    return next((f.name for f in msgspec.structs.fields(cls) if f.encode_name == key), None)


def _carries_capabilities(tp: Any) -> bool:
    """Whether a params or result type (or an untagged union of them) has ``capabilities``."""
    members = getattr(tp, "members", None)
    if isinstance(members, tuple):
        return any(_carries_capabilities(m.type) for m in members)
    return "capabilities" in getattr(tp, "__struct_fields__", ())


def _where(method: str) -> str:
    """Where else ``method`` exists, for the error message (from the method tables)."""
    from . import bindings

    found = [
        f"{r} ({spec.kind} from {_senders(spec.sender)})"
        for r in REVISIONS
        if (spec := bindings(r).METHODS.get(method)) is not None
    ]
    return f"it is in {', '.join(found)}" if found else "it is not an MCP method in any revision"


def _senders(sender: str) -> str:
    return "client and server" if sender == "both" else sender


def _cut(name: str) -> str:
    return repr(name if len(name) <= _NAME_MAX else name[:_NAME_MAX] + "...")


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

    Task-augmented requests (where ``FACTS.tasks``): a request sent with a task is answered by
    the task's creation result; the payload request of that task is answered by the result of
    the method that created it. The codec remembers up to 1,024 open tasks.
    """

    def __init__(
        self,
        revision: str,
        role: str = "client",
        *,
        requires: dict[str, Any] | None = None,
        capabilities: Any = None,
        peer_capabilities: Any = None,
    ) -> None:
        if role not in ("client", "server"):
            raise ValueError(f"role must be 'client' or 'server', not {role!r}")
        from . import bindings

        self.module = bindings(revision)  # UnknownRevisionError for a revision not pinned
        self.revision = revision
        self.role = role
        self.peer = "server" if role == "client" else "client"
        self._t = _tables(revision, role)
        self.facts: Facts = self._t.facts
        self._pending: dict[Any, str] = {}  # id of a request sent -> its method
        # id -> (method whose result answers it, or None for a task's creation; the task's id)
        self._answers: dict[Any, tuple[str | None, Any]] = {}
        self._tasks: dict[Any, str] = {}  # task id -> the method that created it
        self._check_meta = self.facts.request_meta is not None and role == "server"
        if requires and not self._check_meta:
            raise ValueError(
                "requires= applies to a server codec of a revision with per-request _meta"
            )
        self._requires: dict[str, Any] = {}
        if self._check_meta:
            for name, m in self._t.receive.items():
                for g in m.spec.gates:
                    if m.spec.kind == "request" and g.side == "client" and not g.when:
                        self._requires[name] = _path_object(g.path)
            self._requires.update({k: msgspec.to_builtins(v) for k, v in (requires or {}).items()})
        self._caps: dict[str, Any] = {}  # side -> its capabilities object
        self._plain: dict[str, Any] = {}  # side -> the same as plain JSON, read at the first gate
        self._verdicts: dict[tuple[str, str], bool] = {}
        self.capabilities = capabilities
        self.peer_capabilities = peer_capabilities

    def __repr__(self) -> str:
        return f"Codec({self.revision!r}, role={self.role!r})"

    def expect(self, id: RequestId, method: str) -> None:
        """Tell the codec that the response with ``id`` answers a ``method`` request."""
        self._pending[id] = method

    @property
    def pending(self) -> dict[Any, str]:
        """Ids of requests awaiting a response, with their methods (a copy)."""
        return dict(self._pending)

    # -- decode ---------------------------------------------------------------------------------

    def decode(self, data: bytes | bytearray | memoryview | str) -> Any:
        """Decode one JSON-RPC message (or a batch, to a list, where the revision has them).

        Requests and notifications decode in one pass as the tagged union of every method this
        side may receive, a response to a pending request in one pass as its precise result.
        Everything else goes through one classifier that says exactly what is wrong. Bad input
        raises ``ProtocolError``, never another exception.
        """
        if type(data) is not bytes:
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogatepass")  # a lone surrogate fails below
            elif isinstance(data, (bytearray, memoryview)):
                data = bytes(data)
            else:
                raise TypeError(
                    f"Codec.decode takes the bytes or str of a message, not {type(data).__name__}"
                )
        if not data.isascii():
            try:  # msgspec skips the values it does not keep without checking them
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ProtocolError(
                    PARSE_ERROR, f"Parse error: invalid UTF-8 ({exc.reason})"
                ) from None
        return self._one(data, batch=True)

    def _one(self, data: bytes, batch: bool) -> Any:
        if self._pending and data.find(b'"result"', 0, 512) >= 0:
            found = self._fast_response(data)
            if found is not None:
                return found
        try:
            wire = self._t.fast.decode(data)
        except _FAILED:
            return self._classify(data, batch)
        m = self._t.by_wire[type(wire)]
        if m.spec.kind != "request" and b'"id"' in data:
            return self._classify(data, batch)  # a notification with an id is refused there
        msg = m.build(wire)
        if m.spec.gates or m.learns or self._check_meta:
            self._received(m, msg)
        return msg

    def _fast_response(self, data: bytes) -> Response[Any] | None:
        """A result response to a pending request in one closed pass; None when it is not plainly
        that (the classifier then decides, errors included)."""
        pending = self._pending
        if len(pending) == 1:
            id_, method = next(iter(pending.items()))
        else:
            id_ = _peek_id(data)
            found = pending.get(id_)
            if found is None:
                return None
            method = found
        answers = self._answers.get(id_)
        m = self._t.methods.get(method if answers is None else answers[0] or "")
        decoder = (
            (m.response if m is not None else None)
            if answers is None or answers[0] is not None
            else self._t.tasks
        ) or self._t.generic
        try:
            env = decoder.decode(data)
        except _FAILED:
            return None
        if type(env.id) is not type(id_) or env.id != id_:
            return None
        if answers is None and m is not None and m.kind_attr is not None:
            kinds = self.facts.result_kinds
            if kinds is not None and getattr(env.result, m.kind_attr) != kinds.own:
                return None  # it says it is another kind of result: the classifier decides
        return self._answered(id_, method, m, env.result)

    def _answered(self, id_: Any, method: str, m: _Method | None, result: Any) -> Response[Any]:
        del self._pending[id_]
        answers = self._answers.pop(id_, None)
        tasks = self.facts.tasks
        if answers is not None and tasks is not None:
            if answers[0] is None:  # a task was created: its payload is this method's result
                if len(self._tasks) >= _TASKS_MAX:
                    del self._tasks[next(iter(self._tasks))]
                self._tasks[_get(result, tasks.task_id)] = method
            else:
                self._tasks.pop(answers[1], None)
        elif m is not None and m.result_learns:
            self._learn(result)
        return Response(id=id_, result=result)

    def _classify(self, data: bytes, batch: bool) -> Any:
        try:
            env = _ENVELOPE.decode(data)
        except msgspec.ValidationError as exc:
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {exc}") from None
        except RecursionError:
            raise ProtocolError(PARSE_ERROR, "Parse error: nesting too deep") from None
        except _FAILED as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}") from None
        if isinstance(env, list):
            if not self.facts.batches:
                raise ProtocolError(
                    INVALID_REQUEST,
                    f"Invalid Request: JSON-RPC batches are not part of MCP {self.revision}",
                )
            if not env or not batch:
                raise ProtocolError(
                    INVALID_REQUEST,
                    f"Invalid Request: {'empty batch' if batch else 'a batch inside a batch'}",
                )
            return [self._one(bytes(item), batch=False) for item in env]
        id_, id_ok = _read_id(env.id)
        if _plain_value(env.jsonrpc) != "2.0":
            raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', id=id_)
        if env.method:
            method = _plain_value(env.method)
            if not isinstance(method, str):
                raise ProtocolError(
                    INVALID_REQUEST, 'Invalid Request: "method" must be a string', id=id_
                )
            if env.id and not id_ok:
                raise ProtocolError(
                    INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer'
                )
            return self._bad_message(method, bool(env.id), id_, data)
        if env.result and env.error:
            raise ProtocolError(
                INVALID_REQUEST,
                'Invalid Request: a response has "result" or "error", not both',
                id=id_,
            )
        if env.result:
            if not id_ok:
                raise ProtocolError(
                    INVALID_REQUEST,
                    'Invalid Request: a result response needs a string or integer "id"',
                )
            return self._result(id_, env.result)
        if env.error:
            if env.id and not id_ok and _plain_value(env.id) is not None:
                raise ProtocolError(
                    INVALID_REQUEST, 'Invalid Request: "id" must be a string, an integer or null'
                )
            try:
                err = _ERROR.decode(data)
            except _FAILED as exc:
                raise ProtocolError(
                    INVALID_REQUEST, f"Invalid Request: bad error response: {_at(exc, '$')}", id=id_
                ) from None
            if self._pending.pop(err.id, None) is not None:
                answers = self._answers.pop(err.id, None)
                if answers is not None and answers[0] is not None:
                    self._tasks.pop(answers[1], None)
            return ErrorResponse(id=err.id, error=err.error)
        raise ProtocolError(
            INVALID_REQUEST,
            'Invalid Request: not a request, notification or response (no "method", "result" or "error")',
            id=id_,
        )

    def _bad_message(self, method: str, has_id: bool, id_: Any, data: bytes) -> Any:
        """A request or notification the fast path refused: say exactly why."""
        m = self._t.methods.get(method)
        if m is None:
            text = f"Method not found: {_cut(method)} is not part of MCP {self.revision}; {_where(method)}"
            raise ProtocolError(METHOD_NOT_FOUND, text, {"method": method[:_NAME_MAX]}, id_)
        if method not in self._t.receive:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: in MCP {self.revision} {method!r} is sent by the {_senders(m.spec.sender)}, "
                f"so a {self.role} does not receive it",
                {"method": method},
                id_,
            )
        if (m.spec.kind == "request") != has_id:
            need = (
                'a request needs an "id"'
                if m.spec.kind == "request"
                else 'a notification has no "id"'
            )
            raise ProtocolError(
                INVALID_REQUEST, f"Invalid Request: {method!r} is a {m.spec.kind}; {need}", id=id_
            )
        try:
            msgspec.json.decode(data, type=m.wire.wire, dec_hook=dec_hook)
        except msgspec.ValidationError as exc:
            text = join_path(str(exc))
            if "`$.params" in text or "`params`" in text:
                raise ProtocolError(
                    INVALID_PARAMS,
                    f"Invalid params for {method!r} (MCP {self.revision}): {text}",
                    id=id_,
                ) from None
            raise ProtocolError(
                INVALID_REQUEST,
                f"Invalid Request ({method!r}, MCP {self.revision}): {text}",
                id=id_,
            ) from None
        except RecursionError:
            raise ProtocolError(PARSE_ERROR, "Parse error: nesting too deep", id=id_) from None
        except _FAILED as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}", id=id_) from None
        # Decodes alone but not in the union: the receiving side's checks refused it there.
        return self._one_of(m, msgspec.json.decode(data, type=m.wire.wire, dec_hook=dec_hook))

    def _one_of(self, m: _Method, wire: Any) -> Any:
        msg = m.build(wire)
        self._received(m, msg)
        return msg

    def _result(self, id_: Any, raw: Raw) -> Response[Any]:
        """A result response the fast path did not take: its class by the rules, or why not."""
        method = self._pending.get(id_)
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
        what = f"the result of {method!r}" if method else "a result"
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
        except msgspec.ValidationError as exc:
            text = f"Invalid result: {what} (MCP {self.revision}): {_at(exc, '$.result')}"
            raise ProtocolError(INVALID_PARAMS, text, id=id_) from None
        except RecursionError:
            raise ProtocolError(PARSE_ERROR, "Parse error: nesting too deep", id=id_) from None
        except _FAILED as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}", id=id_) from None
        if method is None:
            return Response(id=id_, result=result)
        return self._answered(id_, method, m, result)

    # -- checks on what is received and sent ----------------------------------------------------

    def _received(self, m: _Method, msg: Any) -> None:
        if m.spec.gates and self._caps:
            self._check_gates(m, msg, incoming=True)
        if self._check_meta and m.spec.kind == "request":
            self._check_request_meta(m, msg)
        if m.learns:
            self._learn(_params(msg))

    def _learn(self, carrier: Any) -> None:
        """Remember the capabilities a message carries (its sender's)."""
        caps = getattr(carrier, "capabilities", None)
        t = type(caps)
        side = (
            "client"
            if t is self.facts.client_capabilities
            else "server" if t is self.facts.server_capabilities else None
        )
        if side == self.role:
            self.capabilities = caps
        elif side == self.peer:
            self.peer_capabilities = caps

    @property
    def capabilities(self) -> Any:
        """This side's capabilities (learned from the handshake, or given)."""
        return self._caps.get(self.role)

    @capabilities.setter
    def capabilities(self, caps: Any) -> None:
        self._set_caps(self.role, caps)

    @property
    def peer_capabilities(self) -> Any:
        """The peer's capabilities (learned from the handshake, or given)."""
        return self._caps.get(self.peer)

    @peer_capabilities.setter
    def peer_capabilities(self, caps: Any) -> None:
        self._set_caps(self.peer, caps)

    def _set_caps(self, side: str, caps: Any) -> None:
        if caps is None:
            self._caps.pop(side, None)
        elif self._caps.get(side) is not caps:
            self._caps[side] = caps
        else:
            return
        self._plain.pop(side, None)
        self._verdicts = {k: v for k, v in self._verdicts.items() if k[0] != side}

    def _supports(self, side: str, path: str) -> bool | None:
        """Whether ``side`` advertised ``path``; None while its capabilities are unknown."""
        verdict = self._verdicts.get((side, path))
        if verdict is None:
            caps = self._caps.get(side)
            if caps is None:
                return None
            plain = self._plain.get(side)
            if plain is None:
                plain = self._plain[side] = (
                    caps if isinstance(caps, dict) else msgspec.to_builtins(caps)
                )
            verdict = self._verdicts[side, path] = supports(plain, path)
        return verdict

    def _check_gates(self, m: _Method, msg: Any, *, incoming: bool) -> None:
        receiver = self.role if incoming else self.peer
        for gate in m.spec.gates:
            side = receiver if gate.side == "receiver" else gate.side
            if self._supports(side, gate.path) is not False or not _applies(gate, _params(msg)):
                continue
            whom = f"this {side}" if side == self.role else f"the {side}"
            condition = f" (its params have {'.'.join(gate.when)})" if gate.when else ""
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {m.spec.method!r}{condition} needs the {side} capability "
                f"{gate.path!r}, which {whom} did not advertise (MCP {self.revision})",
                {"method": m.spec.method, "capability": gate.path, "side": side},
                _id(msg),
            )

    def _check_request_meta(self, m: _Method, msg: Any) -> None:
        """The protocol version and client capabilities in a request's ``params._meta``."""
        meta_facts = self.facts.request_meta
        meta = getattr(_params(msg), "meta", UNSET)
        if meta_facts is None or not isinstance(meta, dict):
            return  # the schema decides whether _meta is required; it already passed
        version = meta.get(meta_facts.version_key, UNSET)
        if version is not UNSET and version not in self.facts.versions:
            raise ProtocolError(
                meta_facts.unsupported_version_code,
                "Unsupported protocol version",
                {"supported": list(self.facts.versions), "requested": version},
                _id(msg),
            )
        required = self._requires.get(m.spec.method)
        if required is not None:
            missing = missing_capabilities(required, meta.get(meta_facts.capabilities_key) or {})
            if missing is not None:
                raise ProtocolError(
                    meta_facts.missing_capability_code,
                    "Missing required client capability",
                    {"requiredCapabilities": missing},
                    _id(msg),
                )

    # -- encode ---------------------------------------------------------------------------------

    def encode(self, msg: Any) -> bytes:
        """Encode a message (or, where the revision has batches, a list of them) to JSON bytes.

        Requests this side sends are remembered by id, so that their responses decode to the
        precise result class. A message that cannot be sent raises before anything is remembered.
        """
        if type(msg) is list:
            if not self.facts.batches:
                raise ProtocolError(
                    INVALID_REQUEST, f"JSON-RPC batches are not part of MCP {self.revision}"
                )
            if not msg:
                raise ProtocolError(INVALID_REQUEST, "Invalid Request: empty batch")
            return b"[" + b",".join([self.encode(x) for x in msg]) + b"]"
        t = type(msg)
        if t is Response:
            _check_id(msg.id)
            out = _finite(_encode(msg), msg)
            self._learn(msg.result)
            return out
        if t is ErrorResponse:
            if msg.id is UNSET and not self.facts.error_id_optional:
                msg = msgspec.structs.replace(msg, id=None)  # JSON-RPC 2.0: null when unknown
            elif msg.id is not None and msg.id is not UNSET:
                _check_id(msg.id)
            return _finite(_encode(msg), msg)
        if isinstance(msg, ProtocolError):
            return msg.to_json()
        m = self._t.by_message.get(type(msg.message) if t is Request else t)
        if (
            m is None
            or (t is Request and m.spec.kind != "request")
            or (m.spec.kind == "request" and (t is Request) == m.enveloped)
        ):
            raise TypeError(self._not_sendable(msg))
        if m.spec.sender not in (self.role, "both"):
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"in MCP {self.revision} {m.spec.method!r} is sent by the {_senders(m.spec.sender)}, not the {self.role}",
            )
        request = m.spec.kind == "request"
        if request:
            _check_id(msg.id)
        if m.spec.gates and self._caps:
            self._check_gates(m, msg, incoming=False)
        out = _finite(_encode(m.unbuild(msg)), msg)
        if request:
            self._sent(m, msg)
        if m.learns:
            self._learn(_params(msg))
        return out

    def _sent(self, m: _Method, msg: Any) -> None:
        self._pending[msg.id] = m.spec.method
        tasks = self.facts.tasks
        if tasks is None:
            return
        params = _params(msg)
        if getattr(params, tasks.when, UNSET) is not UNSET:
            self._answers[msg.id] = (None, None)
        elif m.spec.method == tasks.payload_method:
            task = getattr(params, tasks.payload_task_id, UNSET)
            if task in self._tasks:
                self._answers[msg.id] = (self._tasks[task], task)

    def _not_sendable(self, msg: Any) -> str:
        t = type(msg.message) if type(msg) is Request else type(msg)
        if t in self._t.by_message:
            m = self._t.by_message[t]
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
        return self.encode(
            ErrorResponse(
                id=err.id,
                error=ErrorObject(
                    code=err.code, message=err.message, data=UNSET if err.data is None else err.data
                ),
            )
        )

    def meta(self, capabilities: Any = None, **extra: Any) -> dict[str, Any]:
        """The reserved ``_meta`` keys a client puts in every request (where the revision has the
        per-request envelope): protocol version and client capabilities, then ``extra``."""
        facts = self.facts.request_meta
        if facts is None:
            raise ValueError(f"MCP {self.revision} has no per-request _meta envelope")
        out = {
            facts.version_key: self.facts.versions[0],
            facts.capabilities_key: msgspec.to_builtins(capabilities or {}),
        }
        out.update(extra)
        return out


def _params(msg: Any) -> Any:
    return getattr(msg.message if type(msg) is Request else msg, "params", UNSET)


def _id(msg: Any) -> Any:
    return getattr(msg, "id", None)


def _applies(gate: Gate, params: Any) -> bool:
    """Whether a conditional gate's params value is there (and has the value it names)."""
    node = params
    for key in gate.when:  # wire keys, through Structs and dicts alike
        if isinstance(node, dict):
            node = node.get(key, UNSET)
        elif isinstance(node, msgspec.Struct):
            name = _attribute(type(node), key)
            node = getattr(node, name) if name is not None else UNSET
        else:
            return False
        if node is UNSET:
            return False
    return gate.equals is None or msgspec.to_builtins(node) == gate.equals


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        obj = getattr(obj, name)
    return obj


def _check_id(id_: Any) -> None:
    if type(id_) is not str and type(id_) is not int:
        raise ValueError(f"a JSON-RPC request id is a string or an integer, not {id_!r}")


def _finite(out: bytes, msg: Any) -> bytes:
    """``out``, unless ``msg`` holds NaN or an infinity, which msgspec writes as null."""
    if b"null" in out and _nonfinite(msgspec.to_builtins(msg)):
        raise ValueError("JSON has no NaN or Infinity: the message holds a non-finite number")
    return out


def _nonfinite(value: Any) -> bool:
    if type(value) is float:
        return not math.isfinite(value)
    if type(value) is dict:
        return any(_nonfinite(v) for v in value.values())
    if type(value) is list:
        return any(_nonfinite(v) for v in value)
    return False


def _peek_id(data: bytes) -> Any:
    """The id of a response, read without decoding its result (None when it cannot be read)."""
    try:
        return _ID_ONLY.decode(data).id
    except _FAILED:
        return None


class _IdOnly(msgspec.Struct, gc=False):
    id: Any = None


_ID_ONLY = msgspec.json.Decoder(_IdOnly)


def _read_id(raw: Raw) -> tuple[Any, bool]:
    """The id of a message and whether it is a valid request id (a string or an integer)."""
    if not raw:
        return None, False
    value = _plain_value(raw)
    ok = type(value) is str or type(value) is int
    return (value if ok else None), ok


def _plain_value(raw: Raw) -> Any:
    try:
        return _ANY.decode(raw) if raw else UNSET
    except _FAILED:
        return UNSET


def _path_object(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    for key in path.split("."):
        node[key] = {}
        node = node[key]
    return out


def _at(exc: Exception, prefix: str) -> str:
    text = join_path(str(exc))
    return (
        text.replace(" - at `$", f" - at `{prefix}", 1)
        if " - at `$" in text
        else f"{text} - at `{prefix}`"
    )
