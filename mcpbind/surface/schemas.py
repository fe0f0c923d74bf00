"""Whether one JSON Schema accepts fewer instances than another, more, the same, or neither:
the review's word on a changed parameter or output schema (``mcpbind surface diff``).

It reads the keywords tool schemas use (types, enums and consts, bounds, lengths, required,
properties, additional properties, items, anyOf); a change it cannot place on either side, or
of a keyword it does not read, is ``CHANGED`` (incomparable), which a review counts as breaking.
Annotations (title, description, default, examples, ...) never change what a schema accepts."""

from __future__ import annotations

import json
import math
from enum import Enum
from typing import Any

__all__ = ["ANNOTATIONS", "Relation", "relation", "without_annotations"]

# Keywords that say nothing about which instances are valid.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$schema",
        "$id",
        "$anchor",
        "contentMediaType",
        "contentEncoding",
    }
)
_TYPES = frozenset({"null", "boolean", "integer", "number", "string", "array", "object"})


class Relation(Enum):
    """How a new schema's valid instances relate to the old one's."""

    SAME = "same"
    NARROWED = "narrowed"  # the new schema accepts a subset
    WIDENED = "widened"  # a superset
    CHANGED = "changed"  # neither (or not known)

    def __and__(self, other: Relation) -> Relation:
        if self is Relation.SAME:
            return other
        if other is Relation.SAME or other is self:
            return self
        return Relation.CHANGED


_S, _N, _W, _C = Relation.SAME, Relation.NARROWED, Relation.WIDENED, Relation.CHANGED


def without_annotations(schema: Any) -> Any:
    """``schema`` without its annotation keywords (top level only)."""
    if isinstance(schema, dict):
        return {k: v for k, v in schema.items() if k not in ANNOTATIONS}
    return schema


def _boolean(schema: Any) -> bool | None:
    """True for a schema accepting everything, False for one accepting nothing, else None."""
    if schema is True or schema == {}:
        return True
    if schema is False:
        return False
    if isinstance(schema, dict) and schema.get("not") in (True, {}) and len(schema) == 1:
        return False
    return None


def relation(old: Any, new: Any) -> Relation:
    """How ``new``'s valid instances relate to ``old``'s."""
    old, new = without_annotations(old), without_annotations(new)
    if old == new:
        return _S
    bo, bn = _boolean(old), _boolean(new)
    if bo is not None and bo == bn:
        return _S
    if bo is True or bn is False:
        return _N
    if bo is False or bn is True:
        return _W
    if not isinstance(old, dict) or not isinstance(new, dict):
        return _C
    result = _S
    for key in sorted(set(old) | set(new)):
        rule = _RULES.get(key)
        if rule is None:
            if old.get(key) != new.get(key):
                return _C
            continue
        result = result & _relation_of(rule, old, new)
        if result is _C:
            return _C
    return result


def _relation_of(rule: Any, old: dict[str, Any], new: dict[str, Any]) -> Relation:
    found: Relation = rule(old, new)
    return found


def _subset(old: set[str] | None, new: set[str] | None) -> Relation:
    """None is every value."""
    if old == new:
        return _S
    if new is None:
        return _W
    if old is None or new < old:
        return _N
    if new > old:
        return _W
    return _C


def _types(schema: dict[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if t is None:
        return None
    found = {t} if isinstance(t, str) else set(t) if isinstance(t, list) else set()
    if "number" in found:
        found.add("integer")
    return found & _TYPES


def _type(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    return _subset(_types(old), _types(new))


def _values(schema: dict[str, Any]) -> set[str] | None:
    found: set[str] | None = None
    if isinstance(schema.get("enum"), list):
        found = {_key(v) for v in schema["enum"]}
    if "const" in schema:
        const = {_key(schema["const"])}
        found = const if found is None else found & const
    return found


def _key(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return json.dumps(value, sort_keys=True)


def _enum(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    return _subset(_values(old), _values(new))


def _lower(schema: dict[str, Any]) -> tuple[float, bool]:
    """The lower bound (value, exclusive)."""
    bounds = [(-math.inf, False)]
    if isinstance(schema.get("minimum"), int | float):
        bounds.append((schema["minimum"], False))
    ex = schema.get("exclusiveMinimum")
    if isinstance(ex, int | float) and not isinstance(ex, bool):
        bounds.append((ex, True))
    return max(bounds)


def _upper(schema: dict[str, Any]) -> tuple[float, bool]:
    bounds = [(math.inf, False)]
    if isinstance(schema.get("maximum"), int | float):
        bounds.append((schema["maximum"], False))
    ex = schema.get("exclusiveMaximum")
    if isinstance(ex, int | float) and not isinstance(ex, bool):
        bounds.append((ex, True))
    return min(bounds, key=lambda b: (b[0], not b[1]))


def _bounds(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    lo, ln = _lower(old), _lower(new)
    uo, un = _upper(old), _upper(new)
    low = _S if lo == ln else _N if ln > lo else _W
    high = _S if uo == un else _N if (un[0], not un[1]) < (uo[0], not uo[1]) else _W
    return low & high


def _count(low: str, high: str) -> Any:
    def rule(old: dict[str, Any], new: dict[str, Any]) -> Relation:
        lo, ln = old.get(low, 0), new.get(low, 0)
        ho, hn = old.get(high, math.inf), new.get(high, math.inf)
        r = _S if lo == ln else _N if ln > lo else _W
        return r & (_S if ho == hn else _N if hn < ho else _W)

    return rule


def _multiple(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    mo, mn = old.get("multipleOf"), new.get("multipleOf")
    if mo == mn:
        return _S
    if mo is None:
        return _N
    if mn is None:
        return _W
    if isinstance(mo, int | float) and isinstance(mn, int | float) and mo and mn:
        if (mn / mo).is_integer():
            return _N
        if (mo / mn).is_integer():
            return _W
    return _C


def _required(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    ro, rn = set(old.get("required") or ()), set(new.get("required") or ())
    if ro == rn:
        return _S
    return _N if rn > ro else _W if rn < ro else _C


def _properties(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    po, pn = old.get("properties") or {}, new.get("properties") or {}
    ao, an = old.get("additionalProperties", True), new.get("additionalProperties", True)
    result = _S
    for name in sorted(set(po) | set(pn)):
        result = result & relation(po.get(name, ao), pn.get(name, an))
        if result is _C:
            break
    return result


def _additional(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    return relation(old.get("additionalProperties", True), new.get("additionalProperties", True))


def _items(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    io, in_ = old.get("items", True), new.get("items", True)
    if isinstance(io, list) or isinstance(in_, list):
        return _S if io == in_ else _C
    return relation(io, in_)


def _any_of(old: dict[str, Any], new: dict[str, Any]) -> Relation:
    mo, mn = old.get("anyOf"), new.get("anyOf")
    if mo == mn:
        return _S
    if not isinstance(mo, list) or not isinstance(mn, list):
        return _C
    return _subset({_key(m) for m in mo}, {_key(m) for m in mn})


_RULES = {
    "type": _type,
    "enum": _enum,
    "const": _enum,
    "minimum": _bounds,
    "maximum": _bounds,
    "exclusiveMinimum": _bounds,
    "exclusiveMaximum": _bounds,
    "multipleOf": _multiple,
    "minLength": _count("minLength", "maxLength"),
    "maxLength": _count("minLength", "maxLength"),
    "minItems": _count("minItems", "maxItems"),
    "maxItems": _count("minItems", "maxItems"),
    "minProperties": _count("minProperties", "maxProperties"),
    "maxProperties": _count("minProperties", "maxProperties"),
    "required": _required,
    "properties": _properties,
    "additionalProperties": _additional,
    "items": _items,
    "anyOf": _any_of,
}
