"""Shared helpers for the differential tests: schemas per definition, the reference validator,
the hypothesis strategies that generate instances, and the mutations applied to them.

Two schemas exist per revision:

* the *reference* schema: ``codegen.model.patched_schema(revision)``, exactly what the
  bindings follow. The ``jsonschema`` validator (Draft 7 for ``definitions`` revisions,
  2020-12 for ``$defs``) judges every instance against it.
* the *generation* schema: a copy used only to generate instances with hypothesis-jsonschema.
  It differs in the ways ``tests/disagreements.py`` lists under ``GENERATION``: objects that
  ignore undeclared keys are closed, ``allOf`` is merged, and recursive references are cut.
  Every instance generated from it is checked against the reference schema before use, so
  these changes can only narrow what is generated, never make it invalid.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Iterator
from functools import cache
from typing import Any

import jsonschema
import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import utils as _cu
from hypothesis_jsonschema import _canonicalise as _hjs_canon
from hypothesis_jsonschema import _from_schema as _hjs
from hypothesis_jsonschema import from_schema

import mcpbind
from codegen.model import patched_schema
from codegen.overlay import overlay
from codegen.pin import pins


class _LegacyMany:
    """hypothesis-jsonschema 0.23 drives ``cu.many`` with the pre-6.150 ``more()`` /
    ``reject()`` protocol; current hypothesis made ``many`` a context manager. This adapter
    keeps object generation working (see GENERATION["legacy-many-shim"] in disagreements.py).
    """

    def __init__(self, data: Any, **kwargs: Any) -> None:
        self._many = _cu.many(data, **kwargs)
        self._many.__enter__()
        self._it = iter(self._many)

    def more(self) -> bool:
        try:
            next(self._it)
        except StopIteration:
            self._many.__exit__(None, None, None)
            return False
        return True

    def reject(self, why: str | None = None) -> None:
        self._many.reject(why)


if not hasattr(_cu.many, "more"):

    class _CuShim:
        def __getattr__(self, name: str) -> Any:
            return _LegacyMany if name == "many" else getattr(_cu, name)

    _hjs.cu = _CuShim()  # type: ignore[assignment]


def _validator_class_unchecked(schema: Any) -> Any:
    # hypothesis-jsonschema re-runs ``check_schema`` on every sub-schema it canonicalises, to
    # pick a validator class; that was half of the default run. Our schemas are checked once
    # per revision (``validator`` below), so the check is skipped here.
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


_hjs_canon._get_validator_class = _validator_class_unchecked


class _NoSchemaCheck:
    @staticmethod
    def check_schema(schema: Any) -> None:
        pass


class _Validators:
    def __getattr__(self, name: str) -> Any:
        return getattr(jsonschema.validators, name)

    @staticmethod
    def validator_for(schema: Any, default: Any = None) -> Any:
        return _NoSchemaCheck  # only used by from_schema to check the schema (done by us)


class _JsonschemaForHjs:
    validators = _Validators()

    def __getattr__(self, name: str) -> Any:
        return getattr(jsonschema, name)


_hjs.jsonschema = _JsonschemaForHjs()  # type: ignore[assignment]

DEEP = os.environ.get("MCPBIND_DEEP") == "1"

REVISIONS: tuple[str, ...] = tuple(p.revision for p in pins())

#: the key added to objects to test undeclared keys; nothing in any revision declares it
EXTRA_KEY = "x-mcpbind-differential"


def hyp_settings(default: int, deep: int) -> settings:
    """Hypothesis settings: derandomized in the default run, random and larger in the deep run."""
    return settings(
        max_examples=deep if DEEP else default,
        deadline=None,
        derandomize=not DEEP,
        database=None,
        suppress_health_check=list(HealthCheck),
        print_blob=True,
    )


# -- schemas ------------------------------------------------------------------------------------


@cache
def reference(revision: str) -> dict[str, Any]:
    return patched_schema(revision)


def defs_key(revision: str) -> str:
    return "$defs" if "$defs" in reference(revision) else "definitions"


def definition_names(revision: str) -> list[str]:
    return sorted(reference(revision)[defs_key(revision)])


def all_definitions() -> list[tuple[str, str]]:
    return [(r, n) for r in REVISIONS for n in definition_names(r)]


def _ref(revision: str, name: str) -> str:
    return f"#/{defs_key(revision)}/{name.replace('~', '~0').replace('/', '~1')}"


@cache
def validator_class(revision: str) -> type[Any]:
    return (
        jsonschema.Draft202012Validator
        if defs_key(revision) == "$defs"
        else jsonschema.Draft7Validator
    )


@cache
def checked_reference(revision: str) -> dict[str, Any]:
    doc = reference(revision)
    validator_class(revision).check_schema(doc)
    return doc


@cache
def validator(revision: str, name: str) -> Any:
    """The reference validator for one definition (formats not asserted, as by default)."""
    doc = checked_reference(revision)
    cls = validator_class(revision)
    schema = {
        "$schema": cls.META_SCHEMA["$schema"],
        defs_key(revision): doc[defs_key(revision)],
        "allOf": [{"$ref": _ref(revision, name)}],
    }
    return cls(schema)


def reference_accepts(revision: str, name: str, instance: Any) -> bool:
    return bool(validator(revision, name).is_valid(instance))


# -- the generation schema ----------------------------------------------------------------------


def _is_object_schema(s: Any) -> bool:
    return isinstance(s, dict) and (s.get("type") == "object" or "properties" in s)


def recursive_definitions(revision: str) -> frozenset[str]:
    """Definitions that reach themselves through ``$ref`` (hypothesis-jsonschema cannot)."""
    defs = reference(revision)[defs_key(revision)]
    prefix = f"#/{defs_key(revision)}/"

    def refs(s: Any) -> Iterator[str]:
        if isinstance(s, dict):
            for k, v in s.items():
                if k == "$ref" and isinstance(v, str) and v.startswith(prefix):
                    yield v[len(prefix) :]
                else:
                    yield from refs(v)
        elif isinstance(s, list):
            for x in s:
                yield from refs(x)

    edges = {n: set(refs(s)) for n, s in defs.items()}
    out = set()
    for start in defs:
        seen: set[str] = set()
        todo = list(edges[start])
        while todo:
            n = todo.pop()
            if n == start:
                out.add(start)
                break
            if n in seen or n not in edges:
                continue
            seen.add(n)
            todo += edges[n]
    return frozenset(out)


@cache
def generation_schema(revision: str) -> dict[str, Any]:
    """The copy of the reference schema that instances are generated from (see module doc)."""
    doc = copy.deepcopy(reference(revision))
    key = defs_key(revision)
    defs: dict[str, Any] = doc[key]
    prefix = f"#/{key}/"
    ov = overlay(revision)
    recursive = recursive_definitions(revision)

    def resolve(s: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in s:
            s = defs[s["$ref"][len(prefix) :]]
        return merge_all_of(s)

    def merge_all_of(s: dict[str, Any]) -> dict[str, Any]:
        if "allOf" not in s:
            return s
        parts = [resolve(p) for p in s["allOf"]] + [{k: v for k, v in s.items() if k != "allOf"}]
        merged: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        open_ = True
        for part in parts:
            for k, v in part.get("properties", {}).items():
                merged["properties"][k] = {**merged["properties"].get(k, {}), **v}
            merged["required"] += [
                r for r in part.get("required", []) if r not in merged["required"]
            ]
            if _is_object_schema(part) and part.get("additionalProperties") in (None, False):
                open_ = False
        if open_:
            merged["additionalProperties"] = {}
        return merged

    def close(s: Any, name: str | None, via: str | None, inside_recursive: bool) -> Any:
        if isinstance(s, list):
            return [close(x, None, None, inside_recursive) for x in s]
        if not isinstance(s, dict):
            return s
        if inside_recursive and "$ref" in s and s["$ref"][len(prefix) :] in recursive:
            return {}  # GENERATION["recursive-refs"]
        s = merge_all_of(s)
        out: dict[str, Any] = {}
        for k, v in s.items():
            if k == "properties":
                out[k] = {pk: close(pv, None, pk, inside_recursive) for pk, pv in v.items()}
            else:
                out[k] = close(v, None, None, inside_recursive)
        if (
            _is_object_schema(out)
            and out.get("properties")
            and "additionalProperties" not in out
            and not (via is not None and via in ov.open_fields)
            and not (name is not None and name.endswith(ov.open_type_suffixes))
        ):
            out["additionalProperties"] = False  # GENERATION["closed-objects"]
        return out

    doc[key] = {n: close(s, n, None, n in recursive) for n, s in defs.items()}
    return doc


@cache
def instances(revision: str, name: str) -> st.SearchStrategy[Any]:
    """Instances of one definition, generated from the generation schema (cached)."""
    doc = generation_schema(revision)
    body = doc[defs_key(revision)][name]
    members = body.get("anyOf") if isinstance(body, dict) else None
    if members and all(set(m) == {"$ref"} for m in members):
        # a union of definitions: draw from the members' own (cached) strategies instead of
        # making hypothesis-jsonschema canonicalise every member again
        prefix = f"#/{defs_key(revision)}/"
        return st.one_of([instances(revision, m["$ref"][len(prefix) :]) for m in members])
    schema = {
        "$schema": validator_class(revision).META_SCHEMA["$schema"],
        defs_key(revision): doc[defs_key(revision)],
        "allOf": [{"$ref": _ref(revision, name)}],
    }
    return from_schema(schema, allow_x00=True, codec="utf-8")


# -- bindings -----------------------------------------------------------------------------------


def binding(revision: str, name: str) -> Any:
    return getattr(mcpbind.bindings(revision), name)


def decode(revision: str, name: str, instance: Any) -> Any:
    """Decode through the JSON path the users take."""
    return mcpbind.decode(json.dumps(instance).encode(), binding(revision, name))


def roundtrip(revision: str, name: str, instance: Any) -> Any:
    return json.loads(msgspec.json.encode(decode(revision, name, instance)))


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (``1 == 1.0``), but ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# -- mutations ----------------------------------------------------------------------------------

Path = tuple[str | int, ...]


def nodes(instance: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield path, instance
    if isinstance(instance, dict):
        for k, v in instance.items():
            yield from nodes(v, (*path, k))
    elif isinstance(instance, list):
        for i, v in enumerate(instance):
            yield from nodes(v, (*path, i))


def get(instance: Any, path: Path) -> Any:
    for p in path:
        instance = instance[p]
    return instance


def replace_at(instance: Any, path: Path, value: Any) -> Any:
    if not path:
        return value
    out = copy.deepcopy(instance)
    parent = get(out, path[:-1])
    parent[path[-1]] = value
    return out


#: one value of each JSON kind, for "wrong type" (no float with a zero fraction: see
#: disagreements.INTEGRAL_FLOAT)
KIND_VALUES: tuple[Any, ...] = (None, True, False, 0, -7, 2.5, "", "mutated", [], {}, [1], {"a": 1})
#: numbers outside every bound the schemas use, and fractional numbers for integers
NUMBER_VALUES: tuple[Any, ...] = (
    -1,
    -(2**31),
    2**53,
    -0.5,
    0.5,
    1.5,
    100.5,
    101,
    2**63,
    -(2**63) - 1,
)
#: strings that no enum or const in any revision holds
STRING_VALUES: tuple[Any, ...] = ("not-a-member", "TEXT", "2000-01-01", "")


class Mutation(msgspec.Struct, frozen=True):
    kind: str  # "retype" | "drop_key" | "number" | "string" | "add_key"
    path: Path
    key: str | None = None
    value: Any = None

    def apply(self, instance: Any) -> Any:
        if self.kind == "drop_key":
            out = copy.deepcopy(instance)
            del get(out, self.path)[self.key]
            return out
        if self.kind == "add_key":
            out = copy.deepcopy(instance)
            get(out, self.path)[self.key] = self.value
            return out
        return replace_at(instance, self.path, self.value)


def is_integral_float(v: Any) -> bool:
    return isinstance(v, float) and math.isfinite(v) and v.is_integer()


def candidate_mutations(instance: Any) -> list[Mutation]:
    """Every mutation of ``instance`` these tests know (deterministic order)."""
    out: list[Mutation] = []
    for path, v in nodes(instance):
        for value in KIND_VALUES:
            if _kind(value) != _kind(v):
                out.append(Mutation("retype", path, value=value))
        if isinstance(v, dict):
            for k in v:
                out.append(Mutation("drop_key", path, key=k))
            out.append(Mutation("add_key", path, key=EXTRA_KEY, value=1))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out += [Mutation("number", path, value=n) for n in NUMBER_VALUES if n != v]
        elif isinstance(v, str):
            out += [Mutation("string", path, value=s) for s in STRING_VALUES if s != v]
    return out


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    return {dict: "object", list: "array", str: "string"}[type(v)]


@st.composite
def mutated(draw: st.DrawFn, revision: str, name: str) -> tuple[Any, Mutation]:
    instance = draw(instances(revision, name))
    muts = candidate_mutations(instance)
    return instance, draw(st.sampled_from(muts))
