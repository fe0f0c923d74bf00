"""Tasks across `mcpbind bridge` (stdio, make interop): a 2025-11-25 client of the core
revision's tasks in front of a 2026-07-28 server of the tasks extension, an App run with
``app.run(tasks=...)`` as a child process of the bridge. The client is mcpbind's
``ClientSession`` at 2025-11-25 over the bridge process's stdin/stdout (the official ``mcp``
2.3.0 client has no 2025-11-25 tasks). It is told of ``tasks``, makes task-augmented calls,
polls them with ``tasks/get``, lists them, gets a result through ``tasks/result``, answers the
elicitation a task asks there (tied to the task by the related-task ``_meta``), cancels one, and
an unknown task is -32602; every line the client sent and received validates against
2025-11-25 (``mcpbind validate``)."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpbind._extensions import TASKS
from mcpbind.events import ErrorReceived, RequestReceived, ResultReceived, TaskCreated
from mcpbind.session import ClientSession
from mcpbind.validate import validate_lines

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
REVISION = "2025-11-25"
RELATED = TASKS["2026-07-28"].related_task_key

SERVER = """\
from mcpbind.app import App
from mcpbind.app.tasks import app_tasks
from mcpbind.tasks import Tasks
from tests.interop.tasks_works import add, confirm, slow

app = App("tasks-behind-the-bridge", revisions=("2026-07-28",))
for tool in (slow, add):
    app.tool(tool)
layer = Tasks(poll_interval_ms=20)
layer.tool("confirm", confirm, required=True)
app.run(tasks=app_tasks(app, "slow", layer=layer))
"""


class Peer:
    """The bridge process, spoken to by a 2025-11-25 ``ClientSession``; every line either way
    is kept (``wire``)."""

    def __init__(self, server: list[str]) -> None:
        self.proc = subprocess.Popen(
            [MCPBIND, "bridge", "--client-revision", REVISION, "--", *server],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        caps: dict[str, Any] = {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}}
        self.session = ClientSession([REVISION], caps, {"name": "core-tasks", "version": "1"})
        self.wire: list[str] = []
        self.asked: list[Any] = []  # the requests the bridge made of the client
        self.answer: Callable[[RequestReceived], Any] = lambda e: {"action": "decline"}

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def _send(self) -> None:
        assert self.proc.stdin is not None
        for data in self.session.data_to_send():
            self.wire.append(data.decode())
            self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def until(self, done: Callable[[Any], bool]) -> Any:
        """Read until an event ``done`` takes; the bridge's requests are answered meanwhile."""
        deadline = time.monotonic() + 20
        while True:
            line = self.lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            self.wire.append(line.decode().strip())
            for event in self.session.receive(line):
                if isinstance(event, RequestReceived):
                    self.asked.append(event)
                    self.session.respond(event.id, self.answer(event))
                    self._send()
                elif done(event):
                    return event

    def open(self) -> Any:
        self.session.connect()
        self._send()
        return self.until(lambda e: type(e).__name__ == "Negotiated")

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """The event answering the request (a result, a task created, an error)."""
        rid = self.session.request(method, params)
        self._send()
        answers = (ResultReceived, TaskCreated, ErrorReceived)
        return self.until(lambda e: isinstance(e, answers) and e.id == rid)

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(20)
        return self.proc.stderr.read().decode(errors="replace")


@pytest.fixture
def peer(tmp_path: Path) -> Iterator[Peer]:
    path = tmp_path / "server.py"
    path.write_text(SERVER)
    peer = Peer([sys.executable, str(path)])
    try:
        yield peer
    finally:
        if peer.proc.poll() is None:
            peer.close()


def test_a_task_augmented_call_is_a_task_the_client_follows_to_its_result(peer: Peer) -> None:
    opened = peer.open()
    offered = msgspec.to_builtins(opened.capabilities)["tasks"]
    assert offered == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    created = peer.request(
        "tools/call", {"name": "slow", "arguments": {"seconds": 0.3}, "task": {}}
    )
    assert isinstance(created, TaskCreated), created
    task = created.result.task
    assert task.status == "working" and task.task_id
    got = peer.request("tasks/get", {"taskId": task.task_id})
    assert isinstance(got, ResultReceived) and got.result.task_id == task.task_id
    assert got.result.status in ("working", "completed")
    done = peer.request("tasks/result", {"taskId": task.task_id})
    assert isinstance(done, ResultReceived), done
    assert done.result.content[0].text == "slept 0.3"
    assert done.result.meta[RELATED] == {"taskId": task.task_id}
    assert peer.request("tasks/get", {"taskId": task.task_id}).result.status == "completed"
    # a call the server answers at once is a task already completed
    added = peer.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 40}, "task": {}})
    assert added.result.task.status == "completed"
    total = peer.request("tasks/result", {"taskId": added.result.task.task_id})
    assert total.result.structured_content == {"result": 42}
    # a plain call (not task-augmented) is answered as before
    plain = peer.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
    assert isinstance(plain, ResultReceived) and plain.result.structured_content == {"result": 2}
    _closed(peer)


def test_the_input_a_task_asks_for_is_asked_of_the_client(peer: Peer, tmp_path: Path) -> None:
    peer.open()
    peer.answer = lambda e: {"action": "accept", "content": {}}
    confirm = peer.request("tools/call", {"name": "confirm", "arguments": {}, "task": {}})
    assert isinstance(confirm, TaskCreated), confirm
    confirm_id = confirm.result.task.task_id
    confirmed = peer.request("tasks/result", {"taskId": confirm_id})
    assert isinstance(confirmed, ResultReceived), confirmed
    assert confirmed.result.content[0].text == "accept"  # the App's tool saw the answer
    [asked] = peer.asked
    assert asked.method == "elicitation/create" and asked.params.message == "Go ahead?"
    assert asked.params.meta[RELATED] == {"taskId": confirm_id}
    _closed(peer)
    transcript = tmp_path / "client.jsonl"
    transcript.write_text("\n".join(peer.wire) + "\n")
    checked = subprocess.run(
        [MCPBIND, "validate", "-r", REVISION, str(transcript)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_tasks_are_cancelled_listed_and_unknown_ones_refused(peer: Peer) -> None:
    peer.open()
    first = peer.request("tools/call", {"name": "slow", "arguments": {"seconds": 0}, "task": {}})
    first_id = first.result.task.task_id
    peer.request("tasks/result", {"taskId": first_id})
    second = peer.request("tools/call", {"name": "slow", "arguments": {"seconds": 30}, "task": {}})
    second_id = second.result.task.task_id
    cancelled = peer.request("tasks/cancel", {"taskId": second_id})
    assert isinstance(cancelled, ResultReceived) and cancelled.result.status == "cancelled"
    ended = peer.request("tasks/result", {"taskId": second_id})
    assert isinstance(ended, ErrorReceived) and "cancelled" in ended.message
    listed = peer.request("tasks/list", {})
    statuses = {t.task_id: t.status for t in listed.result.tasks}
    assert statuses == {first_id: "completed", second_id: "cancelled"}
    for method in ("tasks/get", "tasks/result", "tasks/cancel"):
        unknown = peer.request(method, {"taskId": "nope"})
        assert isinstance(unknown, ErrorReceived) and unknown.code == -32602, (method, unknown)
        assert "no task 'nope'" in unknown.message
    _closed(peer)


def _closed(peer: Peer) -> None:
    """End the bridge: it said nothing of a fault, and every line validates at 2025-11-25."""
    stderr = peer.close()
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert [str(f) for f in validate_lines(peer.wire, REVISION, strict=True)] == []
