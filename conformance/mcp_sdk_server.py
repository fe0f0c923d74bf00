"""A small server on the official `mcp` SDK (the dev extras pin it), over Streamable HTTP.

It exists to show that `make conformance` reports honestly before mcpbind's own server is the
one under test: `python conformance/run.py --server-cmd "python conformance/mcp_sdk_server.py
--port {port}"` runs the suite against it. It implements a few of the suite's fixtures on purpose
and no more, so the table it produces must show both passing and failing scenarios.
"""

from __future__ import annotations

import argparse

from mcp.server import MCPServer
from mcp.server.mcpserver.utilities.types import Image

PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="

server = MCPServer("mcpbind-conformance-sdk-reference")


@server.tool()
def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@server.tool()
def test_image_content() -> Image:
    """Tests image content response."""
    import base64

    return Image(data=base64.b64decode(PNG_1X1), format="png")


@server.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@server.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource."""
    return "This is the content of the static text resource."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server.run("streamable-http", host="127.0.0.1", port=args.port, streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
