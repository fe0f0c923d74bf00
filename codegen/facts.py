"""Stage 4, emit (facts): the record of what the runtime must know about one revision.

Everything that differs between revisions in kind, not only in fields, is worked out here
from the IR and the overlay and emitted as data (``generated/mcpbind/<package>/facts.py``):
the handshake and version strings, the JSON-RPC envelopes of every method as generated
Structs, where results are told apart, params-dependent results, the per-request ``_meta``
envelope and the lifecycle methods. The runtime reads only that.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .ir import Lit, Method, ObjectDef, RefT, Revision, TypeExpr, UnionT
from .model import input_methods
from .overlay import OverlayError, overlay


@dataclass
class WireView:
    method: str  # literal
    name: str  # the wire Struct's class name, or the message class when it has the envelope
    fields: list[tuple[str, str, str | None]] = field(
        default_factory=list
    )  # (py, annotation, default)
    response: str | None = None  # class name of the response envelope
    result: str | None = None  # the method's own result, as an annotation


@dataclass
class ResponseView:
    name: str
    result: str  # annotation


@dataclass
class FactsView:
    wires: list[WireView]
    responses: list[ResponseView]
    record: list[tuple[str, str]]  # (field, Python expression) of the Facts record
    peek_key: str | None = None  # literal: the version key a server peeks at first
    meta_key: str = ""  # literal: the wire key of the reserved metadata member


def facts_view(rev: Revision, py: dict[str, str], annotate: Callable[[TypeExpr], str]) -> FactsView:
    """The facts of ``rev``; ``py`` maps definitions to their class names and ``annotate`` gives
    the annotation of an IR type expression (the renderer's)."""
    from .emit import literal

    ann = annotate
    ov = overlay(rev.revision)
    key = meta_key(rev)
    kinds = [k for k in ov.result_kinds if k.definition is not None]
    selected = {py[k.definition] for k in kinds if k.definition in py}
    enveloped = all(
        "jsonrpc" in {f.wire for f in _object(rev, m.message).fields} for m in rev.methods.values()
    )
    wires: list[WireView] = []
    responses: list[ResponseView] = []
    for m in rev.methods.values():
        message = py[m.message]
        w = WireView(method=literal(m.method), name=message)
        if not enveloped:
            w.name = f"_{message}Wire"
            if m.kind == "request":
                w.fields.append(("id", "RequestId", None))
            w.fields.append(("jsonrpc", 'Literal["2.0"]', None))
            fields = [
                f
                for f in _object(rev, m.message).fields
                if not (f.wire == "method" and isinstance(f.type, Lit))
            ]
            if [f.wire for f in fields] != ["params"]:
                # The runtime wraps a message without the JSON-RPC envelope as {method, params}.
                raise OverlayError(
                    f"{rev.revision}: {m.message} has no envelope and more than params"
                )
            for f in fields:
                annotation = ann(f.type)
                default = None if f.required else "UNSET"
                if not f.required:
                    annotation += " | UnsetType"
                w.fields.append((f.py, annotation, default))
        if m.result is not None:
            w.result = _own_result(m, py, ann, selected)
            w.response = f"_{message}Response"
            responses.append(ResponseView(w.response, w.result))
        wires.append(w)
    responses.append(ResponseView("_ResultResponse", py["Result"]))
    record: list[tuple[str, str]] = [
        ("revision", literal(rev.revision)),
        ("versions", literal(ov.versions or (rev.revision,))),
        (
            "handshake",
            literal("initialize" if ov.lifecycle.get("initialize") in rev.methods else "discover"),
        ),
        ("lifecycle", _mapping({r: m for r, m in ov.lifecycle.items() if m in rev.methods})),
        ("features", _mapping({r: m for r, m in ov.features.items() if m in rev.methods})),
        ("batches", repr(any(n.startswith("JSONRPCBatch") for n in rev.definitions))),
        ("enveloped", repr(enveloped)),
        ("meta_key", literal(key)),
        ("schema_dialect", literal(SCHEMA_DIALECTS[rev.dialect])),
        ("error_id_optional", repr(_error_id_optional(rev))),
        ("result", py["Result"]),
        ("result_response", "_ResultResponse"),
        ("client_capabilities", py["ClientCapabilities"]),
        ("server_capabilities", py["ServerCapabilities"]),
        ("wires", "WIRES"),
        (
            "capability_names",
            literal(tuple(e["path"] for e in _entries("capability_names", rev.revision))),
        ),
        ("capability_implied", _implied(rev, py)),
    ]
    meta = [e for e in _entries("request_meta", rev.revision)]
    if meta:
        e = meta[0]
        record.append(
            (
                "request_meta",
                f"RequestMeta(type={py[e['definition']]}, version_key={literal(e['version_key'])}, "
                f"capabilities_key={literal(e['capabilities_key'])}, info_key={literal(e['info_key'])}, "
                f"unsupported_version_code={_error_code(rev, e['unsupported_version'])}, "
                f"missing_capability_code={_error_code(rev, e['missing_capability'])}, peek=_Peek)",
            )
        )
    if ov.result_kinds:
        own = [k for k in ov.result_kinds if k.definition is None]
        if len(own) != 1 or len({k.field for k in ov.result_kinds}) != 1:
            raise OverlayError(
                f"{rev.revision}: result kinds need one field and one value for the method's own result"
            )
        for k in kinds:
            responses.append(
                ResponseView(f"_{py[k.definition or '']}Response", py[k.definition or ""])
            )
        by_value = {literal(k.value): f"_{py[k.definition or '']}Response" for k in kinds}
        classes = {literal(k.value): py[k.definition or ""] for k in kinds}
        record.append(
            (
                "result_kinds",
                f"ResultKinds(key={literal(own[0].field)}, own={literal(own[0].value)}, "
                f"responses={{{', '.join(f'{v}: {r}' for v, r in by_value.items())}}}, "
                f"classes={{{', '.join(f'{v}: {r}' for v, r in classes.items())}}})",
            )
        )
    for t in ov.task_results:
        responses.append(ResponseView(f"_{py[t.result]}Response", py[t.result]))
        record.append(
            (
                "tasks",
                f"TaskResults(when={literal(_py_key(t.when))}, result={py[t.result]}, response=_{py[t.result]}Response, "
                f"task_id={literal(tuple(_py_path(rev, t.result, t.task_id)))}, "
                f"payload_method={literal(t.payload_method)}, payload_task_id={literal(_py_key(t.payload_task_id))})",
            )
        )
    for e in _entries("round_trip", rev.revision):
        asked = set(input_methods(rev, e["result"], e["input_requests"]))
        requests = {r: m for r, m in ov.features.items() if m in asked}
        gates = {r: ov.capabilities[m][1] for r, m in requests.items() if m in ov.capabilities}
        record.append(
            (
                "round_trip",
                f"RoundTrip(result={py[e['result']]}, input_requests={literal(e['input_requests'])}, "
                f"input_responses={literal(e['input_responses'])}, request_state={literal(e['request_state'])}, "
                f"requests={_mapping(requests)}, capabilities={_mapping(gates)})",
            )
        )
    if ov.tool_argument_errors is not None:
        record.append(("tool_argument_errors", literal(ov.tool_argument_errors)))
    if _entries("sse_priming", rev.revision):
        record.append(("sse_priming", "True"))
    losses = _losses(rev)
    if losses:
        record.append(("losses", losses))
    peek = literal(meta[0]["version_key"]) if meta else None
    return FactsView(
        wires=wires, responses=responses, record=record, peek_key=peek, meta_key=literal(key)
    )


# The JSON Schema dialect of the revision's own schema, by the IR's name for it: the dialect a
# tool's inputSchema and outputSchema are read in when they declare no ``$schema`` (2025-11-25
# says so of 2020-12; the revisions before it say nothing, and are written in draft-07 themselves).
SCHEMA_DIALECTS = {
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}

# The bases every request's params, every notification's params and every result extend: the
# reserved metadata member is the one key all three declare.
_META_BASES = ("RequestParams", "NotificationParams", "Result")
META_ATTRIBUTE = "meta"  # the attribute generated classes (and the runtime) read it as


def meta_key(rev: Revision) -> str:
    """The wire key of the reserved metadata member (``_meta``): the one key the base request
    params, notification params and result all declare; every generated class that has a
    ``meta`` attribute must map it to that key, or generation stops."""
    keys: set[str] | None = None
    for name in _META_BASES:
        wires = {f.wire for f in _object(rev, name).fields}
        keys = wires if keys is None else keys & wires
    if keys is None or len(keys) != 1:
        raise OverlayError(
            f"{rev.revision}: {', '.join(_META_BASES)} share {sorted(keys or ())} "
            "where one reserved metadata key was expected"
        )
    (key,) = keys
    for d in rev.definitions.values():
        if not isinstance(d, ObjectDef):
            continue
        for f in d.fields:
            if (f.py == META_ATTRIBUTE) != (f.wire == key):
                raise OverlayError(
                    f"{rev.revision}: {d.name}.{f.wire} is the attribute {f.py!r}, but the "
                    f"reserved metadata key is {key!r} and the runtime reads it as "
                    f"{META_ATTRIBUTE!r}"
                )
    return key


_LOSS_RULES = ("drop", "replace", "refuse", "fill")


def _losses(rev: Revision) -> str:
    """The ``[[loss]]`` entries whose target range includes ``rev``, as a ``Loss`` table (and a
    "moved" entry per ``[[migration]]`` into ``rev``: projection carries that value); an entry
    that could never apply to ``rev`` (its type or field exists there) stops generation."""
    from .emit import literal
    from .overlay import in_range

    items = []
    for e in _entries("loss", rev.revision):
        rule, type_, key = e.get("rule"), e.get("type", "*"), e.get("field", "")
        where = f"{rev.revision}: [[loss]] {type_}{'.' + key if key else ''}"
        if rule not in _LOSS_RULES or not e.get("reason"):
            raise OverlayError(f"{where}: rule must be one of {_LOSS_RULES}, with a reason")
        if (rule == "replace") != ("into" in e and not key):
            raise OverlayError(f"{where}: 'replace' (and only it) needs `into` and no `field`")
        if (rule == "fill") != ("with" in e and bool(key)):
            raise OverlayError(f"{where}: 'fill' needs `field` and the value `with`")
        d = rev.definitions.get(type_)
        if not key and d is not None:
            raise OverlayError(f"{where}: {type_} exists in {rev.revision}, nothing is lost")
        if (
            rule != "fill"
            and key not in ("", "*")
            and isinstance(d, ObjectDef)
            and d.field(key) is not None
        ):
            raise OverlayError(f"{where}: {type_} has {key} in {rev.revision}, nothing is lost")
        template = {"value": e["with"]} if rule == "fill" else e.get("with", {})
        items.append(
            f"({literal(type_)}, {literal(key)}): Loss(rule={literal(rule)}, "
            f"reason={literal(e['reason'])}, into={literal(e.get('into'))}, "
            f"template={_json(template)})"
        )
    for e in _entries_all("migration"):
        if in_range(rev.revision, e["moved_since"], None):
            items.append(
                f"({literal(e['type'])}, {literal(e['path'][0])}): Loss(rule='moved', "
                f"reason={literal(e['reason'])})"
            )
    return "{" + ", ".join(items) + "}" if items else ""


def _entries_all(kind: str) -> list[dict[str, Any]]:
    from .overlay import _raw

    return list(_raw().get(kind, []))


def _implied(rev: Revision, py: dict[str, str]) -> str:
    """What a bare capability object declares: the overlay's ``[[default]]`` of a field of an
    object that a capabilities definition holds (``ClientCapabilitiesElicitation.form``)."""
    from .emit import literal
    from .overlay import defaults, in_range

    out: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {}
    for holder in ("ClientCapabilities", "ServerCapabilities"):
        for f in _object(rev, holder).fields:
            if not isinstance(f.type, RefT) or not isinstance(
                rev.definitions[f.type.name], ObjectDef
            ):
                continue
            keys = tuple(sorted(g.wire for g in _object(rev, f.type.name).fields))
            for d in defaults():
                if d.type == f.type.name and in_range(rev.revision, d.since, d.until):
                    out.setdefault(f.wire, (keys, {}))[1][d.field] = d.value
    items = ", ".join(
        f"{literal(k)}: ({literal(keys)}, {_json(v)})" for k, (keys, v) in sorted(out.items())
    )
    return "{" + items + "}"


def _json(value: Any) -> str:
    """A Python literal of a JSON value (dicts and lists included)."""
    from .emit import literal

    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {_json(v)}" for k, v in sorted(value.items())) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    return literal(value)


def _object(rev: Revision, name: str) -> ObjectDef:
    d = rev.definitions[name]
    if not isinstance(d, ObjectDef):
        raise OverlayError(f"{rev.revision}: {name} is not an object")
    return d


def _own_result(
    m: Method, py: dict[str, str], ann: Callable[[TypeExpr], str], selected: set[str]
) -> str:
    """The method's own result: its result type without the members a result kind selects."""
    result = m.result
    if isinstance(result, UnionT):
        rest = [t for t in result.members if not (isinstance(t, RefT) and py[t.name] in selected)]
        if len(rest) == 1:
            result = rest[0]
    assert result is not None
    return ann(result)


def _error_id_optional(rev: Revision) -> bool:
    for name in ("JSONRPCErrorResponse", "JSONRPCError"):
        d = rev.definitions.get(name)
        if isinstance(d, ObjectDef):
            f = d.field("id")
            return f is None or not f.required
    raise OverlayError(f"{rev.revision}: no JSON-RPC error response definition")


def _error_code(rev: Revision, name: str) -> int:
    """The constant ``error.code`` of an error response definition."""
    d = _object(rev, name)
    error = d.field("error")
    if error is not None and isinstance(error.type, RefT):
        code = _object(rev, error.type.name).field("code")
        if code is not None and isinstance(code.type, Lit) and isinstance(code.type.values[0], int):
            return code.type.values[0]
    raise OverlayError(f"{rev.revision}: {name} has no constant error code")


def _py_path(rev: Revision, start: str, keys: tuple[str, ...]) -> list[str]:
    """Attribute names along wire ``keys`` from the object ``start``."""
    out, name = [], start
    for key in keys:
        f = _object(rev, name).field(key)
        if f is None:
            raise OverlayError(f"{rev.revision}: {start} has no {'.'.join(keys)}")
        out.append(f.py)
        if isinstance(f.type, RefT):
            name = f.type.name
    return out


def _py_key(key: str) -> str:
    from .names import snake

    return snake(key)


def _entries(kind: str, revision: str) -> list[dict[str, Any]]:
    from .overlay import _applies, _raw

    return [e for e in _raw().get(kind, []) if _applies(e, revision)]


def _mapping(items: dict[str, str]) -> str:
    from .emit import literal

    return "{" + ", ".join(f"{literal(k)}: {literal(v)}" for k, v in sorted(items.items())) + "}"
