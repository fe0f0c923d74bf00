"""Every schema definition, and every object defined inline, is a public name of its package."""

import ast
import inspect
import typing

import pytest

import mcpbind
from codegen.model import patched_schema
from tests._revisions import REVISIONS, definitions


def _pascal(key: str) -> str:
    words = [w for w in "".join(c if c.isalnum() else " " for c in key.rsplit("/", 1)[-1]).split()]
    out = ""
    for w in words:
        # camelCase keys split on their humps: inputSchema -> InputSchema
        out += w[:1].upper() + w[1:]
    return out


def _inline_names(schema: dict, name: str, raw_defs: dict) -> set[str]:
    """Names of the objects defined inside ``schema`` (parent name + field name, Item, Value)."""
    found: set[str] = set()

    def resolve(s: dict) -> dict:
        while isinstance(s, dict) and "$ref" in s:
            s = raw_defs[s["$ref"].rsplit("/", 1)[-1]]
        return s

    def merged_properties(s: dict) -> dict:
        props: dict = {}
        for part in [resolve(p) for p in s.get("allOf", [])] + [s]:
            props.update(part.get("properties", {}))
        return props

    def visit(s: object, hint: str, top: bool) -> None:
        if not isinstance(s, dict) or "$ref" in s:
            return
        for key in ("anyOf", "oneOf"):
            for member in s.get(key, []):
                visit(member, hint, False)
        props = merged_properties(s)
        if props and not top:
            found.add(hint)
        for key, value in props.items():
            visit(value, hint + _pascal(key), False)
        if isinstance(s.get("items"), dict):
            visit(s["items"], hint + "Item", False)
        if isinstance(s.get("additionalProperties"), dict):
            visit(s["additionalProperties"], hint + "Value", False)

    visit(schema, name, True)
    return found


def _defined_names(module) -> set[str]:
    """Public names bound at the top level of a generated module's source."""
    names: set[str] = set()

    def top_level(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.If):  # `if TYPE_CHECKING: ... else: ...`
                top_level(node.body)
                top_level(node.orelse)

    top_level(ast.parse(inspect.getsource(module)).body)
    return {n for n in names if not n.startswith("_")} - {"REVISION", "SHA256"}


@pytest.mark.parametrize("revision", REVISIONS)
def test_public_names_are_the_schema_definitions_and_inline_objects(revision):
    raw = definitions(patched_schema(revision))
    expected = set(raw)
    for name, schema in raw.items():
        expected |= _inline_names(schema, name, raw)
    module = mcpbind.bindings(revision)
    assert set(module.DEFINITIONS) == expected
    own = vars(module.types)
    bound = {
        n if own.get(n) is module.DEFINITIONS[n] else module.DEFINITIONS[n].__name__
        for n in expected
    }
    assert _defined_names(module.types) == {n for n in bound if not n.startswith("_")}
    assert (
        set(module.__all__) - {"DEFINITIONS", "FACTS", "METHODS", "REVISION", "SHA256"} == expected
    )
    for name in expected:
        # The schema's own type, never a helper the module uses under the same name.
        assert getattr(module, name) is not getattr(typing, name, None)
        assert getattr(module, name) is module.DEFINITIONS[name]


@pytest.mark.parametrize("revision", REVISIONS)
def test_no_numeric_suffixes_in_generated_names(revision):
    module = mcpbind.bindings(revision)
    raw = set(definitions(patched_schema(revision)))
    invented = [n for n in module.types.__all__ if n not in raw and n[-1:].isdigit()]
    assert invented == []


def test_bindings_knows_every_revision_and_rejects_others():
    assert tuple(REVISIONS) == mcpbind.REVISIONS
    assert mcpbind.LATEST == "2026-07-28"
    for revision in REVISIONS:
        assert revision == mcpbind.bindings(revision).REVISION
    assert mcpbind.bindings("2025-11-25") is mcpbind.v2025_11_25
    with pytest.raises(mcpbind.UnknownRevisionError, match="2024-11-05") as info:
        mcpbind.bindings("1999-01-01")
    assert isinstance(info.value, ValueError)


def test_revision_packages_are_attributes_of_mcpbind_without_an_import():
    import importlib

    for revision in REVISIONS:
        package = mcpbind.PACKAGES[revision] if hasattr(mcpbind, "PACKAGES") else None
        assert package is not None
        assert getattr(mcpbind, package) is importlib.import_module(f"mcpbind.{package}")
    with pytest.raises(AttributeError):
        mcpbind.v1999_01_01  # noqa: B018
