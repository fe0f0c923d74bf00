"""The task fixtures of the MCP conformance suite (the tasks extension, SEP-2663), for an App.

``add_to(app)`` registers the tools the suite's ``tasks-*`` scenarios call on an
``mcpbind.App`` and returns the ``mcpbind.tasks.Tasks`` layer that runs them as tasks for
clients that declare the extension: ``app.asgi(tasks=add_to(app))``. Plain tools become tasks
through ``mcpbind.app.tasks.app_tasks``; the ones that ask the client for input in a task are
written against ``TaskContext`` and, for a call that is no task, against the App's ``Context``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from mcpbind import ProtocolError
from mcpbind.app import App, Context
from mcpbind.app.tasks import app_tasks
from mcpbind.app.tools import ToolError
from mcpbind.errors import INTERNAL_ERROR
from mcpbind.tasks import TaskContext, Tasks

MAX_SECONDS = 60.0  # slow_compute sleeps at most this long

NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
CONFIRM_SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean"}},
    "required": ["confirm"],
}


def elicit(message: str, schema: dict[str, Any]) -> dict[str, Any]:
    """An input request of a task: an elicitation the client answers through tasks/update."""
    return {
        "method": "elicitation/create",
        "params": {"message": message, "requestedSchema": schema},
    }


def text_result(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def deleted(filename: str, answer: Any) -> str:
    accepted = msgspec.to_builtins(answer).get("action") == "accept"
    return f"{'Deleted' if accepted else 'Kept'} {filename}"


def name_given(params: dict[str, Any]) -> str | None:
    """The name the multi-round-trip round of ``test_tool_with_task`` brought, if any."""
    answers = params.get("inputResponses")
    answer = answers.get("user_name") if isinstance(answers, dict) else None
    content = answer.get("content") if isinstance(answer, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    return name if isinstance(name, str) else None


# -- work of the tasks that ask the client -------------------------------------------------------


async def confirm_delete_task(context: TaskContext, params: dict[str, Any]) -> Any:
    filename = str((params.get("arguments") or {}).get("filename", ""))
    answers = await context.ask({"confirm": elicit(f"Delete {filename}?", CONFIRM_SCHEMA)})
    return text_result(deleted(filename, answers["confirm"]))


async def multi_input_task(context: TaskContext, params: dict[str, Any]) -> Any:
    asks = {
        "name": elicit("What is your name?", NAME_SCHEMA),
        "confirm": elicit("Go ahead?", CONFIRM_SCHEMA),
    }
    answers = await context.ask(asks)
    return text_result(f"Received {len(answers)} answers")


async def test_tool_with_task_task(context: TaskContext, params: dict[str, Any]) -> Any:
    return text_result(f"Hello, {name_given(params)}! (from a task)")


def add_to(app: App) -> Tasks:
    """Register the fixtures on ``app`` and return the tasks layer that runs them as tasks."""

    @app.tool
    def greet(name: str = "stranger") -> str:
        """Says hello (never a task)"""
        return f"Hello, {name}!"

    @app.tool
    async def slow_compute(seconds: float = 0, label: str = "") -> str:
        """Sleeps `seconds` (at most 60); a task for a client that declares the extension"""
        seconds = min(max(seconds, 0.0), MAX_SECONDS)
        await asyncio.sleep(seconds)
        return f"Computed {label!r} in {seconds:g} s"

    @app.tool
    async def failing_job() -> str:
        """Fails as a tool after a second (a task only, at 2026-07-28)"""
        await asyncio.sleep(1.0)
        raise ToolError("The job failed")

    @app.tool
    def protocol_error_job() -> str:
        """Fails with a protocol error"""
        raise ProtocolError(INTERNAL_ERROR, "Internal error: the job broke down")

    @app.tool
    async def confirm_delete(ctx: Context, filename: str = "") -> str:
        """Asks the client to confirm a deletion (a task only, at 2026-07-28)"""
        return deleted(filename, await ctx.elicit(f"Delete {filename}?", CONFIRM_SCHEMA))

    @app.tool
    async def multi_input(ctx: Context) -> str:
        """Asks two questions at once (a task only, at 2026-07-28)"""
        answers = await ctx.gather(
            ctx.elicit("What is your name?", NAME_SCHEMA, key="name"),
            ctx.elicit("Go ahead?", CONFIRM_SCHEMA, key="confirm"),
        )
        return f"Received {len(answers)} answers"

    @app.tool
    async def test_tool_with_task(ctx: Context) -> str:
        """Asks for a name in a round trip, then answers in a task (a task only, at 2026-07-28)"""
        # At 2026-07-28 only the first round gets here: the round that brings the name becomes
        # the task (``when`` below).
        answer = msgspec.to_builtins(
            await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        )
        return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!"

    layer = app_tasks(app, "slow_compute", "protocol_error_job", required=("failing_job",))
    layer.tool("confirm_delete", confirm_delete_task, required=True)
    layer.tool("multi_input", multi_input_task, required=True)
    layer.tool(
        "test_tool_with_task",
        test_tool_with_task_task,
        required=True,
        when=lambda params: name_given(params) is not None,
    )
    return layer
