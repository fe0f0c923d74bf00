"""Tasks across `mcpbind bridge` with a real server (`make interop`): a 2026-07-28 client of the
tasks extension (raw JSON lines: no SDK client speaks the extension) in front of
``@modelcontextprotocol/server-everything``, whose ``simulate-research-query`` is a 2025-11-25
task-only tool. The client gets a task, polls it with ``tasks/get``, answers the elicitation the
task asks through ``tasks/update`` and gets the report; a second task is cancelled."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import mcpbind
from mcpbind._extensions import TASKS

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402
from test_bridge_peers import MCPBIND, need_everything  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

FACTS = TASKS["2026-07-28"]
ENVELOPE = mcpbind.bindings("2026-07-28").FACTS.request_meta
assert ENVELOPE is not None
TASK_KEYS = set(FACTS.task_fields)


class RawClient:
    """JSON lines to and from the bridge process; every request carries the 2026-07-28
    envelope declaring the extension (and form elicitation)."""

    def __init__(self) -> None:
        argv = [MCPBIND, "bridge", "--client-revision", "2026-07-28", "--"]
        self.proc = subprocess.Popen(
            [*argv, "node", str(driver.EVERYTHING), "stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ids = 0
        self.meta = {
            ENVELOPE.version_key: "2026-07-28",
            ENVELOPE.capabilities_key: {
                "elicitation": {"form": {}},
                "extensions": {FACTS.extension: {}},
            },
            ENVELOPE.info_key: {"name": "raw-tasks-client", "version": "1"},
        }

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.ids += 1
        message = {
            "jsonrpc": "2.0",
            "id": self.ids,
            "method": method,
            "params": {**(params or {}), "_meta": self.meta},
        }
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + 20
        while True:
            got = json.loads(self.lines.get(timeout=max(deadline - time.monotonic(), 0.01)))
            if got.get("id") == self.ids and "method" not in got:
                return dict(got)

    def close(self) -> str:
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(20)
        return self.proc.stderr.read().decode(errors="replace")


def poll(client: RawClient, task_id: str, until: set[str]) -> dict[str, Any]:
    """``tasks/get`` at the task's poll interval until its status is one of ``until``."""
    deadline = time.monotonic() + 30
    while True:
        got = client.request(FACTS.get, {"taskId": task_id})
        task = got["result"]
        assert task["resultType"] == FACTS.complete_result and task["taskId"] == task_id
        assert set(task) - {"resultType", "inputRequests", "result", "error"} <= TASK_KEYS
        if task["status"] in until:
            return dict(task)
        assert time.monotonic() < deadline, task
        time.sleep(min(task.get("pollIntervalMs", 500), 1000) / 1000)


def test_a_2026_client_gets_server_everythings_task_and_polls_it_to_its_result() -> None:
    need_everything()
    client = RawClient()
    try:
        found = client.request("server/discover")["result"]
        assert FACTS.extension in found["capabilities"]["extensions"]
        names = [t["name"] for t in client.request("tools/list")["result"]["tools"]]
        assert "simulate-research-query" in names
        call = {
            "name": "simulate-research-query",
            "arguments": {"topic": "python", "ambiguous": True},
        }
        created = client.request("tools/call", call)["result"]
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
            FACTS.update, {"taskId": task_id, "inputResponses": {name: answer}}
        )
        assert updated["result"] == {"resultType": FACTS.complete_result}
        done = poll(client, task_id, {FACTS.completed, FACTS.failed, FACTS.cancelled})
        assert done["status"] == FACTS.completed, done
        report = done["result"]["content"][0]["text"]
        assert "Research Report: python (programming)" in report
        # a second task, cancelled while it works
        call["arguments"] = {"topic": "mcp", "ambiguous": False}
        second = client.request("tools/call", call)["result"]["taskId"]
        cancelled = client.request(FACTS.cancel, {"taskId": second})
        assert cancelled["result"] == {"resultType": FACTS.complete_result}
        assert poll(client, second, {FACTS.cancelled})["status"] == FACTS.cancelled
        # the methods the extension removed are not there for its client
        gone = client.request("tasks/list")
        assert gone["error"]["code"] == -32601
    finally:
        stderr = client.close()
    assert "notifications of task" in stderr  # the status notifications: a loss, said once
