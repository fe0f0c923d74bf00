"""What a handler raises and what the client gets, as docs/app.md (Errors) says: the names a new
user reaches for are importable from ``mcpbind``, and the page shows the real messages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mcpbind
from codegen.paths import REPO_ROOT
from mcpbind import App, Client

RELEASED = mcpbind.REVISIONS[: mcpbind.REVISIONS.index(mcpbind.LATEST) + 1]


def test_tool_error_resource_not_found_and_context_are_importable_from_mcpbind():
    from mcpbind import Context, ResourceNotFound, ToolError
    from mcpbind import app as app_package

    assert ToolError is app_package.ToolError and Context is app_package.Context
    assert issubclass(ResourceNotFound, mcpbind.ProtocolError)
    assert {"Context", "ResourceNotFound", "ToolError"} <= set(mcpbind.__all__)


def notes_app() -> App:
    app = App("notes")
    notes = {"today": "buy milk"}

    @app.resource("note://{name}")
    def note(name: str) -> str:
        if name not in notes:
            raise mcpbind.ResourceNotFound(f"note://{name}")
        return notes[name]

    @app.tool
    def forget(name: str) -> str:
        if name not in notes:
            raise mcpbind.ToolError(f"no note {name!r}")
        del notes[name]
        return "done"

    return app


@pytest.mark.parametrize("revision", RELEASED)
def test_a_template_raising_resource_not_found_is_answered_32002(revision: str):
    async def main() -> tuple[Any, mcpbind.ProtocolError]:
        async with Client(notes_app(), revisions=[revision]) as client:
            found = await client.read_resource("note://today")
            with pytest.raises(mcpbind.ProtocolError) as raised:
                await client.read_resource("note://someday")
            return found, raised.value

    found, error = asyncio.run(main())
    assert found.contents[0].text == "buy milk"
    assert error.code == -32002 == mcpbind.errors.RESOURCE_NOT_FOUND
    assert error.message == "Resource not found: note://someday"
    assert error.data == {"uri": "note://someday"}


def test_a_tool_raising_tool_error_gives_a_result_with_is_error():
    async def main() -> Any:
        async with Client(notes_app()) as client:
            return await client.call_tool("forget", {"name": "someday"})

    result = asyncio.run(main())
    assert result.is_error is True and result.content[0].text == "no note 'someday'"


def test_docs_app_shows_the_real_argument_error_text():
    app = App("calculator")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    async def main() -> Any:
        async with Client(app, revisions=["2025-11-25"]) as client:
            return await client.call_tool("add", {"a": "x", "b": 1})

    text = asyncio.run(main()).content[0].text
    assert text == "Invalid arguments for tool 'add': Expected `int`, got `str` - at `$.a`"
    page = (REPO_ROOT / "docs" / "app.md").read_text(encoding="utf-8")
    assert text in page
    assert "mcpbind.ResourceNotFound" in page and "mcpbind.ToolError" in page
