"""What a codec builds from one revision's facts, once per (revision, role), under a lock:
after it exists msgspec builds nothing lazily (docs/threads.md)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Union

import msgspec

from ._support import Facts, MethodSpec, Wire, dec_hook
from .messages import Request


@dataclass(frozen=True)
class _Method:
    spec: MethodSpec
    wire: Wire
    enveloped: bool  # the generated message is the wire Struct itself
    response: msgspec.json.Decoder[Any] | None  # a result response to it, in one pass
    learns: bool  # its params may carry the sender's capabilities
    result_learns: bool  # its result may carry the responder's capabilities
    kind_attr: str | None  # attribute of the result discriminator in its own result class

    def build(self, wire: Any) -> Any:
        """What decode returns for a decoded wire Struct (the facts guarantee that a message
        without the envelope is ``{method, params}``)."""
        if self.enveloped:
            return wire
        message = self.spec.message(params=wire.params)
        return Request(id=wire.id, message=message) if self.spec.kind == "request" else message

    def unbuild(self, msg: Any) -> Any:
        if self.enveloped:
            return msg
        if self.spec.kind == "request":
            return self.wire.wire(id=msg.id, jsonrpc="2.0", params=msg.message.params)
        return self.wire.wire(jsonrpc="2.0", params=msg.params)


@dataclass(frozen=True)
class _Tables:
    """One revision's tables for one role, built once: msgspec builds nothing after this."""

    facts: Facts
    methods: dict[str, _Method]
    receive: dict[str, _Method]  # what this role may receive
    by_wire: dict[type, _Method]
    by_message: dict[type, _Method]  # every method, by the generated class a caller holds
    fast: msgspec.json.Decoder[Any]  # the tagged union of every message this role receives
    generic: msgspec.json.Decoder[Any]  # a response with the generic result
    tasks: msgspec.json.Decoder[Any] | None  # a response creating a task
    sides: dict[Any, str]  # capabilities class -> whose ("client" or "server")


_BUILD_LOCK = threading.Lock()
_TABLES: dict[tuple[str, str], _Tables] = {}  # two per pinned revision at most


def _tables(revision: str, role: str) -> _Tables:
    found = _TABLES.get((revision, role))
    if found is None:
        with _BUILD_LOCK:  # built once, by one thread (docs/threads.md)
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
        learns = spec.kind == "request" and _carries_capabilities(spec.params)
        methods[name] = _Method(
            spec,
            wire,
            wire.wire is spec.message,
            response,
            learns,
            _carries_capabilities(result),
            kind_attr,
        )
    peer = "server" if role == "client" else "client"
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
        sides={facts.client_capabilities: "client", facts.server_capabilities: "server"},
    )


def _decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp, dec_hook=dec_hook)


def _carries_capabilities(tp: Any) -> bool:
    """Whether a params or result type (or an untagged union of them) has ``capabilities``."""
    members = getattr(tp, "members", None)
    if isinstance(members, tuple):
        return any(_carries_capabilities(m.type) for m in members)
    return "capabilities" in getattr(tp, "__struct_fields__", ())
