"""The digest of a revision: its IR as plain JSON, so that ``mcpbind diff`` needs no schema.

The generator writes one digest per revision (``generated/mcpbind/_digest/<package>.json``,
committed and drift-checked like the bindings); ``mcpbind diff`` and ``docs/changes/`` compare
digests read back with ``load``, so a plain install diffs revisions without the upstream files.
The digest holds the IR's definitions, methods and overlay patches, everything the diff reads;
it leaves out how unions are decoded (``Revision.unions``) and where the schema file was read
(a local path), which belong to the generator alone.

This module imports the IR and the standard library only: it runs on a plain install.
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

from .ir import (
    ANY,
    AliasDef,
    AnyT,
    ArrayT,
    CapabilityCondition,
    Constraints,
    Definition,
    Field,
    Lit,
    MapT,
    Method,
    ObjectDef,
    Patch,
    Prim,
    RefT,
    Revision,
    TypeExpr,
    UnionT,
)

FORMAT = "mcpbind.digest/1"
DIGEST_DIR = "_digest"  # under generated/mcpbind/ (in a wheel: under mcpbind/)


class DigestError(ValueError):
    """A digest that this version of mcpbind cannot read (another format, or damaged)."""


# -- writing -----------------------------------------------------------------------------------------


def _type(t: TypeExpr) -> dict[str, Any]:
    if isinstance(t, AnyT):
        return {"any": True}
    if isinstance(t, Prim):
        return {"prim": t.json, **_constraints(t.constraints)}
    if isinstance(t, Lit):
        return {"lit": list(t.values)}
    if isinstance(t, ArrayT):
        return {"array": _type(t.item), **_constraints(t.constraints)}
    if isinstance(t, MapT):
        return {"map": _type(t.value)}
    if isinstance(t, RefT):
        return {"ref": t.name}
    return {"union": [_type(m) for m in t.members], "site": t.site}


def _constraints(c: Constraints) -> dict[str, Any]:
    set_ = {k: v for k, v in c.__dict__.items() if v is not None}
    return {"constraints": set_} if set_ else {}


def _field(f: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"wire": f.wire, "py": f.py, "type": _type(f.type)}
    out["required"] = f.required
    if f.description is not None:
        out["description"] = f.description
    if f.has_default:
        out["default"] = f.default
    return out


def _definition(d: Definition) -> dict[str, Any]:
    if isinstance(d, AliasDef):
        return {"alias": _type(d.type), "description": d.description}
    out: dict[str, Any] = {
        "object": [_field(f) for f in d.fields],
        "description": d.description,
        "extra": d.extra,
    }
    if d.extra_value != ANY:
        out["extra_value"] = _type(d.extra_value)
    if d.inline:
        out["inline"] = True
    if d.tag is not None:
        out["tag"] = list(d.tag)
    return out


def _method(m: Method) -> dict[str, Any]:
    return {
        "kind": m.kind,
        "sender": m.sender,
        "message": m.message,
        "params": None if m.params is None else _type(m.params),
        "params_required": m.params_required,
        "result": None if m.result is None else _type(m.result),
        "capability": m.capability,
        "capability_side": m.capability_side,
        "conditions": [c.__dict__ for c in m.conditions],
    }


def _line(key: str, value: object) -> str:
    return json.dumps(key) + ": " + json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def dump(rev: Revision) -> str:
    """The digest of ``rev`` as text: deterministic, one definition, method or patch a line."""

    def block(name: str, items: dict[str, object]) -> str:
        body = ",\n".join(_line(k, v) for k, v in items.items())
        return f"{json.dumps(name)}: {{\n{body}\n}}"

    head = {
        "format": FORMAT,
        "revision": rev.revision,
        "sha256": rev.sha256,
        "dialect": rev.dialect,
    }
    parts = [_line(k, v) for k, v in head.items()]
    parts.append(block("definitions", {n: _definition(d) for n, d in rev.definitions.items()}))
    parts.append(block("methods", {n: _method(m) for n, m in rev.methods.items()}))
    patches = ",\n".join(
        json.dumps(p.__dict__, ensure_ascii=False, separators=(",", ":")) for p in rev.patches
    )
    parts.append(f'"patches": [\n{patches}\n]' if patches else '"patches": []')
    return "{\n" + ",\n".join(parts) + "\n}\n"


# -- reading -----------------------------------------------------------------------------------------


def _read_type(x: dict[str, Any]) -> TypeExpr:
    if "ref" in x:
        return RefT(x["ref"])
    if "prim" in x:
        return Prim(x["prim"], Constraints(**x.get("constraints", {})))
    if "lit" in x:
        return Lit(tuple(x["lit"]))
    if "array" in x:
        return ArrayT(_read_type(x["array"]), Constraints(**x.get("constraints", {})))
    if "map" in x:
        return MapT(_read_type(x["map"]))
    if "union" in x:
        return UnionT(tuple(_read_type(m) for m in x["union"]), x["site"])
    if x.get("any") is True:
        return ANY
    raise DigestError(f"unknown type expression {x!r}")


def _read_definition(name: str, x: dict[str, Any]) -> Definition:
    if "alias" in x:
        return AliasDef(name, x["description"], _read_type(x["alias"]))
    fields = tuple(
        Field(
            wire=f["wire"],
            py=f["py"],
            type=_read_type(f["type"]),
            required=f["required"],
            description=f.get("description"),
            default=f.get("default"),
            has_default="default" in f,
        )
        for f in x["object"]
    )
    extra_value = _read_type(x["extra_value"]) if "extra_value" in x else ANY
    tag = cast("tuple[str, str]", tuple(x["tag"])) if "tag" in x else None
    return ObjectDef(
        name, x["description"], fields, x["extra"], extra_value, x.get("inline", False), tag
    )


def _read_method(name: str, x: dict[str, Any]) -> Method:
    return Method(
        method=name,
        kind=x["kind"],
        sender=x["sender"],
        message=x["message"],
        params=None if x["params"] is None else _read_type(x["params"]),
        params_required=x["params_required"],
        result=None if x["result"] is None else _read_type(x["result"]),
        capability=x["capability"],
        capability_side=x["capability_side"],
        conditions=tuple(CapabilityCondition(**c) for c in x["conditions"]),
    )


def load(text: str | bytes, source: str = "") -> Revision:
    """The IR a digest holds (without ``unions``); DigestError when it is not a readable digest."""
    try:
        x = json.loads(text)
        if x.get("format") != FORMAT:
            raise DigestError(f"not a {FORMAT} digest (format {x.get('format')!r})")
        return Revision(
            revision=x["revision"],
            sha256=x["sha256"],
            source=source,
            dialect=x["dialect"],
            definitions={n: _read_definition(n, d) for n, d in x["definitions"].items()},
            methods={n: _read_method(n, m) for n, m in x["methods"].items()},
            patches=tuple(Patch(**p) for p in x["patches"]),
        )
    except DigestError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DigestError(f"damaged digest: {type(exc).__name__}: {exc}") from exc


# -- the committed digests ---------------------------------------------------------------------------


def read(revision: str) -> Revision:
    """The IR of a pinned revision from its committed digest (beside the generated packages).

    DigestError names the known revisions when ``revision`` is not one of them, and says to
    regenerate when its digest is missing.
    """
    import mcpbind
    from mcpbind._revisions import PACKAGES, REVISIONS

    if revision not in REVISIONS:
        raise DigestError(f"{revision!r} is not a known revision; known: {', '.join(REVISIONS)}")
    name = f"{PACKAGES[revision]}.json"
    # ``mcpbind.__path__`` holds the generated folder first in a checkout, this package's own in a wheel.
    for base in mcpbind.__path__:
        path = os.path.join(base, DIGEST_DIR, name)
        try:
            with open(path, "rb") as f:
                return load(f.read(), source=path)
        except FileNotFoundError:
            continue
        except DigestError as exc:
            raise DigestError(f"{path}: {exc}") from None
        except OSError as exc:
            raise DigestError(f"cannot read {path}: {exc.strerror}") from None
    raise DigestError(
        f"no digest of revision {revision} ({DIGEST_DIR}/{name}); run `make generate`"
    )
