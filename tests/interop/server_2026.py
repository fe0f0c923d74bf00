"""A small MCP server on the official `mcp` package (pinned in pyproject's dev extras), over stdio.

mcpbind's interop test drives it at 2026-07-28 with nothing but mcpbind's Codec on the client side.
"""

from __future__ import annotations

from mcp.server import MCPServer

server = MCPServer("mcpbind-interop-2026")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(message: str) -> str:
    """Echo a message back."""
    return message


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
