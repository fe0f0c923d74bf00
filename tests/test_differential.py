"""Differential property tests: mcpbind against the ``jsonschema`` reference validator.

For every definition of every revision, instances generated with hypothesis-jsonschema must
decode and re-encode to equal JSON, and mutations of them (wrong type, missing key, number out
of range, bad enum/const string, undeclared key) must be rejected by mcpbind, with
``msgspec.ValidationError`` and nothing else, exactly when the reference validator (Draft 7
for ``definitions`` revisions, 2020-12 for ``$defs``) rejects them. The deliberate
disagreements are in tests/disagreements.py and nowhere else.

Default run: a few derandomized examples per definition. ``MCPBIND_DEEP=1 pytest -m deep``
(``make test-deep``) runs the deep variant: random, many more examples and mutations.
"""

from __future__ import annotations

import json
import random
from typing import Any

import disagreements as D
import msgspec
import pytest
from _schema_strategies import (
    DEEP,
    EXTRA_KEY,
    REVISIONS,
    Mutation,
    all_definitions,
    binding,
    candidate_mutations,
    decode,
    definition_names,
    generation_schema,
    hyp_settings,
    instances,
    is_integral_float,
    json_equal,
    recursive_definitions,
    reference,
    reference_accepts,
    roundtrip,
)
from hypothesis import given
from hypothesis import strategies as st

import mcpbind
from codegen.ir import ObjectDef
from codegen.model import build


def _params(pairs: list[tuple[str, Any]], name_of: Any = lambda x: x) -> list[Any]:
    """pytest params, with the ``known bug`` entries of disagreements.py as strict xfails."""
    out = []
    for revision, item in pairs:
        name = name_of(item)
        bug = D.known_bug(revision, name)
        marks = [pytest.mark.xfail(strict=True, reason=f"known bug: {bug.id}")] if bug else []
        out.append(pytest.param(revision, item, id=f"{revision}:{name}", marks=marks))
    return out


DEFINITIONS = all_definitions()
DEFINITION_PARAMS = _params(DEFINITIONS)


def _ir(revision: str) -> Any:
    return _IR.setdefault(revision, build(revision))


_IR: dict[str, Any] = {}


def _tags(revision: str) -> frozenset[tuple[str, Any]]:
    return frozenset(o.tag for o in _ir(revision).objects() if o.tag is not None)


def _mcpbind_accepts(revision: str, name: str, instance: Any) -> tuple[bool, str]:
    """mcpbind's verdict; any exception other than msgspec.ValidationError fails the test."""
    try:
        decode(revision, name, instance)
    except msgspec.ValidationError as exc:
        return False, str(exc)
    return True, ""


def _pick(muts: list[Mutation], rnd: random.Random, per_kind: int) -> list[Mutation]:
    by_kind: dict[str, list[Mutation]] = {}
    for m in muts:
        by_kind.setdefault(m.kind, []).append(m)
    out: list[Mutation] = []
    for kind in sorted(by_kind):
        group = by_kind[kind]
        out += rnd.sample(group, min(per_kind, len(group)))
    return out


def check_undeclared_key(revision: str, obj: ObjectDef, instance: Any) -> None:
    """Undeclared keys: kept objects re-encode them, ignored ones drop them, forbidden reject."""
    assert isinstance(instance, dict)
    with_extra = {**instance, EXTRA_KEY: {"nested": [1, "two", None]}}
    accepted, error = _mcpbind_accepts(revision, obj.name, with_extra)
    assert accepted == reference_accepts(revision, obj.name, with_extra), error
    if obj.extra == "forbidden":
        assert not accepted
    elif obj.extra == "kept":
        assert accepted
        assert json_equal(roundtrip(revision, obj.name, with_extra), with_extra)
    else:
        assert accepted
        assert json_equal(roundtrip(revision, obj.name, with_extra), instance)


def check_instance(revision: str, name: str, instance: Any, seed: int, per_kind: int) -> None:
    """Every property for one generated instance (shared by the default and the deep run)."""
    # the generation schema only narrows: every instance is valid for the reference schema
    assert reference_accepts(revision, name, instance), f"generated invalid instance {instance!r}"
    # valid -> decodes and re-encodes to equal JSON
    again = roundtrip(revision, name, instance)
    assert json_equal(again, instance), f"round-trip changed {instance!r} into {again!r}"

    obj = _ir(revision).definitions.get(name)
    if isinstance(obj, ObjectDef):
        check_undeclared_key(revision, obj, instance)

    # mutations: mcpbind rejects exactly when the reference validator rejects
    tags = _tags(revision)
    rnd = random.Random(seed)
    for mutation in _pick(candidate_mutations(instance), rnd, per_kind):
        assert not D.INTEGRAL_FLOAT.applies(mutation.value)  # never generated: see disagreements
        mutated = mutation.apply(instance)
        expected = reference_accepts(revision, name, mutated)
        accepted, error = _mcpbind_accepts(revision, name, mutated)
        if accepted and not expected and D.TAG_OPTIONAL_DIRECT.applies(tags, mutation, instance):
            continue  # disagreements.TAG_OPTIONAL_DIRECT
        assert accepted == expected, (
            f"{revision} {name}: {mutation} of {instance!r}: reference "
            f"{'accepts' if expected else 'rejects'}, mcpbind "
            f"{'accepts' if accepted else 'rejects: ' + error}"
        )


# -- default run: every definition of every revision --------------------------------------------


@pytest.mark.parametrize(("revision", "name"), DEFINITION_PARAMS)
def test_generated_instances(revision: str, name: str) -> None:
    @hyp_settings(default=1, deep=1)
    @given(instance=instances(revision, name), seed=st.integers(0, 2**32 - 1))
    def run(instance: Any, seed: int) -> None:
        check_instance(revision, name, instance, seed, per_kind=6)

    run()


# -- deep run -------------------------------------------------------------------------------------


@pytest.mark.deep
@pytest.mark.skipif(not DEEP, reason="deep run only (MCPBIND_DEEP=1, make test-deep)")
@pytest.mark.parametrize(("revision", "name"), DEFINITION_PARAMS)
def test_generated_instances_deep(revision: str, name: str) -> None:
    @hyp_settings(default=2, deep=60)
    @given(instance=instances(revision, name), seed=st.integers(0, 2**32 - 1))
    def run(instance: Any, seed: int) -> None:
        check_instance(revision, name, instance, seed, per_kind=25)

    run()


# -- coverage and bookkeeping ---------------------------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
def test_every_definition_has_a_generated_binding(revision: str) -> None:
    """Each schema name is bound to a generated type (a known bug is listed, and must be real)."""
    module = mcpbind.bindings(revision)
    wrong = []
    for name in definition_names(revision):
        value = getattr(module, name, None)
        # a class from ``typing`` is never a binding (typing.Annotated shadowing the schema's)
        if value is None or (isinstance(value, type) and value.__module__ == "typing"):
            wrong.append(name)
    assert wrong == [n for n in definition_names(revision) if D.known_bug(revision, n)]


def test_every_definition_is_covered() -> None:
    assert len(DEFINITIONS) == sum(len(definition_names(r)) for r in REVISIONS)


def test_recursive_definitions_are_the_expected_ones() -> None:
    assert {r: sorted(recursive_definitions(r)) for r in REVISIONS if recursive_definitions(r)} == {
        "2026-07-28": ["JSONObject", "JSONValue"],
        "draft": ["JSONObject", "JSONValue"],
    }


def test_generation_schema_only_closes_ignored_objects() -> None:
    """The generation schema closes exactly the objects without ``additionalProperties``."""
    for r in REVISIONS:
        key = "$defs" if "$defs" in reference(r) else "definitions"
        ref_defs, gen_defs = reference(r)[key], generation_schema(r)[key]
        ir = _ir(r)
        for name in ref_defs:
            d = ir.definitions.get(name)
            if isinstance(d, ObjectDef) and "allOf" not in ref_defs[name]:
                closed = gen_defs[name].get("additionalProperties") is False
                assert closed == (d.extra in ("ignored", "forbidden")), (r, name, d.extra)


def test_disagreements_are_listed_once_with_reasons() -> None:
    ids = [d.id for d in D.ALL]
    assert len(ids) == len(set(ids))
    for d in D.ALL:
        assert d.kind in ("deliberate", "generation", "known bug")
        assert len(d.reason) > 40 and d.scope


# -- each deliberate disagreement is still real ---------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
def test_integral_float_disagreement(revision: str) -> None:
    resource = {"uri": "file:///a", "name": "a", "size": 1.0}  # size: integer
    assert D.INTEGRAL_FLOAT.applies(1.0) and is_integral_float(1e300)
    assert not D.INTEGRAL_FLOAT.applies(1) and not D.INTEGRAL_FLOAT.applies(1.5)
    assert reference_accepts(revision, "Resource", resource)
    with pytest.raises(msgspec.ValidationError):
        decode(revision, "Resource", resource)
    assert decode(revision, "Resource", {**resource, "size": 1}).size == 1


@pytest.mark.parametrize("revision", REVISIONS)
def test_tag_optional_only_when_decoded_directly(revision: str) -> None:
    text = {"type": "text", "text": "hi"}
    untagged = {"text": "hi"}
    assert not reference_accepts(revision, "TextContent", untagged)
    # as itself: msgspec implies the tag (the disagreement) and re-encodes it
    assert json.loads(msgspec.json.encode(decode(revision, "TextContent", untagged))) == text
    mutation = Mutation("drop_key", (), key="type")
    assert D.TAG_OPTIONAL_DIRECT.applies(_tags(revision), mutation, text)
    assert not D.TAG_OPTIONAL_DIRECT.applies(
        _tags(revision), Mutation("drop_key", (), key="text"), text
    )
    # through the union the tag is required, as the schema says
    union = "ContentBlock" if "ContentBlock" in definition_names(revision) else "PromptMessage"
    if union == "ContentBlock":
        assert isinstance(decode(revision, union, text), binding(revision, "TextContent"))
        with pytest.raises(msgspec.ValidationError):
            decode(revision, union, untagged)
    else:
        message = {"role": "user", "content": untagged}
        assert not reference_accepts(revision, union, message)
        with pytest.raises(msgspec.ValidationError):
            decode(revision, union, message)


# -- agreements that are easy to get wrong --------------------------------------------------------


@pytest.mark.parametrize("revision", REVISIONS)
def test_format_is_not_asserted(revision: str) -> None:
    resource = {"uri": "not a uri at all", "name": "r"}
    assert reference_accepts(revision, "Resource", resource)
    assert decode(revision, "Resource", resource).uri == "not a uri at all"


@pytest.mark.parametrize("revision", REVISIONS)
def test_bool_is_not_a_number(revision: str) -> None:
    for flag in (True, False):
        bad = {"uri": "file:///a", "name": "a", "size": flag}  # size: integer
        assert not reference_accepts(revision, "Resource", bad)
        with pytest.raises(msgspec.ValidationError):
            decode(revision, "Resource", bad)
