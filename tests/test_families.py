"""Identical inline objects (copies of one property of a base definition) are one class."""

import msgspec
import pytest

import mcpbind
from codegen.families import families
from codegen.model import build, build_from_schema
from tests._revisions import REVISIONS

META_2025_11_25 = [
    "CallToolRequestParamsMeta",
    "CancelTaskRequestParamsMeta",
    "CompleteRequestParamsMeta",
    "CreateMessageRequestParamsMeta",
    "ElicitRequestFormParamsMeta",
    "ElicitRequestURLParamsMeta",
    "GetPromptRequestParamsMeta",
    "GetTaskPayloadRequestParamsMeta",
    "GetTaskRequestParamsMeta",
    "InitializeRequestParamsMeta",
    "PaginatedRequestParamsMeta",
    "ReadResourceRequestParamsMeta",
    "ResourceRequestParamsMeta",
    "SetLevelRequestParamsMeta",
    "SubscribeRequestParamsMeta",
    "TaskAugmentedRequestParamsMeta",
    "UnsubscribeRequestParamsMeta",
]


def test_the_2025_11_25_request_meta_copies_are_one_class_under_every_name():
    M = mcpbind.bindings("2025-11-25")
    for name in META_2025_11_25:
        assert getattr(M, name) is M.RequestParamsMeta, name
        assert M.DEFINITIONS[name] is M.RequestParamsMeta
    assert M.CallToolRequestParams.__annotations__["meta"].startswith("RequestParamsMeta")


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18"])
def test_older_revisions_share_their_request_params_and_meta_classes(revision):
    M = mcpbind.bindings(revision)
    assert M.CallToolRequestParamsMeta is M.RequestParamsMeta
    assert M.JSONRPCRequestParamsMeta is M.RequestParamsMeta
    assert M.PingRequestParams is M.RequestParams
    assert M.ToolListChangedNotificationParams is M.NotificationParams
    # alike but not copies of one base's property: classes of their own
    assert M.ReadResourceRequestParams is not M.SubscribeRequestParams
    assert M.ListPromptsRequestParams is not M.ListToolsRequestParams


@pytest.mark.parametrize("revision", REVISIONS)
def test_named_objects_keep_classes_of_their_own(revision):
    M = mcpbind.bindings(revision)
    named = [o.name for o in build(revision).objects() if not o.inline]
    assert len({id(M.DEFINITIONS[n]) for n in named}) == len(named)
    if "Notification" in M.DEFINITIONS:
        assert M.Request is not M.Notification  # the same shape, two concepts


def test_a_decoded_copy_is_the_shared_class_and_round_trips():
    M = mcpbind.bindings("2025-11-25")
    raw = b'{"name": "t", "_meta": {"progressToken": 3, "x": 1}}'
    params = mcpbind.decode(raw, M.CallToolRequestParams)
    assert type(params.meta) is M.RequestParamsMeta
    assert params.meta.progress_token == 3 and params.meta["x"] == 1
    assert msgspec.json.decode(msgspec.json.encode(params)) == msgspec.json.decode(raw)


def test_a_shared_class_projects_as_its_canonical_name():
    M = mcpbind.bindings("2025-06-18")
    meta = M.CallToolRequestParamsMeta({"progressToken": "p", "k": 1})
    out = mcpbind.project(meta, to="2025-11-25")
    assert type(out) is mcpbind.bindings("2025-11-25").RequestParamsMeta
    assert dict(out) == {"progressToken": "p", "k": 1}
    params = M.CallToolRequestParams(name="t", meta=meta)
    assert mcpbind.project(params, to="2024-11-05").meta == {"progressToken": "p", "k": 1}


def _obj(*keys, ref=None):
    props = {k: {"type": "string"} for k in keys}
    if ref:
        props["m"] = {"type": "object", "properties": {"p": {"type": "integer"}}}
    return {"type": "object", "properties": props}


def test_copies_merge_only_where_a_base_declares_the_property():
    """``Base.m`` is copied into ``A`` and ``B`` (which declare more): one family named after
    the base. ``C.m`` and ``D.m`` are alike but their owners are siblings: no family. A
    description of a copy does not keep it apart; a different default does."""
    schema = {"definitions": {
        "Base": _obj(ref=True),
        "A": _obj("a", ref=True),
        "B": _obj("b", ref=True),
        "C": _obj("c", ref=True),
        "D": _obj("c", ref=True),
    }}  # fmt: skip
    schema["definitions"]["B"]["properties"]["m"]["description"] = "B's own words"
    rev = build_from_schema("families", schema)
    assert families(rev) == {"AM": "BaseM", "BM": "BaseM", "CM": "BaseM", "DM": "BaseM"}
    del schema["definitions"]["Base"]
    assert families(build_from_schema("families", schema)) == {}
    schema["definitions"]["Base"] = _obj(ref=True)
    schema["definitions"]["A"]["properties"]["m"]["properties"]["p"]["default"] = 1
    assert "AM" not in families(build_from_schema("families", schema))


def test_objects_holding_copies_merge_once_their_copies_do():
    inner = {"type": "object", "properties": {"p": {"type": "integer"}}}
    outer = {"type": "object", "properties": {"m": inner}}
    schema = {"definitions": {
        "Base": {"type": "object", "properties": {"params": outer}},
        "A": {"type": "object", "properties": {"params": outer, "id": {"type": "string"}}},
    }}  # fmt: skip
    assert families(build_from_schema("families", schema)) == {
        "AParams": "BaseParams",
        "AParamsM": "BaseParamsM",
    }
