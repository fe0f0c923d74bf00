"""``mcpbind.Client`` in front of servers that misbehave: a real server process on stdio
(tests/fixtures/hostile_child.py) that sends messages its revision refuses by the thousand, that
repeats its listings' ``nextCursor``, or whose listings never end."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest

import mcpbind

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = [sys.executable, str(ROOT / "tests" / "fixtures" / "hostile_child.py")]


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, 100))


def test_messages_the_client_refuses_by_the_thousand_are_logged_once_and_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """2,000 invalid notifications before an answer: one warning, then one counting the rest
    (said when the connection ends); the call is answered (the logger had a line each)."""

    async def main() -> str:
        async with mcpbind.Client([*HOSTILE, "junk", "2000"]) as client:
            result = await client.call_tool("x")
        return str(result.content[0].text)

    with caplog.at_level(logging.WARNING, logger="mcpbind.client"):
        assert run(main()) == "ok"
    said = [r.getMessage() for r in caplog.records if "notifications/message" in r.getMessage()]
    first = (
        "from the server: Invalid params for 'notifications/message' (MCP 2025-06-18): Expected "
        "`str`, got `int` - at `$.params.level`"
    )
    assert said[0] == first
    assert len(said) == 2 and said[1].startswith(f"{first} (and 1,999 more like it in the last ")


# -- listings -------------------------------------------------------------------------------------

LISTINGS = ("list_tools", "list_prompts", "list_resources", "list_resource_templates")


@pytest.mark.parametrize("listing", LISTINGS)
def test_a_cursor_the_server_repeats_is_refused_at_once(listing: str, tmp_path: Path) -> None:
    """The server answers every page with the same ``nextCursor``: the second time it comes the
    listing is given up (it read 1,000 pages, a million items at 1,000 a page)."""
    heard = tmp_path / "stderr"

    command = ["sh", "-c", f'exec "$@" 2>>{heard}', "sh", *HOSTILE, "same-cursor"]

    async def main() -> mcpbind.ProtocolError:
        async with mcpbind.Client(command) as client:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await getattr(client, listing)()
        return caught.value

    error = run(main())
    method = {
        "list_tools": "tools/list",
        "list_prompts": "prompts/list",
        "list_resources": "resources/list",
        "list_resource_templates": "resources/templates/list",
    }[listing]
    assert error.code == -32603
    assert error.message == (
        f"the server's {method!r} listing gave the cursor 'again' a second time (after page 2): "
        "the listing is given up"
    )
    assert error.data == {"cursor": "again", "page": 2}
    assert heard.read_text().split() == ["cursor:", "None", "cursor:", "again"]  # two pages


def test_a_listing_is_bounded_by_its_items() -> None:
    """Pages of 1,000 tools without end: past ``max_list_items`` (100,000) the listing is given
    up, before its 101st page is kept (it read 1,000 pages, a million tools, 1 GB)."""

    async def main() -> tuple[mcpbind.ProtocolError, mcpbind.ProtocolError]:
        async with mcpbind.Client([*HOSTILE, "pages", "1000"]) as client:
            with pytest.raises(mcpbind.ProtocolError) as default:
                await client.list_tools()
        async with mcpbind.Client([*HOSTILE, "pages", "1000"], max_list_items=2500) as client:
            with pytest.raises(mcpbind.ProtocolError) as smaller:
                await client.list_prompts()
        return default.value, smaller.value

    default, smaller = run(main())
    assert default.message == (
        "the server's 'tools/list' listing goes on past 100,000 items (max_list_items): the "
        "listing is given up"
    )
    assert default.data == {"limit": "max_list_items", "max": 100_000}
    assert smaller.data == {"limit": "max_list_items", "max": 2500}


def test_a_listing_is_bounded_by_its_size() -> None:
    """The same pages, bounded by their size as JSON: past ``max_list_bytes``."""

    async def main() -> mcpbind.ProtocolError:
        options: dict[str, Any] = {"max_list_bytes": 200_000}
        async with mcpbind.Client([*HOSTILE, "pages", "1000"], **options) as client:
            with pytest.raises(mcpbind.ProtocolError) as caught:
                await client.list_resources()
        return caught.value

    error = run(main())
    assert error.message == (
        "the server's 'resources/list' listing goes on past 200,000 bytes (max_list_bytes): the "
        "listing is given up"
    )
    assert error.data == {"limit": "max_list_bytes", "max": 200_000}
