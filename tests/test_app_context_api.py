"""The context's one rule (docs/app.md, The context): every call that talks to the client is
awaitable. ``log`` and ``progress`` are sent at once, so awaiting them is optional; ``require``,
``close_stream`` and ``wait`` are plain calls, and a type checker refuses ``await`` on them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import mcpbind
from codegen.paths import REPO_ROOT
from mcpbind import App, Client, Context
from mcpbind import events as ev

RELEASED = mcpbind.REVISIONS[: mcpbind.REVISIONS.index(mcpbind.LATEST) + 1]


def logging_app() -> App:
    app = App("logger")

    @app.tool
    async def awaited(ctx: Context) -> str:
        await ctx.log("info", "awaited log")
        await ctx.info("awaited info")
        await ctx.progress(1, 2, "half")
        return "ok"

    @app.tool
    async def plain(ctx: Context) -> str:
        ctx.log("info", "plain log")
        ctx.warning("plain warning")
        ctx.progress(2, 2)
        return "ok"

    @app.tool
    def in_a_thread(ctx: Context) -> str:
        ctx.info("from a worker thread")
        return "ok"

    return app


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_log_and_progress_work_awaited_or_not(revision: str):
    messages: list[Any] = []
    progress: list[tuple[float, float | None]] = []

    def heard(event: ev.NotificationReceived) -> None:
        if event.method == "notifications/message":
            messages.append(event.params.data)

    async def main() -> list[str]:
        async with Client(logging_app(), revisions=[revision], on_notification=heard) as client:
            await client.set_log_level("info")
            texts = []
            for name in ("awaited", "plain", "in_a_thread"):
                result = await client.call_tool(
                    name, progress=lambda p, total, message: progress.append((p, total))
                )
                texts.append(result.content[0].text)
            await asyncio.sleep(0.05)  # notifications from the worker thread
            return texts

    assert asyncio.run(main()) == ["ok", "ok", "ok"]
    assert messages == [
        "awaited log",
        "awaited info",
        "plain log",
        "plain warning",
        "from a worker thread",
    ]
    assert progress == [(1, 2), (2, 2)]


def test_a_type_checker_accepts_await_on_what_talks_and_refuses_it_on_plain_calls(
    tmp_path: Path,
):
    code = textwrap.dedent("""
        from mcpbind import Context

        async def tool(ctx: Context) -> None:
            await ctx.log("info", "x")
            ctx.log("info", "x")
            await ctx.progress(1, 2)
            await ctx.debug("x")
            await ctx.require("sampling")
        """)
    (tmp_path / "tool.py").write_text(code, encoding="utf-8")
    env = {**os.environ, "MYPYPATH": str(REPO_ROOT / "generated")}
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "tool.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert errors, checked.stdout
    assert all(line.startswith("tool.py:9: error:") for line in errors), checked.stdout
    assert 'Incompatible types in "await" (actual type "None"' in checked.stdout
