"""The facts record's reserved metadata key (``FACTS.meta_key``): read off the schema by the
generator, checked against the key the generated classes map their ``meta`` attribute to."""

from __future__ import annotations

import dataclasses

import msgspec
import pytest

import mcpbind
from codegen.facts import meta_key
from codegen.ir import Field, ObjectDef, Revision
from codegen.model import build
from codegen.overlay import OverlayError


@pytest.fixture(scope="module")
def rev() -> Revision:
    return build("2025-06-18")


def _with_object(rev: Revision, name: str, fields: tuple[Field, ...]) -> Revision:
    d = rev.definitions[name]
    assert isinstance(d, ObjectDef)
    definitions = {**rev.definitions, name: dataclasses.replace(d, fields=fields)}
    return dataclasses.replace(rev, definitions=definitions)


@pytest.mark.parametrize("revision", mcpbind.REVISIONS)
def test_the_meta_key_is_the_key_generated_classes_read_as_meta(revision: str) -> None:
    b = mcpbind.bindings(revision)
    keys = {
        f.encode_name
        for cls in b.DEFINITIONS.values()
        if isinstance(cls, type) and issubclass(cls, msgspec.Struct)
        for f in msgspec.structs.fields(cls)
        if f.name == "meta"
    }
    assert keys == {b.FACTS.meta_key} == {"_meta"}


def test_the_meta_key_is_the_one_key_the_bases_share(rev: Revision) -> None:
    assert meta_key(rev) == "_meta"


def test_a_result_without_the_shared_key_stops_generation(rev: Revision) -> None:
    result = rev.definitions["Result"]
    assert isinstance(result, ObjectDef)
    renamed = tuple(
        dataclasses.replace(f, wire="meta_") if f.wire == "_meta" else f for f in result.fields
    )
    with pytest.raises(
        OverlayError, match=r"2025-06-18: RequestParams, NotificationParams, Result share \[\]"
    ):
        meta_key(_with_object(rev, "Result", renamed))


def test_a_meta_attribute_on_another_key_stops_generation(rev: Revision) -> None:
    call = rev.definitions["CallToolRequestParams"]
    assert isinstance(call, ObjectDef)
    moved = tuple(
        dataclasses.replace(f, wire="metadata") if f.py == "meta" else f for f in call.fields
    )
    with pytest.raises(
        OverlayError,
        match="CallToolRequestParams.metadata is the attribute 'meta', but the reserved metadata key is '_meta'",
    ):
        meta_key(_with_object(rev, "CallToolRequestParams", moved))


@pytest.mark.parametrize("revision", mcpbind.REVISIONS)
def test_the_schema_dialect_is_the_one_the_revisions_own_schema_declares(revision: str) -> None:
    from codegen.pin import load_schema

    assert mcpbind.bindings(revision).FACTS.schema_dialect == load_schema(revision)["$schema"]
