"""What the generated revision packages build on: open objects, untagged unions, the decode hook.

msgspec decodes Structs, tagged unions and unions of different JSON kinds natively. Two
shapes of these schemas it cannot: unions whose members nothing but their keys tell apart
(``TextResourceContents | BlobResourceContents``, ``ServerResult``), and objects that must
keep keys they do not declare (``_meta``, ``Result``, a tool's ``inputSchema``). For those the
generated code uses the two classes below as field types, and ``dec_hook`` decodes them.

Thread safety: msgspec builds a Struct's decoding info on first use and, on builds with a GIL,
lets other threads see it before it is complete (docs/threads.md). Everything here that makes
msgspec build (decoders, hooks, ``convert`` targets) does so once under ``_LOCK``, and
``prepare`` builds all of a revision's up front.
"""

from __future__ import annotations

import _thread  # not threading: importing that would add to every revision's import time
import types as types_module
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, ClassVar, Literal, NamedTuple, TypeVar, Union, get_origin

import msgspec

T = TypeVar("T")

# Held while anything msgspec builds lazily is built, so that no thread ever decodes through
# what another is still building. Reentrant: a hook being compiled prepares its members' types.
_LOCK = _thread.RLock()


class Gate(msgspec.Struct, frozen=True, kw_only=True):
    """A capability a method needs: ``side``'s capabilities must advertise ``path`` (a dotted
    path) before the other side may send it; with ``when`` (wire keys into the params) only when
    that value is present, or, with ``equals``, has that value."""

    side: str  # "client", "server", or "receiver" (whichever side receives the message)
    path: str
    when: tuple[str, ...] = ()
    equals: Any = None


class MethodSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One JSON-RPC method of a revision, as the generated ``METHODS`` tables list it."""

    method: str
    kind: str  # "request" or "notification"
    sender: str  # "client", "server" or "both"
    message: Any  # the request or notification type
    params: Any  # the type of its params, or None
    params_required: bool
    result: Any  # the result type of a request; None for a notification
    capability: str | None  # dotted capability path that must have been advertised
    capability_side: str | None  # whose: "client", "server" or "receiver" (the side receiving it)
    gates: tuple[Gate, ...] = ()  # every capability it needs, ``capability`` first, as records


class Wire(msgspec.Struct, frozen=True, kw_only=True):
    """How one method travels: the generated Structs the codec decodes and encodes it as."""

    wire: Any  # the whole message, tagged on ``method`` (the message class itself when it has id)
    response: Any  # a result response to it, closed (None for a notification)
    result: Any  # the method's own result class (None for a notification)


class RequestMeta(msgspec.Struct, frozen=True, kw_only=True):
    """The per-request ``_meta`` envelope of revisions without the initialize handshake."""

    type: Any  # its generated class
    version_key: str
    capabilities_key: str
    info_key: str
    unsupported_version_code: int
    missing_capability_code: int
    peek: Any  # a Struct reading only a request's id, method and params._meta version


class ResultKinds(msgspec.Struct, frozen=True, kw_only=True):
    """The discriminator of results: ``own`` (or no key) is the method's own result; each value
    of ``responses`` selects that response envelope; any other value is an extension's result."""

    key: str
    own: str
    responses: Mapping[str, Any]
    classes: Mapping[str, Any]


class TaskResults(msgspec.Struct, frozen=True, kw_only=True):
    """Results that depend on the params (task-augmented requests)."""

    when: str  # params attribute that makes a request task-augmented
    result: Any  # the result answering such a request
    response: Any  # its response envelope
    task_id: tuple[str, ...]  # attribute path to the task id in its result
    payload_method: str  # answers with the result of the request that created the task
    payload_task_id: str  # attribute holding the task id in that method's params


class RoundTrip(msgspec.Struct, frozen=True, kw_only=True):
    """Multi-round-trip requests: the result asking for input and the fields a retry carries."""

    result: Any
    input_requests: str
    input_responses: str
    request_state: str
    requests: Mapping[str, str] = {}  # feature role (sample, elicit, ...) -> input request method
    capabilities: Mapping[str, str] = {}  # feature role -> client capability it needs


class Loss(msgspec.Struct, frozen=True, kw_only=True):
    """What a bridge does with a value the revision cannot carry (an overlay ``[[loss]]``)."""

    rule: str  # "drop"; "replace": the object becomes ``into`` built from ``template``; "refuse"
    reason: str
    into: str | None = None  # schema name of the replacement type, in the source revision
    template: Mapping[str, Any] = {}  # the replacement as JSON; strings are format templates


class Facts(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the runtime needs to know about one revision, emitted by the generator."""

    revision: str
    versions: tuple[str, ...]  # protocol version strings its messages carry; the first is sent
    handshake: str  # "initialize", or "discover" (with the per-request ``request_meta``)
    lifecycle: Mapping[str, str]  # role (initialize, ping, cancelled, ...) -> method
    # role (list_tools, call_tool, read_resource, sample, log, ...) -> method, of the features an
    # application serves or sends; only the methods the revision has
    features: Mapping[str, str] = {}
    batches: bool  # JSON-RPC batches are part of the revision
    enveloped: bool  # request and notification classes carry ``jsonrpc`` (and ``id``) themselves
    error_id_optional: bool  # an error response may leave out ``id``
    # the wire key of the reserved metadata member of params and results (every generated class
    # reads it as its ``meta`` attribute)
    meta_key: str
    # the JSON Schema dialect (its ``$schema`` URI) of schemas the revision carries (a tool's
    # input and output schemas) that declare none: the dialect of the revision's own schema
    schema_dialect: str
    result: Any  # the generic result (an open object): unknown methods, extension results
    result_response: Any  # its closed response envelope
    client_capabilities: Any
    server_capabilities: Any
    wires: Mapping[str, Wire]
    capability_names: tuple[str, ...] = ()  # capabilities whose keys are names, not paths
    # capability -> (its sub-capabilities, what an object with none of them declares):
    # ``elicitation: {}`` is form mode
    capability_implied: Mapping[str, tuple[tuple[str, ...], Mapping[str, Any]]] = {}
    request_meta: RequestMeta | None = None
    result_kinds: ResultKinds | None = None
    tasks: TaskResults | None = None
    round_trip: RoundTrip | None = None
    # (schema type name or "*", wire field or "" for the object itself) -> what a bridge does
    # with it when this revision, the target, cannot carry it
    losses: Mapping[tuple[str, str], Loss] = {}
    # how a tools/call with arguments the tool's input schema rejects is answered: "protocol"
    # (Invalid params) or "result" (a tool result with isError)
    tool_argument_errors: str = "protocol"
    # a POST's event stream may start with a priming event (an id, no data) and be closed for the
    # client to poll with Last-Event-ID (Streamable HTTP, SEP-1699); older clients cannot read one
    sse_priming: bool = False


class Member(NamedTuple):
    """One member of an untagged union and what must hold for it to be a candidate."""

    type: Any
    kind: str | None  # "object", "array", "string", ...; None accepts any kind
    required: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    consts: tuple[tuple[str, tuple[Any, ...]], ...] = ()


class _UntaggedType(type):
    """Makes ``isinstance(x, Marker)`` true for instances of the union's members.

    msgspec checks that ``dec_hook`` returned an instance of the field's type; the members
    do not inherit from the marker, so the check has to come from here.
    """

    def __instancecheck__(cls, obj: Any) -> bool:
        classes = cls._classes  # type: ignore[attr-defined]
        if classes is None:
            classes = member_classes(cls)  # type: ignore[arg-type]
        return isinstance(obj, classes)


def member_classes(cls: type[Untagged]) -> tuple[type, ...]:
    """The runtime classes of an untagged union's members, worked out once (they are only all
    known once the module that registers them is imported)."""
    with _LOCK:
        if cls._classes is None:
            cls._classes = tuple(_runtime_classes(m.type for m in cls.members))
        return cls._classes


def _runtime_classes(types: Any) -> list[type]:
    out: list[type] = []
    for t in types:
        args = getattr(t, "__args__", None)
        if isinstance(t, types_module.UnionType) or get_origin(t) is Union:
            out += _runtime_classes(args)
        elif isinstance(t, _UntaggedType):
            out += _runtime_classes(m.type for m in t.members)  # type: ignore[attr-defined]
        elif isinstance(t, type):
            out.append(t)
        elif get_origin(t) is Literal:
            out += [type(a) for a in args or ()]
        else:
            out.append(get_origin(t) or object)
    return out


class Untagged(metaclass=_UntaggedType):
    """Marker for an untagged union: a field of this type is decoded by ``dec_hook``.

    The generated code declares one subclass per such union (the type checker sees the real
    union instead) and registers its members, most specific first.
    """

    __slots__ = ()
    members: ClassVar[tuple[Member, ...]] = ()
    _classes: ClassVar[tuple[type, ...] | None] = None  # the members' runtime classes, once known

    def __new__(cls) -> Untagged:
        raise TypeError(f"{cls.__name__} is an untagged union: build one of its members instead")


def register(marker: type[Untagged], members: tuple[Member, ...]) -> None:
    """Attach its members, most specific first, to an untagged union's marker (once, at import)."""
    marker.members = members
    marker._classes = None


class OpenObject(dict[str, Any]):
    """A JSON object that keeps every key: declared ones typed, any other as it came.

    Generated subclasses add a read-only property per declared key (``meta.protocol_version``
    reads ``"io.modelcontextprotocol/protocolVersion"``). It is a ``dict``, so msgspec encodes
    it as is and nothing a peer sent is lost on the way through.
    """

    __slots__ = ()
    _attributes: ClassVar[Mapping[str, str]] = {}  # attribute name -> wire key
    _fields_type: ClassVar[Any] = None  # a Struct of the declared keys, for validation
    _extra_type: ClassVar[Any] = None  # dict type of the other keys, None when any value goes

    def __init__(self, _extra: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        super().__init__(_extra or {})
        for attribute, value in fields.items():
            try:
                wire = self._attributes[attribute]
            except KeyError:
                raise TypeError(
                    f"{type(self).__name__}() got an unexpected keyword argument {attribute!r}"
                ) from None
            if value is not msgspec.UNSET:
                self[wire] = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"

    @classmethod
    def _from_fields(cls, values: Any, /) -> Any:
        """The open object of the declared keys a ``_fields_type`` Struct holds (those set), in
        its field order. Generated classes override it with the same written out, a line a key:
        what the codec builds a request's ``_meta`` with (``_tables._closed``)."""
        self = dict.__new__(cls)
        for attribute, wire in cls._attributes.items():
            value = getattr(values, attribute)
            if value is not msgspec.UNSET:
                self[wire] = value
        return self


def open_class(cls: Any, attribute: str) -> Any:
    """The open-object class (e.g. a ``_meta`` class) of the field ``attribute`` of the Struct
    ``cls``, or None."""
    import msgspec.inspect as mi

    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        return None
    for f in mi.type_info(cls).fields:  # type: ignore[attr-defined]
        if f.name != attribute:
            continue
        types = f.type.types if isinstance(f.type, mi.UnionType) else (f.type,)
        for t in types:
            if isinstance(t, mi.CustomType) and issubclass(t.cls, OpenObject):
                return t.cls
    return None


def meta_key(cls: Any, attribute: str) -> str | None:
    """The wire key of the ``_meta`` key a params or result class declares as ``attribute``."""
    meta = open_class(cls, "meta")
    return meta._attributes.get(attribute) if meta is not None else None


def _compile_open(cls: type[OpenObject]) -> Callable[[Any], Any]:
    """The decoder of one open object class: the declared keys are validated by one
    ``msgspec.convert`` into its fields Struct; only those whose decoded value is not the JSON
    value itself (a Struct, an open object, a union member) replace what the peer sent.

    Every message of the newest revisions has a ``_meta`` open object, so this runs once per
    message: what can be decided per class is decided here, and the function returned does
    only what the value at hand needs (bench/remarks.md, "Open objects")."""
    import msgspec.inspect as mi

    klass: Any = cls
    fields_type = klass._fields_type
    extra_type = klass._extra_type
    declared = frozenset(klass._attributes.values())
    info = {f.name: f for f in mi.type_info(fields_type).fields}  # type: ignore[attr-defined]
    typed = [(a, w) for a, w in klass._attributes.items() if not _plain(info[a].type)]
    # A required key is always there after a successful convert: no UNSET to skip.
    always = tuple((a, w) for a, w in typed if info[a].required)
    maybe = tuple((a, w) for a, w in typed if not info[a].required)
    always_one = always[0] if len(always) == 1 else ()
    maybe_one = maybe[0] if len(maybe) == 1 else ()
    # With no declared key present and none required, there is nothing to validate or replace.
    skippable = not any(f.required for f in info.values())
    hooked = _needs_hook(fields_type)
    convert_extra = _converter(extra_type) if extra_type is not None else None
    new, update, convert, unset = dict.__new__, dict.update, msgspec.convert, msgspec.UNSET

    def decode(obj: Any) -> Any:
        if type(obj) is not dict:
            raise ValueError(f"Expected `object`, got `{_kind(obj)}`")
        self = new(klass)
        self |= obj  # cheaper than calling ``update``
        if not skippable or not declared.isdisjoint(obj):
            try:
                values = (
                    convert(obj, fields_type, dec_hook=dec_hook)
                    if hooked
                    else convert(obj, fields_type)
                )
            except msgspec.ValidationError as exc:
                # msgspec passes a ValidationError from a hook on as it is, but adds where the
                # hook's value is to any other ValueError: the path must name the whole way.
                raise ValueError(str(exc)) from None
            if always_one:  # (the usual shapes, without a loop)
                self[always_one[1]] = getattr(values, always_one[0])
            else:
                for attribute, wire in always:
                    self[wire] = getattr(values, attribute)
            if maybe_one:
                value = getattr(values, maybe_one[0])
                if value is not unset:
                    self[maybe_one[1]] = value
            else:
                for attribute, wire in maybe:
                    value = getattr(values, attribute)
                    if value is not unset:
                        self[wire] = value
        if convert_extra is not None:
            try:
                update(self, convert_extra({k: v for k, v in obj.items() if k not in declared}))
            except msgspec.ValidationError as exc:
                raise ValueError(str(exc)) from None
        return self

    return decode


def _plain(t: Any) -> bool:
    """Whether values of this msgspec type decode to exactly the JSON value (no objects made)."""
    import msgspec.inspect as mi

    if isinstance(
        t, (mi.StrType, mi.IntType, mi.BoolType, mi.NoneType, mi.AnyType, mi.LiteralType)
    ):
        return True
    if isinstance(t, mi.UnionType):
        return all(_plain(u) for u in t.types)
    if isinstance(t, (mi.ListType, mi.DictType)):
        items = [t.item_type] if isinstance(t, mi.ListType) else [t.key_type, t.value_type]
        return all(_plain(u) for u in items)
    if isinstance(t, mi.Metadata):
        return _plain(t.type)
    return False  # Structs, custom types (open objects, untagged unions), floats (1 -> 1.0), ...


def _kind(obj: Any) -> str:
    if obj is None:
        return "null"
    return {
        dict: "object",
        list: "array",
        str: "str",
        bool: "bool",
        int: "int",
        float: "float",
    }.get(type(obj), type(obj).__name__)


_JSON_KIND = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
}


_MISSING = object()
_SEEN_KEYS = 16  # objects of at most this many keys have their union candidates remembered
_SEEN_MAX = 256  # and at most this many key sets per union


def _closest(members: tuple[Member, ...], obj: Any) -> Member | None:
    """The member an undecodable value was most likely meant to be (for the error message)."""
    kind = "null" if obj is None else _JSON_KIND.get(type(obj))
    same = [m for m in members if m.kind in (kind, None)]
    if not same:
        return None
    if kind != "object":
        return same[0]
    keys = obj.keys()
    return max(same, key=lambda m: (len(m.known & keys) - len(m.required - keys), -len(m.required)))


def dec_hook(tp: Any, obj: Any) -> Any:
    """The msgspec ``dec_hook`` that decodes the generated untagged unions and open objects."""
    try:  # (one subscript: msgspec calls this once per open object and untagged union)
        return _HOOKS[tp](obj)
    except KeyError:
        if tp in _HOOKS:
            raise  # the decoder's own
    return _hook(tp)(obj)


# The decoder of each untagged union and open object class, written only under _LOCK. One entry
# per such class, and only classes (generated ones, as a rule) get one: bounded by the code.
_HOOKS: dict[Any, Callable[[Any], Any]] = {}


def _hook(tp: Any) -> Callable[[Any], Any]:
    """The decoder of ``tp``, compiled once; compiling builds every msgspec type it converts into."""
    with _LOCK:
        decode = _HOOKS.get(tp)
        if decode is None:
            decode = _HOOKS[tp] = _compile(tp)
        return decode


def _compile(tp: Any) -> Callable[[Any], Any]:
    if isinstance(tp, type):
        if issubclass(tp, Untagged):
            return _compile_untagged(tp)
        if issubclass(tp, OpenObject):
            return _compile_open(tp)
    raise NotImplementedError(f"mcpbind cannot decode {tp!r}")


def _needs_hook(tp: Any) -> bool:
    """Whether converting into ``tp`` reaches an untagged union or open object (msgspec's
    ``convert`` is several times slower with a ``dec_hook`` than without)."""
    import msgspec.inspect as mi

    stack: list[Any] = [mi.type_info(tp)]
    seen: set[int] = set()
    while stack:
        t = stack.pop()
        if isinstance(t, mi.CustomType):
            return True
        if id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t, (mi.StructType, mi.DataclassType, mi.TypedDictType, mi.NamedTupleType)):
            stack += [f.type for f in t.fields]
        elif isinstance(t, mi.UnionType):
            stack += t.types
        elif isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
            stack.append(t.item_type)
        elif isinstance(t, mi.TupleType):
            stack += t.item_types
        elif isinstance(t, mi.DictType):
            stack += [t.key_type, t.value_type]
        elif isinstance(t, mi.Metadata):
            stack.append(t.type)
    return False


def _converter(tp: Any) -> Callable[[Any], Any]:
    """``msgspec.convert`` into ``tp``, with the hook only when ``tp`` needs it."""
    convert = msgspec.convert
    if _needs_hook(tp):
        return lambda obj: convert(obj, tp, dec_hook=dec_hook)
    return lambda obj: convert(obj, tp)


def preferred(tp: Any) -> tuple[Any, tuple[str, ...]] | None:
    """For an untagged union of objects: the member to decode straight from JSON bytes, and the
    keys whose absence from the bytes makes that exact.

    ``X`` is the member the general rule ranks first among equals (most required keys, then
    member order). If ``X`` decodes, its required keys and constants are there; another member
    could only outrank it with more known keys present, so with none of the keys only the
    others know in the message, the general rule picks ``X`` too. None when ``tp`` is not such
    a union.
    """
    if not (isinstance(tp, type) and issubclass(tp, Untagged)):
        return None
    members = tp.members
    if len(members) < 2 or any(m.kind != "object" or not isinstance(m.type, type) for m in members):
        return None
    first = min(range(len(members)), key=lambda i: (-len(members[i].required), i))
    x = members[first]
    if not issubclass(x.type, msgspec.Struct):
        return None
    # Decoding X must require what the rule requires of it (no default standing in for a key).
    if not x.required <= {f.encode_name for f in msgspec.structs.fields(x.type) if f.required}:
        return None
    guards = sorted(frozenset().union(*(m.known for m in members if m is not x)) - x.known)
    return x.type, tuple(guards)


def _compile_untagged(tp: type[Untagged]) -> Callable[[Any], Any]:
    """The decoder of one untagged union: try its candidates in turn (usually there is one),
    and explain a value that is none of them."""
    members = tp.members
    # (type, whether converting into it needs the hook), called inline: one frame less a value
    targets = [(m.type, _needs_hook(m.type)) for m in members]
    candidates = _candidates(members)
    convert = msgspec.convert

    def decode(obj: Any) -> Any:
        first_error: msgspec.ValidationError | None = None
        for i in candidates(obj):
            target, hooked = targets[i]
            try:
                return convert(obj, target, dec_hook=dec_hook) if hooked else convert(obj, target)
            except msgspec.ValidationError as exc:
                first_error = first_error or exc
        if first_error is not None:
            raise ValueError(str(first_error))
        raise ValueError(_mismatch(tp, obj))

    return decode


def _candidates(members: tuple[Member, ...]) -> Callable[[Any], list[int]]:
    """The rule deciding an untagged union: the members (indices) a value may be, in the order
    to try them. The JSON kind must fit; an object must have the member's required keys and
    constants, and objects with the most known keys come first (then the most required keys,
    then member order). When every member is an object requiring one key with constant values
    (``type`` of ``PrimitiveSchemaDefinition``), that key's value picks the members to check.
    """
    objects = tuple(i for i, m in enumerate(members) if m.kind in ("object", None))
    shared = set.intersection(*(set(dict(m.consts)) for m in members)) if members else set()
    const_key = next(
        (k for k in sorted(shared) if all(m.kind == "object" and k in m.required for m in members)),
        None,
    )
    by_value: dict[Any, tuple[int, ...]] = {}
    if const_key is not None:
        for i, m in enumerate(members):
            for value in dict(m.consts)[const_key]:
                by_value[value] = (*by_value.get(value, ()), i)
    # What is left to check of each member once the pool is chosen (the constant key's value
    # chose it), and the rank among members that fit: the most known keys present, then the
    # most required keys, then member order.
    checks = tuple(
        (m.required, tuple((k, v) for k, v in m.consts if k != const_key)) for m in members
    )
    ranks = tuple((m.known, -len(m.required), i) for i, m in enumerate(members))
    kinds = tuple((i, m.kind, m.kind == "number") for i, m in enumerate(members))
    # Where no member has a constant left to check, the candidates depend only on the constant
    # key's value and the keys present. They are remembered (a bounded number) for objects of a
    # few keys that the union declares and a value that picks members: nothing else a peer sent
    # is kept.
    by_keys = not any(consts for _, consts in checks)
    declared = frozenset().union(*(m.known for m in members))
    seen: dict[tuple[Any, ...], list[int]] = {}

    def candidates(obj: Any) -> list[int]:
        if type(obj) is dict:
            signature = None
            if by_keys and len(obj) <= _SEEN_KEYS and declared.issuperset(obj):
                signature = (obj.get(const_key, _MISSING) if const_key is not None else None, *obj)
                try:
                    found = seen.get(signature)
                except TypeError:  # an array or object where the constant belongs
                    found, signature = None, None
                if found is not None:
                    return found
            pool = objects
            if const_key is not None:
                try:
                    pool = by_value.get(obj.get(const_key, _MISSING), ())
                except TypeError:
                    pool = ()
            keys = obj.keys()
            fits = []
            for i in pool:
                required, consts = checks[i]
                if required <= keys:
                    for key, values in consts:
                        if obj.get(key, _MISSING) not in values:
                            break
                    else:
                        fits.append(i)
            if len(fits) > 1:
                order = sorted((-len(ranks[i][0] & keys), ranks[i][1], i) for i in fits)
                fits = [i for _, _, i in order]
            if signature is not None and fits:
                if len(seen) >= _SEEN_MAX:
                    seen.clear()
                seen[signature] = fits
            return fits
        kind = "null" if obj is None else _JSON_KIND.get(type(obj))
        return [
            i for i, k, number in kinds if k is None or k == kind or (number and kind == "integer")
        ]

    return candidates


def _mismatch(tp: type[Untagged], obj: Any) -> str:
    """Why ``obj`` is no member of ``tp``: the error of the member it was most likely meant to be."""
    closest = _closest(tp.members, obj)
    if closest is None:
        expected = " | ".join(sorted({m.kind or "any" for m in tp.members}))
        return f"Expected `{expected}`, got `{_kind(obj)}`"
    try:
        msgspec.convert(obj, closest.type, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        return str(exc)
    # Keys and kind fit but a constant does not.
    for key, values in closest.consts:
        if obj.get(key, _MISSING) not in values:
            return f"Invalid value {obj.get(key)!r} - at `$.{key}`"
    return f"Value matches no member of `{tp.__name__}`"


_AT_PATTERN = r" - at `(\$[^`]*)`"


def join_path(message: str) -> str:
    """Fold the nested locations msgspec reports for values decoded inside ``dec_hook``.

    ``Expected `str`, got `int` - at `$.blob` - at `$.contents[1]``` becomes
    ``Expected `str`, got `int` - at `$.contents[1].blob```.
    """
    if message.count(" - at `") < 2:
        return message
    import re  # only errors need it; keep it off the import path

    parts = re.findall(_AT_PATTERN, message)
    head = re.split(_AT_PATTERN, message, maxsplit=1)[0]
    path = "$"
    for part in reversed(parts):
        path += part[1:]
    return f"{head} - at `{path}`"


@lru_cache(maxsize=1024)
def decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    """A cached JSON decoder for ``tp`` that handles every generated type (built under the lock)."""
    with _LOCK:
        _prepare_types((tp,))
        return msgspec.json.Decoder(tp, dec_hook=dec_hook)


def decode(data: bytes | str, tp: type[T]) -> T:
    """Decode JSON into ``tp`` (any generated type).

    Whatever ``data`` holds, the only error is ``msgspec.DecodeError``: its subclass
    ``msgspec.ValidationError`` (naming the full JSON path) when the JSON does not fit ``tp``,
    ``msgspec.DecodeError`` itself when it is not JSON, is not UTF-8 (a lone surrogate, in a
    ``str`` or encoded in bytes) or nests too deeply to decode.
    """
    try:
        return decoder(tp).decode(data)  # type: ignore[arg-type, no-any-return]
    except msgspec.ValidationError as exc:
        raise msgspec.ValidationError(join_path(str(exc))) from None
    except RecursionError:
        raise msgspec.DecodeError("JSON is nested too deeply") from None
    except UnicodeError as exc:  # a str is encoded to UTF-8 first; bytes' strings are decoded
        raise msgspec.DecodeError(
            f"Invalid JSON: not UTF-8 ({getattr(exc, 'reason', exc)})"
        ) from None


def convert(obj: Any, tp: type[T]) -> T:
    """Convert builtin objects (from ``json.loads``) into ``tp`` (any generated type)."""
    ready(tp)
    try:
        return msgspec.convert(obj, tp, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        raise msgspec.ValidationError(join_path(str(exc))) from None


# -- building once ---------------------------------------------------------------------------
#
# msgspec builds what it needs to decode a Struct (its field types, resolved from the string
# annotations) the first time the Struct is used, and caches it on the class before it has
# finished: with a GIL, another thread can take it half built and crash decoding through it
# (docs/threads.md). So every such build in mcpbind happens here, once, under _LOCK.


def prepare(source: types_module.ModuleType | Iterable[Any]) -> None:
    """Build now, once and thread-safely, everything msgspec and ``dec_hook`` would otherwise
    build on first use: msgspec's decoding info of every Struct and the decoder of every open
    object and untagged union that ``source`` defines (a generated revision module), or that
    the given types reach (any others are built, under the same lock, when first decoded).

    Afterwards any thread may decode these types, with ``dec_hook`` or its own msgspec
    decoders, at no risk. Preparing what is already prepared costs a set lookup.
    """
    with _LOCK:
        if isinstance(source, types_module.ModuleType):
            if source.__name__ in _PREPARED_MODULES:
                return
            _prepare_types(
                v
                for module in _with_submodules(source)
                for v in vars(module).values()
                if isinstance(v, type)
                and issubclass(v, (msgspec.Struct, OpenObject, Untagged))
                and v not in (msgspec.Struct, OpenObject, Untagged)
            )
            _PREPARED_MODULES.add(source.__name__)
        else:
            _prepare_types(source)


def _with_submodules(module: types_module.ModuleType) -> list[types_module.ModuleType]:
    """A package and the submodules it has imported (private classes live in ``types``)."""
    prefix = module.__name__ + "."
    return [module] + [
        v
        for v in vars(module).values()
        if isinstance(v, types_module.ModuleType) and v.__name__.startswith(prefix)
    ]


# Names of the modules prepared: one per revision package at most.
_PREPARED_MODULES: set[str] = set()


def _prepare_types(types: Iterable[Any]) -> None:
    """Build msgspec's info of ``types`` (and all they reach) and their hooks; holds the lock."""
    with _LOCK:
        plain: list[Any] = []
        for t in types:
            if isinstance(t, type) and issubclass(t, (OpenObject, Untagged)):
                _hook(t)  # builds what its decoder converts into
                if issubclass(t, Untagged):
                    member_classes(t)
            else:
                plain.append(t)
        if plain:
            # One decoder of a tuple of them all: msgspec builds each type's info (and that of
            # every Struct it reaches) completely before the lock is released.
            msgspec.json.Decoder(tuple.__class_getitem__(tuple(plain)))


@lru_cache(maxsize=1024)
def _ready(tp: Any) -> None:
    _prepare_types((tp,))


def ready(tp: Any) -> None:
    """Make sure msgspec's info for ``tp`` is built (once, under the lock) before it is used
    without a decoder from here (``msgspec.convert``)."""
    try:
        _ready(tp)
    except TypeError:  # an unhashable type (Annotated with unhashable metadata): build each time
        _prepare_types((tp,))
