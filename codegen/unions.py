"""How each union of a revision is decoded (part of the model stage).

msgspec decodes a union natively when its members are of different JSON kinds, or when its
object members are Structs that share a constant field (a *tag*). Every other union is
*untagged*: the runtime picks the member from the keys and constants present, then decodes
it (see ``mcpbind/_untagged.py``). This module decides which, assigns tags, and records for
each untagged union what tells its members apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace

from .ir import (
    AnyT,
    ArrayT,
    JsonKind,
    Lit,
    MapT,
    ObjectDef,
    Prim,
    RefT,
    Revision,
    Site,
    TypeExpr,
    UnionInfo,
    UnionMember,
    UnionT,
)
from .resolve import members
from .resolve import target as resolve

TAG_PREFERENCE = ("method", "type")


def walk(t: TypeExpr) -> Iterator[TypeExpr]:
    """``t`` and every type expression inside it (not following references)."""
    yield t
    if isinstance(t, ArrayT):
        yield from walk(t.item)
    elif isinstance(t, MapT):
        yield from walk(t.value)
    elif isinstance(t, UnionT):
        for m in t.members:
            yield from walk(m)


def all_unions(rev: Revision) -> list[UnionT]:
    """Every union of the revision, one per site, in site order."""
    found: dict[Site, UnionT] = {}
    for d in rev.definitions.values():
        roots = (
            [f.type for f in d.fields] + [d.extra_value] if isinstance(d, ObjectDef) else [d.type]
        )
        for root in roots:
            for t in walk(root):
                if isinstance(t, UnionT):
                    seen = found.setdefault(t.site, t)
                    if seen != t:  # one marker per site: two unions there would be decoded as one
                        raise ValueError(f"{rev.revision}: two different unions at {t.site}")
    return [found[s] for s in sorted(found)]


def flatten(rev: Revision, t: UnionT) -> list[TypeExpr]:
    """The members of ``t`` with aliased unions expanded, each as written (``codegen.resolve``)."""
    return members(rev, t)


def kind_of(rev: Revision, t: TypeExpr) -> JsonKind | None:
    r = resolve(rev, t)
    if isinstance(r, (RefT, MapT)):
        return "object"
    if isinstance(r, ArrayT):
        return "array"
    if isinstance(r, Prim):
        return r.json
    if isinstance(r, Lit):
        kinds = {value_kind(v) for v in r.values}
        return kinds.pop() if len(kinds) == 1 else None
    return None


def value_kind(v: object) -> JsonKind:
    """The JSON kind of a constant."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    return "string"


def _is_native(kinds: Sequence[JsonKind | None], lit_kinds: Sequence[JsonKind]) -> bool:
    if None in kinds:
        return False
    counts = Counter(k for k in kinds if k is not None)
    # Literals of one kind merge into one Literal, but not with the bare primitive of that kind.
    for k in set(lit_kinds):
        counts[k] -= lit_kinds.count(k) - 1
    return all(n <= 1 for n in counts.values())


def _tag_field(rev: Revision, objs: list[ObjectDef]) -> str | None:
    candidates: set[str] | None = None
    for o in objs:
        mine = {
            f.wire
            for f in o.fields
            if f.required
            and isinstance(f.type, Lit)
            and len(f.type.values) == 1
            and isinstance(f.type.values[0], str)
            and (o.tag is None or o.tag[0] == f.wire)
        }
        candidates = mine if candidates is None else candidates & mine
    if not candidates:
        return None
    ordered = sorted(
        candidates,
        key=lambda w: (
            w not in TAG_PREFERENCE,
            TAG_PREFERENCE.index(w) if w in TAG_PREFERENCE else 0,
            w,
        ),
    )
    for wire in ordered:
        values = [_tag_value(o, wire) for o in objs]
        if len(set(values)) == len(values):
            return wire
    return None


def _tag_value(o: ObjectDef, wire: str) -> str:
    f = o.field(wire)
    assert f is not None and isinstance(f.type, Lit)
    return str(f.type.values[0])


def _member(rev: Revision, t: TypeExpr) -> UnionMember:
    kind = kind_of(rev, t)
    r = resolve(rev, t)
    if isinstance(r, RefT):
        o = rev.definitions[r.name]
        assert isinstance(o, ObjectDef)
        return UnionMember(
            type=t,
            kind=kind,
            required=tuple(f.wire for f in o.fields if f.required),
            known=tuple(f.wire for f in o.fields),
            consts=tuple(
                (f.wire, f.type.values) for f in o.fields if f.required and isinstance(f.type, Lit)
            ),
        )
    return UnionMember(type=t, kind=kind)


def analyse(rev: Revision) -> None:
    """Fill ``rev.unions`` and set the tags of tagged union members (in place)."""
    for u in all_unions(rev):
        members = flatten(rev, u)
        if any(isinstance(resolve(rev, m), AnyT) for m in members):
            rev.unions[u.site] = UnionInfo(u.site, "native", ())
            continue
        kinds = [kind_of(rev, m) for m in members]
        lit_kinds = [
            k for m, k in zip(members, kinds, strict=True) if isinstance(resolve(rev, m), Lit) and k
        ]
        object_refs = [
            resolve(rev, m) for m, k in zip(members, kinds, strict=True) if k == "object"
        ]
        if _is_native(kinds, lit_kinds):
            rev.unions[u.site] = UnionInfo(u.site, "native", ())
            continue
        others = [k for k in kinds if k != "object"]
        objs = [rev.definitions[r.name] for r in object_refs if isinstance(r, RefT)]
        structs = [o for o in objs if isinstance(o, ObjectDef) and o.extra != "kept"]
        if (
            len(structs) == len(object_refs) >= 2
            and _is_native(others, [k for k in lit_kinds if k != "object"])
            and (tag := _tag_field(rev, structs)) is not None
        ):
            for o in structs:
                rev.definitions[o.name] = replace(o, tag=(tag, _tag_value(o, tag)))
            rev.unions[u.site] = UnionInfo(u.site, "tagged", (), tag_field=tag)
            continue
        rev.unions[u.site] = UnionInfo(u.site, "untagged", tuple(_member(rev, m) for m in members))
