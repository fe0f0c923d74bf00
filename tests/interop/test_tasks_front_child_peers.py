"""Tasks across the HTTP gateway with a child per link (`mcpbind bridge --listen ... -- CMD`,
make interop): a 2025-11-25 client (raw HTTP, as in test_tasks_upstream_peers.py) in front of a
2026-07-28 App of the tasks extension served over stdio (``app.run(tasks=...)``, the server of
test_tasks_stdio_front_peers.py), the translation's requests on the link's session. The client
is told of ``tasks``, makes a task-augmented call, polls it with ``tasks/get``, answers the
elicitation a task asks during ``tasks/result``, lists and cancels; an unknown task is -32602;
every message either way validates against 2025-11-25."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcpbind.validate import validate_lines
from tests._net import free_port, wait_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_tasks_stdio_front_peers import RELATED, SERVER  # noqa: E402
from test_tasks_upstream_peers import MCPBIND, REVISION, Client  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    """A gateway whose links each start the App as a child: its URL."""
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    port = free_port()
    front = subprocess.Popen(
        [MCPBIND, "bridge", "--listen", f"127.0.0.1:{port}", "--", sys.executable, str(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_port(port, front)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        front.terminate()
        try:
            front.wait(10)
        except subprocess.TimeoutExpired:
            front.kill()
        assert front.stderr is not None
        stderr = front.stderr.read().decode(errors="replace")
        assert "Traceback" not in stderr and "internal error" not in stderr, stderr


def test_a_2025_client_gets_tasks_of_a_2026_child_through_the_gateway(gateway: str) -> None:
    client = Client(gateway)
    offered = client.open("tasks-through-a-child")
    assert offered == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}

    slow = {"name": "slow", "arguments": {"seconds": 0.2}, "task": {}}
    created = client.request(2, "tools/call", slow)["result"]["task"]
    assert created["status"] == "working"
    task_id = created["taskId"]
    got = client.request(3, "tasks/get", {"taskId": task_id})["result"]
    assert got["taskId"] == task_id and got["status"] in ("working", "completed")
    done = client.request(4, "tasks/result", {"taskId": task_id})
    assert done["result"]["content"][0]["text"] == "slept 0.2"
    assert done["result"]["_meta"][RELATED] == {"taskId": task_id}

    confirm = {"name": "confirm", "arguments": {}, "task": {}}
    confirm_id = client.request(5, "tools/call", confirm)["result"]["task"]["taskId"]
    asked, done = client.payload(6, confirm_id, {"action": "accept", "content": {}})
    [elicit] = asked
    assert elicit["method"] == "elicitation/create" and elicit["params"]["message"] == "Go ahead?"
    assert elicit["params"]["_meta"][RELATED] == {"taskId": confirm_id}
    assert done["result"]["content"][0]["text"] == "accept"

    long = {"name": "slow", "arguments": {"seconds": 30}, "task": {}}
    long_id = client.request(7, "tools/call", long)["result"]["task"]["taskId"]
    cancelled = client.request(8, "tasks/cancel", {"taskId": long_id})["result"]
    assert cancelled["status"] == "cancelled"
    listed = client.request(9, "tasks/list", {})["result"]["tasks"]
    statuses = {t["taskId"]: t["status"] for t in listed}
    assert statuses == {task_id: "completed", confirm_id: "completed", long_id: "cancelled"}
    unknown = client.request(10, "tasks/get", {"taskId": "nope"})
    assert unknown["error"]["code"] == -32602
    assert [str(f) for f in validate_lines(client.wire, REVISION, strict=True)] == []
