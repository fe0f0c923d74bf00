"""Nothing a schema says becomes code: names, descriptions and constants are data."""

import importlib
import json
import sys
from pathlib import Path

import msgspec
import pytest

import mcpbind
from codegen.emit import revision_files
from codegen.model import build_from_schema

FIXTURE = Path(__file__).parent / "fixtures" / "hostile_schema.json"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, monkeypatch_module):
    root = tmp_path_factory.mktemp("hostile")
    monkeypatch_module.chdir(root)
    package = root / "hostile_bindings"
    package.mkdir()
    rev = build_from_schema("hostile", json.loads(FIXTURE.read_text(encoding="utf-8")))
    for name, text in revision_files(rev).items():
        (package / name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("hostile_bindings"), root
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith("hostile_bindings")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_definitions_named_like_python_keywords_and_builtins_are_reachable(hostile):
    module, _ = hostile
    for name in ["class", "list", "None", "Annotated", "Struct", "import", "lambda", "print"]:
        assert getattr(module, name) is not None
    assert isinstance(getattr(module, "class"), type)
    assert issubclass(getattr(module, "class"), msgspec.Struct)


def test_descriptions_stay_docstrings_and_run_nothing(hostile):
    module, root = hostile
    cls = getattr(module, "class")
    assert '""" ; import os' in cls.__doc__
    assert not (root / "PWNED").exists()


def test_awkward_property_names_round_trip_with_exact_wire_keys(hostile):
    module, _ = hostile
    cls = getattr(module, "class")
    wire = {
        "a/b": "x",
        "x.y": 3,
        "kebab-case": True,
        "1st": 1.5,
        "naïve": "n",
        "名前": "name",
        "class": "c",
        "str": "s",
        "self": "me",
        "_meta": {"k": 1},
        "meta": "m",
        "nested": {"def": 'b"""c'},
    }
    obj = mcpbind.decode(json.dumps(wire).encode(), cls)
    assert json.loads(msgspec.json.encode(obj)) == wire
    attributes = {f.name for f in msgspec.structs.fields(cls)}
    # Namespaced keys keep their last segment; names taken by Python or by a class get a `_`.
    assert attributes == {
        "b",
        "x_y",
        "kebab_case",
        "f_1st",
        "na_uef_ve",
        "u540d_u524d",
        "class__",
        "str_",
        "self",
        "meta_",
        "meta",
        "nested",
    }
    with pytest.raises(msgspec.ValidationError, match=r"\$\.x\.y|x\.y"):
        mcpbind.decode(json.dumps({**wire, "x.y": 11}).encode(), cls)


def test_unions_over_hostile_names_decode_to_their_members(hostile):
    module, _ = hostile
    items = mcpbind.decode(b'[{"text": "t"}, {"blob": "b"}]', module.list)
    assert [type(i).__name__ for i in items] == ["Annotated_", "Struct_"]
    tagged = mcpbind.decode(b'{"kind": "print", "exec": "e"}', getattr(module, "import"))
    assert type(tagged) is module.print
    assert json.loads(msgspec.json.encode(tagged)) == {"kind": "print", "exec": "e"}
    quoted = mcpbind.decode(
        json.dumps({"kind": "lambda'\"", "value": 1}).encode(), getattr(module, "import")
    )
    assert type(quoted) is getattr(module, "lambda")


def test_definitions_named_like_the_package_s_own_attributes_stay_reachable_by_schema_name(hostile):
    """`types`, `methods`, `METHODS`, `DEFINITIONS`, `__init__` keep the package working, and
    DEFINITIONS gives every definition under its schema name (docs/design.md, "Names")."""
    module, _ = hostile
    import types as pytypes

    assert isinstance(module.types, pytypes.ModuleType) and isinstance(
        module.methods, pytypes.ModuleType
    )
    assert dict(module.METHODS) == {}
    definitions = module.DEFINITIONS
    for name in [
        "types",
        "methods",
        "METHODS",
        "DEFINITIONS",
        "__init__",
        "Any",
        "register",
        "a/b~c",
        "class",
    ]:
        assert name in definitions
    assert issubclass(definitions["types"], msgspec.Struct)
    assert definitions["__init__"].__name__ == "T__init__"
    assert module.Any is definitions["Any"] and module.register is definitions["register"]
    assert getattr(module, "class") is definitions["class"]
    assert set(module.__all__) >= {"Any", "register", "class", "a/b~c"}
    assert not set(module.__all__) & {"types", "methods", "__init__"}
    decoded = mcpbind.decode(b'[{"t": "x"}]', definitions["methods"])
    assert type(decoded[0]) is definitions["types"]


def test_a_json_pointer_with_escapes_reaches_its_definition(hostile):
    module, _ = hostile
    value = mcpbind.decode(b'{"slash": "s"}', module.escaped)
    assert type(value) is module.DEFINITIONS["a/b~c"]
    value = mcpbind.decode(b'{"init": "i"}', module.escaped)
    assert type(value) is module.DEFINITIONS["__init__"]
