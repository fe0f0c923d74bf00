"""A stateless (2026-07-28) POST whose Mcp-Method, Mcp-Name or Mcp-Param-* headers disagree with
its body is refused with HTTP 400 and the header-mismatch error (-32020), as the suite's
http-header-validation and http-custom-header-server-validation scenarios ask (SEP-2243)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from mcpbind import ClientSession
from mcpbind.transports.header_check import decode_header_value
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import HEADER_MISMATCH, Call, StreamableHTTPServer
from tests.test_http_transport import ACCEPT, INFO, URL, http, run

SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "query": {"type": "string"},
    },
    "required": ["region"],
}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def handler(call: Call) -> Any:
    if call.method == "tools/list":
        tools = [{"name": "routed", "inputSchema": SCHEMA}]
        return {"tools": tools, "cacheScope": "private", "ttlMs": 0}
    return {"content": [{"type": "text", "text": "ok"}]}


def app() -> StreamableHTTPServer:
    return StreamableHTTPServer(
        handler, revisions=("2026-07-28",), capabilities={"tools": {}}, info=INFO
    )


def request(method: str, params: dict[str, Any] | None = None) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": method,
        "params": {**(params or {}), "_meta": META},
    }
    return json.dumps(body)


def call(arguments: dict[str, Any]) -> str:
    return request("tools/call", {"name": "routed", "arguments": arguments})


BASE = {**ACCEPT, "mcp-protocol-version": "2026-07-28"}
CALL = {**BASE, "mcp-method": "tools/call", "mcp-name": "routed"}

# (body, headers, accepted)
CASES = {
    "method matches": (request("tools/list"), {**BASE, "mcp-method": "tools/list"}, True),
    "header name in any case": (request("tools/list"), {**BASE, "MCP-METHOD": "tools/list"}, True),
    "method missing": (request("tools/list"), BASE, False),
    "method differs": (request("tools/list"), {**BASE, "mcp-method": "prompts/list"}, False),
    "method in another case": (request("tools/list"), {**BASE, "mcp-method": "TOOLS/LIST"}, False),
    "name with whitespace around": (
        call({"region": "eu"}),
        {**CALL, "mcp-name": "  routed  ", "mcp-param-region": "eu"},
        True,
    ),
    "name missing": (
        call({"region": "eu"}),
        {**BASE, "mcp-method": "tools/call", "mcp-param-region": "eu"},
        False,
    ),
    "name differs": (
        call({"region": "eu"}),
        {**CALL, "mcp-name": "other", "mcp-param-region": "eu"},
        False,
    ),
    "param plain": (
        call({"region": "eu", "priority": 2}),
        {**CALL, "mcp-param-region": "eu", "mcp-param-priority": "2"},
        True,
    ),
    "param base64": (
        call({"region": "Hello"}),
        {**CALL, "mcp-param-region": "=?base64?SGVsbG8=?="},
        True,
    ),
    "param base64 without padding": (
        call({"region": "Hello"}),
        {**CALL, "mcp-param-region": "=?base64?SGVsbG8?="},
        False,
    ),
    "param base64 outside the alphabet": (
        call({"region": "Hello"}),
        {**CALL, "mcp-param-region": "=?base64?SGVs!!!bG8=?="},
        False,
    ),
    "param without the suffix is literal": (
        call({"region": "=?base64?SGVsbG8="}),
        {**CALL, "mcp-param-region": "=?base64?SGVsbG8="},
        True,
    ),
    "param missing": (call({"region": "eu"}), CALL, False),
    "param differs": (call({"region": "eu"}), {**CALL, "mcp-param-region": "us"}, False),
    "integer param differs": (
        call({"region": "eu", "priority": 2}),
        {**CALL, "mcp-param-region": "eu", "mcp-param-priority": "3"},
        False,
    ),
    "param for an absent argument": (
        call({"region": "eu"}),
        {**CALL, "mcp-param-region": "eu", "mcp-param-priority": "3"},
        False,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_headers_are_checked_against_the_body(case: str) -> None:
    body, headers, accepted = CASES[case]

    async def go() -> Any:
        async with http(app()) as client:
            listed = await client.post(
                URL, content=request("tools/list"), headers={**BASE, "mcp-method": "tools/list"}
            )
            assert listed.status_code == 200  # the server now knows the tool's designations
            return await client.post(URL, content=body, headers=headers)

    response = run(go())
    if accepted:
        assert response.status_code == 200, response.text
        assert "result" in response.json()
    else:
        assert response.status_code == 400
        assert response.json()["error"]["code"] == HEADER_MISMATCH
        assert response.json()["id"] == 3


def test_mcpbinds_client_sends_headers_the_server_accepts() -> None:
    async def go() -> Any:
        session = ClientSession(revisions=("2026-07-28",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(app())) as client:
            await client.connect()
            await client.call("tools/list", {})
            arguments = {"region": " Zürich ", "priority": 7, "query": "q"}
            return await client.call("tools/call", {"name": "routed", "arguments": arguments})

    assert run(go()).content[0].text == "ok"


def test_a_method_the_revision_does_not_know_is_not_found_whatever_its_mcp_name() -> None:
    body = request("tasks/result", {"taskId": "t-1"})
    headers = {**BASE, "mcp-method": "tasks/result"}  # no Mcp-Name for the taskId

    async def go() -> Any:
        async with http(app()) as client:
            return await client.post(URL, content=body, headers=headers)

    response = run(go())
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32601


@pytest.mark.parametrize(
    ("raw", "text"),
    [
        ("plain", "plain"),
        ("  padded\t", "padded"),
        ("=?base64?SGVsbG8=?=", "Hello"),
        ("=?base64?SGVsbG8?=", None),
        ("=?base64?//79?=", None),  # not UTF-8
        ("=?base64?SGVsbG8=", "=?base64?SGVsbG8="),
    ],
)
def test_header_values_decode(raw: str, text: str | None) -> None:
    assert decode_header_value(raw) == text


def test_a_method_that_is_not_a_string_is_an_invalid_request_not_an_internal_error() -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 3, "method": ["tools/list"], "params": {"_meta": META}}
    )

    async def go() -> Any:
        async with http(app()) as client:
            return await client.post(URL, content=body, headers={**BASE, "mcp-method": "x"})

    response = run(go())
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == -32600


def test_the_mirrored_parts_leave_meta_values_and_arguments_unread() -> None:
    from mcpbind.transports import header_check

    body = {
        "id": 1,
        "method": "tools/call",
        "params": {
            "uri": "u",
            "taskId": 5,
            "arguments": {"deep": [1, {"x": None}]},
            "_meta": {"b/version": "v", "other": {"big": [1, 2, 3]}, "a/version": None},
        },
    }
    peek = header_check.decode(json.dumps(body).encode())
    assert peek.params is not None and peek.params.meta is not None
    assert header_check.version(peek.params.meta, ("b/version", "a/version")) == "v"
    # The first key present counts, even when its value is null.
    assert header_check.version(peek.params.meta, ("a/version", "b/version")) is None
    assert header_check.version(peek.params.meta, ("c/version",)) is None
    assert header_check.target_name(peek.params) == "u"  # taskId is not a string
    assert header_check.arguments(peek.params) == {"deep": [1, {"x": None}]}
    for params in ([1], "x", {"_meta": "not an object"}):
        with pytest.raises(msgspec.ValidationError):
            header_check.decode(json.dumps({"id": 1, "method": "m", "params": params}).encode())


def test_the_servers_peek_reads_the_version_as_the_raw_meta_does() -> None:
    """With one version key, the server reads _meta as the generated peek's Struct: the same
    version (absent and null alike: none), the same refusals of what is not an object."""
    from mcpbind import bindings
    from mcpbind.transports import header_check

    server = StreamableHTTPServer(
        handler, revisions=("2025-11-25", "2026-07-28"), capabilities={"tools": {}}, info=INFO
    )
    assert server._peek is not None and len(server._version_keys) == 1
    key = server._version_keys[0]
    assert key == bindings("2026-07-28").FACTS.request_meta.version_key
    for meta in ({key: "v", "other": {"x": [1]}}, {key: None}, {"other": 1}, {key: [1, {}]}):
        body = json.dumps({"id": 1, "method": "m", "params": {"name": "n", "_meta": meta}}).encode()
        fast, raw = server._peek.decode(body), header_check.decode(body)
        assert fast.params is not None and raw.params is not None and raw.params.meta is not None
        assert fast.params.meta.version == header_check.version(raw.params.meta, (key,))
        assert (fast.id, fast.method, fast.params.name) == (raw.id, raw.method, raw.params.name)
    for params in ([1], "x", {"_meta": "not an object"}, {"_meta": [key]}):
        body = json.dumps({"id": 1, "method": "m", "params": params}).encode()
        with pytest.raises(msgspec.ValidationError):
            server._peek.decode(body)
        with pytest.raises(msgspec.ValidationError):
            header_check.decode(body)


def test_a_tool_list_answered_in_a_handshake_session_teaches_the_designations_too() -> None:
    server = StreamableHTTPServer(
        handler, revisions=("2025-11-25", "2026-07-28"), capabilities={"tools": {}}, info=INFO
    )

    async def go() -> Any:
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with http(server) as transport:
            async with StreamableHTTPClient(URL, session, http=transport) as client:
                await client.connect()
                await client.call("tools/list", {})
            return await transport.post(URL, content=call({"region": "eu"}), headers=CALL)

    response = run(go())
    assert response.status_code == 400, response.text  # Mcp-Param-Region is missing
    assert response.json()["error"]["code"] == HEADER_MISMATCH


PLAIN = {**BASE, "mcp-method": "tools/call", "mcp-name": "plain"}  # a tool without designations
OTHER_META = {**META, "io.modelcontextprotocol/protocolVersion": "2025-11-25"}


# A call of a tool without designations is decoded once, by the session, in the revision of its
# Mcp-Protocol-Version, and checked against its headers after; whatever disagrees or cannot be
# read so is checked as before, the header check first: (body, headers, status, error code).
@pytest.mark.parametrize(
    ("body", "headers", "status", "code"),
    [
        (request("tools/call", {"name": "plain"}), PLAIN, 200, None),
        (request("tools/call", {"name": "plain"}), {**PLAIN, "mcp-name": " plain\t"}, 200, None),
        (request("tools/call", {"name": "plain"}), {**PLAIN, "mcp-name": "other"}, 400, -32020),
        (request("tools/call", {"name": "plain"}), {**PLAIN, "mcp-method": "x"}, 400, -32020),
        (
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "tools/call",
                    "params": {"name": "plain", "_meta": OTHER_META},
                }
            ),
            PLAIN,
            400,
            -32020,
        ),
        # arguments not an object: the session cannot read it; the headers are checked first
        (
            request("tools/call", {"name": "plain", "arguments": 1}),
            {**PLAIN, "mcp-name": "x"},
            400,
            -32020,
        ),
        (request("tools/call", {"name": "plain", "arguments": 1}), PLAIN, 400, -32602),
    ],
)
def test_a_call_read_once_is_checked_as_the_header_check_would(
    body: str, headers: dict[str, str], status: int, code: int | None
) -> None:
    async def go() -> Any:
        async with http(app()) as client:
            return await client.post(URL, content=body, headers=headers)

    response = run(go())
    assert response.status_code == status, response.text
    if code is None:
        assert response.json()["result"]["content"][0]["text"] == "ok"
    else:
        assert response.json()["error"]["code"] == code
        assert response.json()["id"] == 3


# Read once, a name with whitespace around, or empty, or not ASCII, is checked as the header
# check does: the header's whitespace is dropped (the body's is not), its bytes read as latin-1.
@pytest.mark.parametrize(
    ("name", "header", "status"),
    [
        (" plain", b" plain", 400),
        ("plain ", b"plain", 400),
        ("plain", b" plain ", 200),
        ("", b"", 200),
        ("Z\u00fcrich", "Z\u00fcrich".encode(), 400),
        ("Z\u00fcrich", "Z\u00fcrich".encode("latin-1"), 200),
    ],
)
def test_a_name_read_once_keeps_the_header_checks_rules(
    name: str, header: bytes, status: int
) -> None:
    async def go() -> Any:
        async with http(app()) as client:
            headers = {**PLAIN, "mcp-name": header}
            body = request("tools/call", {"name": name})
            return await client.post(URL, content=body, headers=headers)

    response = run(go())
    assert response.status_code == status, response.text
