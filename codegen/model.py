"""Stage 2, model: one revision's (patched) JSON schema -> its IR.

This is the only module that reads schema keywords. It resolves references, hoists
inline objects into named definitions (parent name + field name), merges ``allOf``,
and hands unions to ``codegen.unions`` to decide how each is decoded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from . import unions
from .families import families
from .ir import (
    ANY,
    AliasDef,
    AnyT,
    ArrayT,
    Constraints,
    Definition,
    Field,
    InputRequests,
    Lit,
    MapT,
    Method,
    ObjectDef,
    Prim,
    RefT,
    Revision,
    Site,
    TypeExpr,
    UnionT,
)
from .names import pascal, unique_attributes
from .overlay import Overlay, OverlayError, apply, overlay
from .pin import load_schema, pin
from .resolve import ResolveError

PRIMITIVES = ("string", "integer", "number", "boolean", "null")
SIDES = {
    "ClientRequest": ("request", "client"),
    "ServerRequest": ("request", "server"),
    "ClientNotification": ("notification", "client"),
    "ServerNotification": ("notification", "server"),
}


# The keywords the model stage implements; ``_check_keywords`` refuses every other one (unless a
# ``[[keyword]]`` entry of the overlay says how to treat it), so none is silently ignored.
IMPLEMENTED = frozenset(
    {
        "$ref", "allOf", "anyOf", "oneOf", "const", "enum", "type", "properties", "required",
        "additionalProperties", "items", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
    }
)  # fmt: skip
# Keywords that say nothing about which values are valid (``format`` asserts nothing by default).
ANNOTATIONS = frozenset(
    {
        "$schema", "$id", "$comment", "$defs", "definitions", "title", "description", "default",
        "examples", "deprecated", "readOnly", "writeOnly", "format", "contentMediaType",
        "contentEncoding",
    }
)  # fmt: skip


class ModelError(Exception):
    """The schema uses something the generator cannot represent faithfully."""


def build(revision: str) -> Revision:
    """The IR of a pinned revision, overlay applied."""
    p = pin(revision)
    return build_from_schema(revision, load_schema(revision), overlay(revision), p.sha256, p.path)


def build_from_schema(
    revision: str,
    schema: dict[str, Any],
    ov: Overlay | None = None,
    sha256: str = "",
    source: str = "",
) -> Revision:
    """The IR of any schema in the MCP style (used for pinned revisions and test fixtures)."""
    ov = ov or Overlay((), frozenset(), (), {}, {})
    patched = apply(schema, ov, revision)
    rev = _Modeler(revision, patched, ov).run()
    rev.sha256, rev.source, rev.patches = sha256, source, ov.patches
    for result, key in ov.round_trips:
        rev.input_requests = InputRequests(result, key, input_methods(rev, result, key))
    return rev


def input_methods(rev: Revision, result: str, key: str) -> tuple[str, ...]:
    """The methods of the input requests a round trip's ``result`` can carry under ``key``
    (sorted): the ``method`` tags of the members of the union its map of input requests holds."""
    found: set[str] = set()
    holder = rev.definitions.get(result)
    f = holder.field(key) if isinstance(holder, ObjectDef) else None
    todo: list[TypeExpr] = [f.type] if f is not None else []
    seen: set[str] = set()
    while todo:
        t = todo.pop()
        if isinstance(t, RefT):
            if t.name in seen:
                continue
            seen.add(t.name)
            d = rev.definitions[t.name]
            if isinstance(d, ObjectDef):
                method = d.field("method")
                if method is not None and isinstance(method.type, Lit):
                    found.update(str(v) for v in method.type.values)
            elif isinstance(d, AliasDef):
                todo.append(d.type)
        elif isinstance(t, UnionT):
            todo.extend(t.members)
        elif isinstance(t, MapT):
            todo.append(t.value)
    if not found:
        raise OverlayError(f"{rev.revision}: {result}.{key} holds no request with a method")
    return tuple(sorted(found))


def patched_schema(revision: str) -> dict[str, Any]:
    """The pinned schema of ``revision`` with the overlay's defect fixes applied."""
    return apply(load_schema(revision), overlay(revision), revision)


class _Modeler:
    def __init__(self, revision: str, schema: dict[str, Any], ov: Overlay) -> None:
        self.revision = revision
        self.ov = ov
        if "$defs" in schema:
            self.raw: dict[str, Any] = schema["$defs"]
            self.prefix, self.dialect = "#/$defs/", "2020-12"
        else:
            self.raw = schema.get("definitions", {})
            self.prefix, self.dialect = "#/definitions/", "draft-07"
        self.defs: dict[str, Definition] = {}

    def run(self) -> Revision:
        for name in sorted(self.raw):
            self._check_keywords(self.raw[name], self.prefix + _escape(name))
        for name in sorted(self.raw):
            self._definition(name, self.raw[name])
        rev = Revision(
            revision=self.revision,
            sha256="",
            source="",
            dialect=self.dialect,  # type: ignore[arg-type]
            definitions=dict(sorted(self.defs.items())),
        )
        try:
            unions.analyse(rev)
        except ResolveError as exc:
            raise ModelError(str(exc)) from None
        rev.same = families(rev)
        rev.methods = _methods(rev, self.ov)
        return rev

    def _check_keywords(self, s: Any, pointer: str) -> None:
        """Refuse a keyword the model does not implement, naming it and its JSON pointer."""
        if not isinstance(s, dict):
            return
        for key in s:
            if (
                key not in IMPLEMENTED
                and key not in ANNOTATIONS
                and self.ov.keywords.get(key) != "ignore"
            ):
                raise ModelError(
                    f"{self.revision}: {pointer}: schema keyword {key!r} is not implemented by the "
                    "generator; add a [[keyword]] entry to schema/overlay.toml to say how to treat it"
                )
        for key, value in (s.get("properties") or {}).items():
            self._check_keywords(value, f"{pointer}/properties/{_escape(key)}")
        for key in ("items", "additionalProperties"):
            self._check_keywords(s.get(key), f"{pointer}/{key}")
        for key in ("anyOf", "oneOf", "allOf"):
            for i, member in enumerate(s.get(key) or ()):
                self._check_keywords(member, f"{pointer}/{key}/{i}")

    # -- definitions -------------------------------------------------------------------------

    def _definition(self, name: str, s: dict[str, Any]) -> None:
        s = self._merge_all_of(s)
        if _is_object(s) and s.get("properties"):
            self._object(name, s, inline=False, via_field=None)
        else:
            self._add(AliasDef(name, s.get("description"), self._type(s, name, Site(name))))

    def _add(self, d: Definition) -> None:
        if d.name in self.defs or (d.name in self.raw and getattr(d, "inline", False)):
            raise ModelError(
                f"{self.revision}: inline object would be named {d.name!r}, "
                "which another definition already has"
            )
        self.defs[d.name] = d

    def _object(
        self,
        name: str,
        s: dict[str, Any],
        *,
        inline: bool,
        via_field: str | None,
        site: Site | None = None,
    ) -> None:
        props: dict[str, Any] = s["properties"]
        required = set(s.get("required", []))
        unknown = required - set(props)
        attrs = unique_attributes(list(props))
        fields = []
        for wire, ps in props.items():
            ps = self._merge_all_of(ps)
            py = attrs[wire]
            fields.append(
                Field(
                    wire=wire,
                    py=py,
                    type=self._type(ps, name + pascal(py), Site(name).field(wire), via_field=wire),
                    required=wire in required,
                    description=ps.get("description"),
                    default=ps.get("default"),
                    has_default="default" in ps,
                )
            )
        if unknown:
            # A required key with no property schema: any value, but it must be there.
            fields += [Field(w, attrs.get(w, w), ANY, True) for w in sorted(unknown)]
        ap = s.get("additionalProperties")
        extra_value: TypeExpr = ANY
        if ap is False:
            extra = "forbidden"
        elif ap is None:
            opened = via_field in self.ov.open_fields or name.endswith(self.ov.open_type_suffixes)
            extra = "kept" if opened else "ignored"
        else:
            extra = "kept"
            if isinstance(ap, dict) and ap:
                extra_value = self._type(ap, name + "Value", Site(name).value())
        self._add(
            ObjectDef(
                name=name,
                description=s.get("description"),
                fields=tuple(fields),
                extra=extra,  # type: ignore[arg-type]
                extra_value=extra_value,
                inline=inline,
                site=site,
            )
        )

    # -- type expressions --------------------------------------------------------------------

    def _type(self, s: Any, hint: str, site: Site, via_field: str | None = None) -> TypeExpr:
        if s is True or s == {}:
            return ANY
        if not isinstance(s, dict):
            raise ModelError(f"{self.revision}: {site}: unsupported schema {s!r}")
        s = self._merge_all_of(s)
        if "$ref" in s:
            return RefT(self._ref_name(s["$ref"], site))
        for key in ("anyOf", "oneOf"):
            if key in s:
                # Members that open sites of their own (an array's items, a map's values, a
                # nested union) get their index in the site when two of them would share it
                # (2025-03-26 JSONRPCMessage: the batch request and the batch response).
                opening = [i for i, m in enumerate(s[key]) if _opens_site(m)]
                return _union(
                    [
                        self._type(
                            m, hint, site.member(i) if len(opening) > 1 and i in opening else site
                        )
                        for i, m in enumerate(s[key])
                    ],
                    site,
                )
        if "const" in s:
            return Lit((s["const"],))
        if "enum" in s:
            return Lit(tuple(s["enum"]))
        t = s.get("type")
        if isinstance(t, list):
            return _union([self._type({**s, "type": x}, hint, site) for x in t], site)
        if t == "object" or (t is None and "properties" in s):
            if s.get("properties"):
                self._object(hint, s, inline=True, via_field=via_field, site=site)
                return RefT(hint)
            ap = s.get("additionalProperties")
            if isinstance(ap, dict) and ap:
                return MapT(self._type(ap, hint + "Value", site.value()))
            return MapT(ANY)
        if t == "array":
            return ArrayT(
                self._type(s.get("items", {}), hint + "Item", site.item()), _constraints(s)
            )
        if t in PRIMITIVES:
            return Prim(t, _constraints(s))
        if t is None:
            return ANY
        raise ModelError(f"{self.revision}: {site}: unsupported type {t!r}")

    def _ref_name(self, ref: str, site: Site | str) -> str:
        # A JSON pointer escapes "/" as "~1" and "~" as "~0" (RFC 6901), undone in that order.
        name = ref[len(self.prefix) :].replace("~1", "/").replace("~0", "~")
        if not ref.startswith(self.prefix) or name not in self.raw:
            raise ModelError(f"{self.revision}: {site}: unresolvable $ref {ref!r}")
        return name

    def _resolve(self, s: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in s:
            s = self.raw[self._ref_name(s["$ref"], "allOf")]
        return self._merge_all_of(s)

    def _merge_all_of(self, s: dict[str, Any]) -> dict[str, Any]:
        """``allOf`` of object schemas -> one object schema (the later part refines the earlier)."""
        if not isinstance(s, dict) or "allOf" not in s:
            return s
        parts = [self._resolve(p) for p in s["allOf"]] + [
            {k: v for k, v in s.items() if k != "allOf"}
        ]
        merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        explicit_open = True
        for part in parts:
            if not (_is_object(part) or set(part) <= {"description"}):
                raise ModelError(f"{self.revision}: allOf of a non-object schema is not supported")
            for key, value in part.get("properties", {}).items():
                merged["properties"][key] = {**merged["properties"].get(key, {}), **value}
            merged["required"] += [
                r for r in part.get("required", []) if r not in merged["required"]
            ]
            if _is_object(part) and part.get("additionalProperties") in (None, False):
                explicit_open = False
        if explicit_open:
            merged["additionalProperties"] = {}
        if "description" in s:
            merged["description"] = s["description"]
        return merged


def _escape(name: str) -> str:
    """``name`` as one JSON pointer segment."""
    return name.replace("~", "~0").replace("/", "~1")


def _is_object(s: dict[str, Any]) -> bool:
    return s.get("type") == "object" or "properties" in s


def _opens_site(s: Any) -> bool:
    """Whether a schema has parts below it whose site extends its own."""
    if not isinstance(s, dict) or "$ref" in s:
        return False
    ap = s.get("additionalProperties")
    return (
        s.get("type") == "array"
        or "items" in s
        or "anyOf" in s
        or "oneOf" in s
        or (isinstance(ap, dict) and bool(ap))
    )


def _union(members: list[TypeExpr], site: Site) -> TypeExpr:
    flat: list[TypeExpr] = []
    for m in members:
        for x in m.members if isinstance(m, UnionT) else (m,):
            if isinstance(x, AnyT):
                return ANY
            if x not in flat:
                flat.append(x)
    return flat[0] if len(flat) == 1 else UnionT(tuple(flat), site)


def _constraints(s: dict[str, Any]) -> Constraints:
    return Constraints(
        minimum=s.get("minimum"),
        maximum=s.get("maximum"),
        exclusive_minimum=s.get("exclusiveMinimum"),
        exclusive_maximum=s.get("exclusiveMaximum"),
        min_length=s.get("minLength"),
        max_length=s.get("maxLength"),
        pattern=s.get("pattern"),
        min_items=s.get("minItems"),
        max_items=s.get("maxItems"),
        format=s.get("format"),
    )


# -- methods ---------------------------------------------------------------------------------


def _members(rev: Revision, name: str) -> list[str]:
    d = rev.definitions.get(name)
    if d is None:
        return []
    if isinstance(d, ObjectDef):
        return [name]
    t = d.type
    refs = t.members if isinstance(t, UnionT) else (t,)
    return [r.name for r in refs if isinstance(r, RefT)]


def _methods(rev: Revision, ov: Overlay) -> dict[str, Method]:
    found: dict[str, Method] = {}
    for union, (kind, sender) in SIDES.items():
        for message in _members(rev, union):
            obj = rev.definitions[message]
            assert isinstance(obj, ObjectDef)
            mf = obj.field("method")
            if mf is None or not isinstance(mf.type, Lit) or len(mf.type.values) != 1:
                raise ModelError(f"{rev.revision}: {message} has no constant method")
            method = str(mf.type.values[0])
            if method in found:
                # A side union with one member is inlined upstream as a copy of that member
                # (2026-07-28 ClientNotification); the named definition is the message type.
                better = found[method].message in SIDES and message not in SIDES
                found[method] = replace(
                    found[method],
                    sender="both",
                    message=message if better else found[method].message,
                )
                continue
            pf = obj.field("params")
            cap = ov.capabilities.get(method)
            found[method] = Method(
                method=method,
                kind=kind,  # type: ignore[arg-type]
                sender=sender,  # type: ignore[arg-type]
                message=message,
                params=pf.type if pf else None,
                params_required=bool(pf and pf.required),
                result=None,
                capability=cap[1] if cap else None,
                capability_side=cap[0] if cap else None,  # type: ignore[arg-type]
                conditions=ov.conditions.get(method, ()),
            )
    for method, m in found.items():
        if m.kind == "request":
            found[method] = replace(m, result=_result(rev, ov, m))
    return dict(sorted(found.items()))


def _result(rev: Revision, ov: Overlay, m: Method) -> TypeExpr:
    stem = m.message.removesuffix("Request")
    response = rev.definitions.get(stem + "ResultResponse")
    if isinstance(response, ObjectDef) and (rf := response.field("result")) is not None:
        return rf.type
    if m.method in ov.results:
        return RefT(ov.results[m.method])
    results = {
        "client": _members(rev, "ServerResult"),
        "server": _members(rev, "ClientResult"),
        "both": _members(rev, "ServerResult") + _members(rev, "ClientResult"),
    }[m.sender]
    if stem + "Result" in results:
        return RefT(stem + "Result")
    raise ModelError(
        f"{rev.revision}: no result type for request {m.method!r} ({m.message}); "
        "add a [[result]] entry to schema/overlay.toml"
    )
