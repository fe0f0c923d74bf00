"""What a JSON Schema says, as the surface generator holds it: a ``Node`` is the set of JSON
values a schema accepts, split by JSON kind (null, boolean, number, string, array, object), each
kind with what constrains it. msgspec can decode one type per kind in a union, so a node renders
as one union whose members are its kinds' types.

Every operation here is exact or wider than the schema, never stricter: what a kind cannot hold
exactly is widened and the widening reported to the ``Inexact`` collector, whose schema then gets
the fallback check."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "ANY_KINDS",
    "Arr",
    "Bool",
    "Inexact",
    "Lits",
    "Node",
    "Null",
    "Num",
    "Obj",
    "Ref",
    "Str",
    "Tagged",
]

KIND_ORDER = ("null", "boolean", "number", "string", "array", "object")


class Inexact:
    """Collects why a schema cannot be said by its generated type alone (pointer, reason)."""

    def __init__(self) -> None:
        self.reasons: list[tuple[str, str]] = []

    def add(self, where: str, why: str) -> None:
        if (where, why) not in self.reasons:
            self.reasons.append((where, why))

    def __bool__(self) -> bool:
        return bool(self.reasons)


@dataclass(frozen=True)
class Null:
    pass


@dataclass(frozen=True)
class Bool:
    pass


@dataclass(frozen=True)
class Num:
    """Numbers (``integral``: only those with a zero fractional part, JSON Schema's integer)."""

    integral: bool = False
    lower: float = -math.inf
    lower_open: bool = False
    upper: float = math.inf
    upper_open: bool = False
    multiple_of: float | None = None

    def admits(self, v: float) -> bool:
        if self.integral and not float(v).is_integer():
            return False
        if v < self.lower or (self.lower_open and v == self.lower):
            return False
        if v > self.upper or (self.upper_open and v == self.upper):
            return False
        if self.multiple_of is not None:
            q = v / self.multiple_of
            if not (math.isfinite(q) and float(q).is_integer()):
                return False
        return True

    def covers(self, other: Num) -> bool:
        if self.integral and not other.integral:
            return False
        if (other.lower, not other.lower_open) < (self.lower, not self.lower_open):
            return False
        if (other.upper, other.upper_open) > (self.upper, self.upper_open):
            return False
        if self.multiple_of is not None:
            if other.multiple_of is None:
                return False
            q = other.multiple_of / self.multiple_of
            if not q.is_integer():
                return False
        return True


@dataclass(frozen=True)
class Str:
    min_length: int = 0
    max_length: int | None = None
    pattern: str | None = None  # a Python pattern (codegen.surface.patterns)

    def admits(self, v: str) -> bool:
        if len(v) < self.min_length or (self.max_length is not None and len(v) > self.max_length):
            return False
        return self.pattern is None or re.search(self.pattern, v) is not None

    def covers(self, other: Str) -> bool:
        if other.min_length < self.min_length:
            return False
        if self.max_length is not None and (
            other.max_length is None or other.max_length > self.max_length
        ):
            return False
        return self.pattern is None or self.pattern == other.pattern


@dataclass(frozen=True)
class Lits:
    """Exactly these values of one kind (compared as JSON Schema compares: 1 equals 1.0)."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class Arr:
    items: Node | None = None  # None: any item
    min_items: int = 0
    max_items: int | None = None
    prefix: tuple[Node, ...] | None = None  # a fixed-length tuple (exactly these items)


@dataclass(frozen=True)
class Obj:
    """An object: as a Struct (``properties``; ``closed`` refuses other keys) or, without
    properties, as a dict (``values`` typed, ``key_pattern``, ``min/max_properties``)."""

    properties: tuple[tuple[str, Node], ...] = ()
    required: frozenset[str] = frozenset()
    closed: bool = False
    values: Node | None = None  # dict form: the type of every value (None: any)
    key_pattern: str | None = None
    min_properties: int = 0
    max_properties: int | None = None
    name: str | None = None  # the class name once it is a Struct
    tag: tuple[str, Any] | None = None  # (field, value) of a tagged union member
    doc: str | None = None

    @property
    def is_struct(self) -> bool:
        return bool(self.properties) or self.closed

    def property(self, key: str) -> Node | None:
        return next((n for k, n in self.properties if k == key), None)


@dataclass(frozen=True)
class Tagged:
    """Objects told apart by a required property holding a different constant in each."""

    members: tuple[Obj, ...]
    field: str


@dataclass(frozen=True)
class Ref:
    """A named definition (rendered as its name); ``name`` is the definition's key."""

    name: str


Kind = Null | Bool | Num | Str | Lits | Arr | Obj | Tagged


@dataclass(frozen=True)
class Node:
    """The values a schema accepts: by kind, or a reference to a named definition."""

    kinds: dict[str, Kind] = field(default_factory=dict)
    ref: Ref | None = None
    doc: str | None = None

    @property
    def never(self) -> bool:
        return self.ref is None and not self.kinds

    def with_doc(self, doc: str | None) -> Node:
        return replace(self, doc=doc) if doc else self


ANY_KINDS: dict[str, Kind] = {
    "null": Null(),
    "boolean": Bool(),
    "number": Num(),
    "string": Str(),
    "array": Arr(),
    "object": Obj(),
}
