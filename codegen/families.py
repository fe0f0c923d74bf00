"""Families of identical inline objects: one class per family (part of the model stage).

The JSON rendering of the schemas flattens TypeScript ``extends``: a property a base declares
is copied, inline, into every definition that extends the base (each request's ``params._meta``
is a copy of ``RequestParams._meta``; 2024-11-05's ``annotations`` of each content type a copy
of ``Annotated.annotations``). Hoisted, each copy would be a class of its own with the same
fields. Here the copies become a *family*: the generated module defines one class for it, under
the name of the *canonical* member, and binds every other member's name to that class.

Inline objects are one family when

- they stand at the same step from their owners (the same property: ``_meta``, ``params``,
  ``annotations``), and
- their wire shape is identical: the same keys, attribute names, types (references compared
  through the families already found, so ``CallToolRequestParams`` and ``RequestParams`` are
  alike once their ``_meta`` objects are), required keys, schema defaults, undeclared-key rule
  and tag. Descriptions do not count: they are documentation, and the class keeps the
  canonical member's docstring; and
- one of them is a base that the others extend: its owner declares no key the other owners
  lack, and fewer than one of them does (``RequestParams`` {_meta} against ``CallToolRequestParams``
  {name, arguments, _meta}); where the owners are inline objects too, their owners count the
  same way, level by level. Without a base the objects are only alike, not copies of one
  property (2024-11-05's ``ReadResourceRequestParams`` and ``SubscribeRequestParams``, both
  ``{uri}`` in requests that are both ``{method, params}``): they keep classes of their own,
  so that no value reports a sibling's name.

The canonical member is the base (the shortest name among several, then the first in order).
Named schema definitions are never merged: each is a concept of the schema, even when two have
the same shape (``Request`` and ``Notification``).
"""

from __future__ import annotations

import json
from typing import Any

from .ir import ArrayT, MapT, ObjectDef, RefT, Revision, TypeExpr, UnionT


class FamilyError(Exception):
    """The families of a revision did not settle (a bug of this module, never of a schema)."""


def families(rev: Revision) -> dict[str, str]:
    """Every inline object that shares the class of another: its name -> the canonical name."""
    candidates = [o for o in rev.objects() if o.inline and o.site is not None]
    same: dict[str, str] = {}
    # Objects holding copies are copies themselves only once those are known to be one family:
    # repeat until nothing new is found (a few rounds: the depth of nested inline objects).
    for _ in range(len(candidates) + 1):
        found = _round(rev, candidates, same)
        if found == same:
            return same
        same = found
    raise FamilyError(f"{rev.revision}: the families of identical inline objects do not settle")


def _round(rev: Revision, candidates: list[ObjectDef], same: dict[str, str]) -> dict[str, str]:
    groups: dict[Any, list[ObjectDef]] = {}
    for o in candidates:
        assert o.site is not None
        groups.setdefault((o.site.steps, _shape(o, same)), []).append(o)
    found: dict[str, str] = {}
    for members in groups.values():
        canonical = _base(rev, members) if len(members) > 1 else None
        if canonical is not None:
            found |= {o.name: canonical for o in members if o.name != canonical}
    return found


def _base(rev: Revision, members: list[ObjectDef]) -> str | None:
    """The member whose owners every other member's owners extend, if one does."""
    keys = {o.name: _owner_keys(rev, o) for o in members}
    bases = [n for n in keys if all(keys[n] <= k for k in keys.values())]
    if not bases or all(keys[bases[0]] == k for k in keys.values()):
        return None
    return min(bases, key=lambda n: (len(n), n))


def _owner_keys(rev: Revision, o: ObjectDef) -> frozenset[tuple[int, str]]:
    """The keys the owners of ``o`` declare, by level: its owner's (1), that owner's owner's
    when the owner is inline too (2), and so on up to a named definition. ``CallToolRequest``'s
    inline ``params._meta`` extends ``Request``'s because both levels declare more."""
    keys: set[tuple[int, str]] = set()
    level = 0
    while o.site is not None:
        level += 1
        owner = rev.definitions[o.site.owner]
        assert isinstance(owner, ObjectDef)
        keys |= {(level, f.wire) for f in owner.fields}
        if not owner.inline:
            break
        o = owner
    return frozenset(keys)


def _shape(o: ObjectDef, same: dict[str, str]) -> tuple[Any, ...]:
    """Everything of ``o`` that the wire sees, with references read through ``same``."""
    fields = tuple(
        (
            f.wire,
            f.py,
            _type(f.type, same),
            f.required,
            f.has_default,
            json.dumps(f.default, sort_keys=True),
        )
        for f in o.fields
    )
    return (fields, o.extra, _type(o.extra_value, same), o.tag)


def _type(t: TypeExpr, same: dict[str, str]) -> Any:
    """``t`` with references read through ``same`` and union sites left out (a union's site
    names its decoder, not what it accepts)."""
    if isinstance(t, RefT):
        return RefT(same.get(t.name, t.name))
    if isinstance(t, ArrayT):
        return ("array", _type(t.item, same), t.constraints)
    if isinstance(t, MapT):
        return ("map", _type(t.value, same))
    if isinstance(t, UnionT):
        return ("union", tuple(_type(m, same) for m in t.members))
    return t
