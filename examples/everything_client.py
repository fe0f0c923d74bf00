"""A client for the MCP conformance suite's client scenarios, on mcpbind's sessions and HTTP
transport.

The suite runs ``python examples/everything_client.py URL`` with ``MCP_CONFORMANCE_SCENARIO`` and
``MCP_CONFORMANCE_PROTOCOL_VERSION`` set. The client speaks the revision it is asked for: it
negotiates, lists the tools and calls each tool whose input schema it can fill (numbers for
``number`` properties, strings for ``string`` ones), answers elicitations by accepting the
schema's defaults (server requests arrive on a request's stream or on the standalone GET stream
the transport opens after initialization), and exits 0 when the conversation completed (a
refused tool call is reported on stderr), 1 with the error otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import msgspec

from mcpbind import ClientSession, ProtocolError, supports
from mcpbind.events import RequestReceived
from mcpbind.transports.http_client import StreamableHTTPClient

INFO = {"name": "mcpbind-everything-client", "version": "0.1.0"}
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}


def sample_arguments(schema: Any) -> dict[str, Any]:
    """Arguments filling every required property of a tool's input schema with a plain value."""
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    required = schema.get("required", []) if isinstance(schema, dict) else []
    values = {"number": 1, "integer": 1, "string": "mcpbind", "boolean": True}
    out: dict[str, Any] = {}
    for name in required:
        kind = properties.get(name, {}).get("type", "string")
        out[name] = values.get(kind, "mcpbind")
    return out


async def on_request(event: RequestReceived) -> Any:
    """Answer the server: elicitations accepted with the defaults their schema declares."""
    params = msgspec.to_builtins(event.params)
    if event.method == "elicitation/create":
        schema = params.get("requestedSchema", {})
        content = {
            name: prop["default"]
            for name, prop in schema.get("properties", {}).items()
            if "default" in prop
        }
        return {"action": "accept", "content": content}
    if event.method == "sampling/createMessage":
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "mcpbind"},
            "model": "none",
        }
    if event.method == "roots/list":
        return {"roots": []}
    raise ProtocolError(-32601, f"Method not found: {event.method!r}")


async def run(url: str, revision: str) -> None:
    session = ClientSession(revisions=(revision,), capabilities=CAPABILITIES, info=INFO)
    async with StreamableHTTPClient(url, session, on_request=on_request) as client:
        negotiated = await client.connect()
        if not supports(negotiated.capabilities, "tools"):
            return
        listed = msgspec.to_builtins(await client.call("tools/list", {}))
        # The harness may name the calls to make (MCP_CONFORMANCE_CONTEXT); else call each tool.
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        calls = context.get("toolCalls") or [
            {"name": t["name"], "arguments": sample_arguments(t.get("inputSchema"))}
            for t in listed.get("tools", [])
        ]
        for tool in calls:
            arguments = tool.get("arguments", {})
            try:
                await client.call("tools/call", {"name": tool["name"], "arguments": arguments})
            except ProtocolError as error:
                # The server refused this tool call: a finding about the server, reported,
                # while the conversation itself went on as the protocol says.
                print(f"everything_client: tools/call {tool['name']}: {error}", file=sys.stderr)


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: everything_client.py SERVER_URL", file=sys.stderr)
        return 2
    revision = os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "2025-11-25")
    try:
        asyncio.run(run(sys.argv[-1], revision))
    except ProtocolError as error:
        print(f"everything_client: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
