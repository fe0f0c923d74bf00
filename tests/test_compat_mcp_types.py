"""The mcp_types bridge: generated Structs <-> the official pydantic models, exact or refused."""

import json
import subprocess
import sys
from pathlib import Path

import mcp_types
import mcp_types.version
import msgspec
import pytest
from mcp_types import _v2025_11_25 as wire_2025
from mcp_types import methods as sdk_methods

import mcpbind
from mcpbind.compat.mcp_types import REVISIONS, CompatError, from_mcp_types, to_mcp_types
from tests._revisions import SCHEMAS

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = ROOT / "bench" / "sessions"
EXAMPLES = sorted(p for r in REVISIONS for p in (SCHEMAS / r / "examples").glob("*/*.json"))

# Example folders whose type the SDK's wire package does not define (checked to still be absent).
NO_WIRE_MODEL = {"SubscriptionsListenResultResponse"}


def _wire_package(revision):
    """The package the SDK's own method table validates `revision`'s requests with."""
    (package,) = {
        cls.__module__ for (_m, r), cls in sdk_methods.CLIENT_REQUESTS.items() if r == revision
    }
    return package


def _round_trips(obj, revision, public=False):
    model = to_mcp_types(obj, public=public)
    back = from_mcp_types(model, revision)
    assert type(back) is type(obj) and back == obj
    assert msgspec.to_builtins(back) == msgspec.to_builtins(obj)
    again = to_mcp_types(back, public=public)
    assert type(again) is type(model) and again == model
    return model


def test_revisions_are_those_the_sdk_models():
    assert (
        tuple(r for r in mcpbind.REVISIONS if r in mcp_types.version.KNOWN_PROTOCOL_VERSIONS)
        == REVISIONS
    )
    assert "draft" not in REVISIONS and len(REVISIONS) == 5


def test_there_are_official_examples_to_prove_it_on():
    assert len(EXAMPLES) == 129  # 2026-07-28; the older revisions publish no examples


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parts[-4]}/{p.parts[-2]}/{p.name}")
def test_official_example_round_trips_through_the_wire_model(path):
    revision, name = path.parts[-4], path.parts[-2]
    obj = mcpbind.decode(path.read_bytes(), getattr(mcpbind.bindings(revision), name))
    if type(obj) is dict:  # InputRequests / InputResponses: plain maps, no model of their own
        with pytest.raises(TypeError, match="not a type of a generated mcpbind"):
            to_mcp_types(obj)
        return
    if name in NO_WIRE_MODEL:
        with pytest.raises(CompatError) as info:
            to_mcp_types(obj)
        assert (info.value.type, info.value.revision, info.value.path) == (name, revision, "$")
        assert f"has no model named {name}" in str(info.value)
        return
    model = _round_trips(obj, revision)
    assert type(model).__module__ == _wire_package(revision)
    assert type(model).__name__ == name
    # the model holds the example's wire JSON, key for key
    assert model.model_dump(by_alias=True, exclude_unset=True, mode="json") == msgspec.to_builtins(
        obj
    )


def _session_values(revision):
    """Every request, notification, params and result of a recorded real session, decoded."""
    M = mcpbind.bindings(revision)
    pending, values = {}, []
    for line in (SESSIONS / f"{revision}.jsonl").read_text().splitlines():
        entry = json.loads(line)
        message = entry["message"]
        try:
            if "method" in message:
                spec = M.METHODS[message["method"]]
                if "id" in message:
                    pending[(entry["from"], message["id"])] = spec
                values.append(("message", mcpbind.convert(message, spec.message)))
                if spec.params is not None and "params" in message:
                    values.append(("params", mcpbind.convert(message["params"], spec.params)))
            elif "result" in message:
                other = "server" if entry["from"] == "client" else "client"
                spec = pending.pop((other, message["id"]))
                values.append(("result", mcpbind.convert(message["result"], spec.result)))
        except msgspec.ValidationError:
            # server-everything's known deviations from the older revisions (docs/design.md)
            continue
    return values


@pytest.mark.parametrize("revision", REVISIONS)
def test_recorded_session_round_trips(revision):
    values = _session_values(revision)
    assert len(values) > 30
    refused = {False: 0, True: 0}
    for kind, obj in values:
        if kind != "message":
            _round_trips(obj, revision)
            _round_trips(obj, revision, public=True)
            continue
        # From 2025-11-25 on a generated request or notification carries its JSON-RPC envelope,
        # as the SDK's wire models do; the older revisions keep it apart, as the public models
        # do. The SDK checks those older revisions against 2025-11-25 shapes, so each kind of
        # model holds one of the two, and the other is refused at the envelope's first key.
        enveloped = "jsonrpc" in msgspec.to_builtins(obj)
        _round_trips(obj, revision, public=not enveloped)
        with pytest.raises(CompatError) as info:
            to_mcp_types(obj, public=enveloped)
        assert info.value.path in ("$.id", "$.jsonrpc") and info.value.revision == revision
        refused[enveloped] += 1
    # which revisions carry the envelope: 2025-11-25 and later
    assert (refused[True] > 0) == (revision >= "2025-11-25")
    assert (refused[False] > 0) == (revision < "2025-11-25")


def test_a_model_built_in_code_converts_with_its_defaults():
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(text="hi")])
    old = from_mcp_types(result, "2024-11-05")
    assert msgspec.to_builtins(old) == {"content": [{"type": "text", "text": "hi"}]}
    # 2026-07-28 requires resultType: the model's default is written out
    new = from_mcp_types(result, "2026-07-28")
    assert msgspec.to_builtins(new) == {
        "content": [{"type": "text", "text": "hi"}],
        "isError": False,
        "resultType": "complete",
    }


def test_null_and_absent_stay_apart():
    M = mcpbind.bindings("2026-07-28")
    base = {"content": [], "resultType": "complete"}
    with_null = mcpbind.convert({**base, "structuredContent": None}, M.CallToolResult)
    absent = mcpbind.convert(base, M.CallToolResult)
    for public in (False, True):
        dumped = to_mcp_types(with_null, public=public).model_dump(
            by_alias=True, exclude_unset=True
        )
        assert dumped == {**base, "structuredContent": None}
        assert "structuredContent" not in msgspec.to_builtins(
            from_mcp_types(to_mcp_types(absent, public=public), "2026-07-28")
        )
        _round_trips(with_null, "2026-07-28", public=public)


def test_a_key_the_revision_lacks_is_refused_with_its_path():
    tool = wire_2025.Tool.model_validate(
        {"name": "echo", "title": "Echo", "inputSchema": {"type": "object"}}
    )
    assert from_mcp_types(tool, "2025-06-18").title == "Echo"
    with pytest.raises(CompatError) as info:
        from_mcp_types(tool, "2024-11-05")
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.type, error.revision, error.path) == ("Tool", "2024-11-05", "$.title")
    assert str(error) == (
        "cannot carry Tool (2024-11-05) at $.title: mcpbind 2024-11-05 Tool does not keep this key"
    )


def test_a_value_the_revision_rejects_is_refused_with_its_path():
    content = wire_2025.TextContent.model_construct(type="text", text=5)
    with pytest.raises(CompatError) as info:
        from_mcp_types(content, "2025-11-25")
    assert info.value.path == "$.text"
    assert "Expected `str`, got `int`" in info.value.reason


def test_a_value_the_model_rejects_is_refused_with_its_path():
    M = mcpbind.bindings("2026-07-28")
    result = mcpbind.convert(
        {
            "role": "assistant",
            "model": "m",
            "content": [{"type": "tool_use", "id": "1", "name": "t", "input": {}}],
            "resultType": "complete",
        },
        M.CreateMessageResult,
    )
    assert to_mcp_types(result) is not None  # the wire model has the array form
    with pytest.raises(CompatError) as info:
        to_mcp_types(
            result, public=True
        )  # the public model keeps it in CreateMessageResultWithTools
    assert info.value.path == "$.content" and "rejects it" in info.value.reason


def test_the_envelope_the_public_request_lacks_is_refused():
    M = mcpbind.bindings("2025-11-25")
    request = mcpbind.convert({"jsonrpc": "2.0", "id": 7, "method": "ping"}, M.PingRequest)
    assert _round_trips(request, "2025-11-25").id == 7
    with pytest.raises(CompatError) as info:
        to_mcp_types(request, public=True)
    assert info.value.path == "$.id" and "does not keep this key" in info.value.reason


def test_revisions_outside_the_sdk_are_refused():
    model = wire_2025.Implementation(name="x", version="1")
    with pytest.raises(CompatError, match=r"no models for this revision") as info:
        from_mcp_types(model, "draft")
    assert info.value.revision == "draft"
    with pytest.raises(CompatError):
        to_mcp_types(mcpbind.bindings("draft").Implementation(name="x", version="1"))
    with pytest.raises(mcpbind.UnknownRevisionError):
        from_mcp_types(model, "1999-01-01")


def test_wrong_kinds_of_argument_are_type_errors():
    with pytest.raises(TypeError):
        to_mcp_types({"name": "x"})
    with pytest.raises(TypeError):
        from_mcp_types({"name": "x"}, "2025-11-25")  # type: ignore[arg-type]
    with pytest.raises(CompatError, match="no type of this name"):
        from_mcp_types(
            mcp_types.CreateMessageResultWithTools(role="assistant", model="m", content=[]),
            "2025-11-25",
        )


def test_importing_mcpbind_does_not_load_the_bridge():
    code = (
        "import sys, mcpbind, mcpbind.v2025_11_25; "
        "print(sorted(m for m in sys.modules if m.startswith(('mcp_types', 'pydantic', 'mcpbind.compat'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_without_mcp_types_the_import_says_what_to_install():
    code = (
        "import sys; sys.modules['mcp_types'] = None\n"
        "try:\n    import mcpbind.compat.mcp_types\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e.__cause__, e.__suppress_context__, e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == (
        "ImportError None True mcpbind.compat.mcp_types needs the official MCP models: "
        'pip install "mcp-types==2.3.0" (or the `mcp` SDK, which depends on it)'
    )
