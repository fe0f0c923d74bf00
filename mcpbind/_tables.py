"""What a codec builds from one revision's facts, once per (revision, role), under a lock:
after it exists msgspec builds nothing lazily (docs/threads.md)."""

from __future__ import annotations

import dataclasses
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Union, get_origin

import msgspec

from ._support import Facts, MethodSpec, Wire, dec_hook, open_class
from .messages import Request


@dataclass(frozen=True, eq=False, slots=True)
class Method:
    spec: MethodSpec
    wire: Wire
    name: str
    request: bool
    enveloped: bool  # the generated message is the wire Struct itself
    wrapped: bool  # a caller holds it in a ``Request`` (a request without the envelope)
    response: msgspec.json.Decoder[Any] | None  # a result response to it, in one pass
    learns: bool  # its params may carry the sender's capabilities
    result_learns: bool  # its result may carry the responder's capabilities
    kind_attr: str | None  # attribute of the result discriminator in its own result class
    gated: bool  # it has capability gates
    tasked: bool  # a task may ride on it: its params can ask for one, or it asks for a payload
    payload: bool  # it asks for a task's payload (``FACTS.tasks.payload_method``)
    # the wire keys of ``FACTS.tasks.when`` (where a task may ride on it) and of
    # ``.payload_task_id`` (a request naming a task) in its params, for plain dicts; or None
    task_keys: tuple[str | None, str | None]
    message: Any  # the generated message class a caller holds (``spec.message``)
    build: Callable[[Any], Any]  # decoded wire Struct -> what decode returns
    unbuild: Callable[[Any], Any]  # what a caller encodes -> the wire Struct
    # read by the fast decoder as its closed twin (``_closed``): the wire Struct and params
    # classes the twin and its params take back, and the open _meta's ``_from_fields``; else None.
    # A twin's entry (``_Tables.by_wire``) has ``enveloped`` false though its method is: decode
    # tests that first, and only a message read as a twin goes on to the test of this.
    restore: tuple[type, type, Callable[[Any], Any]] | None = None


def _builders(spec: MethodSpec, wire: Any) -> tuple[Callable[[Any], Any], Callable[[Any], Any]]:
    """How a wire Struct becomes what callers hold and back (the facts guarantee that a message
    without the envelope is ``{method, params}``)."""
    message = spec.message
    if wire is message:
        return _same, _same
    if spec.kind == "request":
        return (
            lambda w: Request(id=w.id, message=message(params=w.params)),
            lambda m: wire(id=m.id, jsonrpc="2.0", params=m.message.params),
        )
    return (lambda w: message(params=w.params)), (lambda m: wire(jsonrpc="2.0", params=m.params))


def _same(x: Any) -> Any:
    return x


@dataclass(frozen=True, slots=True)
class _Tables:
    """One revision's tables for one role, built once: msgspec builds nothing after this."""

    facts: Facts
    module: Any  # the generated package of the revision
    methods: dict[str, Method]
    receive: dict[str, Method]  # what this role may receive
    by_wire: dict[type, Method]
    # every method, by the generated class a caller holds, and by its wire class
    # (``FACTS.wires``: what a session builds, saving the ``Request`` and the rebuild)
    by_message: dict[type, Method]
    send: dict[type, Method]  # what this role may send, by the same classes
    fast: msgspec.json.Decoder[Any]  # the tagged union of every message this role receives
    # the same with every wire Struct itself, where ``fast`` reads some as their closed twins
    # (``_closed``): what a message the fast one refused is tried as next; None when the same
    open: msgspec.json.Decoder[Any] | None
    # where in a message a twin refuses what the wire Struct reads (``_closed``), as the end of
    # msgspec's error (`` - at `$.params._meta` ``): a refusal elsewhere is the wire Struct's too
    open_at: tuple[str, ...]
    generic: msgspec.json.Decoder[Any]  # a response with the generic result
    tasks: msgspec.json.Decoder[Any] | None  # a response creating a task
    sides: dict[Any, str]  # capabilities class -> whose ("client" or "server")
    learners: frozenset[Any]  # result classes that carry their sender's capabilities
    # the per-request _meta envelope (``FACTS.request_meta``): its class, the wire key of its
    # protocol version, the versions supported (None, "" and empty without the envelope)
    meta_class: Any
    version_key: str
    versions: frozenset[str]


_BUILD_LOCK = threading.Lock()
_TABLES: dict[tuple[str, str], _Tables] = {}  # two per pinned revision at most


def tables_for(revision: str, role: str) -> _Tables:
    """The tables of ``revision`` for ``role``; UnknownRevisionError for a revision not pinned."""
    try:
        found = _TABLES.get((revision, role))
    except TypeError:  # an unhashable revision
        found = None
    if found is None:
        from .packages import bindings

        bindings(revision)  # UnknownRevisionError for anything but a pinned revision
        with _BUILD_LOCK:  # built once, by one thread (docs/threads.md)
            found = _TABLES.get((revision, role))
            if found is None:
                found = _TABLES[revision, role] = _build(revision, role)
    return found


def _build(revision: str, role: str) -> _Tables:
    from ._support import prepare
    from .packages import bindings

    module = bindings(revision)
    prepare(module)
    facts: Facts = module.FACTS
    kinds = facts.result_kinds
    methods = {}
    for name, spec in module.METHODS.items():
        wire = facts.wires[name]
        result, kind_attr = wire.result, None
        if kinds is not None and isinstance(result, type):
            kind_attr = next(
                (f.name for f in msgspec.structs.fields(result) if f.encode_name == kinds.key), None
            )
        response = _decoder(wire.response) if wire.response is not None else None
        request = spec.kind == "request"
        enveloped = wire.wire is spec.message
        tasks = facts.tasks
        tasked = tasks is not None and (
            name == tasks.payload_method or _has_field(spec.params, tasks.when)
        )
        methods[name] = Method(
            spec,
            wire,
            name,
            request,
            enveloped,
            request and not enveloped,
            response,
            request and _has_field(spec.params, "capabilities"),
            _has_field(result, "capabilities"),
            kind_attr,
            bool(spec.gates),
            tasked,
            tasks is not None and name == tasks.payload_method,
            (
                (
                    _wire_key(spec.params, tasks.when) if tasked else None,
                    _wire_key(spec.params, tasks.payload_task_id) if request else None,
                )
                if tasks is not None
                else (None, None)
            ),
            spec.message,
            *_builders(spec, wire.wire),
        )
    peer = "server" if role == "client" else "client"
    receive = {n: m for n, m in methods.items() if m.spec.sender in (peer, "both")}
    closed = {m.wire.wire: _closed(m.wire.wire) if m.enveloped else None for m in receive.values()}
    fast_wires = [(closed[m.wire.wire] or (m.wire.wire,))[0] for m in receive.values()]
    twins = [twin for twin in closed.values() if twin is not None]
    by_message = {
        **{m.wire.wire: _as_wire(m) for m in methods.values() if not m.enveloped},
        **{m.spec.message: m for m in methods.values()},
    }
    return _Tables(
        facts=facts,
        module=module,
        methods=methods,
        receive=receive,
        by_wire={
            **{m.wire.wire: m for m in receive.values()},
            **{
                # (not ``enveloped``, though it is: Codec.decode's test of the usual path)
                twin[0]: dataclasses.replace(m, enveloped=False, restore=twin[1])
                for m in receive.values()
                if (twin := closed[m.wire.wire]) is not None
            },
        },
        by_message=by_message,
        send={t: m for t, m in by_message.items() if m.spec.sender in (role, "both")},
        fast=_decoder(Union[tuple(fast_wires)]),  # noqa: UP007
        open=(
            _decoder(Union[tuple(m.wire.wire for m in receive.values())])  # noqa: UP007
            if twins
            else None
        ),
        open_at=tuple({where for _, _, where in twins}),
        generic=_decoder(facts.result_response),
        tasks=_decoder(facts.tasks.response) if facts.tasks is not None else None,
        sides={facts.client_capabilities: "client", facts.server_capabilities: "server"},
        learners=frozenset(
            c for m in methods.values() if m.result_learns for c in _classes(m.wire.result)
        ),
        meta_class=facts.request_meta.type if facts.request_meta is not None else None,
        version_key=facts.request_meta.version_key if facts.request_meta is not None else "",
        versions=frozenset(facts.versions) if facts.request_meta is not None else frozenset(),
    )


def _as_wire(m: Method) -> Method:
    """``m`` as sent in its wire class, which carries the envelope itself."""
    return dataclasses.replace(m, enveloped=True, wrapped=False, build=_same, unbuild=_same)


def _closed(wire: Any) -> tuple[Any, tuple[type, type, Callable[[Any], Any]], str] | None:
    """A closed twin of a received wire Struct whose params always carry an open ``_meta``
    object (the per-request envelope), and what turns a decoded twin into the wire Struct
    itself (``Method.restore``: the codec does it), and the JSON path of the twin's ``_meta``;
    None for any other wire Struct. (Asked only of an enveloped method's: the codec's message
    is then the restored Struct itself.)

    An open object is decoded in two passes: msgspec reads it as a plain dict, then its hook
    converts the declared keys into its fields Struct (``_support._compile_open``). The twin
    (a subclass of the wire Struct, its params a subclass of the params Struct) reads ``_meta``
    as that fields Struct refusing other keys, in the one pass of the whole message; the open
    object is then built from it, and the twin and its params take their own classes back (the
    same layout: a subclass adding no field). A ``_meta`` with any other key fails the twin:
    the codec then decodes the message as before, with the wire Struct itself.
    """
    params_field = next((f for f in msgspec.structs.fields(wire) if f.name == "params"), None)
    if params_field is None:
        return None
    params, params_optional = _optional(params_field.type)
    meta_class = open_class(params, "meta")
    if meta_class is None or meta_class._fields_type is None:
        return None
    if wire.__struct_config__.frozen or params.__struct_config__.frozen:
        return None
    meta_field = next(f for f in msgspec.structs.fields(params) if f.name == "meta")
    _, meta_optional = _optional(meta_field.type)
    if params_optional or meta_optional:
        return None  # (mostly absent: the twin would cost its restore and save nothing)
    fields_type = meta_class._fields_type
    strict = type(fields_type)(
        f"{fields_type.__name__}Closed",
        (fields_type,),
        {"__module__": __name__},
        forbid_unknown_fields=True,
    )
    twin_params = type(params)(
        f"{params.__name__}Closed",
        (params,),
        _field_override(meta_field, strict),
    )
    config = wire.__struct_config__
    twin = type(wire)(
        f"{wire.__name__}Closed",
        (wire,),
        _field_override(params_field, twin_params),
        tag=config.tag,
        tag_field=config.tag_field,
    )
    for cls, base in ((strict, fields_type), (twin_params, params), (twin, wire)):
        if any(getattr(cls, a) != getattr(base, a) for a in _LAYOUT):
            return None  # (not the same layout: ``__class__`` could not be assigned)
    where = f"`$.{params_field.encode_name}.{meta_field.encode_name}`"
    return twin, (wire, params, meta_class._from_fields), where


# What ``__class__`` assignment needs equal in a twin and its base (besides the slots, which a
# Struct subclass that only retypes fields does not add).
_LAYOUT = ("__basicsize__", "__itemsize__", "__dictoffset__", "__weakrefoffset__", "__flags__")


def _optional(tp: Any) -> tuple[Any, bool]:
    """``tp`` without ``UnsetType``, and whether it was there."""
    args = getattr(tp, "__args__", None)
    if get_origin(tp) in (Union, types.UnionType) and args is not None:
        rest = tuple(a for a in args if a is not msgspec.UnsetType)
        if len(rest) == 1:
            return rest[0], len(rest) < len(args)
    return tp, False


def _field_override(f: Any, tp: Any) -> dict[str, Any]:
    """A Struct subclass's namespace giving the required field ``f`` the type ``tp``, its wire
    name kept."""
    return {
        "__module__": __name__,
        "__annotations__": {f.name: tp},
        f.name: msgspec.field(name=f.encode_name),
    }


def _decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp, dec_hook=dec_hook)


def _classes(tp: Any) -> list[Any]:
    """The classes a value of ``tp`` (a class, or an untagged union of them) can have."""
    members = getattr(tp, "members", None)
    if isinstance(members, tuple):
        return [c for m in members for c in _classes(m.type)]
    return [tp]


def _wire_key(tp: Any, name: str) -> str | None:
    """The JSON key of the attribute ``name`` of a params type (or an untagged union of them)."""
    for c in _classes(tp):
        if name in getattr(c, "__struct_fields__", ()):
            return next(f.encode_name for f in msgspec.structs.fields(c) if f.name == name)
    return None


def _has_field(tp: Any, name: str) -> bool:
    """Whether a params or result type (or an untagged union of them) has the attribute."""
    return any(name in getattr(c, "__struct_fields__", ()) for c in _classes(tp))
