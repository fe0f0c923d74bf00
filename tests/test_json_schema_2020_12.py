"""JSON Schema 2020-12 tool schemas (SEP-1613, SEP-2106) reach the other side exactly: the example
server lists its ``json_schema_2020_12_tool`` with every keyword, and the example client hands a
listed schema back to an echo tool unchanged (the suite's json-schema-2020-12 scenarios)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mcpbind import ClientSession, ProtocolError
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from tests.test_http_hostile import load_example
from tests.test_http_transport import INFO, URL, http, run

# The suite's schema (json-schema-2020-12): 2020-12 keywords at every level.
SUITE_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        },
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
# And with a tuple of fixed item types besides.
SCHEMA = {
    **SUITE_SCHEMA,
    "$defs": {
        **SUITE_SCHEMA["$defs"],
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
    },
    "properties": {**SUITE_SCHEMA["properties"], "pair": {"$ref": "#/$defs/pair"}},
}
REVISIONS = ["2025-06-18", "2025-11-25", "2026-07-28"]


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_example_server_lists_its_2020_12_tool_with_every_keyword(revision: str) -> None:
    example = load_example("everything_server")

    async def go() -> None:
        session = ClientSession(revisions=(revision,), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(example.app())) as client:
            await client.connect()
            listed = msgspec.to_builtins(await client.call("tools/list", {}))
            found = {t["name"]: t["inputSchema"] for t in listed["tools"]}
            assert found["json_schema_2020_12_tool"] == SUITE_SCHEMA
            call = {"name": "json_schema_2020_12_tool", "arguments": {"name": "a", "email": "b"}}
            result = await client.call("tools/call", call)
            assert not result.is_error

    run(go())


@pytest.mark.parametrize("revision", REVISIONS)
def test_the_example_client_echoes_a_listed_schema_unchanged(revision: str) -> None:
    example = load_example("everything_client")
    echoed: list[Any] = []

    async def handler(call: Call) -> Any:
        hints = {"cacheScope": "private", "ttlMs": 0} if revision == "2026-07-28" else {}
        if call.method == "tools/list":
            echo = {"type": "object", "properties": {"schema": {"type": "object"}}}
            tools = [
                {"name": "json_schema_2020_12_tool", "inputSchema": SCHEMA},
                {"name": "json_schema_echo", "inputSchema": echo},
            ]
            return {"tools": tools, **hints}
        if call.method == "tools/call":
            wire = msgspec.to_builtins(call.params)
            if wire["name"] == "json_schema_echo":
                echoed.append(wire["arguments"]["schema"])
            return {"content": [{"type": "text", "text": "ok"}]}
        raise ProtocolError(-32601, f"Method not found: {call.method!r}")

    async def go() -> None:
        server = StreamableHTTPServer(
            handler, revisions=(revision,), capabilities={"tools": {}}, info=INFO
        )
        session = ClientSession(revisions=(revision,), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(server)) as client:
            await example.converse(client, {})

    run(go())
    assert echoed == [SCHEMA]
