"""An MCP server at 2025-11-25 (an ``mcpbind.App`` over Streamable HTTP) whose tools ask the client
and then take their time: what a gateway's input round looks like while the server still works
on the request after the client's answer.

``python tests/interop/gateway_upstream.py --port PORT``; tools:
- ``ask_then_report``: elicits a ``response``, then reports progress twice (50 ms apart) and
  answers ``answered: <response>``;
- ``ask_then_wait``: elicits, then waits ``seconds`` (60 by default) before answering.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from mcpbind.app import App, Context
from mcpbind.transports.serving import serve

mcp = App("gateway-upstream", revisions=("2025-11-25",))
FORM = {
    "type": "object",
    "properties": {"response": {"type": "string"}},
    "required": ["response"],
}


def answered(result: Any) -> str:
    content = getattr(result, "content", None) or {}
    return f"answered: {content.get('response')}"


@mcp.tool
async def ask_then_report(ctx: Context) -> str:
    """Elicits, then reports progress twice before answering"""
    result = await ctx.elicit("say something", FORM)
    for step in (1, 2):
        ctx.progress(step, 2, f"step {step} of 2")
        await asyncio.sleep(0.05)
    return answered(result)


@mcp.tool
async def ask_then_wait(ctx: Context, seconds: float = 60.0) -> str:
    """Elicits, then waits before answering"""
    result = await ctx.elicit("say something", FORM)
    await asyncio.sleep(seconds)
    return answered(result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    serve(mcp.asgi(), "127.0.0.1", args.port, log_level="warning")


if __name__ == "__main__":
    main()
