"""A small MCP server on the official `mcp` package (pinned in pyproject's dev extras), over stdio.

mcpbind's interop tests drive it at 2025-06-18, 2025-11-25 and 2026-07-28: the Codec-only driver
and the example client (examples/stdio_client.py). Besides plain tools, prompts and resources:

- ``confirm`` needs the user's answer: at 2026-07-28 a multi-round-trip ``InputRequiredResult``
  (answered by retrying with ``inputResponses`` and ``requestState``), before that a standalone
  ``elicitation/create`` request to the client in the middle of the call;
- ``touch`` publishes a tools list-changed event to ``subscriptions/listen`` streams (the SDK
  serves ``subscriptions/listen`` itself at 2026-07-28);
- tasks (2025-11-25): mcp 2.3.0 serves no ``tasks/*`` (its method tables leave them out), so
  ``Tasks`` below, a middleware of the SDK's own server, adds them: it advertises
  ``tasks.requests.tools.call``, answers a task-augmented ``tools/call`` with a
  ``CreateTaskResult`` after running the call through the SDK, and serves ``tasks/get`` and
  ``tasks/result`` from what it stored.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import mcp_types
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context
from pydantic import BaseModel


class Tasks:
    """Task-augmented ``tools/call`` for 2025-11-25, in front of the SDK's own handlers."""

    def __init__(self) -> None:
        self.ids = itertools.count(1)
        self.tasks: dict[str, tuple[dict[str, Any], HandlerResult]] = {}

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        params = dict(ctx.params or {})
        if ctx.method == "tools/call" and "task" in params:
            task_options = params.pop("task")
            result = await call_next(replace(ctx, params=params))
            stamp = "2025-01-01T00:00:00Z"
            task = {
                "taskId": f"task-{next(self.ids)}",
                "status": "completed",
                "createdAt": stamp,
                "lastUpdatedAt": stamp,
                "ttl": task_options.get("ttl", 60_000),
            }
            self.tasks[task["taskId"]] = (task, result)
            return {"task": task}
        if ctx.method in ("tasks/get", "tasks/result"):
            task, result = self.tasks[params["taskId"]]
            return task if ctx.method == "tasks/get" else result
        return await call_next(ctx)


server = MCPServer("mcpbind-interop-2026", middleware=[Tasks()])
_options = server._lowlevel_server.create_initialization_options


def _with_tasks(*args: Any, **kwargs: Any) -> Any:
    """The SDK's initialize options, advertising the tasks that ``Tasks`` serves."""
    options = _options(*args, **kwargs)
    tasks = mcp_types.ServerCapabilities.model_validate(
        {"tasks": {"requests": {"tools": {"call": {}}}}}
    )
    options.capabilities.tasks = tasks.tasks
    return options


server._lowlevel_server.create_initialization_options = _with_tasks  # type: ignore[method-assign]


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    return message


class Answer(BaseModel):
    ok: bool


@server.tool()
async def confirm(question: str, ctx: Context) -> str | mcp_types.InputRequiredResult:
    """Ask the user to confirm: an input-required result at 2026-07-28, an elicitation before."""
    if ctx.protocol_version == "2026-07-28":
        answers = ctx.input_responses
        if not answers:
            ask = mcp_types.ElicitRequest(
                params=mcp_types.ElicitRequestFormParams(
                    message=question,
                    requested_schema={
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                )
            )
            return mcp_types.InputRequiredResult(
                input_requests={"confirm": ask}, request_state="asked"
            )
        reply = answers["confirm"]
        content = reply.content if isinstance(reply, mcp_types.ElicitResult) else None
        return f"confirmed={bool(content and content.get('ok'))} state={ctx.request_state}"
    outcome = await ctx.elicit(question, Answer)
    return f"confirmed={outcome.action == 'accept' and outcome.data.ok}"


@server.tool()
async def touch(ctx: Context) -> str:
    """Tell subscribers that the tool list changed."""
    await ctx.notify_tools_changed()
    return "touched"


@server.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}!"


@server.resource("mcpbind://static/readme")
def readme() -> str:
    """A static text resource."""
    return "mcpbind interop resource"


@server.resource("mcpbind://items/{item}")
def item(item: str) -> str:
    """A templated resource."""
    return f"item {item}"


if __name__ == "__main__":
    server.run("stdio")
