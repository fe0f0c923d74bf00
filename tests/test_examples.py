"""The official examples decode to their folder's type, to the precise member, and re-encode unchanged."""

import json
from pathlib import Path

import jsonschema
import msgspec
import pytest

import mcpbind
from codegen.model import patched_schema
from tests._revisions import SCHEMAS
from tests.disagreements import EXAMPLES_WITH_UNDECLARED_KEYS

EXAMPLES = sorted(SCHEMAS.glob("*/examples/*/*.json"))


def _id(path: Path) -> str:
    return f"{path.parts[-4]}/{path.parts[-2]}/{path.name}"


def _validator(revision: str, name: str) -> jsonschema.protocols.Validator:
    schema = patched_schema(revision)
    return jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": schema["$defs"]})


def _without(value, paths):
    value = json.loads(json.dumps(value))
    for path in paths:
        *parents, last = path
        node = value
        for key in parents:
            node = node[key]
        del node[last]
    return value


def test_all_official_examples_are_found():
    assert len(EXAMPLES) == 258


@pytest.mark.parametrize("path", EXAMPLES, ids=_id)
def test_example_decodes_to_its_type_precisely_and_round_trips(path):
    revision, type_name = path.parts[-4], path.parts[-2]
    module = mcpbind.bindings(revision)
    wire = json.loads(path.read_bytes())
    obj = mcpbind.decode(path.read_bytes(), getattr(module, type_name))

    concrete = type(obj)
    if isinstance(obj, (msgspec.Struct, mcpbind.OpenObject)):
        # The decoded class is a definition of the revision, and the schema agrees it fits.
        assert getattr(module, concrete.__name__) is concrete
        assert not list(
            _validator(revision, concrete.__name__).iter_errors(
                json.loads(msgspec.json.encode(obj))
            )
        )

    dropped = EXAMPLES_WITH_UNDECLARED_KEYS.get(_id(path))
    again = json.loads(msgspec.json.encode(obj))
    if dropped is None:
        assert again == wire
    else:
        checked = obj
        for attribute in dropped.at:
            checked = getattr(checked, attribute)
        assert type(checked).__name__ == dropped.decodes_as
        assert again == _without(wire, dropped.keys)
        # and the reference validator accepts the example as it is
        assert not list(_validator(revision, type_name).iter_errors(wire))
