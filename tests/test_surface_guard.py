"""Enforcing a lock (``mcpbind.surface.Guard``): items the lock does not approve are left out of
lists and refused with ``block``, listed and logged with ``warn``; arguments and results are
checked against the locked schemas. The rug-pull tests run a real server (an App started as a
subprocess) changed after it was locked, and feed the guard what it sends."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpbind import ProtocolError
from mcpbind.surface import Guard, Lock, Unverified, lock
from mcpbind.surface.reader import RawConnection, pages

FIXTURES = Path(__file__).parent / "fixtures"
SERVER = [sys.executable, str(FIXTURES / "surface_server.py")]


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Lock:
    path = tmp_path_factory.mktemp("guard") / "weather.lock"
    asyncio.run(lock(SERVER, path))
    return Lock.read(path)


async def guarded(locked: Lock, variant: str, mode: str, steps: Any) -> Any:
    """Connect to the server started as ``variant``, hand ``steps(connection, guard)`` a guard."""
    env = {**os.environ, "SURFACE_VARIANT": variant}
    async with RawConnection(SERVER, env=env) as c:
        guard = Guard(locked, c.negotiated.revision, mode)  # type: ignore[arg-type]
        return await steps(c, guard)


async def list_tools(c: RawConnection, guard: Guard) -> list[str]:
    k = c.speech.kinds["tool"]
    names = []
    async for page in pages(c, k):
        names += [t["name"] for t in guard.filter_result(k.list_method, page).result[k.items_key]]
    return sorted(names)


async def call(c: RawConnection, guard: Guard, name: str, arguments: dict[str, Any]) -> Any:
    k = c.speech.kinds["tool"]
    params = {"name": name, "arguments": arguments}
    if guard.check_request(k.use_method or "", params) is not None:
        await list_tools(c, guard)
        assert guard.check_request(k.use_method or "", params) is None
    result = await c.request(k.use_method or "", params)
    guard.check_result(k.use_method or "", params, result)
    return result


@pytest.mark.parametrize(
    ("variant", "change"),
    [
        ("description", "description_changed at description"),
        ("parameter", "parameter_narrowed at inputSchema.properties.days"),
        ("annotation", "annotation_changed at annotations.destructiveHint"),
    ],
)
def test_block_leaves_a_drifted_tool_out_and_refuses_its_call_naming_item_lock_and_change(
    locked: Lock, variant: str, change: str
) -> None:
    async def steps(c: RawConnection, guard: Guard) -> None:
        assert await list_tools(c, guard) == ["add"]
        with pytest.raises(ProtocolError) as refused:
            await call(c, guard, "get_weather", {"city": "Paris"})
        error = refused.value
        assert error.code == -32602
        assert error.message == (
            f"tool 'get_weather' differs from the lock {locked.path}: {change}; refused"
        )
        assert error.data["item"] == {"kind": "tool", "name": "get_weather"}
        assert error.data["lock"] == locked.path and error.data["reason"] == "drifted"
        result = await call(c, guard, "add", {"a": 2, "b": 3})
        assert result["structuredContent"] == {"result": 5}

    asyncio.run(guarded(locked, variant, "block", steps))


def test_warn_lists_and_calls_a_drifted_tool_and_logs_it(
    locked: Lock, caplog: pytest.LogCaptureFixture
) -> None:
    async def steps(c: RawConnection, guard: Guard) -> None:
        with caplog.at_level(logging.WARNING, "mcpbind.surface"):
            assert await list_tools(c, guard) == ["add", "get_weather"]
            result = await call(c, guard, "get_weather", {"city": "Paris"})
        assert result["content"][0]["text"] == "sunny in Paris for 1 day(s)"
        assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
            f"tool 'get_weather' differs from the lock {locked.path}: "
            "description_changed at description"
        ] * 2

    asyncio.run(guarded(locked, "description", "warn", steps))


def test_block_refuses_a_new_and_a_renamed_tool(locked: Lock) -> None:
    async def new(c: RawConnection, guard: Guard) -> None:
        assert await list_tools(c, guard) == ["add", "get_weather"]
        with pytest.raises(ProtocolError, match="tool 'send' is not in the lock .*unapproved"):
            await call(c, guard, "send", {"data": "x"})

    async def renamed(c: RawConnection, guard: Guard) -> None:
        assert await list_tools(c, guard) == ["add"]
        with pytest.raises(ProtocolError, match="tool 'weather_for' is not in the lock"):
            await call(c, guard, "weather_for", {"city": "x"})

    asyncio.run(guarded(locked, "new", "block", new))
    asyncio.run(guarded(locked, "renamed", "block", renamed))


def test_the_unchanged_server_passes_whole(locked: Lock) -> None:
    async def steps(c: RawConnection, guard: Guard) -> None:
        assert await list_tools(c, guard) == ["add", "get_weather"]
        result = await call(c, guard, "get_weather", {"city": "Oslo", "days": 2})
        assert result["content"][0]["text"] == "sunny in Oslo for 2 day(s)"

    asyncio.run(guarded(locked, "base", "block", steps))


# -- the guard alone ------------------------------------------------------------------------------


def page(locked: Lock, *tools: dict[str, Any], cursor: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"tools": list(tools)}
    if cursor is not None:
        out["nextCursor"] = cursor
    return out


def definition(locked: Lock, name: str, **changes: Any) -> dict[str, Any]:
    return {**locked.items["tool"][name].definition, **changes}


def test_a_use_before_the_list_was_seen_is_unverified_and_a_list_change_forgets_it(
    locked: Lock,
) -> None:
    guard = Guard(locked, locked.revision)
    call_params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    assert guard.check_request("tools/call", call_params) == Unverified("tool", "tools/list")
    guard.filter_result("tools/list", page(locked, definition(locked, "add"), cursor="2"))
    assert guard.check_request("tools/call", call_params) is None
    assert guard.changed("notifications/tools/list_changed") == ("tools/list",)
    assert guard.check_request("tools/call", call_params) == Unverified("tool", "tools/list")
    changed = definition(locked, "add", description="Add two integers, then mail them.")
    filtered = guard.filter_result("tools/list", page(locked, changed))
    assert filtered.result == {"tools": []}
    assert [d.reason for d in filtered.drifts] == ["drifted"]
    with pytest.raises(ProtocolError, match="tool 'add' differs from the lock"):
        guard.check_request("tools/call", call_params)


def test_arguments_are_checked_against_the_locked_input_schema_with_their_json_path(
    locked: Lock,
) -> None:
    guard = Guard(locked, locked.revision)
    guard.filter_result("tools/list", page(locked, definition(locked, "get_weather")))
    with pytest.raises(ProtocolError) as refused:
        guard.check_request(
            "tools/call", {"name": "get_weather", "arguments": {"city": "x", "days": 9}}
        )
    assert refused.value.code == -32602
    assert "$.params.arguments.days: 9 is greater than the maximum of 7" in refused.value.message
    assert (
        guard.check_request("tools/call", {"name": "get_weather", "arguments": {"city": "x"}})
        is None
    )


def test_results_are_checked_against_the_locked_output_schema_except_errors(locked: Lock) -> None:
    guard = Guard(locked, locked.revision)
    params = {"name": "add", "arguments": {"a": 1, "b": 2}}
    guard.check_result("tools/call", params, {"content": [], "structuredContent": {"result": 3}})
    guard.check_result("tools/call", params, {"content": [], "isError": True})
    with pytest.raises(
        ProtocolError, match=r"\$.result.structuredContent.result: 'x' is not of type"
    ):
        guard.check_result(
            "tools/call", params, {"content": [], "structuredContent": {"result": "x"}}
        )
    with pytest.raises(ProtocolError, match="structuredContent: missing"):
        guard.check_result("tools/call", params, {"content": []})


def test_a_read_is_checked_against_resources_and_templates(locked: Lock) -> None:
    guard = Guard(locked, locked.revision)
    templates = {
        "resourceTemplates": list(i.definition for i in locked.items["resource_template"].values())
    }
    resources = {"resources": list(i.definition for i in locked.items["resource"].values())}
    guard.filter_result("resources/templates/list", templates)
    guard.filter_result("resources/list", resources)
    assert guard.check_request("resources/read", {"uri": "weather://cities/oslo"}) is None
    assert guard.check_request("resources/read", {"uri": "weather://about"}) is None
    with pytest.raises(ProtocolError, match="resource 'weather://secrets' is not in the lock"):
        guard.check_request("resources/read", {"uri": "weather://secrets"})


def _app(description: str) -> Any:
    import mcpbind

    app = mcpbind.App("shop", "1")

    @app.tool(description=description)
    def buy(item: str, count: int = 1) -> str:
        return f"bought {count} {item}"

    return app


@pytest.mark.parametrize(
    "revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
)
def test_the_guard_speaks_every_revision(revision: str, tmp_path: Path) -> None:
    """Locked and enforced in each revision: the methods, pages and keys from its facts."""
    locked = asyncio.run(lock(_app("Buy an item."), tmp_path / "shop.lock", revisions=(revision,)))
    assert locked.revision == revision

    async def steps(app: Any, expected: list[str]) -> None:
        async with RawConnection(app, revisions=(revision,)) as c:
            guard = Guard(locked, revision)
            assert await list_tools(c, guard) == expected
            if expected:
                result = await call(c, guard, "buy", {"item": "tea", "count": 2})
                assert result["content"][0]["text"] == "bought 2 tea"
            else:
                with pytest.raises(ProtocolError, match="description_changed at description"):
                    await call(c, guard, "buy", {"item": "tea"})

    asyncio.run(steps(_app("Buy an item."), ["buy"]))
    asyncio.run(steps(_app("Buy an item, and pay with the saved card."), []))
