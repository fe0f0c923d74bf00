"""Table tests of the capability semantics of projection, both directions, and the loud cases."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

import mcpbind

TASKS = "io.modelcontextprotocol/tasks"


def proj(revision: str, type_name: str, value: dict[str, Any], to: str) -> Any:
    obj = mcpbind.decode(json.dumps(value), getattr(mcpbind.bindings(revision), type_name))
    return json.loads(msgspec.json.encode(mcpbind.project(obj, to)))


FULL_CLIENT = {
    "roots": {"listChanged": True},
    "sampling": {"tools": {}, "context": {}},
    "elicitation": {"form": {}, "url": {}},
    "tasks": {"requests": {"sampling": {"createMessage": {}}}},
    "experimental": {"x": {}},
}

CASES = [
    # (source, type, value, target, expected)
    (
        "2025-11-25",
        "ClientCapabilities",
        FULL_CLIENT,
        "2025-06-18",
        {
            "roots": {"listChanged": True},
            "sampling": {},
            "elicitation": {},
            "experimental": {"x": {}},
        },
    ),
    (
        "2025-11-25",
        "ClientCapabilities",
        FULL_CLIENT,
        "2024-11-05",
        {"roots": {"listChanged": True}, "sampling": {}, "experimental": {"x": {}}},
    ),
    (
        "2025-11-25",
        "ClientCapabilities",
        FULL_CLIENT,
        "2026-07-28",
        {
            "roots": {},
            "sampling": {"tools": {}, "context": {}},
            "elicitation": {"form": {}, "url": {}},
            "experimental": {"x": {}},
            "extensions": {TASKS: {"requests": {"sampling": {"createMessage": {}}}}},
        },
    ),
    (
        "2026-07-28",
        "ClientCapabilities",
        {"extensions": {TASKS: {"requests": {}}, "other/ext": {}}},
        "2025-11-25",
        {"tasks": {"requests": {}}},
    ),
    ("draft", "ClientCapabilities", {"extensions": {TASKS: {}}}, "2025-11-25", {"tasks": {}}),
    (
        "2025-06-18",
        "ClientCapabilities",
        {"elicitation": {}, "sampling": {}},
        "2025-11-25",
        {"elicitation": {"form": {}}, "sampling": {}},
    ),
    (
        "2025-06-18",
        "ClientCapabilities",
        {"elicitation": {}},
        "2026-07-28",
        {"elicitation": {"form": {}}},
    ),
    ("2025-11-25", "ClientCapabilities", {"elicitation": {}}, "2026-07-28", {"elicitation": {}}),
    ("2025-06-18", "ClientCapabilities", {"elicitation": {}}, "2025-03-26", {}),
    ("2024-11-05", "ClientCapabilities", {"sampling": {}}, "2025-11-25", {"sampling": {}}),
    (
        "2025-11-25",
        "ServerCapabilities",
        {"tools": {"listChanged": True}, "tasks": {"list": {}}},
        "2026-07-28",
        {"tools": {"listChanged": True}, "extensions": {TASKS: {"list": {}}}},
    ),
    (
        "2026-07-28",
        "ServerCapabilities",
        {"extensions": {TASKS: {"list": {}}}},
        "2025-11-25",
        {"tasks": {"list": {}}},
    ),
    ("2025-11-25", "ServerCapabilities", {"tasks": {}, "completions": {}}, "2024-11-05", {}),
    ("2025-03-26", "ServerCapabilities", {"completions": {}}, "2025-11-25", {"completions": {}}),
    (
        "2025-11-25",
        "Implementation",
        {
            "name": "n",
            "version": "1",
            "title": "T",
            "icons": [{"src": "https://x/i.png"}],
            "websiteUrl": "https://x",
            "description": "d",
        },
        "2024-11-05",
        {"name": "n", "version": "1"},
    ),
    (
        "2025-11-25",
        "Implementation",
        {"name": "n", "version": "1", "title": "T"},
        "2025-06-18",
        {"name": "n", "version": "1", "title": "T"},
    ),
    (
        "2024-11-05",
        "Implementation",
        {"name": "n", "version": "1"},
        "2026-07-28",
        {"name": "n", "version": "1"},
    ),
]


@pytest.mark.parametrize(("source", "name", "value", "target", "expected"), CASES)
def test_capability_projection(
    source: str, name: str, value: Any, target: str, expected: Any
) -> None:
    assert proj(source, name, value, target) == expected


def test_result_type_is_filled_going_up_and_checked_going_down() -> None:
    assert proj("2025-11-25", "CallToolResult", {"content": []}, "2026-07-28") == {
        "content": [],
        "resultType": "complete",
    }
    assert proj(
        "2026-07-28", "CallToolResult", {"content": [], "resultType": "complete"}, "2025-11-25"
    ) == {"content": []}
    with pytest.raises(mcpbind.ProjectionError, match="resultType"):
        proj(
            "2026-07-28",
            "CallToolResult",
            {"content": [], "resultType": "input_required"},
            "2025-11-25",
        )


def test_loud_cases_name_type_path_and_revisions() -> None:
    audio = {
        "content": [
            {"type": "text", "text": "a"},
            {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
        ]
    }
    with pytest.raises(mcpbind.ProjectionError) as err:
        proj("2025-06-18", "CallToolResult", audio, "2024-11-05")
    e = err.value
    assert (e.type, e.path, e.source, e.target) == (
        "AudioContent",
        "$.content[1]",
        "2025-06-18",
        "2024-11-05",
    )
    v = mcpbind.bindings("2026-07-28")
    with pytest.raises(mcpbind.ProjectionError, match="does not exist in 2025-11-25"):
        mcpbind.project(v.InputRequiredResult(result_type="input_required"), "2025-11-25")
    with pytest.raises(
        mcpbind.ProjectionError, match="cacheScope"
    ):  # required, and the spec gives no value
        proj("2024-11-05", "ListToolsResult", {"tools": []}, "2026-07-28")


def test_lossy_mode_drops_and_reports_paths() -> None:
    v = mcpbind.bindings("2025-06-18")
    r = v.CallToolResult(
        content=[v.TextContent(text="a"), v.AudioContent(data="AA==", mime_type="audio/wav")]
    )
    out, dropped = mcpbind.project_lossy(r, "2024-11-05")
    assert dropped == ["$.content[1]"]
    assert json.loads(msgspec.json.encode(out)) == {"content": [{"type": "text", "text": "a"}]}
