"""The task fixtures of the MCP conformance suite (the tasks extension, SEP-2663).

``tasks()`` builds the ``mcpbind.tasks.Tasks`` layer that runs the tools the suite's ``tasks-*``
scenarios call as tasks; ``add_to(app)`` also registers those tools on an ``mcpbind.App`` (what
they do when a call is no task) and returns the layer: ``app.asgi(tasks=add_to(app))``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from mcpbind import ProtocolError
from mcpbind.app import App, Context
from mcpbind.errors import INTERNAL_ERROR
from mcpbind.tasks import TaskContext, Tasks

MAX_SECONDS = 60.0  # slow_compute sleeps at most this long


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


NAME_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}},
    "required": ["name"],
}
ASK_NAME: dict[str, Any] = {
    "method": "elicitation/create",
    "params": {"message": "What is your name?", "requestedSchema": NAME_SCHEMA},
}


def _confirm(message: str) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {"confirm": {"type": "boolean"}},
                "required": ["confirm"],
            },
        },
    }


def _arguments(params: dict[str, Any]) -> dict[str, Any]:
    args = params.get("arguments")
    return args if isinstance(args, dict) else {}


def _seconds(params: dict[str, Any]) -> float:
    value = _arguments(params).get("seconds", 0)
    number = float(value) if isinstance(value, int | float) else 0.0
    return min(max(number, 0.0), MAX_SECONDS)


def _name_given(params: dict[str, Any]) -> str | None:
    answers = params.get("inputResponses")
    answer = answers.get("user_name") if isinstance(answers, dict) else None
    content = answer.get("content") if isinstance(answer, dict) else None
    name = content.get("name") if isinstance(content, dict) else None
    return name if isinstance(name, str) else None


async def _slow_compute(context: TaskContext, params: dict[str, Any]) -> Any:
    seconds = _seconds(params)
    await asyncio.sleep(seconds)
    label = _arguments(params).get("label", "")
    return {"content": [_text(f"Computed {label!r} in {seconds:g} s")]}


async def _failing_job(context: TaskContext, params: dict[str, Any]) -> Any:
    await asyncio.sleep(1.0)
    return {"content": [_text("The job failed")], "isError": True}


async def _protocol_error_job(context: TaskContext, params: dict[str, Any]) -> Any:
    raise ProtocolError(INTERNAL_ERROR, "Internal error: the job broke down")


async def _confirm_delete(context: TaskContext, params: dict[str, Any]) -> Any:
    filename = str(_arguments(params).get("filename", ""))
    answers = await context.ask({"confirm": _confirm(f"Delete {filename}?")})
    action = answers["confirm"].get("action")
    verb = "Deleted" if action == "accept" else "Kept"
    return {"content": [_text(f"{verb} {filename}")]}


async def _multi_input(context: TaskContext, params: dict[str, Any]) -> Any:
    answers = await context.ask({"name": ASK_NAME, "confirm": _confirm("Go ahead?")})
    return {"content": [_text(f"Received {len(answers)} answers")]}


async def _with_task(context: TaskContext, params: dict[str, Any]) -> Any:
    return {"content": [_text(f"Hello, {_name_given(params)}! (from a task)")]}


def tasks() -> Tasks:
    """The tasks layer with the suite's task fixtures, at its default bounds."""
    layer = Tasks()
    layer.tool("slow_compute", _slow_compute)
    layer.tool("failing_job", _failing_job, required=True)
    layer.tool("protocol_error_job", _protocol_error_job)
    layer.tool("confirm_delete", _confirm_delete, required=True)
    layer.tool("multi_input", _multi_input, required=True)
    # The first round gathers the name by the multi-round-trip result; the round that brings
    # it becomes the task.
    layer.tool(
        "test_tool_with_task",
        _with_task,
        required=True,
        when=lambda params: _name_given(params) is not None,
    )
    return layer


def add_to(app: App) -> Tasks:
    """Register the fixtures' tools on ``app`` (what they do when the call is no task: a client
    that did not declare the extension, the first round of ``test_tool_with_task``) and return
    the tasks layer that runs them as tasks: ``app.asgi(tasks=add_to(app))``."""

    @app.tool
    def greet(name: str = "stranger") -> str:
        """Says hello (never a task)"""
        return f"Hello, {name}!"

    @app.tool
    async def slow_compute(seconds: float = 0, label: str = "") -> str:
        """Sleeps `seconds` (at most 60); a task when the client declares the extension"""
        seconds = min(max(seconds, 0.0), MAX_SECONDS)
        await asyncio.sleep(seconds)
        return f"Computed {label!r} in {seconds:g} s"

    @app.tool
    def failing_job() -> str:
        """A task whose tool fails (a task only: -32021 without the extension)"""
        raise AssertionError("the tasks layer refuses this call without the extension")

    @app.tool
    def protocol_error_job() -> str:
        """A task that fails with a protocol error"""
        raise ProtocolError(INTERNAL_ERROR, "Internal error: the job broke down")

    @app.tool
    def confirm_delete(filename: str = "") -> str:
        """A task that asks the client to confirm (a task only)"""
        raise AssertionError("the tasks layer refuses this call without the extension")

    @app.tool
    def multi_input() -> str:
        """A task that asks two questions at once (a task only)"""
        raise AssertionError("the tasks layer refuses this call without the extension")

    @app.tool
    async def test_tool_with_task(ctx: Context) -> str:
        """Asks for a name in a round trip, then answers it in a task"""
        # Reached for the first round only: the round that brings the name becomes the task.
        answer = msgspec.to_builtins(
            await ctx.elicit(ASK_NAME["params"]["message"], NAME_SCHEMA, key="user_name")
        )
        return f"Hello, {(answer.get('content') or {}).get('name', 'stranger')}!"

    return tasks()
