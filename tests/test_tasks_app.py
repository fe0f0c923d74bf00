"""An App's tools as tasks (mcpbind.app.tasks.app_tasks): the tool's own function runs in the
task, its arguments converted and its result built as the App builds them."""

from __future__ import annotations

from typing import Any

import pytest

from mcpbind.app import App, Context
from mcpbind.app.tasks import app_tasks
from mcpbind.app.tools import ToolError
from tests.test_http_transport import http, run
from tests.test_tasks import OPTED_IN, Peer


def make_app() -> App:
    app = App("tasks-app", revisions=("2026-07-28",))

    @app.tool
    def double(n: int) -> str:
        """Doubles n"""
        return str(2 * n)

    @app.tool
    def refuse() -> str:
        """Always a tool error"""
        raise ToolError("no, thanks")

    @app.tool
    async def chatty(ctx: Context) -> str:
        """Asks the client"""
        return str(await ctx.elicit("?", {"type": "object", "properties": {}}))

    return app


def scenario(test: Any, capabilities: dict[str, Any] = OPTED_IN) -> Any:
    app = make_app()
    layer = app_tasks(app, "double", required=("refuse",))

    async def go() -> Any:
        try:
            async with http(app.asgi(tasks=layer)) as client:
                return await test(Peer(client, capabilities))
        finally:
            await layer.aclose()

    return run(go())


def test_a_tool_of_the_app_runs_as_a_task() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "double", "arguments": {"n": 21}})
        refused = await peer.result("tools/call", {"name": "refuse", "arguments": {}})
        bad = await peer.result("tools/call", {"name": "double", "arguments": {"n": "x"}})
        return (
            created,
            await peer.until(created["taskId"], "completed"),
            await peer.until(refused["taskId"], "completed"),
            await peer.until(bad["taskId"], "failed"),
        )

    created, done, refused, bad = scenario(test)
    assert created["resultType"] == "task"
    assert done["result"]["content"] == [{"type": "text", "text": "42"}]
    assert refused["result"]["isError"] is True
    assert refused["result"]["content"][0]["text"] == "no, thanks"
    assert bad["error"]["code"] == -32602 and "double" in bad["error"]["message"]


def test_without_the_extension_the_app_answers_and_required_tools_are_refused() -> None:
    async def test(peer: Peer) -> Any:
        plain = await peer.result("tools/call", {"name": "double", "arguments": {"n": 2}})
        return plain, await peer.error("tools/call", {"name": "refuse", "arguments": {}})

    plain, (status, error) = scenario(test, capabilities={})
    assert plain["content"] == [{"type": "text", "text": "4"}] and "taskId" not in plain
    assert status == 400 and error["code"] == -32021


@pytest.mark.parametrize("name", ["chatty", "missing"])
def test_a_tool_a_task_cannot_run_is_refused_at_registration(name: str) -> None:
    with pytest.raises(ValueError, match=repr(name)):
        app_tasks(make_app(), name)
