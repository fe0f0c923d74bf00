"""What the App subprocesses of the tasks interop tests serve (their SERVER scripts import it):
the tools and task works each test file's server registers in its own way (which are tasks,
which are required, the Tasks layer's poll interval and bounds)."""

from __future__ import annotations

import asyncio
from typing import Any

from mcpbind.app import ToolError
from mcpbind.errors import ProtocolError


async def slow(seconds: float) -> str:
    """Sleeps, then says so"""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


def refuse() -> str:
    """Always a tool error"""
    raise ToolError("no, thanks")


def add(a: int, b: int) -> int:
    """Adds (never a task)"""
    return a + b


async def confirm(context: Any, params: Any) -> dict[str, Any]:
    """A task asking its client whether to go ahead, ending with the answer's action."""
    answers = await context.ask(
        {
            "ok": {
                "method": "elicitation/create",
                "params": {
                    "message": "Go ahead?",
                    "requestedSchema": {"type": "object", "properties": {}},
                },
            }
        }
    )
    return {"content": [{"type": "text", "text": answers["ok"]["action"]}]}


async def broken(context: Any, params: Any) -> dict[str, Any]:
    """A task that fails, after ``arguments.after`` seconds (none: at once)."""
    await asyncio.sleep(float(params.get("arguments", {}).get("after", 0)))
    raise ProtocolError(-32603, "the job broke down")


async def slow_work(context: Any, params: Any) -> dict[str, Any]:
    """``slow`` as a task work of the Tasks layer itself (no tool of the App behind it)."""
    await asyncio.sleep(float(params["arguments"]["seconds"]))
    return {"content": [{"type": "text", "text": "done"}]}
