"""The whole-server row's other server: the official `mcp` SDK (pinned in the dev extras) over
Streamable HTTP, with the one tool the row calls.

    .venv/bin/python bench/sdk_server.py --port PORT      (bench/server.py starts it)

``test_simple_text`` answers what examples/everything_server.py's tool of that name answers. One
uvicorn process, its HTTP/1.1 protocol httptools and its default event loop (uvloop, installed by
mcpbind's http extra), as mcpbind's server, logging at warnings only (no line per request, as
mcpbind's server); everything else is the SDK's default: a session per
initialize for 2025-11-25 clients, the stateless per-request path for 2026-07-28 ones.
"""

from __future__ import annotations

import argparse

import uvicorn
from mcp.server import MCPServer

server = MCPServer("mcpbind-bench-sdk")


@server.tool(structured_output=False)  # the text content alone, as ours answers
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    uvicorn.run(app, host="127.0.0.1", port=args.port, http="httptools", log_level="warning")


if __name__ == "__main__":
    main()
