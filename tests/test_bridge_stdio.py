"""The bridge process plumbing (``mcpbind.bridge.stdio.serve``) with a child process that goes
away: the client's pending requests get errors, and the bridge returns; nothing hangs."""

from __future__ import annotations

import asyncio
import io
import sys
from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from mcpbind.bridge import CONNECTION_CLOSED, Bridge
from mcpbind.bridge.stdio import serve

pytestmark = pytest.mark.timeout(60)

# A server that answers initialize (2025-06-18) and then exits at the first request after it.
SERVER = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
            "serverInfo": {"name": "dies", "version": "0"}}}), flush=True)
    elif "id" in msg and "method" in msg:
        sys.exit(3)
"""


def run(client_lines: list[bytes], *, close_input: bool) -> tuple[int, list[Any], str]:
    client = mcpbind.ClientSession("2025-11-25", info={"name": "c", "version": "1"})
    client.connect()
    out = io.BytesIO()
    log = io.StringIO()

    async def main() -> int:
        reader = asyncio.StreamReader()
        for raw in client.data_to_send():
            reader.feed_data(raw + b"\n")
        bridge = Bridge(server_revisions="2025-06-18")
        task = asyncio.ensure_future(
            serve([sys.executable, "-c", SERVER], bridge, reader, out, log)
        )
        while b'"result"' not in out.getvalue():  # the handshake first, as a client waits
            await asyncio.sleep(0.02)
        for raw in client_lines:
            reader.feed_data(raw + b"\n")
        if close_input:
            reader.feed_eof()
        return await task

    status = asyncio.run(asyncio.wait_for(main(), 30))
    seen = [e for line in out.getvalue().splitlines() for e in client.receive(line)]
    return status, seen, log.getvalue()


def request(id: int, name: str) -> bytes:
    return msgspec.json.encode(
        {"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name}}
    )


def test_server_exit_answers_every_pending_request() -> None:
    status, seen, log = run([request(100, "a"), request(101, "b")], close_input=False)
    assert status == 3
    assert any(isinstance(e, ev.Negotiated) for e in seen), (seen, log)
    errors = {e.id: e for e in seen if isinstance(e, ev.ErrorReceived)}
    assert set(errors) == {100, 101}, (seen, log)
    assert all(e.code == CONNECTION_CLOSED for e in errors.values())
    assert "the server exited (status 3)" in errors[100].message
    assert "the server exited (status 3)" in log


def test_client_closing_its_input_ends_the_bridge() -> None:
    status, seen, log = run([], close_input=True)
    assert status == 0
    assert "the client closed its input" in log


def test_command_line_refuses_an_unknown_revision_in_one_line() -> None:
    from click.testing import CliRunner

    from mcpbind.cli import main

    result = CliRunner().invoke(main, ["bridge", "--client-revision", "1999-01-01", "--", "x"])
    assert result.exit_code == 2
    assert "--client-revision '1999-01-01'" in result.output
    assert "Traceback" not in result.output


def test_command_line_names_a_server_that_cannot_start() -> None:
    import subprocess
    from pathlib import Path

    mcpbind_cmd = str(Path(sys.executable).with_name("mcpbind"))
    done = subprocess.run(
        [mcpbind_cmd, "bridge", "--", "/nonexistent/mcp-server"],
        input=b"",
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 127
    assert b"cannot start the server '/nonexistent/mcp-server'" in done.stderr
    assert b"Traceback" not in done.stderr


def test_help_explains_the_flags_with_an_example() -> None:
    from click.testing import CliRunner

    from mcpbind.cli import main

    result = CliRunner().invoke(main, ["bridge", "--help"])
    assert result.exit_code == 0
    for flag in ("--client-revision", "--server-revision", "--strict", "Example:"):
        assert flag in result.output
    # the limits, with the defaults the bridge uses
    from mcpbind.bridge import MAX_IN_FLIGHT_PER_SIDE
    from mcpbind.transports.stdio import MAX_LINE

    text = " ".join(result.output.split())
    assert (
        f"--max-line-bytes N The longest message (one line) read from either side, {MAX_LINE}"
        in text
    )
    assert f"at once, {MAX_IN_FLIGHT_PER_SIDE} by default" in text
