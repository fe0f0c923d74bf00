"""Task status notifications of an App over stdio (``app.run(tasks=...)``), the App a real
subprocess: a ``subscriptions/listen`` naming tasks gets the same stream as over Streamable HTTP
(the acknowledgement, ``notifications/tasks`` at each status change, the listen result once all
are over), within the same bounds; and ``Client(tasks=True)`` listens, so a task ends for it
when the notification comes, not a poll interval later. Each recorded transcript passes
``mcpbind validate --strict``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
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
LISTEN = "subscriptions/listen"
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))  # the command line of this venv
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"

SERVER = """\
from mcpbind.app import App
from mcpbind.tasks import Tasks
from tests.interop.tasks_works import add, broken, confirm, slow_work

app = App("task-notifications-on-stdio", revisions=("2026-07-28",))
app.tool(add)
# A poll interval far longer than the test may take: only a notification ends a task in time.
layer = Tasks(poll_interval_ms=30_000, max_listeners=2, max_listen_tasks=3)
for name, work in (("confirm", confirm), ("broken", broken), ("slow", slow_work)):
    layer.tool(name, work, required=True)
app.run(tasks=layer)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    path = tmp_path_factory.mktemp("tasks_listen_stdio") / "server.py"
    path.write_text(SERVER)
    return [sys.executable, str(path)]


class Peer:
    """The App's process spoken to in raw lines, every line both ways kept (the transcript)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = 0
        self.lines: list[bytes] = []
        self.answers: dict[Any, asyncio.Future[Any]] = {}
        self.notes: asyncio.Queue[Any] = asyncio.Queue()
        self.reader = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.lines.append(line.rstrip(b"\n"))
            message = msgspec.json.decode(line)
            if "id" in message and message["id"] in self.answers:
                self.answers[message["id"]].set_result(message)
            else:
                self.notes.put_nowait(message)

    async def write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        line = msgspec.json.encode(message)
        self.lines.append(line)
        self.process.stdin.write(line + b"\n")
        await self.process.stdin.drain()

    def start(self, method: str, params: dict[str, Any]) -> asyncio.Future[Any]:
        """Send a request; its response when it comes."""
        self.ids += 1
        meta = {
            "io.modelcontextprotocol/protocolVersion": REVISION,
            "io.modelcontextprotocol/clientCapabilities": OPTED_IN,
        }
        message = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        message["params"] = {**params, "_meta": meta}
        future = self.answers[self.ids] = asyncio.get_running_loop().create_future()
        asyncio.ensure_future(self.write(message))
        return future

    async def send(self, method: str, params: dict[str, Any]) -> Any:
        return await asyncio.wait_for(self.start(method, params), 20)

    async def note(self) -> Any:
        return await asyncio.wait_for(self.notes.get(), 20)

    async def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        await asyncio.wait_for(self.process.wait(), 10)
        await self.reader


def validated(lines: list[bytes], where: Path) -> str:
    """What ``mcpbind validate -r 2026-07-28 --strict`` says of the transcript (its exit code
    and output, but for the line counting the messages of a clean transcript)."""
    where.write_bytes(b"\n".join(lines) + b"\n")
    done = subprocess.run(
        [MCPBIND, "validate", "-r", REVISION, "--strict", str(where)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    clean = f"{where}: {sum(1 for line in lines if line.strip())} message(s), no findings "
    stderr = done.stderr.removeprefix(clean + f"({REVISION}, strict)\n")
    return f"{done.returncode} {done.stdout}{stderr}"


def test_a_listener_on_stdio_hears_each_status_change(server: list[str], tmp_path: Path) -> None:
    async def main() -> tuple[list[str], list[Any], Any, list[Any], Peer]:
        process = await asyncio.create_subprocess_exec(
            *server, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        peer = Peer(process)
        try:
            await peer.send("server/discover", {})
            ids = []
            for name, arguments in (
                ("confirm", {}),
                ("broken", {"after": 0.3}),
                ("slow", {"seconds": 30}),
            ):
                created = await peer.send("tools/call", {"name": name, "arguments": arguments})
                ids.append(created["result"][FACTS.task_id])
            confirm, broken, slow = ids
            listening = peer.start(LISTEN, {"notifications": {FACTS.listen_filter: ids}})
            heard = [await peer.note()]  # the acknowledgement
            statuses: dict[str, list[str]] = {i: [] for i in ids}

            async def hear(task_id: str, status: str) -> None:
                while status not in statuses[task_id]:
                    note = await peer.note()
                    heard.append(note)
                    params = note["params"]
                    statuses[params[FACTS.task_id]].append(params[FACTS.status])

            await hear(confirm, FACTS.input_required)
            answer = {"ok": {"action": "accept", "content": {}}}
            await peer.send(FACTS.update, {FACTS.task_id: confirm, FACTS.input_responses: answer})
            await hear(confirm, FACTS.completed)
            await hear(broken, FACTS.failed)
            await peer.send(FACTS.cancel, {FACTS.task_id: slow})
            await hear(slow, FACTS.cancelled)
            end = await asyncio.wait_for(listening, 20)
            # A second stream past max_listeners (2) is refused; more ids than
            # max_listen_tasks (3) too; a filter without task ids is the App's own stream.
            held = await peer.send("tools/call", {"name": "slow", "arguments": {"seconds": 30}})
            following = {"notifications": {FACTS.listen_filter: [held["result"][FACTS.task_id]]}}
            first, second = peer.start(LISTEN, following), peer.start(LISTEN, following)
            first_id = peer.ids - 1
            for _ in range(4):  # each one's acknowledgement and the task's status
                await peer.note()
            refused = await peer.send(LISTEN, following)
            many = await peer.send(LISTEN, {"notifications": {FACTS.listen_filter: ["a"] * 4}})
            # The client cancels the first: its place is free for another.
            cancelled = {"requestId": first_id, "reason": "enough"}
            await peer.write(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancelled}
            )
            third = peer.start(LISTEN, following)
            assert (await peer.note())["method"] == ACKNOWLEDGED
            await peer.send(FACTS.cancel, {FACTS.task_id: held["result"][FACTS.task_id]})
            await asyncio.wait_for(asyncio.gather(second, third), 20)
            assert not first.done()  # a cancelled request is not answered
            return ids, heard, end, [refused, many], peer
        finally:
            await peer.close()

    ids, heard, end, refused, peer = asyncio.run(asyncio.wait_for(main(), 90))
    ack, *notes = heard
    assert ack["method"] == ACKNOWLEDGED
    assert sorted(ack["params"]["notifications"][FACTS.listen_filter]) == sorted(ids)
    assert {n["method"] for n in notes} == {FACTS.notification}
    by_task: dict[str, list[str]] = {}
    statuses = {cls: status for status, cls in TYPES.noted_by_status.items()}
    for note in notes:
        task = convert(note, TYPES.notification).params  # its generated class
        assert task.meta.subscription_id == end["id"]  # tagged with the stream
        by_task.setdefault(task.task_id, []).append(statuses[type(task)])
    confirm, broken, slow = ids
    assert FACTS.input_required in by_task[confirm] and by_task[confirm][-1] == FACTS.completed
    assert by_task[broken][-1] == FACTS.failed
    assert by_task[slow][-1] == FACTS.cancelled
    assert "result" in end and end["result"]["resultType"] == FACTS.complete_result
    busy, many = refused
    assert busy["error"]["code"] == -32603 and "subscription streams" in busy["error"]["message"]
    assert many["error"]["code"] == -32602
    assert validated(peer.lines, tmp_path / "listen.jsonl") == "0 "


TAP = str(Path(__file__).with_name("bridge_tap.py"))  # writes down every line both ways


def test_the_client_learns_a_task_ended_from_its_notification(
    server: list[str], tmp_path: Path
) -> None:
    # The App suggests polling every 30 s: a task the client follows ends for it within the
    # test's bound only because it listened and a status notification woke it.
    transcript = tmp_path / "client.jsonl"
    asked: list[str] = []

    def elicitation(params: Any) -> Any:
        asked.append(params.message)
        return {"action": "accept", "content": {}}

    async def main() -> tuple[Any, Any, ProtocolError]:
        command = [sys.executable, TAP, str(transcript), *server]
        async with Client(
            command, revisions=[REVISION], tasks=True, elicitation=elicitation, timeout=60
        ) as client:
            slow = await client.call_tool("slow", {"seconds": 0.3})
            confirmed = await client.call_tool("confirm")
            with pytest.raises(ProtocolError) as raised:
                await client.call_tool("broken", {"after": 0.2})
            return slow, confirmed, raised.value

    slow, confirmed, error = asyncio.run(asyncio.wait_for(main(), 15))
    assert type(slow) is TYPES.call_result and slow.content[0].text == "done"
    assert confirmed.content[0].text == "accept" and asked == ["Go ahead?"]
    assert error.code == -32603 and "the job broke down" in error.message
    lines = transcript.read_bytes().splitlines()
    messages = [msgspec.json.decode(line) for line in lines]
    created = [
        m["result"][FACTS.task_id]
        for m in messages
        if m.get("result", {}).get("resultType") == FACTS.task_result
    ]
    listened = [
        m["params"]["notifications"][FACTS.listen_filter]
        for m in messages
        if m.get("method") == LISTEN
    ]
    assert listened == [[task_id] for task_id in created]  # one stream per task followed
    heard = {
        (m["params"][FACTS.task_id], m["params"][FACTS.status])
        for m in messages
        if m.get("method") == FACTS.notification
    }
    slow_id, confirm_id, broken_id = created
    assert {
        (slow_id, FACTS.completed),
        (confirm_id, FACTS.input_required),
        (confirm_id, FACTS.completed),
        (broken_id, FACTS.failed),
    } <= heard
    assert validated(lines, tmp_path / "validated.jsonl") == "0 "
