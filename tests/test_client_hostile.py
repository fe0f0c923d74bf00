"""``mcpbind.Client`` in front of servers that misbehave: a real server process on stdio
(tests/fixtures/hostile_child.py) that sends messages its revision refuses, by the thousand."""

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
