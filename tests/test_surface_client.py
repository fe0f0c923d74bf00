"""``Client(target, surface=LOCK)``: the client side of enforcing a lock, against a real server
(an App started as a subprocess) changed after it was locked, at its start (``description``,
``parameter``, ``annotation``, ``new``, ``renamed``) or while the client is connected
(``later``: the server says its tool list changed)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from mcpbind import Client, ProtocolError
from mcpbind.surface import Lock, lock

FIXTURES = Path(__file__).parent / "fixtures"
SERVER = [sys.executable, str(FIXTURES / "surface_server.py")]


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("client") / "weather.lock"
    asyncio.run(lock(SERVER, path))
    return path


def run(
    path: Path, variant: str, mode: str, steps: Callable[[Client], Awaitable[Any]], **kw: Any
) -> Any:
    async def main() -> Any:
        env = {**os.environ, "SURFACE_VARIANT": variant}
        async with Client(SERVER, surface=path, on_drift=mode, env=env, **kw) as client:  # type: ignore[arg-type]
            return await steps(client)

    return asyncio.run(main())


async def names(client: Client) -> list[str]:
    return sorted(t.name for t in await client.list_tools())


@pytest.mark.parametrize(
    ("variant", "change"),
    [
        ("description", "description_changed at description"),
        ("parameter", "parameter_narrowed at inputSchema.properties.days"),
        ("annotation", "annotation_changed at annotations.destructiveHint"),
    ],
)
def test_block_leaves_a_drifted_tool_out_and_refuses_it_even_unlisted(
    locked: Path, variant: str, change: str
) -> None:
    async def steps(client: Client) -> None:
        # called before any listing: the client reads the list through the lock first
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("get_weather", {"city": "Paris"})
        assert refused.value.code == -32602
        assert refused.value.message == (
            f"tool 'get_weather' differs from the lock {locked}: {change}; refused"
        )
        assert refused.value.data["item"] == {"kind": "tool", "name": "get_weather"}
        assert await names(client) == ["add"]
        assert (await client.call_tool("add", {"a": 2, "b": 3})).structured_content == {"result": 5}

    run(locked, variant, "block", steps)


def test_warn_lists_and_calls_a_drifted_tool_and_logs_it(
    locked: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def steps(client: Client) -> Any:
        with caplog.at_level(logging.WARNING, "mcpbind.surface"):
            listed = await names(client)
            result = await client.call_tool("get_weather", {"city": "Paris"})
        return listed, result

    listed, result = run(locked, "description", "warn", steps)
    assert listed == ["add", "get_weather"]
    assert result.content[0].text == "sunny in Paris for 1 day(s)"
    logged = [r.getMessage() for r in caplog.records if r.name == "mcpbind.surface"]
    assert logged and all("tool 'get_weather' differs from the lock" in m for m in logged)
    assert any("(listed, warn" in m for m in logged) and any("(used, warn" in m for m in logged)


def test_block_refuses_a_new_and_a_renamed_tool(locked: Path) -> None:
    async def new(client: Client) -> None:
        assert await names(client) == ["add", "get_weather"]
        with pytest.raises(ProtocolError, match="tool 'send' is not in the lock .*unapproved"):
            await client.call_tool("send", {"data": "x"})

    async def renamed(client: Client) -> None:
        assert await names(client) == ["add"]
        with pytest.raises(ProtocolError, match="tool 'weather_for' is not in the lock"):
            await client.call_tool("weather_for", {"city": "x"})

    run(locked, "new", "block", new)
    run(locked, "renamed", "block", renamed)


def test_a_change_while_connected_is_caught_at_the_list_changed_notification(
    locked: Path,
) -> None:
    async def steps(client: Client) -> None:
        await client.watch_lists()  # (where the revision sends list changes on a stream)
        assert await names(client) == ["add", "get_weather"]
        ok = await client.call_tool("get_weather", {"city": "Oslo"})
        assert ok.content[0].text == "sunny in Oslo for 1 day(s)"
        await client.read_resource("weather://about")  # the server changes and says so
        refused: ProtocolError | None = None
        for _ in range(100):  # the notification arrives on its own
            try:
                await client.call_tool("get_weather", {"city": "Oslo"})
            except ProtocolError as error:
                refused = error
                break
            await asyncio.sleep(0.05)
        assert refused is not None, "the changed tool was still called after 5 s"
        assert "description_changed at description" in refused.message
        assert await names(client) == ["add"]

    run(locked, "later", "block", steps)


def test_arguments_are_checked_before_sending_and_the_unchanged_server_passes(
    locked: Path,
) -> None:
    async def steps(client: Client) -> None:
        with pytest.raises(ProtocolError) as refused:
            await client.call_tool("get_weather", {"city": "x", "days": 9})
        assert refused.value.code == -32602
        assert "$.params.arguments.days: 9 is greater than the maximum of 7" in (
            refused.value.message
        )
        assert await names(client) == ["add", "get_weather"]
        assert [p.name for p in await client.list_prompts()] == ["forecast"]
        ok = await client.call_tool("get_weather", {"city": "Oslo", "days": 2})
        assert ok.content[0].text == "sunny in Oslo for 2 day(s)"

    run(locked, "base", "block", steps)


def test_the_lock_is_read_when_the_client_is_made_and_its_revision_offered(
    locked: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.lock"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="bad.lock: not a mcpbind-surface-lock/1 lock"):
        Client(SERVER, surface=bad)
    with pytest.raises(ValueError, match="on_drift"):
        Client(SERVER, surface=locked, on_drift="ignore")  # type: ignore[arg-type]
    assert Client(SERVER, surface=locked).revisions == (Lock.read(locked).revision,)


def test_a_use_whose_list_never_ends_is_refused_not_let_through() -> None:
    """A server whose tool list never ends (pages of one unapproved tool each, for ever): a call
    to a locked tool the client has not seen cannot be checked, and is refused after
    ``max_pages`` pages rather than sent unchecked."""
    from mcpbind.surface.kinds import speech
    from mcpbind.surface.lockfile import Item, item_of

    revision = "2025-06-18"
    item: Item = item_of(
        "tool", {"name": "later", "inputSchema": {"type": "object"}}, speech(revision)
    )
    locked = Lock(revision=revision, server={}, items={"tool": {"later": item}})
    hostile = [sys.executable, str(FIXTURES / "hostile_child.py"), "pages", "1"]

    async def main() -> None:
        async with Client(hostile, surface=locked, max_pages=5) as client:
            with pytest.raises(ProtocolError) as refused:
                await client.call_tool("later", {})
            assert refused.value.code == -32603
            assert "did not end within 5 pages" in refused.value.message

    asyncio.run(main())
