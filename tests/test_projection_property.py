"""Property test of projection over generated instances (random, read off the IR), for every ordered pair of revisions.

For every object type present in both revisions A and B: an instance generated from A's schema,
decoded, is projected to B. Either ``project`` raises ProjectionError (faithful or loud: the
value holds something B cannot), or

* the projection re-encodes to JSON valid against B's schema (``jsonschema`` against
  ``codegen.model.patched_schema(B)``), and
* projecting back to A gives x with the fields B lacks removed: its JSON is contained in x's
  (keys and list items alike, values equal), except for values an overlay ``[[default]]``
  fills in; every field of x that B's definition of the same type also has is still there
  (``kept``); and projecting it to B again gives the same value as before (nothing else lost).
"""

from __future__ import annotations

import json
import os
import random
from typing import Any

import msgspec
import pytest

import mcpbind
from codegen.ir import ArrayT, Lit, MapT, Prim, RefT, UnionT
from codegen.model import build
from codegen.overlay import defaults
from tests import _schema_strategies as strategies

REVISIONS = mcpbind.REVISIONS
PAIRS = [(a, b) for a in REVISIONS for b in REVISIONS if a != b]
PER_TYPE = 40 if os.environ.get("MCPBIND_DEEP") == "1" else 6
DEFAULT_KEYS = {(d.field, json.dumps(d.value)) for d in defaults()}


def common_objects(a: str, b: str) -> list[str]:
    ia, ib = build(a), build(b)
    return sorted(
        n
        for n, d in ia.definitions.items()
        if hasattr(d, "fields")
        and hasattr(ib.definitions.get(n), "fields")
        and n in strategies.definition_names(a)
        and n in strategies.definition_names(b)
    )


def contained(small: Any, big: Any) -> bool:
    """``small`` is ``big`` with some object keys removed (or overlay defaults added)."""
    if isinstance(small, dict) and isinstance(big, dict):
        for k, v in small.items():
            if k not in big:
                if (k, json.dumps(v)) in DEFAULT_KEYS:
                    continue
                return False
            if not contained(v, big[k]):
                return False
        return True
    if isinstance(small, list) and isinstance(big, list):
        return len(small) == len(big) and all(
            contained(x, y) for x, y in zip(small, big, strict=True)
        )
    return strategies.json_equal(small, big)


def kept(x: Any, z: Any, b: Any, where: str = "$") -> list[str]:
    """Paths of fields set in ``x`` that B defines for the same type but ``z`` lost."""
    lost: list[str] = []
    if isinstance(x, msgspec.Struct) and type(z) is type(x):
        bdef = b.definitions.get(type(x).__name__)
        for f in msgspec.structs.fields(x):
            v = getattr(x, f.name)
            if (
                v is msgspec.UNSET
                or bdef is None
                or not hasattr(bdef, "field")
                or bdef.field(f.encode_name) is None
            ):
                continue
            w = getattr(z, f.name)
            if w is msgspec.UNSET:
                lost.append(f"{where}.{f.encode_name}")
            else:
                lost += kept(v, w, b, f"{where}.{f.encode_name}")
    elif isinstance(x, list) and isinstance(z, list):
        for i, (v, w) in enumerate(zip(x, z, strict=False)):
            lost += kept(v, w, b, f"{where}[{i}]")
    elif isinstance(x, dict) and isinstance(z, dict):
        for k, v in x.items():
            if k in z:
                lost += kept(v, z[k], b, f"{where}.{k}")
    return lost


def to_json(obj: Any) -> Any:
    return json.loads(msgspec.json.encode(obj))


class Generator:
    """Random JSON instances of a revision's definitions, read off the IR (deterministic seed).

    Instances the reference validator rejects (a pattern or bound the generator does not
    honour) are skipped by the caller, so this can only narrow what is tested.
    """

    def __init__(self, revision: str, seed: int) -> None:
        self.rev = build(revision)
        self.rnd = random.Random(seed)

    def object(self, name: str, depth: int = 0) -> Any:
        d = self.rev.definitions[name]
        if not hasattr(d, "fields"):
            return self.value(d.type, depth)
        out = {}
        for f in d.fields:
            if f.required or (depth < 4 and self.rnd.random() < 0.6):
                out[f.wire] = self.value(f.type, depth + 1)
        if d.extra == "kept" and self.rnd.random() < 0.3:
            out["x-vendor"] = {"k": [1, "v"]}
        return out

    def value(self, t: Any, depth: int) -> Any:
        r = self.rnd
        if isinstance(t, RefT):
            return self.object(t.name, depth)
        if isinstance(t, Lit):
            return r.choice(t.values)
        if isinstance(t, Prim):
            c = t.constraints
            if t.json == "string":
                return r.choice(["a", "hello", "https://example.com/x", "2025-01-01T00:00:00Z"])
            if t.json in ("integer", "number"):
                lo = c.minimum if c.minimum is not None else -5
                hi = c.maximum if c.maximum is not None else 100
                v = r.randint(int(lo), int(hi)) if hi >= lo else int(lo)
                return v + 0.5 if t.json == "number" and r.random() < 0.3 and v + 0.5 <= hi else v
            if t.json == "boolean":
                return r.random() < 0.5
            return None
        if isinstance(t, ArrayT):
            if depth > 5:
                return []
            return [self.value(t.item, depth + 1) for _ in range(r.randint(0, 3))]
        if isinstance(t, MapT):
            if depth > 5:
                return {}
            return {f"k{i}": self.value(t.value, depth + 1) for i in range(r.randint(0, 2))}
        if isinstance(t, UnionT):
            return self.value(r.choice(t.members), depth)
        return r.choice([1, "s", None, {"a": [True]}])


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}_to_{b}" for a, b in PAIRS])
def test_projection_is_valid_in_target_and_reversible(a: str, b: str) -> None:
    outcomes = {"projected": 0, "refused": 0, "skipped": 0}
    gen = Generator(a, seed=REVISIONS.index(a) * 10 + REVISIONS.index(b))
    for name in common_objects(a, b):
        for _ in range(PER_TYPE):
            instance = gen.object(name)
            if not strategies.reference_accepts(a, name, instance):
                outcomes["skipped"] += 1
                continue
            x = strategies.decode(a, name, instance)
            try:
                y = mcpbind.project(x, b)
            except mcpbind.ProjectionError as exc:
                assert exc.source == a and exc.target == b and exc.type and exc.path.startswith("$")
                outcomes["refused"] += 1
                continue
            outcomes["projected"] += 1
            assert isinstance(y, strategies.binding(b, name))
            yj = to_json(y)
            errors = sorted(strategies.validator(b, name).iter_errors(yj), key=str)
            assert (
                not errors
            ), f"{name} {a}->{b} invalid: {errors[0].message} at {list(errors[0].path)}\n{yj}"
            try:
                z = mcpbind.project(y, a)
            except (
                mcpbind.ProjectionError
            ) as exc:  # B dropped a field A requires: loud, as it must be
                assert "requires" in exc.reason, exc
                outcomes["refused"] += 1
                continue
            zj, xj = to_json(z), to_json(x)
            assert contained(zj, xj), f"{name}: {a}->{b}->{a} gave {zj}, not contained in {xj}"
            assert kept(x, z, build(b)) == [], f"{name}: {a}->{b}->{a} lost fields {b} has"
            assert strategies.json_equal(to_json(mcpbind.project(z, b)), yj), name
    assert outcomes["projected"] > outcomes["skipped"], outcomes
