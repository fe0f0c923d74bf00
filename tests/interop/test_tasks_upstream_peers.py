"""Tasks across the HTTP gateway (`mcpbind bridge --listen --upstream URL`, make interop): a
2025-11-25 client (raw HTTP, its session and its answers by hand: no SDK client runs core tasks
through a proxy) in front of examples/everything_server.py, which serves the 2026-07-28 tasks
extension. The client is told of `tasks`, makes task-augmented calls, polls them with
`tasks/get`, lists them, answers the elicitation `confirm_delete` asks through `tasks/result`
(which then carries the result) and cancels one; every message either way validates against
2025-11-25."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind.validate import validate_lines
from tests._net import free_port, wait_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
MCPBIND = str(Path(sys.executable).with_name("mcpbind"))
REVISION = "2025-11-25"
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture
def gateway() -> Iterator[str]:
    """examples/everything_server.py and a gateway in front of it: the gateway's URL."""
    yield from _gateway([], [])


@pytest.fixture
def protected_gateway(authorization_servers: tuple[str, str]) -> Iterator[str]:
    """examples/everything_server.py requiring tokens of the real authorization server
    (tests/interop/authserver.py), and a gateway in front of it with credentials of its own
    (``--upstream-client-id``): the gateway's URL."""
    issuer = authorization_servers[0]
    yield from _gateway(
        ["--auth-server", issuer],
        ["--upstream-client-id", "app", "--upstream-client-secret", "app-secret"],
    )


def _gateway(server_options: list[str], gateway_options: list[str]) -> Iterator[str]:
    server_port, gateway_port = free_port(), free_port()
    server = subprocess.Popen(
        [sys.executable, "examples/everything_server.py", "--port", str(server_port)]
        + server_options,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    front = subprocess.Popen(
        [
            MCPBIND,
            "bridge",
            "--listen",
            f"127.0.0.1:{gateway_port}",
            "--upstream",
            f"http://127.0.0.1:{server_port}/mcp",
            *gateway_options,
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_port(server_port, server)
        wait_port(gateway_port, front)
        yield f"http://127.0.0.1:{gateway_port}/mcp"
    finally:
        for process in (front, server):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


class Client:
    """A 2025-11-25 session over raw HTTP; ``wire`` keeps every message either way."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30)
        self.headers = dict(ACCEPT)
        self.wire: list[str] = []
        self.lock = threading.Lock()

    def _keep(self, message: Any) -> None:
        with self.lock:
            self.wire.append(json.dumps(message))

    def _messages(self, response: httpx.Response) -> list[Any]:
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            found = [
                json.loads(line[5:])
                for line in response.text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        else:
            found = [response.json()] if response.content else []
        for message in found:
            self._keep(message)
        return found

    def send(self, message: dict[str, Any]) -> httpx.Response:
        self._keep(message)
        return self.http.post(self.url, content=json.dumps(message), headers=self.headers)

    def open(self, name: str) -> dict[str, Any]:
        """The 2025-11-25 handshake, declaring tasks (list, cancel) and form elicitation: the
        tasks capability the gateway offered (the session's headers then set)."""
        caps = {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}}
        info = {"name": name, "version": "1"}
        hello = {"protocolVersion": REVISION, "capabilities": caps, "clientInfo": info}
        response = self.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
        [opened] = self._messages(response)
        self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = REVISION
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return opened["result"]["capabilities"]["tasks"]  # type: ignore[no-any-return]

    def request(self, id: int, method: str, params: dict[str, Any]) -> Any:
        response = self.send({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        [answer] = [m for m in self._messages(response) if m.get("id") == id]
        return answer

    def payload(self, id: int, task_id: str, answer: dict[str, Any]) -> tuple[list[Any], Any]:
        """``tasks/result`` of ``task_id``, answering each request the stream carries with
        ``answer``: (those requests, the final response)."""
        body = {"jsonrpc": "2.0", "id": id, "method": "tasks/result", "params": {"taskId": task_id}}
        self._keep(body)
        asked = []
        with self.http.stream(
            "POST", self.url, content=json.dumps(body), headers=self.headers
        ) as r:
            for line in r.iter_lines():
                if not line.startswith("data:") or not line[5:].strip():
                    continue
                message = json.loads(line[5:])
                self._keep(message)
                if "method" in message and "id" in message:
                    asked.append(message)
                    reply = {"jsonrpc": "2.0", "id": message["id"], "result": answer}
                    self._keep(reply)
                    httpx.post(self.url, content=json.dumps(reply), headers=self.headers)
                elif message.get("id") == id:
                    return asked, message
        raise AssertionError("the tasks/result stream ended without its answer")


def test_a_2025_client_gets_tasks_of_a_2026_server_through_the_gateway(gateway: str) -> None:
    client = Client(gateway)
    offered = client.open("tasks-through-the-gateway")
    assert offered == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}

    call = {"name": "confirm_delete", "arguments": {"filename": "notes.txt"}, "task": {}}
    created = client.request(2, "tools/call", call)["result"]["task"]
    assert created["status"] == "working" and {"taskId", "ttl", "createdAt"} <= set(created)
    task_id = created["taskId"]
    got = client.request(3, "tasks/get", {"taskId": task_id})["result"]
    assert got["taskId"] == task_id and got["status"] in ("working", "input_required")
    asked, done = client.payload(4, task_id, {"action": "accept", "content": {"confirm": True}})
    [elicit] = asked
    assert elicit["method"] == "elicitation/create"
    assert elicit["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert done["result"]["content"] == [{"type": "text", "text": "Deleted notes.txt"}]
    slow = {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": 60000}}
    second = client.request(5, "tools/call", slow)["result"]["task"]["taskId"]
    listed = client.request(6, "tasks/list", {})["result"]["tasks"]
    assert {t["taskId"] for t in listed} == {task_id, second}
    cancelled = client.request(7, "tasks/cancel", {"taskId": second})["result"]
    assert cancelled["taskId"] == second and cancelled["status"] == "cancelled"
    # a call without `task` is not made a task (the extension is declared only on those)
    plain = client.request(8, "tools/call", {"name": "slow_compute", "arguments": {}})
    assert "content" in plain["result"]
    unknown = client.request(9, "tasks/get", {"taskId": "nope"})
    assert unknown["error"]["code"] == -32602
    assert [str(f) for f in validate_lines(client.wire, REVISION, strict=True)] == []


def test_the_gateways_own_task_requests_are_authorized(protected_gateway: str) -> None:
    """The gateway's own requests of the translation (the task-augmented call, tasks/get, the
    polls of tasks/result, tasks/cancel) carry the gateway's token, as the link's do: the
    client, which has none, gets its tasks of a protected server."""
    client = Client(protected_gateway)
    caps = {"tasks": {"list": {}, "cancel": {}}}
    info = {"name": "tasks-through-a-protected-gateway", "version": "1"}
    hello = {"protocolVersion": REVISION, "capabilities": caps, "clientInfo": info}
    response = client.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello})
    [opened] = client._messages(response)
    assert opened["result"]["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    client.headers["mcp-session-id"] = response.headers["mcp-session-id"]
    client.headers["mcp-protocol-version"] = REVISION
    client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    call = {"name": "slow_compute", "arguments": {"seconds": 0.2}, "task": {}}
    created = client.request(2, "tools/call", call)
    task_id = created["result"]["task"]["taskId"]
    got = client.request(3, "tasks/get", {"taskId": task_id})
    assert got["result"]["taskId"] == task_id
    done = client.request(4, "tasks/result", {"taskId": task_id})
    assert done["result"]["content"] and "error" not in done
    slow = {"name": "slow_compute", "arguments": {"seconds": 30}, "task": {}}
    second = client.request(5, "tools/call", slow)["result"]["task"]["taskId"]
    cancelled = client.request(6, "tasks/cancel", {"taskId": second})
    assert cancelled["result"]["status"] == "cancelled"
    assert [str(f) for f in validate_lines(client.wire, REVISION, strict=True)] == []
