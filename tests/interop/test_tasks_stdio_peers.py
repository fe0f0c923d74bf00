"""The 2026-07-28 tasks extension served by an App over stdio (``app.run(tasks=...)``), the App
a real subprocess: ``Client(tasks=True)`` follows its tasks (result, questions through
``tasks/update``, a failed task's error), and the raw messages answer as over HTTP (the task
result, ``tasks/get`` by status, -32021 without the extension, -32602 for an unknown task),
each answer decoding into its generated class of the extension."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import msgspec
import pytest

from mcpbind import Client, convert
from mcpbind._extension_tasks import TASK_TYPES
from mcpbind._extensions import TASKS
from mcpbind.errors import ProtocolError

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

REVISION = "2026-07-28"
FACTS = TASKS[REVISION]
TYPES = TASK_TYPES[REVISION]
OPTED_IN = {"extensions": {FACTS.extension: {}}}

SERVER = """\
from mcpbind.app import App
from mcpbind.app.tasks import app_tasks
from mcpbind.tasks import Tasks
from tests.interop.tasks_works import add, broken, confirm, refuse, slow

app = App("tasks-on-stdio", revisions=("2026-07-28",))
for tool in (slow, refuse, add):
    app.tool(tool)
layer = Tasks(poll_interval_ms=20)
layer.tool("confirm", confirm, required=True)
layer.tool("broken", broken, required=True)
app.run(tasks=app_tasks(app, "slow", required=("refuse",), layer=layer))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("tasks_stdio") / "server.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


def test_the_client_follows_tasks_of_an_app_on_stdio(server: list[str]) -> None:
    asked: list[str] = []

    def elicitation(params: Any) -> Any:
        asked.append(params.message)
        return {"action": "accept", "content": {}}

    async def main() -> Any:
        async with Client(
            server, revisions=[REVISION], tasks=True, elicitation=elicitation
        ) as client:
            slow = await client.call_tool("slow", {"seconds": 0.2})
            confirmed = await client.call_tool("confirm")
            refused = await client.call_tool("refuse")
            added = await client.call_tool("add", {"a": 2, "b": 40})
            with pytest.raises(ProtocolError) as raised:
                await client.call_tool("broken")
            return slow, confirmed, refused, added, raised.value

    slow, confirmed, refused, added, error = asyncio.run(asyncio.wait_for(main(), 60))
    assert type(slow) is TYPES.call_result and slow.content[0].text == "slept 0.2"
    assert confirmed.content[0].text == "accept" and asked == ["Go ahead?"]
    assert refused.is_error is True and refused.content[0].text == "no, thanks"
    assert added.structured_content == {"result": 42}
    assert error.code == -32603 and "the job broke down" in error.message


class Raw:
    """The App's process, spoken to one raw JSON-RPC line at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = 0

    async def send(self, method: str, params: dict[str, Any], caps: Any = OPTED_IN) -> Any:
        self.ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientCapabilities": caps,
        }
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        message["params"] = {**params, "_meta": meta}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(msgspec.json.encode(message) + b"\n")
        await self.process.stdin.drain()
        answer = msgspec.json.decode(await self.process.stdout.readline())
        assert answer["id"] == self.ids
        return answer

    async def until(self, task_id: str, status: str) -> Any:
        for _ in range(500):
            got = (await self.send(FACTS.get, {"taskId": task_id}))["result"]
            if got["status"] == status:
                return got
            await asyncio.sleep(0.01)
        raise AssertionError(f"task {task_id} never reached {status}")


def test_the_raw_messages_are_the_extensions(server: list[str]) -> None:
    async def main() -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            *server, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        raw = Raw(process)
        try:
            discovered = await raw.send("server/discover", {})
            created = await raw.send("tools/call", {"name": "slow", "arguments": {"seconds": 30}})
            task_id = created["result"]["taskId"]
            working = await raw.send(FACTS.get, {"taskId": task_id})
            ungated = await raw.send(FACTS.get, {"taskId": task_id}, caps={})
            unknown = await raw.send(FACTS.get, {"taskId": "no-such-task"})
            cancel = await raw.send(FACTS.cancel, {"taskId": task_id})
            cancelled = await raw.send(FACTS.get, {"taskId": task_id})
            asking = await raw.send("tools/call", {"name": "confirm"})
            asked_id = asking["result"]["taskId"]
            waiting = await raw.until(asked_id, FACTS.input_required)
            bad_update = await raw.send(FACTS.update, {"taskId": asked_id, "inputResponses": 1})
            update = await raw.send(
                FACTS.update,
                {"taskId": asked_id, "inputResponses": {"ok": {"action": "decline"}}},
            )
            done = await raw.until(asked_id, FACTS.completed)
            required = await raw.send("tools/call", {"name": "refuse"}, caps={})
            plain = await raw.send("tools/call", {"name": "slow", "arguments": {"seconds": 0}}, {})
            return locals()
        finally:
            assert process.stdin is not None
            process.stdin.close()
            await asyncio.wait_for(process.wait(), 10)

    got = asyncio.run(asyncio.wait_for(main(), 60))
    extensions = got["discovered"]["result"]["capabilities"]["extensions"]
    assert FACTS.extension in extensions
    created = convert(got["created"]["result"], TYPES.create_result)
    assert created.status == FACTS.working and created.poll_interval_ms == 20
    working = convert(got["working"]["result"], TYPES.get_result)
    assert type(working) is TYPES.by_status[FACTS.working]
    assert working.task_id == created.task_id
    assert got["ungated"]["error"]["code"] == -32021
    assert got["ungated"]["error"]["data"] == {
        "requiredCapabilities": {"extensions": {FACTS.extension: {}}}
    }
    assert got["unknown"]["error"]["code"] == -32602
    assert (
        type(convert(got["cancel"]["result"], TYPES.results[FACTS.cancel]))
        is TYPES.results[FACTS.cancel]
    )
    cancelled = convert(got["cancelled"]["result"], TYPES.get_result)
    assert type(cancelled) is TYPES.by_status[FACTS.cancelled]
    waiting = convert(got["waiting"], TYPES.get_result)
    assert type(waiting) is TYPES.by_status[FACTS.input_required]
    assert list(got["waiting"]["inputRequests"]) == ["ok"]
    assert got["bad_update"]["error"]["code"] == -32602
    assert (
        type(convert(got["update"]["result"], TYPES.results[FACTS.update]))
        is TYPES.results[FACTS.update]
    )
    done = convert(got["done"], TYPES.get_result)
    assert type(done) is TYPES.by_status[FACTS.completed]
    assert done.result.content[0].text == "decline"
    assert got["required"]["error"]["code"] == -32021
    assert got["plain"]["result"]["content"][0]["text"] == "slept 0.0"
