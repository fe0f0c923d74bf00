"""Record a 2025-11-25 session with ``@modelcontextprotocol/server-everything`` that uses tasks
both ways (needs ``make interop-setup``):

- the client asks the server for tasks: ``tools/call`` of ``simulate-research-query`` with
  ``params.task``, polled with ``tasks/get``, its payload fetched with ``tasks/result`` (which
  carries the server's ``elicitation/create`` for the task's ``input_required`` step), another one
  cancelled with ``tasks/cancel``, and ``tasks/list``;
- the server asks the client for tasks: ``trigger-sampling-request-async`` and
  ``trigger-elicitation-request-async`` send ``sampling/createMessage`` and ``elicitation/create``
  with ``params.task``; the client answers with a task, which the server polls with ``tasks/get``
  and collects with ``tasks/result``.

The transcript is written in the format of ``driver.py`` (``{"from", "message", ...}`` a line):

    python tests/interop/tasks_recorder.py [--out tests/fixtures/sessions/2025-11-25-tasks.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent))

import driver  # noqa: E402

import mcpbind  # noqa: E402
from mcpbind import ErrorResponse, Request, Response  # noqa: E402

REVISION = "2025-11-25"
OUT = Path(__file__).resolve().parents[1] / "fixtures" / "sessions" / f"{REVISION}-tasks.jsonl"
TASK_TOOLS = (
    "simulate-research-query",
    "trigger-sampling-request-async",
    "trigger-elicitation-request-async",
)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class TasksSession(driver.Session):
    """A client that also runs the tasks the server asks of it: each finishes at once, and is
    reported ``completed`` from the first ``tasks/get`` on."""

    def __init__(self) -> None:
        super().__init__(["node", str(driver.EVERYTHING), "stdio"], REVISION)
        self.client_tasks: dict[str, dict[str, Any]] = {}  # task id -> its Task and result

    def client_capabilities(self) -> dict[str, Any]:
        return {
            "roots": {"listChanged": True},
            "sampling": {},
            "elicitation": {"form": {}},
            "tasks": {
                "list": {},
                "cancel": {},
                "requests": {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
            },
        }

    def call(self, method: str, params: dict[str, Any], answer: Any) -> Any:
        """``request``, and its result, which must be of the class ``answer``."""
        result = driver.ok(self.request(method, params), method)
        assert isinstance(result, answer), (method, type(result), answer)
        return result

    def check_precise(self, msg: Any) -> None:
        if not isinstance(msg, Response):  # a result is checked by ``call``: tasks change it
            super().check_precise(msg)

    def dispatch(self, msg: Any) -> None:
        if isinstance(msg, (Response, ErrorResponse)):
            return
        inner = msg.message if isinstance(msg, Request) else msg
        M = self.M
        method = inner.method
        if method in TASK_ANSWERS and inner.params.task is not msgspec.UNSET:
            task_id = f"client-task-{len(self.client_tasks) + 1}"
            now = _now()
            task = {
                "taskId": task_id,
                "status": "working",
                "createdAt": now,
                "lastUpdatedAt": now,
                "ttl": inner.params.task.ttl,
                "pollInterval": 500,
            }
            result = mcpbind.convert(TASK_ANSWERS[method], M.METHODS[method].result)
            self.client_tasks[task_id] = {"task": task, "result": result}
            answer = mcpbind.convert({"task": task}, M.CreateTaskResult)
        elif method in ("tasks/get", "tasks/result"):
            found = self.client_tasks[inner.params.task_id]
            found["task"] |= {"status": "completed", "lastUpdatedAt": _now()}
            task_result = mcpbind.convert(found["task"], M.GetTaskResult)
            answer = task_result if method == "tasks/get" else found["result"]
        elif method == "elicitation/create":  # the input_required step of the research task
            content = {"interpretation": "programming"}
            answer = mcpbind.convert({"action": "accept", "content": content}, M.ElicitResult)
        else:
            return super().dispatch(msg)
        self.server_requests.append(method)
        self._write(self.codec.respond(msg.id, answer))
        return None


# What the client's tasks end with, by the method that created them.
TASK_ANSWERS: dict[str, Any] = {
    "sampling/createMessage": driver.SERVER_REQUEST_ANSWERS["sampling/createMessage"](None),
    "elicitation/create": {"action": "accept", "content": {"name": "mcpbind"}},
}


def record() -> TasksSession:
    s = TasksSession()
    M = s.M
    try:
        init = s.call(
            "initialize",
            {
                "protocolVersion": REVISION,
                "capabilities": s.client_capabilities(),
                "clientInfo": {"name": "mcpbind-tasks", "version": "0"},
            },
            M.InitializeResult,
        )
        assert mcpbind.supports(init.capabilities, "tasks.requests.tools.call"), init.capabilities
        s.notify("notifications/initialized")
        s.drain(0.3)
        names = {t.name for t in s.call("tools/list", {}, M.ListToolsResult).tools}
        assert set(TASK_TOOLS) <= names, sorted(names)

        # client -> server: a task-augmented tools/call, its input_required step, its payload
        research = {"topic": "python", "ambiguous": True}
        created = s.call(
            "tools/call",
            {"name": "simulate-research-query", "arguments": research, "task": {"ttl": 60000}},
            M.CreateTaskResult,
        )
        task_id = created.task.task_id
        status = created.task.status
        deadline = time.monotonic() + 30
        while status not in ("input_required", "completed", "failed", "cancelled"):
            assert time.monotonic() < deadline, status
            s.drain(0.5)
            status = s.call("tasks/get", {"taskId": task_id}, M.GetTaskResult).status
        s.call("tasks/list", {}, M.ListTasksResult)
        # tasks/result waits for the task: the elicitation of its input_required step comes first
        s.call("tasks/result", {"taskId": task_id}, M.CallToolResult)

        # client -> server: a second task, cancelled
        second = s.call(
            "tools/call",
            {
                "name": "simulate-research-query",
                "arguments": {"topic": "mcp", "ambiguous": False},
                "task": {"ttl": 60000},
            },
            M.CreateTaskResult,
        )
        s.call("tasks/cancel", {"taskId": second.task.task_id}, M.CancelTaskResult)

        # server -> client: task-augmented sampling and elicitation, polled and collected
        s.call(
            "tools/call",
            {
                "name": "trigger-sampling-request-async",
                "arguments": {"prompt": "hi", "maxTokens": 8},
            },
            M.CallToolResult,
        )
        s.call(
            "tools/call",
            {"name": "trigger-elicitation-request-async", "arguments": {}},
            M.CallToolResult,
        )
        s.drain(0.3)
    finally:
        s.close()
    return s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    s = record()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(e) + "\n" for e in s.transcript), encoding="utf-8")
    print(
        f"{len(s.transcript)} messages, server requests {sorted(set(s.server_requests))}, "
        f"{time.perf_counter() - start:.1f}s -> {args.out}"
    )
    for v in s.violations:
        print(f"  peer deviation: {v.message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
