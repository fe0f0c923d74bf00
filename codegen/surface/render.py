"""``Node``s -> Python: the annotation of each, and the Struct classes and type aliases they
need, for the surface templates to lay out. Every string printed into generated code is built
here (names through ``codegen.names``, values through ``repr`` of plain values)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..emit import ANNOTATION_NAMES
from ..names import class_name, unique_attributes
from .ir import ANY_KINDS, Arr, Bool, Inexact, Kind, Lits, Node, Null, Num, Obj, Str, Tagged
from .layout import LINE, annotated, black_block, bracketed, pystr
from .layout import docstring as layout_docstring
from .naming import pascal, snake
from .resolve import Resolver

__all__ = ["AliasView", "FieldView", "Renderer", "StructView"]


@dataclass
class FieldView:
    py: str
    wire: str
    annotation: str
    default: str | None  # "UNSET" for an optional field
    doc: str | None = None  # the text

    @property
    def assign(self) -> str | None:
        """What follows ``=`` in the class body (None: nothing)."""
        if self.py != self.wire:
            default = f", default={self.default}" if self.default else ""
            return f"field(name={pystr(self.wire)}{default})"
        return self.default

    def lines(self) -> list[str]:
        """The field as black lays it out in a class body, and its docstring."""
        doc = layout_docstring(self.doc, 4)
        return self._lines() + ([""] + doc if doc else [])

    def _lines(self) -> list[str]:
        found = annotated(self.py, self.annotation, self.assign, 4)
        if found is not None:
            return found
        one = f"    {self.py}: {self.annotation}" + (f" = {self.assign}" if self.assign else "")
        return _by_black(f"class _X:\n{one}\n", 1)


@dataclass
class StructView:
    name: str
    options: str  # the class keywords after Struct
    fields: list[FieldView] = field(default_factory=list)
    doc: str | None = None  # the text
    notes: list[str] = field(default_factory=list)  # what the fallback checks, as comments

    def lines(self) -> list[str]:
        items = ["Struct", *self.options.split(", ")] if self.options else ["Struct"]
        head = bracketed(f"class {self.name}(", items, "):", 0)
        if head is None:
            head = _by_black(f"class {self.name}({', '.join(items)}):\n    pass\n", 0)[:-1]
        body: list[str] = []
        doc = layout_docstring(self.doc, 4)
        if doc:
            body += doc
        for note in self.notes:
            body.append(f"    # {note}".rstrip())
        for i, f in enumerate(self.fields):
            if i and (self.fields[i - 1].doc or f.doc):
                body.append("")
            body += f.lines()
        if doc and (self.notes or self.fields):
            body.insert(len(doc), "")
        return head + (body or ["    pass"])


@dataclass
class AliasView:
    name: str
    annotation: str
    doc: str | None = None  # the text

    def lines(self) -> list[str]:
        one = f"{self.name}: TypeAlias = {self.annotation}"
        out = [one]
        if len(one) > LINE:
            out = _by_black(one + "\n", 0)
        doc = layout_docstring(self.doc, 0)
        return out + (doc or [])


def _by_black(source: str, wrapper_lines: int) -> list[str]:
    """``source`` formatted by black, without its first ``wrapper_lines`` lines."""
    return black_block(source).rstrip("\n").split("\n")[wrapper_lines:]


_STRUCT = object()  # a mark on the rendering stack: a Struct's fields are read lazily by name


class Renderer:
    """Renders the nodes of any number of resolvers into one module (names unique within it)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.structs: list[StructView] = []
        self.aliases: list[AliasView] = []
        self._defs: dict[tuple[int, str], str] = {}  # (resolver, definition) -> its name here
        self._stack: list[object] = []
        self.uses: set[str] = set()  # what the module must import (Annotated, Meta, Literal, ...)

    def struct_named(self, name: str) -> StructView | None:
        """The Struct rendered under ``name`` (the latest one: roots are rendered last)."""
        for view in reversed(self.structs):
            if view.name == name:
                return view
        return None

    def name(self, hint: str) -> str:
        found = class_name(hint or "Value", self.taken)
        self.taken.add(found)
        return found

    # -- nodes ---------------------------------------------------------------------------------

    def annotation(self, node: Node, r: Resolver, hint: str, inexact: Inexact) -> str:
        members: list[str] = []
        if node.ref is not None:
            members.append(self._definition(r, node.ref.name, inexact))
            if members[0] == "Any":
                return "Any"
        if node.ref is None and not node.kinds:
            inexact.add(hint, "a schema no value satisfies (checked by the fallback)")
            self.uses.add("Any")
            return "Any"
        if node.ref is None and all(node.kinds.get(k) == v for k, v in ANY_KINDS.items()):
            self.uses.add("Any")
            return "Any"
        for kind, k in node.kinds.items():
            rendered = self._kind(kind, k, r, hint, inexact)
            if rendered is None:
                continue
            if rendered == "Any":
                return "Any"
            members.append(rendered)
        if not members:
            inexact.add(hint, "a schema no value satisfies (checked by the fallback)")
            self.uses.add("Any")
            return "Any"
        return " | ".join(dict.fromkeys(members))

    def _definition(self, r: Resolver, name: str, inexact: Inexact) -> str:
        key = (id(r), name)
        d = r.by_name(name)
        if key in self._defs:
            rendered = self._defs[key]
            marks = self._stack[::-1]
            cut = marks.index(_STRUCT) if _STRUCT in marks else len(marks)
            if rendered in marks[:cut]:  # an alias reaching itself through aliases only
                inexact.add(name, "a recursive type alias (msgspec needs a class on the way)")
                self.uses.add("Any")
                return "Any"
            return rendered
        assert d.node is not None
        node = d.node
        if (
            node.ref is None
            and list(node.kinds) == ["object"]
            and _is_struct(node.kinds["object"])
            and all(_nameable(w) for w, _ in node.kinds["object"].properties)  # type: ignore[union-attr]
        ):
            obj = node.kinds["object"]
            assert isinstance(obj, Obj)
            own = self.name(d.name)
            self._defs[key] = own
            self._struct(obj, own, r, inexact, node.doc)
            return own
        own = self.name(d.name)
        self._defs[key] = own
        self._stack.append(own)
        text = self.annotation(node, r, d.name + "Object", inexact)
        self._stack.pop()
        if text == own:
            text = "Any"
        self.aliases.append(AliasView(own, text, node.doc))
        self.uses.add("TypeAlias")
        return own

    def _kind(self, kind: str, k: Kind, r: Resolver, hint: str, inexact: Inexact) -> str | None:
        if isinstance(k, Null):
            return "None"
        if isinstance(k, Bool):
            return "bool"
        if isinstance(k, Lits):
            return self._literals(k, hint, inexact)
        if isinstance(k, Num):
            return self._number(k, hint, inexact)
        if isinstance(k, Str):
            return self._meta(
                "str", min_length=k.min_length or None, max_length=k.max_length, pattern=k.pattern
            )
        if isinstance(k, Arr):
            return self._array(k, r, hint, inexact)
        if isinstance(k, Tagged) and not all(
            _nameable(w) for m in k.members for w, _ in m.properties
        ):
            inexact.add(hint, "a property name msgspec cannot rename to (checked by the fallback)")
            self.uses.add("Any")
            return "dict[str, Any]"
        if isinstance(k, Tagged):
            return " | ".join(
                self._struct(m, self.name(m.name or hint), r, inexact) for m in k.members
            )
        assert isinstance(k, Obj)
        if _is_struct(k) and not all(_nameable(w) for w, _ in k.properties):
            inexact.add(hint, "a property name msgspec cannot rename to (checked by the fallback)")
            self.uses.add("Any")
            return "dict[str, Any]"
        if _is_struct(k):
            return self._struct(k, self.name(k.name or hint), r, inexact)
        value = "Any" if k.values is None else self.annotation(k.values, r, hint + "Value", inexact)
        if value == "Any":
            self.uses.add("Any")
        key = "str" if k.key_pattern is None else self._meta("str", pattern=k.key_pattern)
        return self._meta(
            f"dict[{key}, {value}]",
            min_length=k.min_properties or None,
            max_length=k.max_properties,
        )

    def _meta(self, base: str, **constraints: Any) -> str:
        given = {k: v for k, v in constraints.items() if v is not None}
        if not given:
            return base
        self.uses |= {"Annotated", "Meta"}
        args = ", ".join(f"{k}={_value(v)}" for k, v in given.items())
        return f"Annotated[{base}, Meta({args})]"

    def _number(self, k: Num, hint: str, inexact: Inexact) -> str | None:
        multiple = k.multiple_of
        integral_multiple = multiple is not None and float(multiple).is_integer()
        if multiple is not None and not integral_multiple:
            inexact.add(hint, f"`multipleOf` {multiple} (a fraction: checked by the fallback)")
        lo = _int_bound(k.lower, k.lower_open, up=True)
        hi = _int_bound(k.upper, k.upper_open, up=False)
        if lo is not None and hi is not None and lo > hi and k.integral:
            return None
        int_part = self._meta(
            "int",
            ge=lo,
            le=hi,
            multiple_of=int(multiple) if integral_multiple and multiple else None,
        )
        float_multiple = (
            int(multiple) if integral_multiple and multiple else (1 if k.integral else None)
        )
        float_part = self._meta(
            "float",
            ge=k.lower if math.isfinite(k.lower) and not k.lower_open else None,
            gt=k.lower if math.isfinite(k.lower) and k.lower_open else None,
            le=k.upper if math.isfinite(k.upper) and not k.upper_open else None,
            lt=k.upper if math.isfinite(k.upper) and k.upper_open else None,
            multiple_of=float_multiple,
        )
        if lo is not None and hi is not None and lo > hi:
            return float_part
        return f"{int_part} | {float_part}"

    def _literals(self, k: Lits, hint: str, inexact: Inexact) -> str | None:
        values = k.values
        if not values:
            return None
        if all(isinstance(v, bool) for v in values):
            if len(set(values)) == 2:
                return "bool"
            self._lit()
            return f"Literal[{values[0]!r}]"
        if all(isinstance(v, str) for v in values):
            self._lit()
            return f"Literal[{', '.join(pystr(v) for v in values)}]"
        numbers = sorted({float(v) for v in values})
        ints = sorted({int(v) for v in values if float(v).is_integer() and abs(v) < 2**63})
        parts = []
        if ints:
            self._lit()
            parts.append(f"Literal[{', '.join(str(i) for i in ints)}]")
        if len(numbers) == 1:
            parts.append(self._meta("float", ge=numbers[0], le=numbers[0]))
        elif ints and len(ints) == len(numbers) and ints == list(range(ints[0], ints[-1] + 1)):
            parts.append(self._meta("float", ge=float(ints[0]), le=float(ints[-1]), multiple_of=1))
        else:
            inexact.add(hint, "numbers of an `enum` (compared by value: checked by the fallback)")
            parts.append(self._meta("float", ge=numbers[0], le=numbers[-1]))
        return " | ".join(parts)

    def _lit(self) -> bool:
        self.uses.add("Literal")
        return True

    def _array(self, k: Arr, r: Resolver, hint: str, inexact: Inexact) -> str:
        if k.prefix is not None:
            if not k.prefix:
                self.uses |= {"Any"}
                return self._meta("list[Any]", max_length=0)
            items = [self.annotation(p, r, f"{hint}Item", inexact) for p in k.prefix]
            return f"tuple[{', '.join(items)}]"
        item = "Any" if k.items is None else self.annotation(k.items, r, hint + "Item", inexact)
        if item == "Any":
            self.uses.add("Any")
        return self._meta(f"list[{item}]", min_length=k.min_items or None, max_length=k.max_items)

    # -- Structs -------------------------------------------------------------------------------

    def _struct(
        self, obj: Obj, name: str, r: Resolver, inexact: Inexact, doc: str | None = None
    ) -> str:
        options = ["kw_only=True"]
        if obj.closed:
            options.append("forbid_unknown_fields=True")
        if obj.tag is not None:
            options.append(f"tag_field={pystr(obj.tag[0])}, tag={pystr(obj.tag[1])}")
        view = StructView(name, ", ".join(options), doc=doc or obj.doc)
        self.structs.append(view)
        self._stack.append(_STRUCT)
        wires = [k for k, _ in obj.properties]
        attributes = dict(_unique_attributes(tuple(wires)))
        taken = set(attributes.values())
        for wire in wires:
            py = attributes[wire]
            while py in ANNOTATION_NAMES or py == name:
                taken.discard(py)
                py += "_"
            taken.add(py)
            attributes[wire] = py
        for wire, node in obj.properties:
            annotation = self.annotation(node, r, name + pascal(snake(wire)), inexact)
            required = wire in obj.required
            if not required:
                annotation = f"{annotation} | UnsetType" if annotation != "Any" else "Any"
                self.uses.add("UNSET")
            view.fields.append(
                FieldView(
                    py=attributes[wire],
                    wire=wire,
                    annotation=annotation,
                    default=None if required else "UNSET",
                    doc=node.doc,
                )
            )
        self._stack.pop()
        view.fields.sort(key=lambda f: f.default is not None)
        return name


@lru_cache(maxsize=1 << 14)
def _unique_attributes(wires: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple(unique_attributes(list(wires)).items())


def _nameable(wire: str) -> bool:
    """Whether msgspec can map a field to this key (it refuses \\, " and control characters)."""
    return not any(c in wire for c in '\\"') and all(ord(c) >= 0x20 for c in wire)


def _is_struct(k: Kind) -> bool:
    return isinstance(k, Obj) and k.is_struct


def _value(v: Any) -> str:
    return pystr(v) if isinstance(v, str) else repr(v)


def _int_bound(v: float, open_: bool, *, up: bool) -> int | None:
    """The smallest (``up``) or largest integer within a bound, None when unbounded."""
    if not math.isfinite(v):
        return None
    if up:
        n = math.floor(v) + 1 if open_ and float(v).is_integer() else math.ceil(v)
    else:
        n = math.ceil(v) - 1 if open_ and float(v).is_integer() else math.floor(v)
    return int(n)
