"""Every union of a schema gets its own marker, even where two sit side by side in one anyOf."""

import importlib
import json
import sys

import pytest

import mcpbind
from codegen.emit import module_view, revision_files
from codegen.ir import AliasDef, ArrayT, RefT, Site, Step, UnionT
from codegen.model import build_from_schema
from codegen.unions import all_unions

M = mcpbind.bindings("2025-03-26")


def test_a_2025_03_26_batch_response_decodes_as_a_message():
    """JSONRPCMessage has two array members (batch request, batch response) whose items are
    different unions; the second once reused the first's marker and was refused."""
    response = [
        {"jsonrpc": "2.0", "id": 0, "error": {"code": 0, "message": ""}},
        {"jsonrpc": "2.0", "id": 1, "result": {}},
    ]
    decoded = mcpbind.decode(json.dumps(response).encode(), M.JSONRPCMessage)
    assert [type(x) for x in decoded] == [M.JSONRPCError, M.JSONRPCResponse]
    request = [
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    decoded = mcpbind.decode(json.dumps(request).encode(), M.JSONRPCMessage)
    assert [type(x) for x in decoded] == [M.JSONRPCRequest, M.JSONRPCNotification]


def _object(key):
    return {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]}


def test_unions_side_by_side_in_one_anyof_get_sites_of_their_own():
    schema = {
        "definitions": {
            "A": _object("a"),
            "B": _object("b"),
            "C": _object("c"),
            "D": _object("d"),
            "U": {
                "anyOf": [
                    {
                        "type": "array",
                        "items": {
                            "anyOf": [{"$ref": "#/definitions/A"}, {"$ref": "#/definitions/B"}]
                        },
                    },
                    {"type": "string"},
                    {
                        "type": "array",
                        "items": {
                            "anyOf": [{"$ref": "#/definitions/C"}, {"$ref": "#/definitions/D"}]
                        },
                    },
                ]
            },
        }
    }
    rev = build_from_schema("sites", schema)
    sites = {
        str(u.site): {m.name for m in u.members if hasattr(m, "name")} for u in all_unions(rev)
    }
    assert sites == {"U": set(), "U|0[]": {"A", "B"}, "U|2[]": {"C", "D"}}


def test_one_array_member_keeps_its_site_unchanged():
    """Only members that would share a site are told apart (no churn elsewhere)."""
    schema = {"definitions": {"A": _object("a"), "B": _object("b"), "U": {"anyOf": [
        {"type": "array", "items": {"anyOf": [{"$ref": "#/definitions/A"}, {"$ref": "#/definitions/B"}]}},
        {"type": "string"},
    ]}}}  # fmt: skip
    assert sorted(str(u.site) for u in all_unions(build_from_schema("sites", schema))) == [
        "U",
        "U[]",
    ]


def test_two_different_unions_at_one_site_stop_generation():
    """The generator refuses what it cannot tell apart, instead of decoding one as the other."""
    schema = {"definitions": {"A": _object("a"), "B": _object("b"), "C": _object("c")}}
    rev = build_from_schema("sites", schema)
    ab = UnionT((RefT("A"), RefT("B")), Site("X"))
    ac = UnionT((RefT("A"), RefT("C")), Site("X"))
    rev.definitions["X"] = AliasDef("X", None, ArrayT(ab))
    rev.definitions["Y"] = AliasDef("Y", None, ArrayT(ac))
    with pytest.raises(ValueError, match="two different unions at X"):
        all_unions(rev)


def test_a_property_whose_name_reads_like_a_site_gets_a_site_and_a_marker_of_its_own(tmp_path):
    """Sites are structured: a property named ``a[]`` is not the items of ``a``. When sites were
    strings re-read by a regex, both were ``U.a[]`` and generation stopped."""

    def union(*names):
        return {"anyOf": [{"$ref": f"#/definitions/{n}"} for n in names]}

    schema = {"definitions": {"A": _object("a"), "B": _object("b"), "C": _object("c"), "U": {
        "type": "object",
        "properties": {"a": {"type": "array", "items": union("A", "B")}, "a[]": union("A", "C")},
    }}}  # fmt: skip
    rev = build_from_schema("sites", schema)
    assert {u.site for u in all_unions(rev)} == {
        Site("U", (Step("field", "a"), Step("item"))),
        Site("U", (Step("field", "a[]"),)),
    }
    assert [m.name for m in module_view(rev).markers] == ["_UA", "_UAItem"]
    package = tmp_path / "sites_bindings"
    package.mkdir()
    for name, text in revision_files(rev).items():
        (package / name).write_text(text, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("sites_bindings")
        value = mcpbind.decode(b'{"a": [{"b": "x"}], "a[]": {"c": "y"}}', module.U)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.startswith("sites_bindings")]:
            del sys.modules[name]
    assert type(value.a[0]) is module.B and type(value.a_) is module.C
