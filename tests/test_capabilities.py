"""Table tests: supports, missing_capabilities, negotiate."""

from __future__ import annotations

import pytest

import mcpbind
from mcpbind import UnsupportedRevision, missing_capabilities, negotiate, supports


@pytest.mark.parametrize(
    ("caps", "path", "want"),
    [
        ({"sampling": {}}, "sampling", True),
        ({"sampling": {"tools": {}}}, "sampling", True),
        ({"sampling": {"tools": {}}}, "sampling.tools", True),
        ({"sampling": {}}, "sampling.tools", False),
        ({}, "sampling", False),
        ({"sampling": None}, "sampling", False),
        ({"elicitation": {}}, "elicitation", True),
        ({"elicitation": {}}, "elicitation.form", True),
        ({"elicitation": {}}, "elicitation.url", False),
        ({"elicitation": {"url": {}}}, "elicitation.form", False),
        ({"elicitation": {"url": {}}}, "elicitation.url", True),
        ({"elicitation": {"form": {}, "url": {}}}, "elicitation.form", True),
        ({"resources": {"subscribe": True}}, "resources.subscribe", True),
        ({"resources": {"subscribe": False}}, "resources.subscribe", False),
        ({"resources": {}}, "resources.subscribe", False),
        ({"tools": {"listChanged": True}}, "tools.listChanged", True),
        ({"experimental": {"x": {}}}, "experimental.x", True),
        ({"experimental": {"x": {}}}, "experimental.y", False),
        (
            {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            "extensions.io.modelcontextprotocol/tasks",
            True,
        ),
        ({"extensions": {}}, "extensions.io.modelcontextprotocol/tasks", False),
    ],
)
def test_supports(caps: dict, path: str, want: bool) -> None:
    assert supports(caps, path) is want


def test_supports_structs() -> None:
    M = mcpbind.bindings("2025-11-25")
    caps = mcpbind.convert({"sampling": {"tools": {}}, "elicitation": {}}, M.ClientCapabilities)
    assert supports(caps, "sampling.tools")
    assert supports(caps, "elicitation.form")
    assert not supports(caps, "roots")


@pytest.mark.parametrize(
    ("required", "declared", "want"),
    [
        ({"sampling": {}}, {"sampling": {}}, None),
        ({"sampling": {}}, {"sampling": {"tools": {}}}, None),
        ({"sampling": {"tools": {}}}, {"sampling": {}}, {"sampling": {"tools": {}}}),
        ({"sampling": {"tools": {}}}, {}, {"sampling": {"tools": {}}}),
        ({"roots": {"listChanged": True}}, {"roots": {}}, {"roots": {"listChanged": True}}),
        ({"roots": {}, "sampling": {}}, {"roots": {}}, {"sampling": {}}),
        ({"elicitation": {"form": {}}}, {"elicitation": {}}, None),
        ({"elicitation": {"url": {}}}, {"elicitation": {}}, {"elicitation": {"url": {}}}),
        (
            {"elicitation": {"form": {}}},
            {"elicitation": {"url": {}}},
            {"elicitation": {"form": {}}},
        ),
        (
            {"experimental": {"a": {}, "b": {}}},
            {"experimental": {"a": {"x": 1}}},
            {"experimental": {"b": {}}},
        ),
        ({"extensions": {"io.x/y": {"v": 2}}}, {"extensions": {"io.x/y": {}}}, None),
        ({}, {}, None),
    ],
)
def test_missing_capabilities(required: dict, declared: dict, want: dict | None) -> None:
    assert missing_capabilities(required, declared) == want


def test_missing_capabilities_struct_type() -> None:
    M = mcpbind.bindings("2025-11-25")
    required = mcpbind.convert({"sampling": {"tools": {}}, "roots": {}}, M.ClientCapabilities)
    out = missing_capabilities(required, {"roots": {}})
    assert type(out) is M.ClientCapabilities
    assert mcpbind.supports(out, "sampling.tools") and not mcpbind.supports(out, "roots")


@pytest.mark.parametrize(
    ("requested", "supported", "want"),
    [
        ("2025-06-18", None, "2025-06-18"),
        ("2024-11-05", None, "2024-11-05"),
        ("1.0.0", None, "2025-11-25"),
        ("2025-03-26", ["2024-11-05", "2025-06-18"], "2025-06-18"),
        ("2025-11-25", ["2024-11-05"], "2024-11-05"),
        ("2026-07-28", ["2026-07-28"], "2026-07-28"),
        (None, ["2025-03-26"], "2025-03-26"),
    ],
)
def test_negotiate(requested: object, supported: list[str] | None, want: str) -> None:
    if supported is None:
        assert negotiate(requested) == want
    else:
        assert negotiate(requested, supported=supported) == want


@pytest.mark.parametrize(
    ("requested", "supported"),
    [("2025-11-25", ["2026-07-28"]), ("1.0.0", []), ("2026-07-28", ["2025-11-25"])],
)
def test_negotiate_unsupported(requested: str, supported: list[str]) -> None:
    with pytest.raises(UnsupportedRevision) as info:
        negotiate(requested, supported=supported, id=3)
    err = info.value
    assert err.code == -32602
    assert err.data == {"supported": supported, "requested": requested}
    assert isinstance(err, mcpbind.ProtocolError)
    assert b'"code":-32602' in err.to_json()


def test_negotiate_unknown_supported() -> None:
    with pytest.raises(ValueError):
        negotiate("2025-11-25", supported=["1999-01-01"])
