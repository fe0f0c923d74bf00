"""Diff: the protocol changes between two revisions, computed on the IR that drives the bindings."""

import json

import pytest
from click.testing import CliRunner

from codegen.diff import KINDS, compare, diff
from codegen.diff_render import markdown, to_json
from codegen.model import build_from_schema
from codegen.pin import pins
from mcpbind.cli import main

REVISIONS = [p.revision for p in pins()]
PAIRS = list(zip(REVISIONS, REVISIONS[1:], strict=False))


def schema(defs, dialect="definitions"):
    return {dialect: defs}


def obj(props, required=(), **extra):
    return {"type": "object", "properties": props, "required": list(required), **extra}


def request(method, params_ref=None):
    props = {"method": {"const": method}, "jsonrpc": {"const": "2.0"}, "id": {"type": "integer"}}
    if params_ref:
        props["params"] = {"$ref": f"#/definitions/{params_ref}"}
    return obj(props, ["method", "jsonrpc", "id"])


BASE = {
    "ClientRequest": {
        "anyOf": [{"$ref": "#/definitions/PingRequest"}, {"$ref": "#/definitions/GoneRequest"}]
    },
    "ServerResult": {
        "anyOf": [{"$ref": "#/definitions/PingResult"}, {"$ref": "#/definitions/GoneResult"}]
    },
    "PingRequest": request("ping"),
    "PingResult": obj({"ok": {"type": "boolean"}}),
    "GoneRequest": request("gone"),
    "GoneResult": obj({"x": {"type": "string"}}),
    "ClientCapabilities": obj(
        {"sampling": obj({"context": {"type": "object"}}), "roots": {"type": "object"}}
    ),
    "Level": {"enum": ["debug", "info", "warning"]},
    "Content": {"anyOf": [{"$ref": "#/definitions/Text"}, {"$ref": "#/definitions/Image"}]},
    "Text": obj({"type": {"const": "text"}, "text": {"type": "string"}}, ["type", "text"]),
    "Image": obj({"type": {"const": "image"}, "data": {"type": "string"}}, ["type", "data"]),
    "Message": obj(
        {
            "dropped": {"type": "string"},
            "optional_now_required": {"type": "string"},
            "required_now_optional": {"type": "string"},
            "narrowed": {"type": ["string", "integer"]},
            "widened": {"type": "integer"},
            "swapped": {"type": "string"},
            "mode": {"enum": ["a", "b"]},
            "content": {"type": "array", "items": {"$ref": "#/definitions/Content"}},
        },
        ["required_now_optional"],
    ),
    "OldThing": obj(
        {"alpha": {"type": "string"}, "beta": {"type": "integer"}, "gamma": {"type": "boolean"}}
    ),
    "Setup": obj({"version": {"type": "string"}}, ["version"]),
    "BadError": obj({"code": {"const": -32001}, "message": {"type": "string"}}),
    "Closed": obj({"a": {"type": "string"}}),
    "GoneError": obj({"code": {"const": -32002}, "message": {"type": "string"}}),
    "Holder": obj({"inner": obj({"x": {"type": "string"}})}),
    "Id": {"type": "string"},
}
NEW = {
    **{
        k: v
        for k, v in BASE.items()
        if k not in ("GoneRequest", "GoneResult", "OldThing", "Setup", "BadError", "GoneError")
    },
    "ClientRequest": {"anyOf": [{"$ref": "#/$defs/PingRequest"}, {"$ref": "#/$defs/NewRequest"}]},
    "ServerResult": {"anyOf": [{"$ref": "#/$defs/PingResult"}, {"$ref": "#/$defs/NewResult"}]},
    "NewRequest": request("new"),
    "NewResult": obj({"y": {"type": "string"}}),
    "ClientCapabilities": obj(
        {
            "sampling": obj({"context": {"type": "object"}, "tools": {"type": "object"}}),
            "extensions": {
                "type": "object",
                "additionalProperties": {"type": "object"},
                "description": 'e.g. "io.modelcontextprotocol/roots"',
            },
        }
    ),
    "Level": {"enum": ["debug", "info", "error"]},
    "Content": {"anyOf": [{"$ref": "#/$defs/Text"}, {"$ref": "#/$defs/Audio"}]},
    "Audio": obj({"type": {"const": "audio"}, "data": {"type": "string"}}, ["type", "data"]),
    "Message": obj(
        {
            "optional_now_required": {"type": "string"},
            "required_now_optional": {"type": "string"},
            "narrowed": {"type": "string"},
            "widened": {"type": "number"},
            "swapped": {"type": "boolean"},
            "mode": {"enum": ["a", "c"]},
            "content": {"type": "array", "items": {"$ref": "#/$defs/Content"}},
            "added_optional": {"type": "string"},
            "added_required": {"type": "string"},
        },
        ["optional_now_required", "added_required"],
    ),
    "NewThing": obj(
        {
            "alpha": {"type": "string"},
            "beta": {"type": "integer"},
            "gamma": {"type": "boolean"},
            "d": {},
        }
    ),
    "Meta": obj({"io.example/version": {"type": "string"}}),
    "BadError": obj({"code": {"const": -32021}, "message": {"type": "string"}}),
    "FreshError": obj({"code": {"const": -32022}, "message": {"type": "string"}}),
    "Closed": obj({"a": {"type": "string"}}, additionalProperties=False),
    "Holder": obj({"inner": {"$ref": "#/definitions/HolderInner"}}),
    "HolderInner": obj({"x": {"type": "string"}}),
    "Id": {"type": ["string", "integer"]},
}


@pytest.fixture(scope="module")
def synthetic():
    a = build_from_schema("A", schema(BASE))
    b = build_from_schema(
        "B", schema(json.loads(json.dumps(NEW).replace("#/definitions/", "#/$defs/")), "$defs")
    )
    return compare(a, b)


def one(d, kind, path):
    found = d.find(kind, path)
    assert found is not None, f"no {kind} at {path}: {[(c.kind, c.path) for c in d.changes]}"
    return found


# -- every kind, every breaking classification ---------------------------------------------------


def test_the_synthetic_pair_exercises_every_kind(synthetic):
    assert {c.kind for c in synthetic.changes} >= set(KINDS) - {
        "method_direction_changed",
        "method_result_changed",
        "method_capability_changed",
    }


def test_a_removed_field_breaks_receivers_that_read_it(synthetic):
    c = one(synthetic, "field_removed", "Message.dropped")
    assert (c.before, c.after, c.breaking) == ("string (optional)", None, "receivers")


def test_a_newly_required_field_breaks_senders_that_omit_it(synthetic):
    assert (
        one(synthetic, "field_required_changed", "Message.optional_now_required").breaking
        == "senders"
    )
    assert one(synthetic, "field_added", "Message.added_required").breaking == "senders"
    assert one(synthetic, "field_added", "Message.added_optional").breaking is None


def test_a_field_no_longer_required_breaks_receivers_that_relied_on_it(synthetic):
    c = one(synthetic, "field_required_changed", "Message.required_now_optional")
    assert (c.before, c.after, c.breaking) == ("required", "optional", "receivers")


def test_a_narrowed_type_breaks_senders_a_widened_one_receivers_an_unrelated_one_both(synthetic):
    narrowed = one(synthetic, "field_type_changed", "Message.narrowed")
    assert (narrowed.before, narrowed.after, narrowed.breaking) == (
        "string | integer",
        "string",
        "senders",
    )
    assert one(synthetic, "field_type_changed", "Message.widened").breaking == "receivers"
    assert one(synthetic, "field_type_changed", "Message.swapped").breaking == "both"


def test_types_render_readably(synthetic):
    c = one(synthetic, "field_added", "Message.added_required")
    assert c.after == "string"
    assert one(synthetic, "type_added", "Audio").after == "object {type, data}"


def test_enum_values_removed_break_senders_and_added_ones_receivers(synthetic):
    assert one(synthetic, "enum_value_removed", "Level").before == '"warning"'
    assert one(synthetic, "enum_value_removed", "Level").breaking == "senders"
    assert one(synthetic, "enum_value_added", "Level").after == '"error"'
    assert one(synthetic, "enum_value_added", "Message.mode").breaking == "receivers"
    assert one(synthetic, "enum_value_removed", "Message.mode").before == '"b"'


def test_union_members_and_types(synthetic):
    assert one(synthetic, "union_member_added", "Content").after == "Audio"
    assert one(synthetic, "union_member_removed", "Content").breaking == "senders"
    assert one(synthetic, "type_removed", "GoneResult").breaking == "both"
    assert one(synthetic, "type_added", "NewResult").breaking is None
    assert one(synthetic, "extra_keys_changed", "Closed").breaking == "senders"


def test_a_removed_and_an_added_type_sharing_most_fields_is_a_rename_candidate(synthetic):
    c = one(synthetic, "type_renamed", "NewThing")
    assert c.before == "OldThing" and "3 of 4" in c.note
    assert synthetic.find("type_removed", "OldThing") is None
    assert one(synthetic, "field_added", "NewThing.d").breaking is None


def test_methods_added_and_removed_with_their_direction(synthetic):
    gone = one(synthetic, "method_removed", "gone")
    assert (gone.side, gone.breaking) == ("client", "both")
    assert "client → server" in gone.before and "result GoneResult" in gone.before
    assert one(synthetic, "method_added", "new").breaking is None


def test_capabilities_as_dotted_paths(synthetic):
    tools = one(synthetic, "capability_added", "sampling.tools")
    assert (tools.side, tools.breaking) == ("client", None)
    assert one(synthetic, "capability_removed", "roots").breaking == "both"
    # The capability section owns these; they are not repeated as field noise.
    assert synthetic.find("field_added", "ClientCapabilitiesSampling.tools") is None


def test_error_codes_added_removed_and_renumbered(synthetic):
    c = one(synthetic, "error_code_changed", "BadError")
    assert (c.before, c.after, c.breaking) == ("-32001", "-32021", "both")
    assert one(synthetic, "error_code_added", "FreshError").after == "-32022"
    assert one(synthetic, "error_code_removed", "GoneError").breaking == "receivers"


def test_an_inline_object_that_became_a_named_definition_and_a_widened_alias(synthetic):
    assert one(synthetic, "type_extracted", "HolderInner").breaking is None
    c = one(synthetic, "type_changed", "Id")
    assert (c.before, c.after, c.breaking) == ("string", "string | integer", "receivers")


def test_what_moved_rather_than_vanished(synthetic):
    into_meta = one(synthetic, "moved", "Setup.version")
    assert into_meta.after == 'Meta["io.example/version"]'
    into_ext = one(synthetic, "moved", "client: roots")
    assert into_ext.after == 'ClientCapabilities.extensions["io.modelcontextprotocol/roots"]'


def test_dialect_change_is_reported(synthetic):
    assert one(synthetic, "dialect_changed", "$schema").after == "2020-12"


def test_method_level_changes_direction_result_capability():
    def rev(name, sender_union, result_ref, cap):
        from codegen.overlay import Overlay

        defs = {
            sender_union: {"anyOf": [{"$ref": "#/definitions/DoRequest"}]},
            "DoRequest": request("do"),
            "ServerResult" if sender_union == "ClientRequest" else "ClientResult": {
                "anyOf": [{"$ref": f"#/definitions/{result_ref}"}]
            },
            "DoResult": obj({"a": {"type": "string"}}),
            "WideResult": obj({"a": {"type": "string"}}),
        }
        ov = Overlay(
            (), frozenset(), (), {"do": result_ref}, {"do": ("server", cap)} if cap else {}
        )
        return build_from_schema(name, schema(defs), ov)

    d = compare(
        rev("A", "ClientRequest", "DoResult", None),
        rev("B", "ServerRequest", "WideResult", "tools"),
    )
    assert one(d, "method_direction_changed", "do").breaking == "both"
    assert one(d, "method_result_changed", "do").after == "WideResult"
    assert one(d, "method_capability_changed", "do").after == "server: tools"


# -- the real revisions: every schema-visible changelog item -------------------------------------


@pytest.fixture(scope="module")
def real():
    return {pair: diff(*pair) for pair in PAIRS}


def test_2025_03_26_batching_annotations_audio_progress_message_completions(real):
    d = real[("2024-11-05", "2025-03-26")]
    assert {
        "JSONRPCBatchRequest",
        "JSONRPCBatchResponse",
        "AudioContent",
        "ToolAnnotations",
    } <= d.paths("type_added")
    assert {"Tool.annotations", "ProgressNotificationParams.message"} <= d.paths("field_added")
    assert one(d, "capability_added", "completions").side == "server"
    assert one(d, "method_capability_changed", "completion/complete").after == "server: completions"


def test_2025_06_18_no_batching_structured_output_elicitation_links_meta_context_title(real):
    d = real[("2025-03-26", "2025-06-18")]
    assert {"JSONRPCBatchRequest", "JSONRPCBatchResponse"} <= d.paths("type_removed")
    assert {"Tool.outputSchema", "CallToolResult.structuredContent"} <= d.paths("field_added")
    assert one(d, "method_added", "elicitation/create").side == "server"
    assert one(d, "capability_added", "elicitation").side == "client"
    assert "ResourceLink" in d.paths("type_added")
    assert "CompleteRequestParams.context" in d.paths("field_added")
    assert {"Tool.title", "Prompt.title", "Resource.title", "Implementation.title"} <= d.paths(
        "field_added"
    )
    assert {"Tool._meta", "Resource._meta", "TextContent._meta"} <= d.paths("field_added")
    assert one(d, "type_renamed", "ResourceTemplateReference").before == "ResourceReference"


def test_2025_11_25_icons_url_elicitation_sampling_tools_tasks_enums_dialect(real):
    d = real[("2025-06-18", "2025-11-25")]
    assert {
        "Icon",
        "Task",
        "ToolUseContent",
        "ToolResultContent",
        "TitledSingleSelectEnumSchema",
    } <= d.paths("type_added")
    assert {"Tool.icons", "Resource.icons", "Prompt.icons", "ResourceTemplate.icons"} <= d.paths(
        "field_added"
    )
    assert {"CreateMessageRequestParams.tools", "CreateMessageRequestParams.toolChoice"} <= d.paths(
        "field_added"
    )
    assert {
        "Implementation.description",
        "StringSchema.default",
        "NumberSchema.default",
    } <= d.paths("field_added")
    assert {
        ("client", "sampling.tools"),
        ("client", "elicitation.url"),
        ("server", "tasks.list"),
    } <= {(c.side, c.path) for c in d.of_kind("capability_added")}
    assert {
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "notifications/elicitation/complete",
    } <= d.paths("method_added")
    assert one(d, "error_code_added", "URLElicitationRequiredError").after == "-32042"
    assert one(d, "dialect_changed", "$schema").before == "draft-07"
    assert "CallToolRequestParams" in d.paths(
        "type_extracted"
    )  # request params decoupled (SEP-1319)
    assert "EnumSchema" in d.paths("type_changed")


def test_2026_07_28_stateless_discover_subscriptions_mrtr_result_type_extensions(real):
    d = real[("2025-11-25", "2026-07-28")]
    removed = {
        "initialize",
        "notifications/initialized",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
        "notifications/roots/list_changed",
        "notifications/elicitation/complete",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "roots/list",
        "sampling/createMessage",
        "elicitation/create",
    }
    assert removed <= d.paths("method_removed")
    assert all(c.breaking == "both" for c in d.of_kind("method_removed"))
    assert {"server/discover", "subscriptions/listen"} <= d.paths("method_added")
    result_type = one(d, "field_added", "CallToolResult.resultType")
    assert (result_type.after, result_type.breaking) == ("string", "senders")
    assert {
        "ListToolsResult.ttlMs",
        "ListToolsResult.cacheScope",
        "ReadResourceResult.ttlMs",
    } <= d.paths("field_added")
    assert {
        "InputRequiredResult",
        "UnsupportedProtocolVersionError",
        "HeaderMismatchError",
    } <= d.paths("type_added")
    assert (
        one(d, "method_result_changed", "tools/call").after
        == "InputRequiredResult | CallToolResult"
    )
    assert {(c.side, c.path) for c in d.of_kind("capability_added")} >= {
        ("client", "extensions"),
        ("server", "extensions"),
    }
    assert ("server", "tasks") in {(c.side, c.path) for c in d.of_kind("capability_removed")}
    assert (
        one(d, "moved", "server: tasks").after
        == 'ServerCapabilities.extensions["io.modelcontextprotocol/tasks"]'
    )
    assert one(d, "moved", "InitializeRequestParams.protocolVersion").after == (
        'RequestMetaObject["io.modelcontextprotocol/protocolVersion"]'
    )
    assert (
        one(d, "moved", "SetLevelRequestParams.level").after
        == 'RequestMetaObject["io.modelcontextprotocol/logLevel"]'
    )
    assert "ElicitRequestURLParams.elicitationId" in d.paths("field_removed")
    codes = {c.path: c.after for c in d.of_kind("error_code_added")}
    assert codes["HeaderMismatchError"] == "-32020"
    assert codes["MissingRequiredClientCapabilityError"] == "-32021"
    assert codes["UnsupportedProtocolVersionError"] == "-32022"
    assert one(d, "method_direction_changed", "notifications/progress").after == "server → client"


def test_draft_is_the_same_file_as_2026_07_28(real):
    assert real[("2026-07-28", "draft")].changes == ()


def test_overlay_fixes_are_shown_as_notes_not_hidden(real):
    d = real[("2025-11-25", "2026-07-28")]
    elicit = "/$defs/ElicitResult/properties/content/additionalProperties/anyOf/1/type"
    assert [n.pointer for n in d.notes] == [elicit, "/$defs/JSONValue/anyOf/2/type"]
    assert "Notes: overlay fixes in force" in markdown(d)
    assert "/$defs/JSONValue/anyOf/2/type" in markdown(d) and elicit in markdown(d)
    # Both sides carry the same fix, so it is no change: ElicitResult.content stays out.
    assert "ElicitResult.content" not in {c.path for c in d.changes}


@pytest.mark.parametrize("a", REVISIONS)
@pytest.mark.parametrize("b", REVISIONS)
def test_any_pair_diffs_both_ways_as_mirror_images(a, b):
    """Every pair diffs (its speed is a `make bench` figure, not a test); what one direction
    adds the other removes."""
    forward, backward = diff(a, b), diff(b, a)
    for added, removed in (("method_added", "method_removed"), ("field_added", "field_removed")):
        assert sorted(c.path for c in forward.of_kind(added)) == sorted(
            c.path for c in backward.of_kind(removed)
        )


def test_a_revision_diffed_with_itself_is_empty():
    assert diff("2025-06-18", "2025-06-18").changes == ()


# -- formats and the command line --------------------------------------------------------------


def test_markdown_leads_with_summary_counts_then_sections_in_a_stable_order(real):
    d = real[("2025-11-25", "2026-07-28")]
    text = markdown(d)
    heads = [line for line in text.splitlines() if line.startswith("## ")]
    assert heads[0] == "## Summary"
    assert heads[1:5] == ["## Methods", "## Capabilities", "## Error codes", "## Moved"]
    assert "| `method_removed` | " in text
    assert markdown(diff("2025-11-25", "2026-07-28")) == text


def test_json_has_the_documented_shape(real):
    d = real[("2024-11-05", "2025-03-26")]
    data = json.loads(to_json(d))
    assert list(data) == ["format", "from", "to", "summary", "changes", "notes"]
    assert data["format"] == "mcpbind.diff/1"
    assert data["from"]["revision"] == "2024-11-05" and len(data["to"]["sha256"]) == 64
    assert data["summary"]["total"] == len(data["changes"])
    assert set(data["summary"]["breaking"]) == {"senders", "receivers", "both"}
    for change in data["changes"]:
        assert list(change) == [
            "kind",
            "section",
            "path",
            "side",
            "before",
            "after",
            "breaking",
            "note",
        ]
        assert change["kind"] in KINDS
        assert change["breaking"] in (None, "senders", "receivers", "both")


def test_cli_diff_prints_markdown_or_json_and_exits_0():
    runner = CliRunner()
    md = runner.invoke(main, ["diff", "2025-11-25", "2026-07-28"])
    assert md.exit_code == 0, md.output
    assert "server/discover" in md.output
    js = runner.invoke(main, ["diff", "2025-11-25", "2026-07-28", "--format", "json"])
    assert js.exit_code == 0
    assert json.loads(js.output)["to"]["revision"] == "2026-07-28"


def test_cli_diff_rejects_an_unknown_revision_naming_the_pinned_ones():
    result = CliRunner().invoke(main, ["diff", "1999-01-01", "draft"])
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "'1999-01-01' is not a known revision" in result.output and "2026-07-28" in result.output


def test_generate_writes_one_change_document_per_consecutive_pair():
    from codegen import write as writer
    from codegen.paths import CHANGES_DIR

    files = writer.change_files({r: __import__("codegen.model").model.build(r) for r in REVISIONS})
    assert sorted(p.name for p in files) == sorted(f"{a}__{b}.md" for a, b in PAIRS)
    assert all(p.parent == CHANGES_DIR for p in files)


def test_a_move_carries_the_same_value_the_same_way():
    """A removed field matches a namespaced ``_meta`` key by name and type; it moved only when
    the new holder travels as the old one did (same sender, request vs result)."""
    from codegen.overlay import Overlay

    def rev(name, defs):
        defs = {
            "ClientRequest": {"anyOf": [{"$ref": "#/definitions/DoRequest"}]},
            "ServerResult": {"anyOf": [{"$ref": "#/definitions/DoResult"}]},
            **defs,
        }
        return build_from_schema(
            name, schema(defs), Overlay((), frozenset(), (), {"do": "DoResult"}, {})
        )

    params = {
        "type": "object",
        "properties": {"version": {"type": "string"}},
        "required": ["version"],
    }
    meta = obj({"io.example/version": {"type": "string"}})
    a = rev(
        "A",
        {
            "DoRequest": obj(
                {**request("do")["properties"], "params": params}, ["method", "jsonrpc", "id"]
            ),
            "DoResult": obj({"version": {"type": "string"}}, ["version"]),
        },
    )
    b = rev(
        "B",
        {
            "DoRequest": obj(
                {
                    **request("do")["properties"],
                    "params": obj({"_meta": {"$ref": "#/definitions/DoMeta"}}),
                },
                ["method", "jsonrpc", "id"],
            ),
            "DoMeta": meta,
            "DoResult": obj({"other": {"type": "string"}}),
        },
    )
    d = compare(a, b)
    assert one(d, "moved", "DoRequestParams.version").after == 'DoMeta["io.example/version"]'
    assert d.find("moved", "DoResult.version") is None  # the server's value is not the client's
    assert one(d, "field_removed", "DoResult.version").breaking == "receivers"


def test_2026_07_28_adds_no_standard_json_rpc_code_and_moves_only_what_travels_the_same_way(real):
    d = real[("2025-11-25", "2026-07-28")]
    added = {c.path: c.after for c in d.of_kind("error_code_added")}
    assert added == {
        "HeaderMismatchError": "-32020",
        "MissingRequiredClientCapabilityError": "-32021",
        "UnsupportedProtocolVersionError": "-32022",
    }
    # The definitions for the JSON-RPC codes every revision used are new types, not new codes.
    assert {
        "ParseError",
        "InvalidRequestError",
        "MethodNotFoundError",
        "InvalidParamsError",
        "InternalError",
    } <= d.paths("type_added")
    assert d.find("moved", "InitializeResult.protocolVersion") is None
    assert (
        one(d, "moved", "InitializeResult.serverInfo").after
        == 'ResultMetaObject["io.modelcontextprotocol/serverInfo"]'
    )


def test_cli_diff_lists_no_standard_json_rpc_code_as_added():
    out = CliRunner().invoke(main, ["diff", "2025-11-25", "2026-07-28", "--format", "json"]).output
    added = [c["after"] for c in json.loads(out)["changes"] if c["kind"] == "error_code_added"]
    assert added and not {"-32700", "-32600", "-32601", "-32602", "-32603"} & set(added)


def test_the_figures_docs_diff_md_quotes_are_the_tools():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "diff.md").read_text()
    example = json.loads(
        re.sub(r',\s*"\.\.\.": 0', "", text.split("```json\n", 1)[1].split("```", 1)[0])
        .replace('"268a..."', '""')
        .replace('"ef70..."', '""')
        .replace('"[...]"', '""')
    )
    d = diff(example["from"]["revision"], example["to"]["revision"])
    summary = d.summary()
    assert example["summary"]["total"] == summary["total"]
    assert example["summary"]["breaking"] == summary["breaking"]
    for kind, count in example["summary"]["by_kind"].items():
        assert summary["by_kind"][kind] == count, kind
