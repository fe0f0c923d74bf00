"""The HTTP gateway's translation of a 2025-11-25 client's tasks (mcpbind/bridge/gateway/tasks_core_to_extension.py)
in this process, a child per session (``-- CMD``): a 2026-07-28 App of the tasks extension on
stdio (the server of tests/interop/test_tasks_stdio_front_peers.py), mcpbind's Streamable HTTP
client at 2025-11-25. A link whose ``tasks/result`` polls is not ended idle between two polls."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind.app import App
from mcpbind.app.tasks import app_tasks
from mcpbind.tasks import Tasks
from mcpbind.transports.http_client import StreamableHTTPClient
from tests.interop.test_tasks_stdio_front_peers import SERVER
from tests.test_gateway import ACCEPT, INFO, Served, client, eventually, in_loop, run

CAPS: dict[str, Any] = {"tasks": {"list": {}, "cancel": {}}}


def test_a_link_polling_a_tasks_result_is_not_ended_idle(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)

    async def main() -> Any:
        # idle after 1 s, the call 3 s: a child that starts slowly on a loaded machine (0.3 s
        # ended its link during the handshake) still leaves the poll twice the idle time
        served = Served(command=[sys.executable, str(script)], session_idle_timeout=1.0)
        async with served.running():
            session = StreamableHTTPClient(served.url, client("2025-11-25", capabilities=CAPS))
            await session.connect()
            call = {"name": "slow", "arguments": {"seconds": 3.0}, "task": {}}
            created = await session.call("tools/call", call)
            task_id = created.task.task_id
            result = await session.call("tasks/result", {"taskId": task_id})
            await asyncio.sleep(0)
            return result, served.log

    result, log = run(main())
    assert result.content[0].text == "slept 3.0", log
    assert not any("idle" in line for line in log), log


# -- a task-augmented call the client leaves on its way: the task it created is cancelled --------

# The server of the stdio test above, its call's answer late (the App's loop held 0.5 s: the
# client has left by then), and its tasks' statuses said on stderr after each tasks/cancel.
SLOW_CHILD = SERVER.replace(
    "layer = Tasks(poll_interval_ms=20)",
    """import sys, time


class Late(Tasks):
    def answer(self, method, params, owner=None):
        if method == "tools/call":
            time.sleep(0.5)
        answered = super().answer(method, params, owner)
        if method == "tasks/cancel":
            statuses = [task.status for task in self._tasks.values()]
            print("statuses", *statuses, file=sys.stderr, flush=True)
        return answered


layer = Late(poll_interval_ms=20)""",
)


class LateTasks(Tasks):
    """A real tasks layer whose answer to a call comes late (the client has left by then)."""

    async def respond(self, method: str, params: dict[str, Any], owner: str | None = None) -> Any:
        if method == "tools/call":
            await asyncio.sleep(0.5)
        return await super().respond(method, params, owner)


async def _leave_a_call(url: str) -> None:
    """A 2025-11-25 client that calls a tool as a task and leaves before the answer."""
    async with httpx.AsyncClient(timeout=10) as http:
        params = {"protocolVersion": "2025-11-25", "capabilities": CAPS, "clientInfo": INFO}
        opened = await http.post(
            url,
            headers=ACCEPT,
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params},
        )
        headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await http.post(url, headers=headers, json=initialized)
        listed = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        assert "slow" in (await http.post(url, headers=headers, json=listed)).text  # linked
        call = {"name": "slow", "arguments": {"seconds": 30}, "task": {}}
        with pytest.raises(httpx.ReadTimeout):  # the client gives up and leaves
            await http.post(
                url,
                headers=headers,
                json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call},
                timeout=httpx.Timeout(10, read=0.1),
            )


def _said_cancelled(log: list[str]) -> list[str]:
    return [line for line in log if "the client cancelled:" in line and "is cancelled" in line]


def test_a_call_left_on_its_way_to_a_child_has_its_task_cancelled(tmp_path: Path) -> None:
    script, heard = tmp_path / "server.py", tmp_path / "server-stderr"
    script.write_text(SLOW_CHILD)
    command = ["sh", "-c", f'exec "$@" 2>>{heard}', "sh", sys.executable, str(script)]

    async def main() -> Any:
        served = Served(command=command)
        async with served.running():
            await _leave_a_call(served.url)
            await eventually(lambda: _said_cancelled(served.log), "the task cancelled")
            return served.log, await eventually(
                lambda: "statuses" in heard.read_text() and heard.read_text(), "the statuses"
            )

    log, stderr = run(main())
    [said] = _said_cancelled(log)
    assert "'tasks/cancel'" in said
    assert "statuses cancelled" in stderr, stderr


def test_a_call_left_on_its_way_upstream_has_its_task_cancelled() -> None:
    app = App("tasks-upstream", revisions=("2026-07-28",))

    @app.tool
    async def slow(seconds: float) -> str:
        """Sleeps"""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    layer = LateTasks(poll_interval_ms=20)

    async def main() -> Any:
        async with in_loop(app.asgi(tasks=app_tasks(app, "slow", layer=layer))) as base:
            served = Served(upstream=f"{base}/mcp")
            async with served.running():
                await _leave_a_call(served.url)
                await eventually(lambda: _said_cancelled(served.log), "the task cancelled")
                statuses = [task.status for task in layer._tasks.values()]
                await layer.aclose()
                return served.log, statuses

    log, statuses = run(main())
    assert statuses == ["cancelled"], log  # without the fix: ["working"], left running
    [said] = _said_cancelled(log)
    assert "'tasks/cancel'" in said
