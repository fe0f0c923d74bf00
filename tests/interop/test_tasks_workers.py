"""Tasks across two worker processes of examples/everything_server.py sharing one real Redis
(`--redis URL`), each on its own port: a task created on one is seen (tasks/get), answered
(tasks/update) and cancelled (tasks/cancel) through the other (docs/tasks.md, "Several
workers")."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from mcpbind._extensions import TASKS
from tests.interop.test_http_workers import ACCEPT, Worker, two_workers  # noqa: F401 (workers)

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

FACTS = TASKS["2026-07-28"]
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {
        "elicitation": {"form": {}},
        "extensions": {FACTS.extension: {}},
    },
    "io.modelcontextprotocol/clientInfo": {"name": "workers-test", "version": "1"},
}


def post(worker: Worker, method: str, params: dict[str, Any], id: int = 1) -> Any:
    body = {"jsonrpc": "2.0", "id": id, "method": method, "params": {**params, "_meta": META}}
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
    name = params.get("name", params.get("taskId"))
    if name is not None:
        headers["mcp-name"] = name
    response = httpx.post(worker.url, content=json.dumps(body), headers=headers, timeout=10)
    return response.json()


def until(worker: Worker, task_id: str, *statuses: str) -> Any:
    deadline = time.monotonic() + 20
    while True:
        task = post(worker, FACTS.get, {"taskId": task_id})["result"]
        if task["status"] in statuses:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.05)


def test_a_task_made_on_one_worker_is_polled_answered_and_cancelled_on_the_other(
    workers: tuple[Worker, Worker],
) -> None:
    a, b = workers
    call = {"name": "confirm_delete", "arguments": {"filename": "notes.txt"}}
    created = post(a, "tools/call", call)["result"]
    assert created["resultType"] == FACTS.task_result
    task_id = created["taskId"]
    # seen on the other worker at once, then asking for its input there
    seen = post(b, FACTS.get, {"taskId": task_id})["result"]
    assert seen["taskId"] == task_id and seen["resultType"] == FACTS.complete_result
    asking = until(b, task_id, FACTS.input_required)
    assert list(asking["inputRequests"]) == ["confirm"]
    # answered through the other worker: the worker running it goes on
    answer = {"action": "accept", "content": {"confirm": True}}
    updated = post(b, FACTS.update, {"taskId": task_id, "inputResponses": {"confirm": answer}})
    assert updated["result"] == {"resultType": FACTS.complete_result}
    done = until(b, task_id, FACTS.completed, FACTS.failed)
    assert done["status"] == FACTS.completed, done
    assert "notes.txt" in done["result"]["content"][0]["text"]
    assert until(a, task_id, FACTS.completed)["result"] == done["result"]
    # a finished task stays finished, whichever worker is asked to cancel it
    assert post(b, FACTS.cancel, {"taskId": task_id})["result"]["resultType"] == "complete"
    assert post(b, FACTS.get, {"taskId": task_id})["result"]["status"] == FACTS.completed
    # cancelled through the other worker: settled for both, the work stopped where it runs
    slow = {"name": "slow_compute", "arguments": {"seconds": 30, "label": "x"}}
    second = post(a, "tools/call", slow)["result"]["taskId"]
    cancelled = post(b, FACTS.cancel, {"taskId": second})
    assert cancelled["result"] == {"resultType": FACTS.complete_result}
    assert post(b, FACTS.get, {"taskId": second})["result"]["status"] == FACTS.cancelled
    assert until(a, second, FACTS.cancelled)["status"] == FACTS.cancelled
    # an unknown task is unknown on both
    for worker in (a, b):
        assert post(worker, FACTS.get, {"taskId": "nope"})["error"]["code"] == -32602
