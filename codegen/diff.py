"""Stage 6, diff: the protocol changes between two revisions, computed on their IRs.

The same IR drives the bindings, so what ``mcpbind diff`` reports and what the generated code
does can never disagree. ``compare(a, b)`` returns a ``Diff``: a sorted tuple of ``Change``
records, each with a ``kind`` (see ``KINDS``), a readable ``path``, ``before``/``after``
renderings and whom the change breaks. Rendering lives in ``codegen.diff_render``.

Breaking, from the wire's point of view:

``senders``    a peer that sends this message as it did under A is now rejected
               (new required field, narrowed type, removed enum value, removed union member)
``receivers``  a peer that reads this message as it did under A now meets something it does
               not expect, or misses something it relied on (removed field, widened type,
               new enum value, field no longer required)
``both``       removed types, methods and capabilities; renumbered error codes; incomparable
               type changes
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

from .ir import (
    AliasDef,
    AnyT,
    ArrayT,
    Constraints,
    Field,
    Lit,
    MapT,
    Method,
    ObjectDef,
    Prim,
    RefT,
    Revision,
    TypeExpr,
    UnionT,
)
from .resolve import expand
from .unions import value_kind
from .unions import walk as walk_type

Breaking = Literal["senders", "receivers", "both"]

# kind -> section; the order of sections is the order of the report.
KINDS: dict[str, str] = {
    "dialect_changed": "protocol",
    "method_added": "methods",
    "method_removed": "methods",
    "method_direction_changed": "methods",
    "method_result_changed": "methods",
    "method_capability_changed": "methods",
    "capability_added": "capabilities",
    "capability_removed": "capabilities",
    "error_code_added": "errors",
    "error_code_removed": "errors",
    "error_code_changed": "errors",
    "moved": "moved",
    "type_added": "types",
    "type_removed": "types",
    "type_renamed": "types",
    "type_extracted": "types",
    "type_changed": "types",
    "union_member_added": "types",
    "union_member_removed": "types",
    "extra_keys_changed": "types",
    "field_added": "fields",
    "field_removed": "fields",
    "field_required_changed": "fields",
    "field_type_changed": "fields",
    "enum_value_added": "enums",
    "enum_value_removed": "enums",
}
SECTIONS: dict[str, str] = {
    "protocol": "Protocol",
    "methods": "Methods",
    "capabilities": "Capabilities",
    "errors": "Error codes",
    "moved": "Moved",
    "types": "Types",
    "fields": "Fields",
    "enums": "Enum values",
}
CAPABILITY_ROOTS = {"client": "ClientCapabilities", "server": "ServerCapabilities"}
RENAME_THRESHOLD = 0.6
ENVELOPE = {
    "id",
    "jsonrpc",
    "method",
    "params",
    "result",
    "error",
    "_meta",
}  # share of (wire name, type) pairs two types must have in common


@dataclass(frozen=True)
class Change:
    kind: str
    path: str  # ``Type.field``, ``Type``, a method name or a dotted capability path
    before: str | None = None
    after: str | None = None
    breaking: Breaking | None = None
    side: str | None = None  # capabilities and methods: ``client``/``server``/``both``
    note: str | None = None

    @property
    def section(self) -> str:
        return KINDS[self.kind]

    def as_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "section": self.section,
            "path": self.path,
            "side": self.side,
            "before": self.before,
            "after": self.after,
            "breaking": self.breaking,
            "note": self.note,
        }


@dataclass(frozen=True)
class Note:
    """An overlay fix in force on one side: the diff compares the fixed schema, not upstream's."""

    revision: str
    pointer: str
    upstream: str
    value: str
    reason: str


@dataclass(frozen=True)
class Diff:
    a: str
    b: str
    changes: tuple[Change, ...]
    notes: tuple[Note, ...]
    sha_a: str = ""
    sha_b: str = ""

    def of_kind(self, kind: str) -> list[Change]:
        return [c for c in self.changes if c.kind == kind]

    def find(self, kind: str, path: str) -> Change | None:
        return next((c for c in self.changes if c.kind == kind and c.path == path), None)

    def paths(self, kind: str) -> set[str]:
        return {c.path for c in self.changes if c.kind == kind}

    def section(self, section: str) -> list[Change]:
        return [c for c in self.changes if c.section == section]

    def summary(self) -> dict[str, object]:
        by_kind: dict[str, int] = {}
        breaking = {"senders": 0, "receivers": 0, "both": 0}
        for c in self.changes:
            by_kind[c.kind] = by_kind.get(c.kind, 0) + 1
            if c.breaking:
                breaking[c.breaking] += 1
        return {
            "total": len(self.changes),
            "breaking": breaking,
            "by_kind": {k: by_kind[k] for k in KINDS if k in by_kind},
        }

    def as_json(self) -> dict[str, object]:
        return {
            "format": "mcpbind.diff/1",
            "from": {"revision": self.a, "sha256": self.sha_a},
            "to": {"revision": self.b, "sha256": self.sha_b},
            "summary": self.summary(),
            "changes": [c.as_json() for c in self.changes],
            "notes": [n.__dict__ for n in self.notes],
        }


# -- rendering type expressions ----------------------------------------------------------------


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def render_constraints(c: Constraints) -> str:
    asserted = c.asserting()
    return ", ".join(f"{k}={_json(v)}" for k, v in asserted.items())


def render(t: TypeExpr | None) -> str:
    """A type expression as a reviewer reads it: ``string | integer``, ``list[ContentBlock]``."""
    if t is None:
        return "none"
    if isinstance(t, AnyT):
        return "any"
    if isinstance(t, Prim):
        bounds = render_constraints(t.constraints)
        return f"{t.json} ({bounds})" if bounds else t.json
    if isinstance(t, Lit):
        return " | ".join(_json(v) for v in t.values)
    if isinstance(t, ArrayT):
        bounds = render_constraints(t.constraints)
        return f"list[{render(t.item)}]" + (f" ({bounds})" if bounds else "")
    if isinstance(t, MapT):
        return f"dict[str, {render(t.value)}]"
    if isinstance(t, RefT):
        return t.name
    return " | ".join(render(m) for m in t.members)


def _wire_path(owner: str, wire: str) -> str:
    return (
        f"{owner}.{wire}" if re.fullmatch(r"[A-Za-z_$][\w$]*", wire) else f"{owner}[{_json(wire)}]"
    )


# -- comparing type expressions ----------------------------------------------------------------

Relation = Literal["equal", "narrowed", "widened", "changed"]


def _members(t: TypeExpr) -> list[TypeExpr]:
    """The alternatives a type accepts, one literal value each."""
    out: list[TypeExpr] = []
    for m in t.members if isinstance(t, UnionT) else (t,):
        out += [Lit((v,)) for v in m.values] if isinstance(m, Lit) else [m]
    return out


def _covers(a: TypeExpr, b: TypeExpr) -> bool:
    """Whether ``a`` accepts every value ``b`` accepts (conservatively: False when unsure)."""
    if a == b or isinstance(a, AnyT):
        return True
    if isinstance(a, RefT) and isinstance(b, RefT):
        return a.name == b.name
    if isinstance(a, MapT) and isinstance(a.value, AnyT) and isinstance(b, RefT):
        return True  # a reference left after resolving aliases is an object definition
    if isinstance(a, Prim):
        tighter = set(a.constraints.asserting().items())
        if isinstance(b, Prim):
            same = a.json == b.json or (a.json == "number" and b.json == "integer")
            return same and tighter <= set(b.constraints.asserting().items())
        if isinstance(b, Lit) and not tighter:
            kind = value_kind(b.values[0])
            return kind == a.json or (a.json == "number" and kind == "integer")
        return False
    if isinstance(a, ArrayT) and isinstance(b, ArrayT):
        tighter = set(a.constraints.asserting().items())
        return _covers(a.item, b.item) and tighter <= set(b.constraints.asserting().items())
    if isinstance(a, MapT) and isinstance(b, MapT):
        return _covers(a.value, b.value)
    if isinstance(a, UnionT) or isinstance(b, UnionT):
        return all(any(_covers(x, y) for x in _members(a)) for y in _members(b))
    return False


def relation(
    before: TypeExpr, after: TypeExpr, rev_a: Revision | None = None, rev_b: Revision | None = None
) -> Relation:
    """How the set of values ``after`` accepts relates to the set ``before`` accepts."""
    if render(before) == render(after):
        return "equal"
    before = expand(rev_a, before) if rev_a is not None else before
    after = expand(rev_b, after) if rev_b is not None else after
    if render(before) == render(after):
        return "equal"
    wider = all(any(_covers(x, y) for x in _members(after)) for y in _members(before))
    narrower = all(any(_covers(x, y) for x in _members(before)) for y in _members(after))
    if wider and narrower:
        return "equal"
    return "widened" if wider else "narrowed" if narrower else "changed"


BREAKS: dict[Relation, Breaking | None] = {
    "equal": None,
    "narrowed": "senders",
    "widened": "receivers",
    "changed": "both",
}


def _enum_values(t: TypeExpr) -> tuple[object, ...] | None:
    """The values of an enum (a literal of several values, or of one where the other side has several)."""
    return t.values if isinstance(t, Lit) else None


# -- the comparison ----------------------------------------------------------------------------


def compare(a: Revision, b: Revision) -> Diff:
    """Every change from revision ``a`` to revision ``b``, in report order."""
    caps_a, caps_b = capabilities(a), capabilities(b)
    cap_fields = {where for caps in (caps_a, caps_b) for where in caps.values()}
    changes: list[Change] = []
    changes += _dialect(a, b)
    changes += _methods(a, b)
    changes += _capabilities(caps_a, caps_b)
    changes += _errors(a, b)
    type_changes = list(_types(a, b))
    changes += _moves(a, b, type_changes, caps_a, caps_b)
    changes += [
        c
        for c in type_changes
        if not (c.kind in ("field_added", "field_removed") and c.path in cap_fields)
    ]
    order = {k: i for i, k in enumerate(KINDS)}
    sections = {s: i for i, s in enumerate(SECTIONS)}
    changes.sort(
        key=lambda c: (sections[c.section], c.path, order[c.kind], c.before or "", c.after or "")
    )
    return Diff(a.revision, b.revision, tuple(changes), _notes(a, b), a.sha256, b.sha256)


def _dialect(a: Revision, b: Revision) -> list[Change]:
    if a.dialect == b.dialect:
        return []
    return [
        Change(
            "dialect_changed",
            "$schema",
            a.dialect,
            b.dialect,
            "receivers",
            note="JSON Schema dialect of the definitions (and the default for embedded schemas)",
        )
    ]


# -- methods -------------------------------------------------------------------------------------

DIRECTION = {"client": "client → server", "server": "server → client", "both": "both directions"}


def _describe(m: Method) -> str:
    text = f"{m.kind}, {DIRECTION[m.sender]}"
    if m.result is not None:
        text += f", result {render(m.result)}"
    if m.capability:
        text += f", needs {m.capability_side} capability {m.capability}"
    return text


def _methods(a: Revision, b: Revision) -> Iterator[Change]:
    for name in sorted(set(a.methods) | set(b.methods)):
        ma, mb = a.methods.get(name), b.methods.get(name)
        if mb is None:
            assert ma is not None
            note = _asked(b, name, "now")
            yield Change("method_removed", name, _describe(ma), None, "both", ma.sender, note)
        elif ma is None:
            note = _asked(a, name, "was")
            yield Change("method_added", name, None, _describe(mb), None, mb.sender, note)
        else:
            yield from _method_changes(ma, mb, a, b)


def _asked(rev: Revision, method: str, when: str) -> str | None:
    """Where a request lives in a revision that lacks it as a method: one of the input requests
    of its multi-round-trip results (``InputRequiredResult.inputRequests``)."""
    asks = rev.input_requests
    if asks is None or method not in asks.methods:
        return None
    return f"{when} an input request of multi-round-trip results: {asks.result}.{asks.key}"


def _method_changes(ma: Method, mb: Method, a: Revision, b: Revision) -> Iterator[Change]:
    name = ma.method
    if ma.sender != mb.sender:
        # Losing a direction breaks the side that used to send it; gaining one, the side that receives.
        lost = ma.sender == "both" or (mb.sender != "both")
        gained = mb.sender == "both" or (ma.sender != "both")
        who: Breaking = "both" if lost and gained else "senders" if lost else "receivers"
        yield Change(
            "method_direction_changed",
            name,
            DIRECTION[ma.sender],
            DIRECTION[mb.sender],
            who,
            side=mb.sender,
        )
    if ma.result is not None and mb.result is not None:
        rel = relation(ma.result, mb.result, a, b)
        if rel != "equal":
            # The server sends a result; a wider result breaks the clients that read it.
            yield Change(
                "method_result_changed",
                name,
                render(ma.result),
                render(mb.result),
                BREAKS[rel],
                side=mb.sender,
            )
    cap_a = f"{ma.capability_side}: {ma.capability}" if ma.capability else None
    cap_b = f"{mb.capability_side}: {mb.capability}" if mb.capability else None
    if cap_a != cap_b:
        yield Change(
            "method_capability_changed",
            name,
            cap_a,
            cap_b,
            "senders" if cap_b else None,
            side=mb.sender,
        )


# -- capabilities ----------------------------------------------------------------------------------


def capabilities(rev: Revision) -> dict[tuple[str, str], str]:
    """Every capability of a revision: (side, dotted path) -> ``Type.field`` that declares it."""
    found: dict[tuple[str, str], str] = {}

    def walk(side: str, name: str, prefix: str, seen: frozenset[str]) -> None:
        d = rev.definitions.get(name)
        if not isinstance(d, ObjectDef) or name in seen:
            return
        for f in d.fields:
            path = prefix + f.wire
            found[(side, path)] = _wire_path(name, f.wire)
            if isinstance(f.type, RefT):
                walk(side, f.type.name, path + ".", seen | {name})

    for side, root in CAPABILITY_ROOTS.items():
        walk(side, root, "", frozenset())
    return found


def _capabilities(
    caps_a: dict[tuple[str, str], str], caps_b: dict[tuple[str, str], str]
) -> Iterator[Change]:
    for side, path in sorted(set(caps_a) - set(caps_b)):
        yield Change("capability_removed", path, caps_a[(side, path)], None, "both", side=side)
    for side, path in sorted(set(caps_b) - set(caps_a)):
        yield Change("capability_added", path, None, caps_b[(side, path)], None, side=side)


# -- error codes -------------------------------------------------------------------------------------


def error_codes(rev: Revision) -> dict[str, int]:
    """Error definitions with a constant ``code``: error name -> code.

    An inline ``error`` object (``FooErrorError``) is named by the response that holds it (``FooError``).
    """
    found: dict[str, int] = {}
    for d in rev.objects():
        f = d.field("code")
        if f is None or not isinstance(f.type, Lit) or len(f.type.values) != 1:
            continue
        code = f.type.values[0]
        if not isinstance(code, int) or isinstance(code, bool):
            continue
        owner = d.name.removesuffix("Error")
        holder = rev.definitions.get(owner)
        named = (
            owner
            if d.inline and isinstance(holder, ObjectDef) and holder.field("error")
            else d.name
        )
        found[named] = code
    return found


# The error codes JSON-RPC 2.0 itself defines (its section 5.1): every MCP revision uses them
# whether or not its schema declares a type for them, so a type declared for one is a new
# definition (``type_added``), not a new code.
JSONRPC_CODES = frozenset({-32700, -32600, -32601, -32602, -32603})


def _errors(a: Revision, b: Revision) -> Iterator[Change]:
    ea, eb = error_codes(a), error_codes(b)
    for name in sorted(set(ea) | set(eb)):
        ca, cb = ea.get(name), eb.get(name)
        if cb is None:
            if ca not in JSONRPC_CODES:
                yield Change("error_code_removed", name, str(ca), None, "receivers")
        elif ca is None:
            if cb not in JSONRPC_CODES:
                yield Change("error_code_added", name, None, str(cb), None)
        elif ca != cb:
            yield Change("error_code_changed", name, str(ca), str(cb), "both")


# -- types and fields ----------------------------------------------------------------------------------


def _types(a: Revision, b: Revision) -> Iterator[Change]:
    removed = [n for n in a.definitions if n not in b.definitions]
    added = [n for n in b.definitions if n not in a.definitions]
    renames = _renames(a, b, removed, added)
    for old, new, note in renames:
        yield Change("type_renamed", new, old, new, None, note=note)
        yield from _object_changes(a.definitions[old], b.definitions[new], new, a, b)  # type: ignore[arg-type]
    renamed = {o for o, _, _ in renames} | {n for _, n, _ in renames}
    for name in removed:
        d = a.definitions[name]
        if name not in renamed and not getattr(d, "inline", False):
            yield Change("type_removed", name, _kind(d), None, "both")
    for name in added:
        d = b.definitions[name]
        if name not in renamed and not getattr(d, "inline", False):
            yield Change("type_added", name, None, _kind(d), None)
    for name in sorted(set(a.definitions) & set(b.definitions)):
        da, db = a.definitions[name], b.definitions[name]
        if getattr(da, "inline", False) and not getattr(db, "inline", False):
            yield Change("type_extracted", name, "inline object", "named definition", None)
        if isinstance(da, ObjectDef) and isinstance(db, ObjectDef):
            yield from _object_changes(da, db, name, a, b)
        elif isinstance(da, AliasDef) and isinstance(db, AliasDef):
            yield from _alias_changes(da, db, a, b)
        else:
            yield Change("type_changed", name, _kind(da), _kind(db), "both")


def _kind(d: ObjectDef | AliasDef) -> str:
    if isinstance(d, ObjectDef):
        return "object {" + ", ".join(f.wire + ("" if f.required else "?") for f in d.fields) + "}"
    return render(d.type)


def _alias_changes(da: AliasDef, db: AliasDef, a: Revision, b: Revision) -> Iterator[Change]:
    ta, tb = da.type, db.type
    if render(ta) == render(tb):
        return
    va, vb = _enum_values(ta), _enum_values(tb)
    if va is not None and vb is not None:
        yield from _enum_changes(da.name, va, vb)
        return
    if isinstance(ta, UnionT) and isinstance(tb, UnionT):
        ma, mb = [render(m) for m in ta.members], [render(m) for m in tb.members]
        for m in mb:
            if m not in ma:
                yield Change("union_member_added", da.name, None, m, "receivers")
        for m in ma:
            if m not in mb:
                yield Change("union_member_removed", da.name, m, None, "senders")
        return
    yield Change("type_changed", da.name, render(ta), render(tb), BREAKS[relation(ta, tb, a, b)])


def _enum_changes(path: str, va: Iterable[object], vb: Iterable[object]) -> Iterator[Change]:
    va, vb = list(va), list(vb)
    for v in vb:
        if v not in va:
            yield Change("enum_value_added", path, None, _json(v), "receivers")
    for v in va:
        if v not in vb:
            yield Change("enum_value_removed", path, _json(v), None, "senders")


def _object_changes(
    da: ObjectDef, db: ObjectDef, name: str, a: Revision, b: Revision
) -> Iterator[Change]:
    fa = {f.wire: f for f in da.fields}
    fb = {f.wire: f for f in db.fields}
    for wire in fa.keys() - fb.keys():
        f = fa[wire]
        yield Change("field_removed", _wire_path(name, wire), _field(f), None, "receivers")
    for wire in fb.keys() - fa.keys():
        f = fb[wire]
        yield Change(
            "field_added",
            _wire_path(name, wire),
            None,
            _field(f),
            "senders" if f.required else None,
        )
    for wire in fa.keys() & fb.keys():
        yield from _field_changes(_wire_path(name, wire), fa[wire], fb[wire], a, b)
    if da.extra != db.extra:
        who: Breaking = "senders" if db.extra == "forbidden" else "receivers"
        yield Change("extra_keys_changed", name, da.extra, db.extra, who, note="undeclared keys")


def _field(f: Field) -> str:
    return render(f.type) + ("" if f.required else " (optional)")


def _field_changes(path: str, a: Field, b: Field, ra: Revision, rb: Revision) -> Iterator[Change]:
    if a.required != b.required:
        before, after = ("required", "optional") if a.required else ("optional", "required")
        yield Change(
            "field_required_changed", path, before, after, "receivers" if a.required else "senders"
        )
    va, vb = _enum_values(a.type), _enum_values(b.type)
    if va is not None and vb is not None and (len(va) > 1 or len(vb) > 1):
        yield from _enum_changes(path, va, vb)
        return
    rel = relation(a.type, b.type, ra, rb)
    if rel != "equal":
        yield Change("field_type_changed", path, render(a.type), render(b.type), BREAKS[rel])


def _signature(d: ObjectDef) -> set[tuple[str, str]]:
    return {(f.wire, render(f.type)) for f in d.fields}


def _renames(
    a: Revision, b: Revision, removed: list[str], added: list[str]
) -> list[tuple[str, str, str]]:
    """Removed and added object types that share most (wire name, type) pairs: rename candidates."""
    messages = {m.message for m in a.methods.values()} | {m.message for m in b.methods.values()}
    scored = []
    for old in removed:
        da = a.definitions[old]
        if not isinstance(da, ObjectDef) or da.inline or old in messages:
            continue
        for new in added:
            db = b.definitions[new]
            if not isinstance(db, ObjectDef) or db.inline or new in messages:
                continue
            sa, sb = _signature(da), _signature(db)
            shared = len(sa & sb)
            score = shared / len(sa | sb)
            if shared >= 2 and score >= RENAME_THRESHOLD:
                scored.append(
                    (-score, old, new, f"candidate: {shared} of {len(sa | sb)} fields shared")
                )
    pairs, used = [], set()
    for _, old, new, note in sorted(scored):
        if old not in used and new not in used:
            used |= {old, new}
            pairs.append((old, new, note))
    return pairs


# -- moves ---------------------------------------------------------------------------------------------


def _moves(
    a: Revision,
    b: Revision,
    type_changes: list[Change],
    caps_a: dict[tuple[str, str], str],
    caps_b: dict[tuple[str, str], str],
) -> Iterator[Change]:
    """What moved rather than vanished: removed fields that reappear under a namespaced key.

    Two patterns of the protocol, both read off the IR: a field that becomes a reserved ``_meta``
    key (``InitializeRequestParams.protocolVersion`` -> ``RequestMetaObject["io.modelcontextprotocol/protocolVersion"]``),
    and a capability that becomes an extension (``tasks`` -> ``extensions["io.modelcontextprotocol/tasks"]``),
    named in the revision's own description of ``extensions``.
    """
    removed_fields: list[tuple[str, Field]] = []
    for name, d in a.definitions.items():
        if isinstance(d, ObjectDef):
            other = b.definitions.get(name)
            for f in d.fields:
                if not isinstance(other, ObjectDef) or other.field(f.wire) is None:
                    removed_fields.append((name, f))

    def in_a(name: str, wire: str) -> bool:
        before = a.definitions.get(name)
        return isinstance(before, ObjectDef) and before.field(wire) is not None

    namespaced = [
        (name, f)
        for name, d in b.definitions.items()
        if isinstance(d, ObjectDef)
        for f in d.fields
        if "/" in f.wire and not in_a(name, f.wire)
    ]
    targets: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for old_owner, of in removed_fields:
        if "/" in of.wire or of.wire in ENVELOPE:
            continue
        for new_owner, nf in namespaced:
            key = nf.wire.rsplit("/", 1)[1]
            same = key == of.wire or key.endswith(of.wire[:1].upper() + of.wire[1:])
            if same and render(of.type) == render(nf.type):
                targets.setdefault((old_owner, of.wire), []).append((new_owner, nf.wire))
    ways_a, ways_b = channels(a), channels(b)
    for held, found in list(targets.items()):
        # A move carries the same value: the new holder must travel the way the old one did
        # (same sender, same request/result/notification), or it is another value of the same name.
        # Holders no method reaches have no known way; they keep the name-and-type rule.
        was = ways_a.get(held[0])
        kept = [t for t in found if not was or not ways_b.get(t[0]) or was & ways_b[t[0]]]
        if kept:
            targets[held] = kept
        else:
            del targets[held]
    for (old_owner, wire), found in sorted(targets.items()):
        # The most general holder (``RequestMetaObject`` over ``SubscriptionsListenResultMetaObject``).
        new_owner, new_wire = min(found, key=lambda t: (len(t[0]), t))
        path = _wire_path(old_owner, wire)
        yield Change("moved", path, path, _wire_path(new_owner, new_wire), "both")
    for side, path in sorted(set(caps_a) - set(caps_b)):
        if "." in path or (side, "extensions") not in caps_b:
            continue
        holder = caps_b[(side, "extensions")].split(".")[0]
        described = " ".join(
            (f.description or "") for d in b.objects() for f in d.fields if f.wire == "extensions"
        )
        ids = sorted(set(re.findall(r"[\w.-]+/" + re.escape(path) + r"\b", described)))
        if ids:
            yield Change(
                "moved",
                f"{side}: {path}",
                f"{CAPABILITY_ROOTS[side]}.{path}",
                f'{holder}.extensions["{ids[0]}"]',
                "both",
                side=side,
                note="capability became an extension",
            )


Channel = tuple[str, str]  # (sender, "request" | "notification" | "result")


def channels(rev: Revision) -> dict[str, set[Channel]]:
    """Per definition, the ways its values travel: who sends the message that holds it, and as what.

    A request or notification is sent by its method's sender; a result by the other side.
    Definitions no method reaches (the envelope's own parts) have no entry.
    """
    found: dict[str, set[Channel]] = {}
    receiver = {"client": ("server",), "server": ("client",), "both": ("client", "server")}

    def refs(t: TypeExpr | None) -> list[str]:
        return [] if t is None else [x.name for x in walk_type(t) if isinstance(x, RefT)]

    def walk(names: Iterable[str], way: Channel) -> None:
        todo = list(names)
        while todo:
            name = todo.pop()
            seen = found.setdefault(name, set())
            if way in seen:
                continue
            seen.add(way)
            d = rev.definitions.get(name)
            if isinstance(d, ObjectDef):
                for f in d.fields:
                    todo += refs(f.type)
            elif isinstance(d, AliasDef):
                todo += refs(d.type)

    for m in rev.methods.values():
        senders = ("client", "server") if m.sender == "both" else (m.sender,)
        for sender in senders:
            walk([m.message], (sender, m.kind))
        for sender in receiver[m.sender]:
            walk(refs(m.result), (sender, "result"))
    return found


# -- notes -----------------------------------------------------------------------------------------------


def _notes(a: Revision, b: Revision) -> tuple[Note, ...]:
    """One note per overlay fix in force on either side (``A and B`` when both have it)."""
    notes: list[Note] = []
    for p in a.patches + tuple(p for p in b.patches if p not in a.patches):
        sides = [r.revision for r in (a, b) if p in r.patches]
        notes.append(
            Note(" and ".join(sides), p.pointer, _json(p.expect), _json(p.value), p.reason)
        )
    return tuple(notes)


def diff(a: str, b: str) -> Diff:
    """The diff of two pinned revisions by name, read from their committed digests
    (``codegen.digest``: no schema needed); raises ``DigestError`` for an unknown revision."""
    from .digest import read

    return compare(read(a), read(b))
