"""``app.run(transport="http", host=, port=)``: one call serves an App over Streamable HTTP with
the connection bounds of ``mcpbind.transports.serving.serve`` (docs/app.md, Serving)."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mcpbind import App, Client
from tests._net import stopped

SERVER = textwrap.dedent("""
    from mcpbind import App

    app = App("calculator")


    @app.tool
    def add(a: int, b: int) -> int:
        return a + b


    app.run("http", host="127.0.0.1", port=0, serving={"header_timeout": 0.5})
    """)


def listening(process: subprocess.Popen[bytes], seconds: float = 30) -> str:
    """The URL of the startup line ``app.run`` writes on stderr."""
    assert process.stderr is not None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        line = process.stderr.readline().decode()
        found = re.match(r"calculator: serving MCP on (http://\S+) \(Streamable HTTP, ", line)
        if found:
            return found.group(1)
        assert line or process.poll() is None, "the server exited"
    raise AssertionError("no startup line")


def test_run_http_serves_the_app_with_serve_bounds(tmp_path: Path):
    (tmp_path / "server.py").write_text(SERVER, encoding="utf-8")
    process = subprocess.Popen([sys.executable, "server.py"], cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        url = listening(process)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")

        async def main() -> str:
            async with Client(url) as client:
                result = await client.call_tool("add", {"a": 2, "b": 40})
                return str(result.content[0].text)

        assert asyncio.run(main()) == "42"
        # serve()'s header timeout (0.5 s here): a head that never ends gets 408 and is closed;
        # a bare uvicorn.run(app.asgi()) would keep the connection for ever.
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1")
            assert sock.recv(4096).startswith(b"HTTP/1.1 408 ")
    finally:
        stopped(process)


def test_run_refuses_http_options_on_stdio_and_unknown_transports():
    app = App("calculator")
    with pytest.raises(TypeError, match="app.run: port, path go with transport='http'"):
        app.run(port=8000, path="/x")
    with pytest.raises(ValueError, match="transport must be 'stdio' or 'http', not 'sse'"):
        app.run("sse")  # type: ignore[arg-type]
