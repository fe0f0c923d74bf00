"""What a type expression of a revision stands for: the one resolver of the generator.

``unions`` (how a union is decoded), ``projection`` (how values convert) and ``diff`` (how two
types relate) all read references through here, so they agree on what an alias means, on which
unions accept any JSON value (the ``JSONValue`` family), and on which schemas are refused.
"""

from __future__ import annotations

from .ir import ANY, AliasDef, AnyT, ArrayT, MapT, Prim, RefT, Revision, TypeExpr, UnionT

_EVERY_KIND = frozenset({"string", "number", "boolean", "null", "object", "array"})


class ResolveError(ValueError):
    """References that stand for nothing: an alias or union that is its own member."""


def target(rev: Revision, t: TypeExpr) -> TypeExpr:
    """``t`` with references to aliases followed: an object reference or a non-reference.

    An alias whose chain of references comes back to it defines no value: ResolveError.
    """
    chain: list[str] = []
    while isinstance(t, RefT) and isinstance(d := rev.definitions[t.name], AliasDef):
        if t.name in chain:
            raise ResolveError(
                f"{rev.revision}: $ref cycle through aliases: {' -> '.join([*chain, t.name])}"
            )
        chain.append(t.name)
        t = d.type
    return t


def members(rev: Revision, u: UnionT, *, resolved: bool = False) -> list[TypeExpr]:
    """The members of ``u`` with unions reached through aliases expanded in place, each once.

    A member is given as written (``RefT("Cursor")``), or past its aliases when ``resolved``.
    A union that reaches itself through its members (``A: B | string``, ``B: A | integer``) is
    refused with the cycle: ResolveError, never a RecursionError.
    """
    out: list[TypeExpr] = []
    _flatten(rev, u, resolved, out, [str(u.site)])
    return out


def _flatten(
    rev: Revision, u: UnionT, resolved: bool, out: list[TypeExpr], path: list[str]
) -> None:
    for m in u.members:
        r = target(rev, m)
        if isinstance(r, UnionT):
            via = m.name if isinstance(m, RefT) else str(r.site)
            if via in path or str(r.site) in path:
                raise ResolveError(
                    f"{rev.revision}: $ref cycle through unions: {' -> '.join([*path, via])}"
                )
            _flatten(rev, r, resolved, out, [*path, via])
            continue
        x = r if resolved else m
        if x not in out:
            out.append(x)


def is_any(rev: Revision, t: TypeExpr, assuming: frozenset[str] = frozenset()) -> bool:
    """Whether ``t`` accepts every JSON value: ``Any``, or a union of every JSON kind whose
    object member is a map of any values and whose array member is a list of any values.

    ``assuming`` holds the aliases being decided: a reference back to one of them counts as any
    value, which is what makes ``JSONValue = ... | dict[str, JSONValue] | list[JSONValue]`` any.
    """
    if isinstance(t, RefT) and t.name in assuming:
        return True
    name = t.name if isinstance(t, RefT) and isinstance(rev.definitions[t.name], AliasDef) else None
    r = target(rev, t)
    if isinstance(r, AnyT):
        return True
    if not isinstance(r, UnionT):
        return False
    inner = assuming | ({name} if name else set())
    kinds: set[str] = set()
    for m in members(rev, r, resolved=True):
        if isinstance(m, AnyT):
            return True
        if isinstance(m, Prim) and not m.constraints.asserting():
            kinds.add(m.json)
        elif isinstance(m, MapT) and is_any(rev, m.value, inner):
            kinds.add("object")
        elif isinstance(m, ArrayT) and not m.constraints.asserting() and is_any(rev, m.item, inner):
            kinds.add("array")
    return kinds >= _EVERY_KIND


def resolve(rev: Revision, t: TypeExpr) -> TypeExpr:
    """``target(t)``, with a union that accepts every JSON value as ``ANY``."""
    r = target(rev, t)
    if isinstance(r, UnionT) and is_any(rev, t):
        return ANY
    return r


def expand(rev: Revision, t: TypeExpr, depth: int = 4) -> TypeExpr:
    """``t`` with references to aliases replaced by what they stand for, ``depth`` references
    deep (recursive aliases stop there), and unions of every JSON value as ``ANY``."""
    if depth == 0:
        return t
    if isinstance(t, RefT):
        d = rev.definitions.get(t.name)
        return expand(rev, d.type, depth - 1) if isinstance(d, AliasDef) else t
    if isinstance(t, MapT):
        return MapT(expand(rev, t.value, depth))
    if isinstance(t, ArrayT):
        return ArrayT(expand(rev, t.item, depth), t.constraints)
    if isinstance(t, UnionT):
        if is_any(rev, t):
            return ANY
        return UnionT(tuple(expand(rev, m, depth - 1) for m in t.members), t.site)
    return t
