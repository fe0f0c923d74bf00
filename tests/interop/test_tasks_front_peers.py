"""Tasks across the HTTP gateway (`mcpbind bridge --listen ... -- CMD`, make interop): a
2026-07-28 client of the tasks extension (raw HTTP: no SDK client speaks the extension) in front
of ``@modelcontextprotocol/server-everything`` (2025-11-25; a child per link, and over Streamable
HTTP with ``--upstream``), whose
``simulate-research-query`` is a task-only tool. The client gets a task, polls it with
``tasks/get``, answers the elicitation the task asks through ``tasks/update`` and gets the
report; a second task is cancelled. Every message of the core revision it receives validates
against 2026-07-28, the task's result too; the extension's own results carry only its keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import mcpbind
from mcpbind._extensions import TASKS
from mcpbind.validate import validate_lines
from tests._net import free_port, wait_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402
from test_bridge_peers import MCPBIND, need_everything  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

REVISION = "2026-07-28"
FACTS = TASKS[REVISION]
ENVELOPE = mcpbind.bindings(REVISION).FACTS.request_meta
assert ENVELOPE is not None
EXTENSION_KEYS = set(FACTS.task_fields) | {"resultType", "inputRequests", "result", "error"}


@pytest.fixture(params=["child", "upstream"])
def gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    """A gateway in front of server-everything, a child per link (``-- CMD``) or over
    Streamable HTTP (``--upstream URL``): its URL."""
    yield from _gateway(request.param, [])


@pytest.fixture
def one_link_gateway() -> Iterator[str]:
    """A gateway in front of server-everything children with room for one client identity
    without a session (``--max-shared 1``): its URL."""
    yield from _gateway("child", ["--max-shared", "1"])


def _gateway(behind_kind: str, options: list[str]) -> Iterator[str]:
    need_everything()
    port = free_port()
    processes = []
    if behind_kind == "child":
        behind = ["--", "node", str(driver.EVERYTHING), "stdio"]
    else:
        server_port = free_port()
        processes.append(
            subprocess.Popen(
                ["node", str(driver.EVERYTHING), "streamableHttp"],
                env={**os.environ, "PORT": str(server_port)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        wait_port(server_port, processes[0])
        behind = ["--upstream", f"http://127.0.0.1:{server_port}/mcp"]
    front = subprocess.Popen(
        [MCPBIND, "bridge", "--listen", f"127.0.0.1:{port}", *options, *behind],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    processes.insert(0, front)
    try:
        wait_port(port, front)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()


class Client:
    """Stateless 2026-07-28 requests declaring the extension (and form elicitation); ``wire``
    keeps the core revision's exchanges (request and answer), ``extension`` the answers of the
    extension's own results."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30)
        self.ids = 0
        self.wire: list[str] = []
        self.meta = {
            ENVELOPE.version_key: REVISION,
            ENVELOPE.capabilities_key: {
                "elicitation": {"form": {}},
                "extensions": {FACTS.extension: {}},
            },
            ENVELOPE.info_key: {"name": "tasks-through-the-gateway", "version": "1"},
        }

    def request(self, method: str, params: dict[str, Any] | None = None, name: str = "") -> Any:
        self.ids += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": method,
            "params": {**(params or {}), "_meta": self.meta},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": REVISION,
            "mcp-method": method,
        }
        if name:
            headers["mcp-name"] = name
        response = self.http.post(self.url, content=json.dumps(body), headers=headers)
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            messages = [
                json.loads(line[5:])
                for line in response.text.splitlines()
                if line.startswith("data:") and line[5:].strip()
            ]
        else:
            messages = [response.json()]
        [answer] = [m for m in messages if m.get("id") == self.ids and "method" not in m]
        result = answer.get("result")
        if method in (FACTS.get, FACTS.update, FACTS.cancel) or (
            isinstance(result, dict) and result.get("resultType") == FACTS.task_result
        ):
            if isinstance(result, dict):  # the extension's: its keys, its payload validated
                assert set(result) <= EXTENSION_KEYS, result
                if "result" in result:
                    self.wire.append(
                        json.dumps(
                            {
                                **body,
                                "id": f"p{self.ids}",
                                "method": "tools/call",
                                "params": {"name": "x", "_meta": self.meta},
                            }
                        )
                    )
                    self.wire.append(
                        json.dumps(
                            {"jsonrpc": "2.0", "id": f"p{self.ids}", "result": result["result"]}
                        )
                    )
        else:
            self.wire.append(json.dumps(body))
            self.wire.extend(json.dumps(m) for m in messages)
        return answer


def poll(client: Client, task_id: str, until: set[str]) -> dict[str, Any]:
    """``tasks/get`` at the task's poll interval until its status is one of ``until``."""
    deadline = time.monotonic() + 30
    while True:
        task = client.request(FACTS.get, {"taskId": task_id}, name=task_id)["result"]
        assert task["resultType"] == FACTS.complete_result and task["taskId"] == task_id
        if task["status"] in until:
            return dict(task)
        assert time.monotonic() < deadline, task
        time.sleep(min(task.get("pollIntervalMs", 500), 1000) / 1000)


def test_a_2026_client_gets_tasks_of_server_everything_through_the_gateway(gateway: str) -> None:
    client = Client(gateway)
    found = client.request("server/discover")["result"]
    assert FACTS.extension in found["capabilities"]["extensions"]
    names = [t["name"] for t in client.request("tools/list")["result"]["tools"]]
    assert "simulate-research-query" in names
    tool = "simulate-research-query"
    call = {"name": tool, "arguments": {"topic": "python", "ambiguous": True}}
    created = client.request("tools/call", call, name=tool)["result"]
    assert created["resultType"] == FACTS.task_result and created["status"] == FACTS.working
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs"} <= set(created)
    task_id = created["taskId"]
    asking = poll(client, task_id, {FACTS.input_required, FACTS.completed, FACTS.failed})
    assert asking["status"] == FACTS.input_required, asking
    [(name, request)] = asking["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert "interpretation" in request["params"]["requestedSchema"]["properties"]
    answer = {"action": "accept", "content": {"interpretation": "programming"}}
    updated = client.request(
        FACTS.update, {"taskId": task_id, "inputResponses": {name: answer}}, name=task_id
    )
    assert updated["result"] == {"resultType": FACTS.complete_result}
    done = poll(client, task_id, {FACTS.completed, FACTS.failed, FACTS.cancelled})
    assert done["status"] == FACTS.completed, done
    assert "Research Report: python (programming)" in done["result"]["content"][0]["text"]
    # a second task, cancelled while it works
    call["arguments"] = {"topic": "mcp", "ambiguous": False}
    second = client.request("tools/call", call, name=tool)["result"]["taskId"]
    cancelled = client.request(FACTS.cancel, {"taskId": second}, name=second)
    assert cancelled["result"] == {"resultType": FACTS.complete_result}
    assert poll(client, second, {FACTS.cancelled})["status"] == FACTS.cancelled
    # a task no link holds, and one asked for without the extension declared
    unknown = client.request(FACTS.get, {"taskId": "nope"}, name="nope")
    assert unknown["error"]["code"] == -32602
    client.meta[ENVELOPE.capabilities_key] = {}
    undeclared = client.request(FACTS.get, {"taskId": task_id}, name=task_id)
    assert undeclared["error"]["code"] == -32021
    assert [str(f) for f in validate_lines(client.wire, REVISION, strict=True)] == []


def test_a_link_with_a_task_running_keeps_its_place(one_link_gateway: str) -> None:
    """The link (and its child) of a client whose task still runs is not given to another
    client identity (--max-shared): the task is there to poll to its end."""
    client = Client(one_link_gateway)
    client.request("tools/list")
    tool = "simulate-research-query"
    call = {"name": tool, "arguments": {"topic": "mcp", "ambiguous": False}}
    task_id = client.request("tools/call", call, name=tool)["result"]["taskId"]
    other = Client(one_link_gateway)
    other.meta[ENVELOPE.info_key] = {"name": "another-client", "version": "1"}
    busy = other.request("tools/list")
    assert busy["error"]["code"] == -32603 and "max_shared" in busy["error"]["message"]
    done = poll(client, task_id, {FACTS.completed, FACTS.failed, FACTS.cancelled})
    assert done["status"] == FACTS.completed, done
    assert "Research Report: mcp" in done["result"]["content"][0]["text"]
