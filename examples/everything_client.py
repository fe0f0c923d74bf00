"""A client for the MCP conformance suite's client scenarios, on mcpbind's sessions and HTTP
transport.

The suite runs ``python examples/everything_client.py URL`` with ``MCP_CONFORMANCE_SCENARIO`` and
``MCP_CONFORMANCE_PROTOCOL_VERSION`` set. The client speaks the revision it is asked for: it
negotiates, lists the tools and calls each tool whose input schema it can fill (numbers for
``number`` properties, strings for ``string`` ones), passes every tool's input schema back verbatim
to a ``json_schema_echo`` tool where the server offers one, answers elicitations by accepting the
schema's defaults (server requests arrive on a request's stream or on the standalone GET stream
the transport opens after initialization), and exits 0 when the conversation completed (a
refused tool call is reported on stderr), 1 with the error otherwise.

A protected server is authorized with ``mcpbind.auth``: the grant follows the scenario's context
(client credentials, a workload's JWT, an enterprise ID token, pre-registered credentials) and
is otherwise the authorization code flow, with a client ID metadata document URL where the
server accepts one, DPoP where the server offers it, and a headless user agent that follows the
authorization endpoint's redirect itself (the suite's authorization server signs in no one).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any
from urllib.parse import urljoin

import httpx
import msgspec

from mcpbind import ClientSession, ProtocolError, supports
from mcpbind.auth import (
    AuthorizationCode,
    ClientCredentials,
    EnterpriseManaged,
    JWTBearer,
    OAuthClient,
    Registration,
)
from mcpbind.auth.grants import Grant
from mcpbind.events import RequestReceived
from mcpbind.transports.http_client import StreamableHTTPClient

INFO = {"name": "mcpbind-everything-client", "version": "0.1.0"}
CAPABILITIES: dict[str, Any] = {"elicitation": {"form": {}}, "sampling": {}, "roots": {}}
# The client ID metadata document URL the suite expects a client to present.
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"
# The suite's tool that echoes a JSON Schema back (json-schema-2020-12-preservation).
ECHO_TOOL = "json_schema_echo"


async def headless_user_agent(url: str) -> str:
    """The user-agent step without a user: ask the authorization endpoint and return where it
    redirects to (the suite's authorization server approves at once)."""
    async with httpx.AsyncClient(timeout=30.0, follow_redirects=False) as http:
        response = await http.get(url)
    location = response.headers.get("location")
    if response.status_code not in (301, 302, 303, 307, 308) or not location:
        raise ProtocolError(-32603, f"the authorization endpoint answered {response.status_code}")
    return str(urljoin(url, location))


def grant_for(context: dict[str, Any]) -> Grant:
    """The grant the scenario's context calls for."""
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    if "idp_id_token" in context:
        return EnterpriseManaged(
            id_token=context["idp_id_token"],
            idp_token_endpoint=context["idp_token_endpoint"],
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            idp_client_id=context.get("idp_client_id"),
        )
    if "valid_jwt" in context:
        return JWTBearer(assertion=context["valid_jwt"], client_id=context.get("client_id"))
    if "private_key_pem" in context:
        return ClientCredentials(
            context["client_id"],
            private_key=context["private_key_pem"],
            alg=context.get("signing_algorithm", "ES256"),
        )
    if scenario.startswith("auth/client-credentials"):
        return ClientCredentials(context["client_id"], context.get("client_secret"))
    registration = Registration(
        client_id=context.get("client_id"),
        client_secret=context.get("client_secret"),
        issuer=context.get("issuer"),
        metadata_url=CLIENT_METADATA_URL,
        client_name=INFO["name"],
    )
    return AuthorizationCode(headless_user_agent, registration)


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
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    session = ClientSession(revisions=(revision,), capabilities=CAPABILITIES, info=INFO)
    auth = OAuthClient(grant_for(context), dpop=True)
    async with StreamableHTTPClient(url, session, on_request=on_request, auth=auth) as client:
        await converse(client, context)


async def converse(client: StreamableHTTPClient, context: dict[str, Any]) -> None:
    """Connect, list the tools and call them: the ones the context names, else each tool with
    sample arguments, and the echo tool (where offered) with every other tool's input schema."""
    negotiated = await client.connect()
    if not supports(negotiated.capabilities, "tools"):
        return
    listed = msgspec.to_builtins(await client.call("tools/list", {}))
    tools = listed.get("tools", [])
    calls = context.get("toolCalls") or [
        {"name": t["name"], "arguments": sample_arguments(t.get("inputSchema"))}
        for t in tools
        if t["name"] != ECHO_TOOL
    ]
    # A server that offers the echo tool wants to see each other tool's input schema as the
    # client holds it: passed back verbatim, it shows what the client kept of it.
    if any(t["name"] == ECHO_TOOL for t in tools):
        calls += [
            {"name": ECHO_TOOL, "arguments": {"schema": t["inputSchema"]}}
            for t in tools
            if t["name"] != ECHO_TOOL and "inputSchema" in t
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
