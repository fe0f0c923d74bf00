"""``Client(tasks=True)`` against examples/everything_server.py (make interop), which serves the
2026-07-28 tasks extension: a tool the server runs as a task is followed to its end and its
result returned, the questions the task asks are answered by the client's elicitation handler
through ``tasks/update``, a failed task raises its error, and a call cancelled (or out of
time) cancels its task on the server. Without ``tasks=True`` the same tools answer directly."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mcpbind import Client
from mcpbind._extension_tasks import TASK_TYPES
from mcpbind._extensions import TASKS
from mcpbind.errors import ProtocolError
from mcpbind.session import ClientSession
from mcpbind.transports.http_client import StreamableHTTPClient

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
REVISION = "2026-07-28"
FACTS = TASKS[REVISION]
TYPES = TASK_TYPES[REVISION]


@pytest.fixture(scope="module")
def url(everything_server: str) -> str:
    return everything_server


class Asked:
    """An elicitation handler keeping the messages it was asked."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, params: Any) -> Any:
        self.messages.append(params.message)
        return {"action": "accept", "content": {"confirm": True, "name": "Ada"}}


async def _status(url: str, task_id: str) -> Any:
    """The task's state as a session of its own sees it (tasks/get)."""
    s = ClientSession([REVISION], capabilities={"extensions": {FACTS.extension: {}}})
    async with StreamableHTTPClient(url, s) as h:
        await h.connect()
        return await h.call(FACTS.get, {"taskId": task_id})


def test_a_task_call_returns_the_tools_result(url: str) -> None:
    async def main() -> Any:
        async with Client(url, revisions=[REVISION], tasks=True) as client:
            return await client.call_tool("slow_compute", {"seconds": 0.2, "label": "y"})

    result = asyncio.run(main())
    assert type(result) is TYPES.call_result
    assert result.content[0].text == "Computed 'y' in 0.2 s"


def test_questions_of_a_task_go_to_the_handlers(url: str) -> None:
    asked = Asked()

    async def main() -> Any:
        async with Client(url, revisions=[REVISION], tasks=True, elicitation=asked) as client:
            one = await client.call_tool("confirm_delete", {"filename": "a.txt"})
            two = await client.call_tool("multi_input")
            return one, two

    one, two = asyncio.run(main())
    assert one.content[0].text == "Deleted a.txt"
    assert two.content[0].text == "Received 2 answers"
    assert sorted(asked.messages) == ["Delete a.txt?", "Go ahead?", "What is your name?"]


def test_a_failed_task_raises_its_error(url: str) -> None:
    async def main() -> Any:
        async with Client(url, revisions=[REVISION], tasks=True) as client:
            tool_error = await client.call_tool("failing_job")
            with pytest.raises(ProtocolError) as raised:
                await client.call_tool("protocol_error_job")
            return tool_error, raised.value

    tool_error, error = asyncio.run(main())
    assert tool_error.is_error is True and tool_error.content[0].text == "The job failed"
    assert error.code == -32603 and "the job broke down" in error.message


def test_cancelling_the_call_cancels_the_task(url: str) -> None:
    async def main() -> Any:
        async with Client(url, revisions=[REVISION], tasks=True) as client:
            link = client._link
            assert link is not None
            call = asyncio.ensure_future(client.call_tool("slow_compute", {"seconds": 30}))
            while "tasks/get" not in link.session.last_ids and not call.done():
                await asyncio.sleep(0.01)
            [task_id] = {
                e.task_id
                for e in link.http.events  # type: ignore[union-attr]
                if type(e).__name__ == "TaskCreated"
            }
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            return await _status(url, task_id)

    state = asyncio.run(main())
    assert type(state) is TYPES.by_status[FACTS.cancelled]


def test_a_task_out_of_time_is_cancelled(url: str) -> None:
    async def main() -> Any:
        async with Client(url, revisions=[REVISION], tasks=True, timeout=1.0) as client:
            link = client._link
            assert link is not None
            with pytest.raises(TimeoutError, match="did not end within 1.0 s"):
                await client.call_tool("slow_compute", {"seconds": 30})
            [task_id] = {
                e.task_id
                for e in link.http.events  # type: ignore[union-attr]
                if type(e).__name__ == "TaskCreated"
            }
            return await _status(url, task_id)

    state = asyncio.run(main())
    assert type(state) is TYPES.by_status[FACTS.cancelled]


def test_without_tasks_the_tools_answer_directly(url: str) -> None:
    async def main() -> Any:
        async with Client(url, revisions=[REVISION]) as client:
            with pytest.raises(ProtocolError) as raised:
                await client.call_tool("failing_job")
            return await client.call_tool("slow_compute", {"seconds": 0}), raised.value

    result, refused = asyncio.run(main())
    assert type(result) is TYPES.call_result
    assert refused.code == -32021  # a task-only tool, for a client that did not declare it
