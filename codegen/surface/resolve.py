"""A server's JSON Schema (draft-07 or 2020-12) -> ``Node``s (``codegen.surface.ir``).

The generator's own resolver for the schemas servers write (docs/surface.md says why not
datamodel-code-generator, with the Test Suite scores of both): references inside the document
(``$ref`` to ``#/...``, ``$defs``, ``definitions``, ``$id`` and ``$anchor``; never fetched from
elsewhere), recursion, ``allOf``/``anyOf``/``oneOf``, ``enum``/``const``, the type-specific
keywords of each kind, ``items``/``prefixItems``/``additionalItems``, typed and closed
``additionalProperties``, ``patternProperties``. A keyword it cannot say exactly is widened and
reported to the ``Inexact`` collector; one it does not know is an annotation (JSON Schema's own
rule for unknown keywords)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import unquote, urldefrag, urljoin

from ..names import class_name
from . import ir
from .ir import ANY_KINDS, Arr, Bool, Inexact, Kind, Lits, Node, Null, Num, Obj, Ref, Str, Tagged
from .naming import pascal, snake
from .patterns import python_pattern

__all__ = ["Definition", "DRAFT7", "DRAFT2020", "Resolver"]

DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT2020 = "https://json-schema.org/draft/2020-12/schema"

# Keywords holding subschemas, by how (for finding $id and $anchor).
_ONE = (
    "additionalItems",
    "additionalProperties",
    "contains",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_MANY = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_MAP = (
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
    "dependencies",
)

_SUBSCHEMA_KEYS = frozenset(_ONE + _MANY + _MAP)

# Keywords whose meaning the generated type cannot hold, by dialect; the fallback checks them.
# (A keyword of the other dialect is unknown here, so an annotation: JSON Schema's own rule.)
_UNSAID_7 = frozenset({"not", "propertyNames", "contains", "dependencies"})
_UNSAID_2020 = frozenset(
    {
        "not",
        "propertyNames",
        "contains",
        "dependentRequired",
        "dependentSchemas",
        "unevaluatedProperties",
        "unevaluatedItems",
        "$dynamicRef",
    }
)


@dataclass
class Definition:
    """A schema reached by ``$ref``: it gets a name of its own in the generated code."""

    key: int
    name: str
    schema: Any
    base: str
    node: Node | None = None
    busy: bool = False


def _kinds_of_type(t: Any) -> dict[str, Kind] | None:
    names = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    if names is None:
        return None
    out: dict[str, Kind] = {}
    for name in names:
        if name == "integer":
            if "number" not in out:
                out["number"] = Num(integral=True)
        elif name == "number":
            out["number"] = Num()
        elif name in ANY_KINDS:
            out[name] = ANY_KINDS[name]
    return out


def _kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _same(a: Any, b: Any) -> bool:
    """JSON Schema equality: numbers by value (1 == 1.0), booleans apart from numbers."""
    if _kind_of(a) != _kind_of(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _union_values(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    out = list(a)
    for v in b:
        if not any(_same(v, x) for x in out):
            out.append(v)
    return tuple(out)


class Resolver:
    """Resolves one schema document (a tool's input schema, ...). ``name`` names its root;
    ``inexact`` collects what the generated types cannot say."""

    def __init__(self, root: Any, dialect: str, name: str, inexact: Inexact) -> None:
        self.root = root
        self.draft7 = dialect.rstrip("#") == DRAFT7.rstrip("#")
        self.name = name
        self.inexact = inexact
        self.resources: dict[str, Any] = {}  # absolute URI (no fragment) -> schema
        self.anchors: dict[str, Any] = {}  # absolute URI#anchor -> schema
        self.bases: dict[int, str] = {}  # id(subschema) -> its base URI
        self.definitions: dict[int, Definition] = {}
        self.taken: set[str] = set()
        self._index(root, _ROOT_URI)

    # -- the document's identifiers -----------------------------------------------------------

    def _index(self, schema: Any, base: str) -> None:
        if not isinstance(schema, dict):
            return
        sid = schema.get("$id")
        if isinstance(sid, str) and not (self.draft7 and "$ref" in schema):  # (ignored beside it)
            if self.draft7 and sid.startswith("#"):
                self.anchors[_join(base, sid)] = schema
            else:
                base = urldefrag(_join(base, sid))[0]
                self.resources[base] = schema
        if base not in self.resources:
            self.resources[base] = schema
        anchor = schema.get("$anchor")
        if isinstance(anchor, str) and not self.draft7:
            self.anchors[f"{base}#{anchor}"] = schema
        self.bases[id(schema)] = base
        for sub in _subschemas(schema, self.draft7):
            self._index(sub, base)

    def _target(self, ref: str, base: str) -> Any:
        uri = _join(base, ref)
        doc, fragment = urldefrag(uri)
        if uri in self.anchors:
            return self.anchors[uri]
        schema = self.resources.get(doc)
        if schema is None:
            return _MISSING
        if not fragment:
            return schema
        if not fragment.startswith("/"):
            return self.anchors.get(f"{doc}#{fragment}", _MISSING)
        for part in fragment.split("/")[1:]:
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(schema, dict) and part in schema:
                schema = schema[part]
            elif isinstance(schema, list) and part.isdigit() and int(part) < len(schema):
                schema = schema[int(part)]
            else:
                return _MISSING
        return schema

    # -- entry points --------------------------------------------------------------------------

    def resolve_root(self) -> Node:
        """The root, as a definition named after the document (so that ``$ref: "#"`` and the
        root are one type)."""
        return self.definition(self.root, self.name, self.bases.get(id(self.root), _ROOT_URI))

    def definition(self, schema: Any, hint: str, base: str) -> Node:
        key = id(schema)
        found = self.definitions.get(key)
        if found is None:
            found = Definition(key, self._class_name(hint), schema, base)
            self.definitions[key] = found
        if found.node is None and not found.busy:
            found.busy = True
            node = self.node(schema, f"definition {found.name}", found.name, base)
            found.node = node
            found.busy = False
        return Node(ref=Ref(found.name), kinds={})

    def _class_name(self, hint: str) -> str:
        base = hint if hint == self.name else pascal(snake(hint)) or "Value"
        name = class_name(base, self.taken)
        self.taken.add(name)
        return name

    def by_name(self, name: str) -> Definition:
        return next(d for d in self.definitions.values() if d.name == name)

    def expand(self, node: Node, where: str) -> Node:
        """``node`` with its references replaced by their definitions' kinds (a reference to a
        definition still being resolved cannot be: it is widened to any value)."""
        if node.ref is None:
            return node
        d = self.by_name(node.ref.name)
        if d.node is None:
            self.inexact.add(where, "a recursive reference combined with other keywords")
            return Node(kinds=dict(ANY_KINDS))
        inner = self.expand(d.node, where)
        return Node(kinds=dict(inner.kinds), doc=node.doc or inner.doc)

    # -- one schema ----------------------------------------------------------------------------

    def node(self, schema: Any, where: str, hint: str, base: str) -> Node:
        if schema is True or schema == {}:
            return Node(kinds=dict(ANY_KINDS))
        if schema is False:
            return Node(kinds={})
        if not isinstance(schema, dict):
            self.inexact.add(where, "not a schema")
            return Node(kinds=dict(ANY_KINDS))
        base = self.bases.get(id(schema), base)
        doc = schema.get("description") if isinstance(schema.get("description"), str) else None
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._target(ref, base)
            if target is _MISSING:
                self.inexact.add(where, f"`$ref` {ref!r} is not in the document (never fetched)")
                referenced = Node(kinds=dict(ANY_KINDS))
            else:
                hint_ref = _ref_hint(ref) or hint
                if target is self.root:
                    hint_ref = self.name
                referenced = self.definition(target, hint_ref, self.bases.get(id(target), base))
            if self.draft7:  # draft-07: a $ref's siblings are ignored
                return referenced.with_doc(doc)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if not _asserts(rest):
                return referenced.with_doc(doc)
            own = self.node(rest, where, hint, base)
            return self.intersect(referenced, own, where).with_doc(doc)
        for key in sorted(schema.keys() & (_UNSAID_7 if self.draft7 else _UNSAID_2020)):
            self.inexact.add(where, f"`{key}` (checked by the fallback)")
        if "if" in schema and ("then" in schema or "else" in schema):
            self.inexact.add(where, "`if`/`then`/`else` (checked by the fallback)")
        if schema.get("uniqueItems") is True:
            self.inexact.add(where, "`uniqueItems` (checked by the fallback)")
        kinds = _kinds_of_type(schema.get("type"))
        if kinds is None:
            kinds = dict(ANY_KINDS)
        node = Node(
            kinds={k: self._constrain(k, v, schema, where, hint, base) for k, v in kinds.items()}
        )
        if "enum" in schema or "const" in schema:
            node = self.intersect(node, self._values(schema, where), where)
        for sub_key in ("allOf",):
            for i, sub in enumerate(schema.get(sub_key) or ()):
                node = self.intersect(node, self.node(sub, f"{where}/allOf/{i}", hint, base), where)
        if isinstance(schema.get("anyOf"), list):
            branches = [
                self.node(s, f"{where}/anyOf/{i}", hint, base)
                for i, s in enumerate(schema["anyOf"])
            ]
            node = self.intersect(node, self.union(branches, where, hint), where)
        if isinstance(schema.get("oneOf"), list):
            branches = [
                self.node(s, f"{where}/oneOf/{i}", hint, base)
                for i, s in enumerate(schema["oneOf"])
            ]
            if not self._disjoint(branches, where):
                self.inexact.add(
                    where, "`oneOf` whose branches may overlap (checked by the fallback)"
                )
            node = self.intersect(node, self.union(branches, where, hint), where)
        return node.with_doc(doc)

    def _values(self, schema: dict[str, Any], where: str) -> Node:
        values: list[Any] = []
        if "enum" in schema:
            values = list(schema["enum"]) if isinstance(schema["enum"], list) else []
        if "const" in schema:
            const = schema["const"]
            values = [const] if "enum" not in schema else [v for v in values if _same(v, const)]
        kinds: dict[str, Kind] = {}
        for v in values:
            k = _kind_of(v)
            if k == "null":
                kinds["null"] = Null()
            elif k in ("array", "object"):
                self.inexact.add(where, f"an {k} in `enum`/`const` (checked by the fallback)")
                kinds[k] = ANY_KINDS[k]
            else:
                old = kinds.get(k)
                kinds[k] = Lits(_union_values(old.values if isinstance(old, Lits) else (), (v,)))
        return Node(kinds=kinds)

    # -- the keywords of each kind --------------------------------------------------------------

    def _constrain(
        self, kind: str, k: Kind, s: dict[str, Any], where: str, hint: str, base: str
    ) -> Kind:
        if kind == "number":
            assert isinstance(k, Num)
            return self._number(k, s, where)
        if kind == "string":
            return self._string(s, where)
        if kind == "array":
            return self._array(s, where, hint, base)
        if kind == "object":
            return self._object(s, where, hint, base)
        return k

    def _number(self, k: Num, s: dict[str, Any], where: str) -> Num:
        def num(key: str) -> float | None:
            v = s.get(key)
            return v if isinstance(v, int | float) and not isinstance(v, bool) else None

        lower, lower_open, upper, upper_open = k.lower, k.lower_open, k.upper, k.upper_open
        if (v := num("minimum")) is not None and (v, False) > (lower, not lower_open):
            lower, lower_open = v, False
        if (v := num("exclusiveMinimum")) is not None and (v, True) >= (lower, lower_open):
            lower, lower_open = v, True
        if (v := num("maximum")) is not None and v < upper:
            upper, upper_open = v, False
        if (v := num("exclusiveMaximum")) is not None and v <= upper:
            upper, upper_open = v, True
        multiple = num("multipleOf")
        if multiple is not None and multiple <= 0:
            multiple = None
        return Num(k.integral, lower, lower_open, upper, upper_open, multiple)

    def _string(self, s: dict[str, Any], where: str) -> Str:
        pattern = s.get("pattern")
        translated = None
        if isinstance(pattern, str):
            translated = python_pattern(pattern)
            if translated is None:
                self.inexact.add(
                    where, f"the ECMA-262 pattern {pattern!r} (checked by the fallback)"
                )
        return Str(
            min_length=_count(s.get("minLength"), 0) or 0,
            max_length=_count(s.get("maxLength"), None),
            pattern=translated,
        )

    def _array(self, s: dict[str, Any], where: str, hint: str, base: str) -> Arr:
        item_hint = hint + "Item"
        prefix_schemas: list[Any] | None = None
        rest: Any = True
        if self.draft7:
            items = s.get("items", True)
            if isinstance(items, list):
                prefix_schemas, rest = items, s.get("additionalItems", True)
            else:
                rest = items
        else:
            if isinstance(s.get("prefixItems"), list):
                prefix_schemas = s["prefixItems"]
            rest = s.get("items", True)
        lo, hi = _count(s.get("minItems"), 0) or 0, _count(s.get("maxItems"), None)
        rest_node = (
            None
            if rest is True or rest == {}
            else self.node(rest, f"{where}/items", item_hint, base)
        )
        if not prefix_schemas:
            if rest_node is not None and rest_node.never:
                hi = 0  # no item may be there
                rest_node = None
            return Arr(items=rest_node, min_items=lo, max_items=hi)
        prefix = tuple(
            self.node(p, f"{where}/prefixItems/{i}", f"{item_hint}{i}", base)
            for i, p in enumerate(prefix_schemas)
        )
        n = len(prefix)
        closed = rest_node is not None and rest_node.never
        if closed and lo >= n and all(not p.never for p in prefix):
            return Arr(prefix=prefix, min_items=n, max_items=n)
        self.inexact.add(where, "items by position that may be fewer or followed by others")
        items = prefix + ((rest_node,) if rest_node is not None and not rest_node.never else ())
        if rest_node is None and not closed:
            return Arr(items=None, min_items=lo, max_items=hi)
        return Arr(items=self.union(list(items), where, item_hint), min_items=lo, max_items=hi)

    def _object(self, s: dict[str, Any], where: str, hint: str, base: str) -> Obj:
        properties: dict[str, Any] = _object_of(s, "properties")
        required = frozenset(r for r in s.get("required") or () if isinstance(r, str))
        patterns: dict[str, Any] = _object_of(s, "patternProperties")
        additional = s.get("additionalProperties", True)
        lo, hi = _count(s.get("minProperties"), 0) or 0, _count(s.get("maxProperties"), None)
        nodes: list[tuple[str, Node]] = []
        for key in properties:
            node = self.node(
                properties[key], f"{where}/properties/{key}", hint + pascal(snake(key)), base
            )
            for pattern, sub in patterns.items():
                translated = python_pattern(pattern)
                if translated is None:
                    self.inexact.add(where, f"the ECMA-262 pattern property {pattern!r}")
                    continue
                if re.search(translated, key):
                    node = self.intersect(
                        node, self.node(sub, f"{where}/patternProperties", hint, base), where
                    )
            nodes.append((key, node))
        for key in sorted(required - set(properties)):
            # required but not described: any value (or none where the rest is closed)
            nodes.append((key, Node(kinds=dict(ANY_KINDS))))
        additional_node = (
            None
            if additional is True or additional == {}
            else self.node(additional, f"{where}/additionalProperties", hint + "Value", base)
        )
        closed = additional_node is not None and additional_node.never and not patterns
        if not nodes and not closed:
            return self._mapping(patterns, additional_node, lo, hi, where, hint, base)
        if nodes and (lo or hi is not None):
            self.inexact.add(where, "`minProperties`/`maxProperties` of an object with properties")
        if patterns:
            self.inexact.add(
                where, "`patternProperties` beside `properties` (checked by the fallback)"
            )
        elif additional_node is not None and not additional_node.never:
            self.inexact.add(where, "typed `additionalProperties` beside `properties`")
        for key, node in nodes:
            if key in required and node.never:
                self.inexact.add(where, f"the required property {key!r} accepts no value")
        return Obj(properties=tuple(nodes), required=required, closed=closed, name=None)

    def _mapping(
        self,
        patterns: dict[str, Any],
        additional: Node | None,
        lo: int,
        hi: int | None,
        where: str,
        hint: str,
        base: str,
    ) -> Obj:
        if not patterns:
            return Obj(values=additional, min_properties=lo, max_properties=hi)
        value_nodes = [
            self.node(sub, f"{where}/patternProperties", hint + "Value", base)
            for sub in patterns.values()
        ]
        translated = [python_pattern(p) for p in patterns]
        exact = (
            additional is not None
            and additional.never
            and None not in translated
            and all(v == value_nodes[0] for v in value_nodes)
        )
        if not exact:
            self.inexact.add(where, "`patternProperties` (checked by the fallback)")
            return Obj(min_properties=lo, max_properties=hi)
        key_pattern = "|".join(f"(?:{t})" for t in translated if t is not None)
        return Obj(
            values=value_nodes[0], key_pattern=key_pattern, min_properties=lo, max_properties=hi
        )

    # -- combining -----------------------------------------------------------------------------

    def intersect(self, a: Node, b: Node, where: str) -> Node:
        if (
            b.ref is None
            and b.kinds.keys() >= ANY_KINDS.keys()
            and all(b.kinds[k] == ANY_KINDS[k] for k in ANY_KINDS)
        ):
            return a
        if (
            a.ref is None
            and a.kinds.keys() >= ANY_KINDS.keys()
            and all(a.kinds[k] == ANY_KINDS[k] for k in ANY_KINDS)
            and not a.doc
        ):
            return b
        a, b = self.expand(a, where), self.expand(b, where)
        kinds: dict[str, Kind] = {}
        for name in ir.KIND_ORDER:
            if name in a.kinds and name in b.kinds:
                found = self._meet(a.kinds[name], b.kinds[name], where)
                if found is not None:
                    kinds[name] = found
        return Node(kinds=kinds, doc=a.doc or b.doc)

    def _meet(self, x: Kind, y: Kind, where: str) -> Kind | None:
        if x == y:
            return x
        if isinstance(x, Lits) or isinstance(y, Lits):
            lits, other = (x, y) if isinstance(x, Lits) else (y, x)
            assert isinstance(lits, Lits)
            kept = tuple(v for v in lits.values if _admits(other, v))
            return Lits(kept) if kept else None
        if isinstance(x, Null | Bool):
            return x
        if isinstance(x, Num) and isinstance(y, Num):
            return self._meet_num(x, y, where)
        if isinstance(x, Str) and isinstance(y, Str):
            pattern = x.pattern or y.pattern
            if x.pattern and y.pattern and x.pattern != y.pattern:
                self.inexact.add(where, "two patterns for one string (checked by the fallback)")
            hi = min((v for v in (x.max_length, y.max_length) if v is not None), default=None)
            return Str(max(x.min_length, y.min_length), hi, pattern)
        if isinstance(x, Arr) and isinstance(y, Arr):
            return self._meet_arr(x, y, where)
        if isinstance(x, Obj) and isinstance(y, Obj):
            return self._meet_obj(x, y, where)
        self.inexact.add(where, "an intersection of unions of objects (checked by the fallback)")
        return x if isinstance(x, Tagged) else y

    def _meet_num(self, x: Num, y: Num, where: str) -> Num:
        lower = max((x.lower, not x.lower_open), (y.lower, not y.lower_open))
        upper = min((x.upper, x.upper_open), (y.upper, y.upper_open))
        multiple = x.multiple_of or y.multiple_of
        if x.multiple_of and y.multiple_of and x.multiple_of != y.multiple_of:
            if (y.multiple_of / x.multiple_of).is_integer():
                multiple = y.multiple_of
            elif not (x.multiple_of / y.multiple_of).is_integer():
                self.inexact.add(where, "two `multipleOf` for one number (checked by the fallback)")
        return Num(x.integral or y.integral, lower[0], not lower[1], upper[0], upper[1], multiple)

    def _meet_arr(self, x: Arr, y: Arr, where: str) -> Arr:
        if x.prefix is not None or y.prefix is not None:
            if x.prefix != y.prefix and x.prefix is not None and y.prefix is not None:
                self.inexact.add(where, "two tuples for one array (checked by the fallback)")
            return x if x.prefix is not None else y
        if x.items is None:
            items = y.items
        elif y.items is None:
            items = x.items
        else:
            items = self.intersect(x.items, y.items, where)
        hi = min((v for v in (x.max_items, y.max_items) if v is not None), default=None)
        return Arr(items=items, min_items=max(x.min_items, y.min_items), max_items=hi)

    def _meet_obj(self, x: Obj, y: Obj, where: str) -> Obj:
        if not x.is_struct and not y.is_struct:
            values = (
                x.values
                if y.values is None
                else y.values if x.values is None else (self.intersect(x.values, y.values, where))
            )
            key = x.key_pattern or y.key_pattern
            if x.key_pattern and y.key_pattern and x.key_pattern != y.key_pattern:
                key = f"(?=.*?(?:{x.key_pattern}))(?:{y.key_pattern})"
                self.inexact.add(where, "two key patterns (checked by the fallback)")
            hi = min(
                (v for v in (x.max_properties, y.max_properties) if v is not None), default=None
            )
            return Obj(
                values=values,
                key_pattern=key,
                min_properties=max(x.min_properties, y.min_properties),
                max_properties=hi,
            )
        if x.values is not None or y.values is not None or x.key_pattern or y.key_pattern:
            self.inexact.add(where, "typed extra keys of an object with properties")
        keys = [k for k, _ in x.properties] + [k for k, _ in y.properties if x.property(k) is None]
        props: list[tuple[str, Node]] = []
        for key in keys:
            a, b = x.property(key), y.property(key)
            if a is None or b is None:
                owner_closed = x.closed if a is None else y.closed
                if owner_closed:
                    # the other side is closed to keys it does not declare: this one can't be there
                    if key in x.required | y.required:
                        self.inexact.add(
                            where, f"the required property {key!r} is refused by the other side"
                        )
                        props.append((key, Node(kinds={})))
                    continue
                props.append((key, a if a is not None else b))  # type: ignore[arg-type]
            else:
                props.append((key, self.intersect(a, b, where)))
        return Obj(
            properties=tuple(props), required=x.required | y.required, closed=x.closed or y.closed
        )

    def union(self, nodes: list[Node], where: str, hint: str) -> Node:
        """Any of ``nodes`` (references kept as such where they may be, for recursion)."""
        if not nodes:
            return Node(kinds={})
        refs = [n for n in nodes if n.ref is not None]
        plain = [n for n in nodes if n.ref is None]
        if len(refs) == 1 and all(self._ref_disjoint(refs[0], p) for p in plain):
            rest = self._union_kinds(plain, where, hint)
            if not rest.kinds:
                return refs[0]
            return Node(kinds=rest.kinds, ref=refs[0].ref)
        expanded = [self.expand(n, where) for n in nodes]
        return self._union_kinds(expanded, where, hint)

    def _ref_disjoint(self, ref: Node, other: Node) -> bool:
        assert ref.ref is not None
        d = self.by_name(ref.ref.name)
        if d.node is None:
            return "object" not in other.kinds and len(other.kinds) <= 1 and "null" in other.kinds
        inner = self.expand(d.node, "")
        return not (set(inner.kinds) & set(other.kinds))

    def _union_kinds(self, nodes: list[Node], where: str, hint: str) -> Node:
        kinds: dict[str, Kind] = {}
        objects: list[Kind] = []
        for n in nodes:
            for name, k in n.kinds.items():
                if name == "object":
                    objects.append(k)
                    continue
                kinds[name] = k if name not in kinds else self._join(kinds[name], k, where)
        if objects:
            kinds["object"] = self._join_objects(objects, where, hint)
        ordered = {name: kinds[name] for name in ir.KIND_ORDER if name in kinds}
        return Node(kinds=ordered, doc=next((n.doc for n in nodes if n.doc), None))

    def _join(self, x: Kind, y: Kind, where: str) -> Kind:
        if x == y:
            return x
        if isinstance(x, Lits) and isinstance(y, Lits):
            return Lits(_union_values(x.values, y.values))
        if isinstance(x, Bool | Null):
            return x
        if isinstance(y, Bool | Null):
            return y
        if isinstance(x, Lits) or isinstance(y, Lits):
            lits, other = (x, y) if isinstance(x, Lits) else (y, x)
            assert isinstance(lits, Lits)
            if all(_admits(other, v) for v in lits.values):
                return other
            return self._join(other, _hull(lits), where)
        if isinstance(x, Num) and isinstance(y, Num):
            if x.covers(y):
                return x
            if y.covers(x):
                return y
            self.inexact.add(where, "numbers of two ranges (checked by the fallback)")
            lower = min((x.lower, not x.lower_open), (y.lower, not y.lower_open))
            upper = max((x.upper, x.upper_open), (y.upper, y.upper_open))
            return Num(x.integral and y.integral, lower[0], not lower[1], upper[0], upper[1])
        if isinstance(x, Str) and isinstance(y, Str):
            if x.covers(y):
                return x
            if y.covers(x):
                return y
            self.inexact.add(where, "strings of two shapes (checked by the fallback)")
            hi = (
                None
                if x.max_length is None or y.max_length is None
                else max(x.max_length, y.max_length)
            )
            return Str(min(x.min_length, y.min_length), hi, None)
        if isinstance(x, Arr) and isinstance(y, Arr):
            if x.items is None and x.prefix is None and x.min_items == 0 and x.max_items is None:
                return x
            if y.items is None and y.prefix is None and y.min_items == 0 and y.max_items is None:
                return y
            self.inexact.add(where, "arrays of two shapes (checked by the fallback)")
            return Arr()
        self.inexact.add(where, "values of two shapes (checked by the fallback)")
        return ANY_KINDS["array"] if isinstance(x, Arr) else x

    def _join_objects(self, objects: list[Kind], where: str, hint: str) -> Kind:
        members: list[Obj] = []
        for o in objects:
            if isinstance(o, Tagged):
                members.extend(o.members)
            else:
                assert isinstance(o, Obj)
                members.append(o)
        unique: list[Obj] = []
        for m in members:
            if m not in unique:
                unique.append(m)
        if len(unique) == 1:
            return unique[0]
        if any(m == Obj() for m in unique):
            return Obj()
        tag = _tag(unique)
        if tag is not None:
            tagged = tuple(
                replace(
                    m,
                    tag=(tag, value),
                    properties=tuple((k, n) for k, n in m.properties if k != tag),
                    name=m.name or hint + pascal(snake(str(value))),
                )
                for m, value in ((m, _tag_value(m, tag)) for m in unique)
            )
            return Tagged(tagged, tag)
        self.inexact.add(where, "objects of several shapes without a constant to tell them apart")
        return Obj()

    def _disjoint(self, branches: list[Node], where: str) -> bool:
        """Whether no value can match two ``oneOf`` branches (so oneOf is anyOf)."""
        seen: dict[str, list[Kind]] = {}
        for b in branches:
            e = self.expand(b, where)
            for name, k in e.kinds.items():
                seen.setdefault(name, []).append(k)
        for name, ks in seen.items():
            if len(ks) < 2:
                continue
            if all(isinstance(k, Lits) for k in ks):
                values = [v for k in ks for v in k.values]  # type: ignore[union-attr]
                if any(_same(a, b) for i, a in enumerate(values) for b in values[i + 1 :]):
                    return False
                continue
            objects = [k for k in ks if isinstance(k, Obj) and k.is_struct]
            if name == "object" and len(objects) == len(ks) and _tag(objects) is not None:
                continue
            return False
        return True


_MISSING: Any = object()
# The base URI of a document without an ``$id`` (a name only: nothing is ever fetched).
_ROOT_URI = "https://mcpbind.invalid/schema.json"


def _object_of(schema: dict[str, Any], key: str) -> dict[str, Any]:
    value = schema.get(key)
    return value if isinstance(value, dict) else {}


def _join(base: str, ref: str) -> str:
    """``ref`` against ``base``, for URNs too (urljoin leaves a fragment alone there)."""
    if ref.startswith("#"):
        return urldefrag(base)[0] + ref
    if ":" in ref.split("/", 1)[0]:
        return ref
    return urljoin(base, ref)


def _asserts(schema: dict[str, Any]) -> bool:
    """Whether a schema has any keyword besides annotations."""
    return any(k not in _ANNOTATIONS for k in schema)


_ANNOTATIONS = frozenset(
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
        "$defs",
        "definitions",
        "format",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "$vocabulary",
        "$dynamicAnchor",
    }
)


def _subschemas(schema: dict[str, Any], draft7: bool) -> Iterator[Any]:
    for key in sorted(schema.keys() & _SUBSCHEMA_KEYS):
        value = schema[key]
        if isinstance(value, dict | bool) and key in _ONE:
            yield value
        elif isinstance(value, list) and key in _MANY:
            yield from value
        elif isinstance(value, dict) and key in _MAP:
            for sub in value.values():
                if isinstance(sub, dict | bool):
                    yield sub


def _ref_hint(ref: str) -> str | None:
    fragment = urldefrag(ref)[1] or urldefrag(ref)[0].rstrip("/").rsplit("/", 1)[-1]
    last = unquote(fragment.rstrip("/").rsplit("/", 1)[-1]).replace("~1", "/").replace("~0", "~")
    return last if last and not last.isdigit() else None


def _count(value: Any, default: int | None) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return int(math.ceil(value)) if value >= 0 else default


def _admits(k: Kind, v: Any) -> bool:
    if isinstance(k, Num):
        return isinstance(v, int | float) and not isinstance(v, bool) and k.admits(v)
    if isinstance(k, Str):
        return isinstance(v, str) and k.admits(v)
    if isinstance(k, Lits):
        return any(_same(v, x) for x in k.values)
    return True


def _hull(lits: Lits) -> Kind:
    """The smallest non-literal kind holding every value of ``lits``."""
    values = lits.values
    if values and all(isinstance(v, int | float) for v in values):
        return Num(
            integral=all(float(v).is_integer() for v in values),
            lower=min(values),
            upper=max(values),
        )
    if values and all(isinstance(v, str) for v in values):
        return Str()
    return Bool()


def _tag(members: list[Obj]) -> str | None:
    """A property every member requires, holding one distinct string or integer each."""
    if not all(m.is_struct and m.tag is None for m in members):
        return None
    candidates = None
    for m in members:
        own = {k for k, n in m.properties if k in m.required and _tag_value(m, k) is not None}
        candidates = own if candidates is None else candidates & own
    for key in sorted(candidates or ()):
        values = [_tag_value(m, key) for m in members]
        kinds = {type(v) for v in values}
        if len(set(map(json.dumps, values))) == len(values) and len(kinds) == 1:
            return key
    return None


def _tag_value(m: Obj, key: str) -> Any:
    node = m.property(key)
    if node is None or node.ref is not None or list(node.kinds) != ["string"]:
        return None
    (k,) = node.kinds.values()
    if isinstance(k, Lits) and len(k.values) == 1:
        v = k.values[0]
        if isinstance(v, str):  # (not a number: a tag 1 would refuse 1.0, which const 1 accepts)
            return v
    return None
