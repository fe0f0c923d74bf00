"""The runtime codec: JSON-RPC messages of one revision <-> the generated Structs.

Everything per method comes from the generated ``METHODS`` table of the revision; this module
has no per-method code. See docs/design.md, "Runtime codec".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Literal, NamedTuple, TypeVar, Union

import msgspec
from msgspec import UNSET, Raw

from ._revisions import REVISIONS
from ._support import MethodSpec, Untagged, dec_hook, decoder, join_path, preferred
from .capabilities import missing_capabilities, supports
from .errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    UNSUPPORTED_PROTOCOL_VERSION,
    ProtocolError,
)

__all__ = ["Codec", "ErrorObject", "ErrorResponse", "Request", "Response"]

T = TypeVar("T")
RequestId = Union[str, int]  # noqa: UP007

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"


# ---------------------------------------------------------------------------------------------
# Runtime envelope types


class Request(msgspec.Struct, Generic[T], kw_only=True, gc=False):
    """A request of a revision whose generated request types carry no envelope (2024-11-05 to
    2025-06-18): the JSON-RPC ``id`` beside the precise generated ``message``.

    From 2025-11-25 on the generated request types carry ``id`` and ``jsonrpc`` themselves and
    the codec uses them directly.
    """

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
    (``CallToolResult`` for ``tools/call``) when the codec knows that request's method, else the
    revision's generic ``Result``."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: T


class ErrorObject(msgspec.Struct, kw_only=True, gc=False, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class ErrorResponse(msgspec.Struct, kw_only=True, gc=False):
    """An error response. ``id`` is ``None`` when the peer could not read the request's id."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None = None
    error: ErrorObject


# ---------------------------------------------------------------------------------------------
# Per-revision tables, built once from the generated METHODS


class _ErrorEnvelope(msgspec.Struct, gc=False, forbid_unknown_fields=True):
    """A plain error response, in one pass; anything else about it goes the general way."""

    jsonrpc: Literal["2.0"]
    error: ErrorObject
    id: RequestId | None = None


class _Envelope(msgspec.Struct, gc=False):
    """Any JSON-RPC message, keys kept raw: the slow path's classifier."""

    jsonrpc: Raw = Raw(b"")
    id: Raw = Raw(b"")
    method: Raw = Raw(b"")
    params: Raw = Raw(b"")
    result: Raw = Raw(b"")
    error: Raw = Raw(b"")


_json_encode = msgspec.json.encode
_ERROR_RESPONSE = msgspec.json.Decoder(_ErrorEnvelope)
_ENVELOPE = msgspec.json.Decoder(Union[_Envelope, list[Raw]])  # noqa: UP007
_ANY = msgspec.json.Decoder()
_ID = msgspec.json.Decoder(Union[str, int, None])  # noqa: UP007
_ERROR = msgspec.json.Decoder(ErrorObject)


@dataclass(frozen=True)
class _Gate:
    """A capability a method needs: ``side``'s capabilities must advertise ``path`` (only when
    ``params[when] == equals``, or when ``params[when]`` is present if ``equals`` is None)."""

    side: str  # "client", "server" or "receiver"
    path: str
    when: tuple[str, ...] = ()
    equals: Any = None

    def applies(self, params: Any) -> bool:
        if not self.when:
            return True
        node = params
        for key in self.when:  # wire keys, through Structs and dicts alike
            if isinstance(node, dict):
                node = node.get(key, UNSET)
            elif isinstance(node, msgspec.Struct):
                name = _attribute_names(type(node)).get(key)
                node = getattr(node, name) if name is not None else UNSET
            else:
                return False
            if node is UNSET:
                return False
        return self.equals is None or msgspec.to_builtins(node) == self.equals


@cache
def _attribute_names(cls: type) -> dict[str, str]:
    """A Struct's attribute names by wire key."""
    return {f.encode_name: f.name for f in msgspec.structs.fields(cls)}


@dataclass(frozen=True)
class _Method:
    spec: MethodSpec
    wire: type  # the Struct the message is decoded from / encoded as (tagged on "method")
    wrap: Callable[[Any], Any]  # wire instance -> what decode returns
    unwrap: Callable[[Any], Any] | None  # what encode takes -> wire instance (None: as is)
    enveloped: bool  # the generated message carries jsonrpc (and id) itself
    gates: tuple[_Gate, ...] = ()  # _gates(spec), computed once
    learns: bool = False  # a request whose params may carry the sender's capabilities (initialize)


@cache
def _gates(spec: MethodSpec) -> tuple[_Gate, ...]:
    gates = [_Gate(spec.capability_side, spec.capability)] if spec.capability and spec.capability_side else []
    gates += [_Gate(side, path, tuple(when.split(".")), equals) for when, equals, side, path in spec.conditions]
    return tuple(gates)


@dataclass(frozen=True)
class _Revision:
    revision: str
    module: Any
    methods: dict[str, _Method]
    by_class: dict[type, _Method]
    batches: bool
    per_request_meta: bool
    carriers: frozenset[type]  # classes whose instances carry their sender's capabilities
    caps_types: dict[type, str]  # ClientCapabilities / ServerCapabilities -> whose


def _build(message: type, names: tuple[str, ...]) -> Callable[[Any], Any]:
    """The generated message from its runtime envelope (same fields under the same names)."""
    if names == ("params",):  # almost every message: spelled out, much faster
        return lambda env: message(params=env.params)
    if not names:
        return lambda env: message()
    return lambda env: message(**{n: getattr(env, n) for n in names})


def _wrap_request(spec: MethodSpec, names: tuple[str, ...]) -> Callable[[Any], Any]:
    build = _build(spec.message, names)

    def wrap(env: Any) -> Request[Any]:
        return Request(id=env.id, message=build(env))

    return wrap


def _wrap_notification(spec: MethodSpec, names: tuple[str, ...]) -> Callable[[Any], Any]:
    return _build(spec.message, names)


def _unwrap(wire: type, names: tuple[str, ...], request: bool) -> Callable[[Any], Any]:
    """The runtime envelope of a generated message (of a ``Request`` for a request)."""
    if request:
        if names == ("params",):
            return lambda r: wire(id=r.id, jsonrpc="2.0", params=r.message.params)
        return lambda r: wire(id=r.id, jsonrpc="2.0", **{n: getattr(r.message, n) for n in names})
    if names == ("params",):
        return lambda m: wire(jsonrpc="2.0", params=m.params)
    return lambda m: wire(jsonrpc="2.0", **{n: getattr(m, n) for n in names})


def _identity(x: Any) -> Any:
    return x


@cache
def _revision(revision: str) -> _Revision:
    from . import bindings

    module = bindings(revision)
    methods: dict[str, _Method] = {}
    for name, spec in module.METHODS.items():
        fields = msgspec.structs.fields(spec.message)
        names = tuple(f.name for f in fields)
        request = spec.kind == "request"
        if "jsonrpc" in names:
            methods[name] = _Method(spec, spec.message, _identity, None, True, _gates(spec), _learns(spec))
            continue
        # Older revisions: the generated message is {method, params}; the envelope around it is
        # a runtime Struct tagged on the same method, with the same params field.
        extra: list[Any] = [("jsonrpc", Literal["2.0"])]
        if request:
            extra.insert(0, ("id", RequestId))
        own = [
            (f.name, f.type, msgspec.field(name=f.encode_name, default=f.default))
            if f.default is not msgspec.NODEFAULT
            else (f.name, f.type, msgspec.field(name=f.encode_name))
            for f in fields
        ]
        wire = msgspec.defstruct(
            f"{spec.message.__name__}Envelope",
            extra + own,
            kw_only=True,
            gc=False,
            tag_field="method",
            tag=name,
            module=__name__,
        )
        wrap = _wrap_request(spec, names) if request else _wrap_notification(spec, names)
        methods[name] = _Method(
            spec, wire, wrap, _unwrap(wire, names, request), False, _gates(spec), _learns(spec)
        )
    by_class = {m.spec.message: m for m in methods.values()}
    return _Revision(
        revision=revision,
        module=module,
        methods=methods,
        by_class=by_class,
        batches=hasattr(module, "JSONRPCBatchRequest"),
        per_request_meta="initialize" not in module.METHODS,
        carriers=frozenset(
            cls
            for cls in vars(module).values()
            if isinstance(cls, type) and "capabilities" in getattr(cls, "__struct_fields__", ())
        ),
        caps_types={
            getattr(module, name): side
            for name, side in (("ClientCapabilities", "client"), ("ServerCapabilities", "server"))
            if hasattr(module, name)
        },
    )


def _learns(spec: MethodSpec) -> bool:
    """Whether a request's params may carry capabilities (only then does ``_learn`` look)."""
    return spec.kind == "request" and spec.params is not None and _carries_capabilities(spec.params)


def _carries_capabilities(tp: Any) -> bool:
    """Whether a params or result type (a Struct, or an untagged union of them) has a
    ``capabilities`` field."""
    if isinstance(tp, type) and issubclass(tp, Untagged):
        return any(_carries_capabilities(m.type) for m in tp.members)
    return "capabilities" in getattr(tp, "__struct_fields__", ())


class _ResponsePlan(NamedTuple):
    """How a result response to a known method is decoded in one pass."""

    decoder: msgspec.json.Decoder[Any]  # the envelope with the precise result type
    learns: bool  # whether the result may carry capabilities (initialize, server/discover)
    # For a result that is an untagged union (2026-07-28: ``InputRequiredResult | X``): the
    # envelope with its preferred member, tried first when none of ``guards`` is in the bytes.
    direct: msgspec.json.Decoder[Any] | None = None
    guards: tuple[bytes, ...] = ()


@cache
def _response_decoder(revision: str, method: str) -> _ResponsePlan | None:
    """One pass over a response to a known ``method``.

    Any key besides ``jsonrpc``, ``id`` and ``result`` (``error``, ``method``, one nobody
    declared) fails it: the general path then judges the message."""
    m = _revision(revision).methods.get(method)
    if m is None or m.spec.result is None:
        return None
    learns = _carries_capabilities(m.spec.result)

    def envelope(result: Any) -> msgspec.json.Decoder[Any]:
        struct = msgspec.defstruct(
            "ResultResponse",
            [
                ("jsonrpc", Literal["2.0"]),
                ("id", RequestId),
                ("result", result),
            ],
            module=__name__,
            forbid_unknown_fields=True,
        )
        return msgspec.json.Decoder(struct, dec_hook=dec_hook)

    plan = _ResponsePlan(envelope(m.spec.result), learns)
    found = preferred(m.spec.result)
    if found is not None:
        member, keys = found
        plan = plan._replace(direct=envelope(member), guards=tuple(f'"{k}"'.encode() for k in keys))
    return plan


_DIRECT_MAX = 2048  # bytes: up to this size a response may take _ResponsePlan.direct


def _peek_id(head: bytes) -> Any:
    """The id of a message from its first bytes when it is written plainly there, else None."""
    at = head.find(b'"id"')
    if at < 0:
        return None
    rest = head[at + 4 :].lstrip()
    if not rest.startswith(b":"):
        return None
    rest = rest[1:].lstrip()
    if rest.startswith(b'"'):
        end = rest.find(b'"', 1)
        if end < 0 or b"\\" in rest[:end]:
            return None
        return rest[1:end].decode("utf-8", "replace")
    end = 0
    while end < len(rest) and rest[end : end + 1] in b"-0123456789":
        end += 1
    try:
        return int(rest[:end]) if end else None
    except ValueError:
        return None


@cache
def _where(method: str) -> tuple[tuple[str, str, str], ...]:
    """Every (revision, kind, sender) that defines ``method``."""
    from . import bindings

    out = []
    for revision in REVISIONS:
        spec = bindings(revision).METHODS.get(method)
        if spec is not None:
            out.append((revision, spec.kind, spec.sender))
    return tuple(out)


def _senders(sender: str) -> str:
    return "client and server" if sender == "both" else sender


# ---------------------------------------------------------------------------------------------
# The codec


class Codec:
    """Encode and decode the JSON-RPC messages of one revision, for one side of a session.

    ``role`` is the side this process plays (``"client"`` or ``"server"``): it decides which
    methods may be received (a request the peer may not send is -32601).

    ``requires`` (2026-07-28 and later, server side): a mapping from method name to the client
    capabilities object the server needs to process that request, in addition to the gates of
    the generated table; a request whose ``_meta`` client capabilities miss any of them raises the
    revision's MissingRequiredClientCapabilityError (-32021).

    Capability gates (``MethodSpec.capability`` and ``.conditions``): once the codec knows what a
    side advertised, a request or notification that needs a capability that side did not
    advertise is refused with -32601, on decode when it is this side's capability and on encode
    when it is the peer's. The codec learns both sides' capabilities from the messages that carry
    them (initialize request and result, server/discover result), or from ``capabilities`` and
    ``peer_capabilities``; until it knows a side's capabilities it checks nothing against them.
    It reads a capabilities object once, when it is given or learned: to change what a side
    advertises, assign a new object (one changed in place is not noticed).
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
        self._rev = _revision(revision)
        self.revision = revision
        self.role = role
        self.peer = "server" if role == "client" else "client"
        self.module = self._rev.module
        self._pending: dict[Any, str] = {}
        self._responses: dict[str, _ResponsePlan] = {}
        receive = {
            name: m for name, m in self._rev.methods.items() if m.spec.sender in (self.peer, "both")
        }
        self._receive = receive
        # What this side sends, by generated class: requests of revisions with Request wrappers
        # are looked up by their message's class (a bare one is refused by _encode_one).
        self._send: dict[type, _Method] = {
            m.spec.message: m
            for m in self._rev.methods.values()
            if m.spec.sender in (role, "both") and (m.enveloped or m.spec.kind == "notification")
        }
        self._send_wrapped: dict[type, _Method] = {
            m.spec.message: m for m in self._rev.methods.values() if m.spec.sender in (role, "both") and not m.enveloped
        }
        self._by_wire: dict[type, _Method] = {m.wire: m for m in receive.values()}
        self._fast = msgspec.json.Decoder(
            Union[tuple(m.wire for m in receive.values())],  # noqa: UP007
            dec_hook=dec_hook,
        )
        self._requires: dict[str, Any] = {}
        if self._rev.per_request_meta and role == "server":
            for name, m in receive.items():
                if m.spec.kind == "request" and m.spec.capability and m.spec.capability_side == "client":
                    self._requires[name] = _path_object(m.spec.capability)
            for name, caps in (requires or {}).items():
                self._requires[name] = msgspec.to_builtins(caps)
        elif requires:
            raise ValueError("requires= applies to a server codec of 2026-07-28 or later")
        self._check_meta = self._rev.per_request_meta and role == "server"
        self._generic_result = getattr(self.module, "Result", dict)
        self._caps_read: dict[str, Any] = {}  # side -> the capabilities object last read
        self._plain_caps: dict[str, Any] = {}  # side -> its capabilities as plain JSON
        self._verdicts: dict[tuple[str, str], bool] = {}  # (side, path) -> advertised
        # Per method and direction (received, sent): the gates whose capability is not advertised.
        self._unmet: tuple[dict[str, tuple[_Gate, ...]], dict[str, tuple[_Gate, ...]]] = ({}, {})
        self.capabilities = capabilities
        self.peer_capabilities = peer_capabilities
        self._carriers = self._rev.carriers
        self._caps_types = self._rev.caps_types

    def __repr__(self) -> str:
        return f"Codec({self.revision!r}, role={self.role!r})"

    # -- bookkeeping --------------------------------------------------------------------------

    def expect(self, id: RequestId, method: str) -> None:
        """Tell the codec that the response with ``id`` answers a ``method`` request."""
        self._pending[id] = method

    @property
    def pending(self) -> dict[Any, str]:
        """Ids of requests awaiting a response, with their methods (a copy)."""
        return dict(self._pending)

    # -- decode ---------------------------------------------------------------------------------

    def decode(self, data: bytes | bytearray | memoryview | str) -> Any:
        """Decode one JSON-RPC message (or a 2025-03-26 batch, to a list) to its precise type.

        Requests and notifications decode in one pass, as the tagged union of every method this
        side may receive. Anything else (responses, batches, bad input) goes through a raw
        envelope: results are decoded from the raw bytes once the id is matched. Bad input
        raises ``ProtocolError``, never another exception.
        """
        if type(data) is not bytes:
            if isinstance(data, str):
                try:
                    data = data.encode("utf-8")
                except UnicodeEncodeError as exc:
                    raise ProtocolError(PARSE_ERROR, f"Parse error: {exc.reason}") from None
            elif isinstance(data, (bytes, bytearray, memoryview)):
                data = bytes(data)
            else:
                raise TypeError(f"Codec.decode takes the bytes or str of a message, not {type(data).__name__}")
        if self._pending:
            if data.find(b'"result"', 0, 256) >= 0:
                response = self._known_response(data)
                if response is not None:
                    return response
            elif data.find(b'"error"', 0, 256) >= 0:  # most likely an error response
                try:
                    env = _ERROR_RESPONSE.decode(data)
                except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError, TypeError):
                    return self._slow(data, batch_allowed=True)
                self._pending.pop(env.id, None)
                return ErrorResponse(id=env.id, error=env.error)
        try:
            wire = self._fast.decode(data)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError, TypeError):
            return self._slow(data, batch_allowed=True)
        m = self._by_wire[type(wire)]
        msg = wire if m.enveloped else m.wrap(wire)
        if m.gates or m.learns or self._check_meta:
            self._received(msg, m)
        return msg

    def _known_response(self, data: bytes) -> Response[Any] | None:
        """A result response to a request this codec knows, decoded in one pass; None when the
        message is not plainly that (the general path then decides, errors included)."""
        pending = self._pending
        method: str | None
        if len(pending) == 1:
            id_, method = next(iter(pending.items()))
        else:
            id_ = _peek_id(data[:256])
            method = pending.get(id_) if id_ is not None else None
            if method is None:
                return None
        found = self._responses.get(method)
        if found is None:
            found = _response_decoder(self.revision, method)
            if found is None:
                return None
            self._responses[method] = found
        env = None
        # The search for the guard keys costs about 0.3 ns a byte each; the union's own way costs
        # a little per object, so past a few KiB it is the cheaper one. A key written with an
        # escape would escape the search: a \u anywhere sends the message the union's way too.
        if found.direct is not None and len(data) <= _DIRECT_MAX and not (b"\\" in data and b"\\u" in data):
            for guard in found.guards:
                if guard in data:
                    break
            else:
                try:  # noqa: SIM105 (contextlib.suppress costs more than this decode on small messages)
                    env = found.direct.decode(data)
                except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError, TypeError):
                    pass  # not that member: the union decides below
        if env is None:
            try:
                env = found.decoder.decode(data)
            except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError, TypeError):
                return None
        if type(env.id) is not type(id_) or env.id != id_:
            return None
        del pending[id_]
        if found.learns:
            self._learn(env.result)
        return Response(id=id_, result=env.result)

    def _slow(self, data: Any, batch_allowed: bool) -> Any:
        try:
            env = _ENVELOPE.decode(data)
        except msgspec.ValidationError as exc:
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {exc}") from None
        except RecursionError:
            raise ProtocolError(PARSE_ERROR, "Parse error: nesting too deep") from None
        except UnicodeDecodeError as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: invalid UTF-8 ({exc.reason})") from None
        except (msgspec.DecodeError, ValueError) as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}") from None
        if isinstance(env, list):
            if not self._rev.batches:
                raise ProtocolError(
                    INVALID_REQUEST,
                    f"Invalid Request: JSON-RPC batches are not part of MCP {self.revision} "
                    "(only 2025-03-26 has them)",
                )
            if not batch_allowed:
                raise ProtocolError(INVALID_REQUEST, "Invalid Request: a batch inside a batch")
            if not env:
                raise ProtocolError(INVALID_REQUEST, "Invalid Request: empty batch")
            return [self._decode_item(bytes(item)) for item in env]
        return self._classify(env, data)

    def _decode_item(self, data: bytes) -> Any:
        try:
            wire = self._fast.decode(data)
        except (msgspec.DecodeError, RecursionError, UnicodeDecodeError, ValueError, TypeError):
            return self._slow(data, batch_allowed=False)
        m = self._by_wire[type(wire)]
        msg = wire if m.enveloped else m.wrap(wire)
        self._received(msg, m)
        return msg

    def _classify(self, env: _Envelope, data: Any) -> Any:
        has_id = bool(env.id)
        id_: Any = None
        id_ok = False
        if has_id:
            try:
                id_ = _ID.decode(env.id)
                id_ok = id_ is not None
            except (msgspec.DecodeError, RecursionError, ValueError):
                id_ = None
        if not env.jsonrpc or _safe(env.jsonrpc) != "2.0":
            raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "jsonrpc" must be "2.0"', id=id_ if id_ok else None)
        if env.method:
            method = _safe(env.method)
            if not isinstance(method, str):
                raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "method" must be a string', id=id_ if id_ok else None)
            if has_id and not id_ok:
                raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "id" must be a string or an integer')
            return self._bad_message(method, has_id, id_ if id_ok else None, data)
        if env.result and env.error:
            raise ProtocolError(INVALID_REQUEST, 'Invalid Request: a response has "result" or "error", not both', id=id_ if id_ok else None)
        if env.result:
            if not id_ok:
                raise ProtocolError(INVALID_REQUEST, 'Invalid Request: a result response needs a string or integer "id"')
            return self._response(id_, env.result)
        if env.error:
            if has_id and id_ is None and _safe(env.id) is not None:
                raise ProtocolError(INVALID_REQUEST, 'Invalid Request: "id" must be a string, an integer or null')
            try:
                error = _ERROR.decode(env.error)
            except (msgspec.DecodeError, RecursionError, ValueError) as exc:
                raise ProtocolError(INVALID_REQUEST, f"Invalid Request: bad error object: {_at(exc, '$.error')}", id=id_) from None
            self._pending.pop(id_, None)
            return ErrorResponse(id=id_, error=error)
        raise ProtocolError(
            INVALID_REQUEST,
            'Invalid Request: not a request, notification or response (no "method", "result" or "error")',
            id=id_ if id_ok else None,
        )

    def _bad_message(self, method: str, has_id: bool, id_: Any, data: Any) -> Any:
        """A message with a method that the fast path refused: say exactly why."""
        known = self._rev.methods.get(method)
        if known is None:
            where = _where(method)
            if where:
                others = ", ".join(f"{r} ({k} from {_senders(s)})" for r, k, s in where)
                text = f"Method not found: {method!r} is not part of MCP {self.revision}; it is in {others}"
            else:
                text = f"Method not found: {method!r} is not an MCP method in any revision"
            raise ProtocolError(METHOD_NOT_FOUND, text, {"method": method}, id_)
        spec = known.spec
        if method not in self._receive:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: in MCP {self.revision} {method!r} is sent by the "
                f"{_senders(spec.sender)}, so a {self.role} does not receive it",
                {"method": method},
                id_,
            )
        if (spec.kind == "request") != has_id:
            need = 'a request needs an "id"' if spec.kind == "request" else 'a notification has no "id"'
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request: {method!r} is a {spec.kind}; {need}", id=id_)
        try:
            wire = decoder(known.wire).decode(data)
        except msgspec.ValidationError as exc:
            text = join_path(str(exc))
            if " - at `$.params" in text or "`params`" in text:
                raise ProtocolError(
                    INVALID_PARAMS, f"Invalid params for {method!r} (MCP {self.revision}): {text}", id=id_
                ) from None
            raise ProtocolError(INVALID_REQUEST, f"Invalid Request ({method!r}, MCP {self.revision}): {text}", id=id_) from None
        except RecursionError:
            raise ProtocolError(PARSE_ERROR, "Parse error: nesting too deep", id=id_) from None
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}", id=id_) from None
        msg = known.wrap(wire)
        self._received(msg)
        return msg

    def _response(self, id_: Any, raw: Raw) -> Response[Any]:
        method = self._pending.pop(id_, None)
        rtype = self._rev.methods[method].spec.result if method in self._rev.methods else None
        if rtype is None:
            rtype = self._generic_result
        try:
            result = decoder(rtype).decode(raw)
        except msgspec.ValidationError as exc:
            what = f"the result of {method!r}" if method else "a result"
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid result: {what} (MCP {self.revision}): {_at(exc, '$.result')}", id=id_
            ) from None
        except RecursionError:
            raise ProtocolError(PARSE_ERROR, "Parse error: nesting too deep", id=id_) from None
        except (msgspec.DecodeError, ValueError, TypeError) as exc:
            raise ProtocolError(PARSE_ERROR, f"Parse error: {exc}", id=id_) from None
        self._learn(result)
        return Response(id=id_, result=result)

    # -- capabilities ---------------------------------------------------------------------------

    def _received(self, msg: Any, m: _Method | None = None) -> None:
        if m is None:
            m = self._rev.by_class.get(type(msg.message if isinstance(msg, Request) else msg))
        if m is not None and m.gates and (self._capabilities is not None or self._peer_capabilities is not None):
            self._check_gates(m, msg, incoming=True)
        if self._check_meta and m is not None and m.spec.kind == "request":
            self._check_request_meta(msg, m)
        if m is not None and m.learns:
            self._learn(_params(msg))

    def _learn(self, carrier: Any) -> None:
        """Remember the capabilities a message carries (its sender's): initialize, discover."""
        caps = getattr(carrier, "capabilities", None)
        side = self._caps_types.get(type(caps))
        if side == self.role:
            self.capabilities = caps
        elif side == self.peer:
            self.peer_capabilities = caps

    # The capabilities of each side, and what the gates found in them: worked out at the first
    # gate after a capabilities object is given or learned (one changed in place is not
    # noticed), and kept while a new one says the same.

    @property
    def capabilities(self) -> Any:
        """This side's capabilities (learned from initialize / server/discover, or given)."""
        return self._capabilities

    @capabilities.setter
    def capabilities(self, caps: Any) -> None:
        self._capabilities = caps
        self._caps_changed = True

    @property
    def peer_capabilities(self) -> Any:
        """The peer's capabilities (learned from initialize / server/discover, or given)."""
        return self._peer_capabilities

    @peer_capabilities.setter
    def peer_capabilities(self, caps: Any) -> None:
        self._peer_capabilities = caps
        self._caps_changed = True

    def _refresh_capabilities(self) -> None:
        self._caps_changed = False
        for side, caps in ((self.role, self._capabilities), (self.peer, self._peer_capabilities)):
            if side in self._caps_read and self._caps_read[side] is caps:
                continue
            self._caps_read[side] = caps
            plain = caps if caps is None or isinstance(caps, dict) else msgspec.to_builtins(caps)
            if side in self._plain_caps and self._plain_caps[side] == plain:
                continue  # the same capabilities again (a session replayed, initialize re-sent)
            self._plain_caps[side] = plain
            self._verdicts.clear()
            for unmet in self._unmet:
                unmet.clear()

    def _supports(self, side: str, path: str) -> bool | None:
        """Whether ``side`` advertised ``path``; None while its capabilities are unknown."""
        verdict = self._verdicts.get((side, path))
        if verdict is None:
            plain = self._plain_caps.get(side)
            if plain is None:
                return None
            verdict = self._verdicts[side, path] = supports(plain, path)
        return verdict

    def _check_gates(self, m: _Method, msg: Any, *, incoming: bool) -> None:
        if self._caps_changed:
            self._refresh_capabilities()
        receiver = self.role if incoming else self.peer
        unmet = self._unmet[0 if incoming else 1]
        gates = unmet.get(m.spec.method)
        if gates is None:
            gates = unmet[m.spec.method] = tuple(
                g for g in m.gates if self._supports(receiver if g.side == "receiver" else g.side, g.path) is False
            )
        for gate in gates:
            if not gate.applies(_params(msg)):
                continue
            side = receiver if gate.side == "receiver" else gate.side
            whom = f"this {side}" if side == self.role else f"the {side}"
            condition = f" (its params have {'.'.join(gate.when)})" if gate.when else ""
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {m.spec.method!r}{condition} needs the {side} capability "
                f"{gate.path!r}, which {whom} did not advertise (MCP {self.revision})",
                {"method": m.spec.method, "capability": gate.path, "side": side},
                getattr(msg, "id", None),
            )

    def _check_request_meta(self, msg: Any, m: _Method) -> None:
        """2026-07-28 and later: the revision and client capabilities in ``params._meta``."""
        meta = getattr(getattr(msg, "params", None), "meta", UNSET)
        if not isinstance(meta, dict):
            return  # the schema decides whether _meta is required; it already passed
        version = meta.get(PROTOCOL_VERSION_KEY, UNSET)
        if version is not UNSET and version != self.revision:
            raise ProtocolError(
                UNSUPPORTED_PROTOCOL_VERSION,
                "Unsupported protocol version",
                {"supported": [self.revision], "requested": version},
                msg.id,
            )
        required = self._requires.get(m.spec.method)
        if required is not None:
            declared = meta.get(CLIENT_CAPABILITIES_KEY) or {}
            missing = missing_capabilities(required, declared)
            if missing is not None:
                raise ProtocolError(
                    MISSING_REQUIRED_CLIENT_CAPABILITY,
                    "Missing required client capability",
                    {"requiredCapabilities": missing},
                    msg.id,
                )

    # -- encode ---------------------------------------------------------------------------------

    def encode(self, msg: Any) -> bytes:
        """Encode a message (or, in 2025-03-26, a list of them as a batch) to JSON bytes.

        Requests this side sends are remembered by id, so that their responses decode to the
        precise result class.
        """
        t = type(msg)
        if t is Response:
            if type(msg.result) in self._carriers:
                self._learn(msg.result)
            return _json_encode(msg)
        m = self._send.get(t)
        if m is not None:  # a generated message this side sends, no Request wrapper needed
            if m.learns or (m.gates and (self._capabilities is not None or self._peer_capabilities is not None)):
                self._sent(m, msg)
            if m.enveloped:
                if m.spec.kind == "request":
                    self._pending[msg.id] = m.spec.method
                return _json_encode(msg)
            return _json_encode(m.unwrap(msg))  # type: ignore[misc]
        if t is Request:
            m = self._send_wrapped.get(type(msg.message))
            if m is not None and m.spec.kind == "request":
                if m.learns or (m.gates and (self._capabilities is not None or self._peer_capabilities is not None)):
                    self._sent(m, msg)
                self._pending[msg.id] = m.spec.method
                return _json_encode(m.unwrap(msg))  # type: ignore[misc]
        if isinstance(msg, list):
            if not self._rev.batches:
                raise ProtocolError(INVALID_REQUEST, f"JSON-RPC batches are not part of MCP {self.revision}")
            if not msg:
                raise ProtocolError(INVALID_REQUEST, "Invalid Request: empty batch")
            return b"[" + b",".join(self._encode_one(m) for m in msg) + b"]"
        return self._encode_one(msg)

    def _encode_one(self, msg: Any) -> bytes:
        if isinstance(msg, (Response, ErrorResponse)):
            if isinstance(msg, Response):
                self._learn(msg.result)
            return msgspec.json.encode(msg)
        if isinstance(msg, ProtocolError):
            return msg.to_json()
        if isinstance(msg, Request):
            m = self._rev.by_class.get(type(msg.message))
            if m is None or m.unwrap is None:
                raise TypeError(
                    f"{type(msg.message).__name__} is not a request type of MCP {self.revision} that needs an envelope"
                )
            self._sendable(m)
            self._sent(m, msg)
            self._pending[msg.id] = m.spec.method
            return msgspec.json.encode(m.unwrap(msg))
        m = self._rev.by_class.get(type(msg))
        if m is None:
            raise TypeError(f"cannot encode {type(msg).__name__} as a message of MCP {self.revision}")
        self._sendable(m)
        self._sent(m, msg)
        if m.spec.kind == "request":
            if m.unwrap is not None:
                raise TypeError(
                    f"in MCP {self.revision} a request needs an id: encode Request(id=..., message=...)"
                )
            self._pending[msg.id] = m.spec.method
            return msgspec.json.encode(msg)
        return msgspec.json.encode(msg if m.unwrap is None else m.unwrap(msg))

    def _sent(self, m: _Method, msg: Any) -> None:
        if m.gates and (self._capabilities is not None or self._peer_capabilities is not None):
            self._check_gates(m, msg, incoming=False)
        if m.learns:
            self._learn(_params(msg))

    def _sendable(self, m: _Method) -> None:
        if m.spec.sender not in (self.role, "both"):
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"in MCP {self.revision} {m.spec.method!r} is sent by the {_senders(m.spec.sender)}, not the {self.role}",
            )

    def request(self, message: Any, id: RequestId) -> Any:
        """``message`` as a request with ``id``, in the shape this revision encodes."""
        m = self._rev.by_class[type(message)]
        if m.unwrap is not None:
            return Request(id=id, message=message)
        return msgspec.structs.replace(message, id=id)

    def respond(self, id: RequestId, result: Any) -> bytes:
        """The response bytes for the request ``id``."""
        return self.encode(Response(id=id, result=result))

    def error_response(self, err: ProtocolError) -> bytes:
        """The JSON-RPC error response bytes for ``err``."""
        return err.to_json()

    def meta(self, capabilities: Any = None, **extra: Any) -> dict[str, Any]:
        """2026-07-28 and later: the reserved ``_meta`` keys a client puts in every request."""
        out = {PROTOCOL_VERSION_KEY: self.revision, CLIENT_CAPABILITIES_KEY: msgspec.to_builtins(capabilities or {})}
        out.update(extra)
        return out


def _params(msg: Any) -> Any:
    return getattr(msg.message if isinstance(msg, Request) else msg, "params", UNSET)


def _path_object(path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    node = out
    for key in path.split("."):
        node[key] = {}
        node = node[key]
    return out


def _safe(raw: Raw) -> Any:
    try:
        return _ANY.decode(raw)
    except (msgspec.DecodeError, RecursionError, ValueError):
        return UNSET


def _at(exc: Exception, prefix: str) -> str:
    text = join_path(str(exc))
    return text.replace(" - at `$", f" - at `{prefix}", 1) if " - at `$" in text else f"{text} - at `{prefix}`"

