"""What the generator refuses to model, and how it says so: keyword, JSON pointer, revision."""

import pytest

from codegen.model import ModelError, build_from_schema
from codegen.overlay import Overlay


def _object(key):
    return {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}


UNSUPPORTED = [
    ("if", {"A": {**_object("a"), "if": {"required": ["a"]}, "then": {}}}, "#/$defs/A"),
    (
        "not",
        {"A": {"type": "object", "properties": {"a": {"not": {"type": "string"}}}}},
        "#/$defs/A/properties/a",
    ),
    ("patternProperties", {"A": {"type": "object", "patternProperties": {"^x": {}}}}, "#/$defs/A"),
    ("dependentSchemas", {"A": {**_object("a"), "dependentSchemas": {"a": {}}}}, "#/$defs/A"),
    (
        "uniqueItems",
        {
            "A": {
                "anyOf": [
                    {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    {"type": "null"},
                ]
            }
        },
        "#/$defs/A/anyOf/0",
    ),
    (
        "propertyNames",
        {"a/b": {"type": "object", "propertyNames": {"maxLength": 3}}},
        "#/$defs/a~1b",
    ),
]


@pytest.mark.parametrize(
    ("keyword", "defs", "pointer"), UNSUPPORTED, ids=[u[0] for u in UNSUPPORTED]
)
def test_a_keyword_the_generator_does_not_implement_stops_generation(keyword, defs, pointer):
    with pytest.raises(ModelError) as info:
        build_from_schema("hostile", {"$defs": defs})
    message = str(info.value)
    assert f"{pointer}: schema keyword {keyword!r} is not implemented" in message
    assert message.startswith("hostile: ") and "[[keyword]]" in message


def test_the_overlay_can_say_to_ignore_a_keyword():
    defs = {
        "A": {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "patternProperties": {"^x": {}},
        }
    }
    ov = Overlay((), frozenset(), (), {}, {}, keywords={"patternProperties": "ignore"})
    rev = build_from_schema("hostile", {"$defs": defs}, ov)
    assert [f.wire for f in rev.get("A").fields] == ["a"]


def test_a_ref_cycle_through_unions_is_a_generation_error_naming_the_cycle():
    defs = {
        "A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "string"}]},
        "B": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "integer"}]},
        "C": {"type": "array", "items": {"$ref": "#/$defs/A"}},
    }
    with pytest.raises(ModelError, match=r"hostile: \$ref cycle through unions: A -> B -> A"):
        build_from_schema("hostile", {"$defs": defs})


def test_a_ref_cycle_of_bare_aliases_is_a_generation_error():
    defs = {
        "A": {"$ref": "#/$defs/B"},
        "B": {"$ref": "#/$defs/A"},
        "U": {"anyOf": [{"$ref": "#/$defs/A"}, {"type": "null"}]},
    }
    with pytest.raises(ModelError, match=r"\$ref cycle through aliases: A -> B -> A"):
        build_from_schema("hostile", {"$defs": defs})


def test_a_recursive_union_through_a_container_is_any_json_not_an_error():
    """JSONValue: a union of every kind whose object and array members hold JSONValue again."""
    from codegen.ir import RefT
    from codegen.resolve import is_any

    defs = {
        "V": {
            "anyOf": [{"type": k} for k in ("string", "number", "boolean", "null")]
            + [{"$ref": "#/$defs/O"}, {"$ref": "#/$defs/L"}]
        },
        "O": {"type": "object", "additionalProperties": {"$ref": "#/$defs/V"}},
        "L": {"type": "array", "items": {"$ref": "#/$defs/V"}},
    }
    rev = build_from_schema("json", {"$defs": defs})
    assert is_any(rev, RefT("V"))
