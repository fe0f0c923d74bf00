"""The fixture server of the MCP conformance suite, on mcpbind's sessions and HTTP transport.

Run as ``python examples/everything_server.py --port PORT``; it serves http://127.0.0.1:PORT/mcp
to clients of every released revision from 2025-06-18 on (initialize for the older ones, the
stateless per-request ``_meta`` for 2026-07-28), with the tools, resources and prompts the suite's
server scenarios call (`make conformance` runs them). Everything protocol-related is mcpbind's;
this file holds only the fixtures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import msgspec
import uvicorn

from mcpbind import ProtocolError, bindings
from mcpbind.errors import INVALID_PARAMS, METHOD_NOT_FOUND
from mcpbind.transports.http_server import Call, StreamableHTTPServer

REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="

CAPABILITIES = {
    "tools": {"listChanged": True},
    "resources": {"subscribe": True, "listChanged": True},
    "prompts": {"listChanged": True},
    "logging": {},
    "completions": {},
}
INFO = {"name": "mcpbind-everything-server", "version": "0.1.0"}

EMPTY = {"type": "object", "properties": {}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": schema or EMPTY}


TOOLS = [
    tool("test_simple_text", "Tests simple text content response"),
    tool("test_image_content", "Tests image content response"),
    tool("test_audio_content", "Tests audio content response"),
    tool("test_embedded_resource", "Tests embedded resource content response"),
    tool("test_multiple_content_types", "Tests response with text, image and resource content"),
    tool("test_tool_with_logging", "Tests tool that emits log messages during execution"),
    tool("test_tool_with_progress", "Tests tool that reports progress notifications"),
    tool("test_error_handling", "Tests error response handling"),
    tool(
        "test_sampling",
        "Tests server-initiated sampling (LLM completion request)",
        {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]},
    ),
    tool(
        "test_elicitation",
        "Tests server-initiated elicitation (user input request)",
        {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]},
    ),
    tool("test_elicitation_sep1034_defaults", "Tests elicitation with default values per SEP-1034"),
    tool("test_elicitation_sep1330_enums", "Tests elicitation with enum schema improvements"),
]

RESOURCES = [
    {"uri": "test://static-text", "name": "static-text", "mimeType": "text/plain"},
    {"uri": "test://static-binary", "name": "static-binary", "mimeType": "image/png"},
    {"uri": "test://watched-resource", "name": "watched-resource", "mimeType": "text/plain"},
]
TEMPLATES = [
    {
        "uriTemplate": "test://template/{id}/data",
        "name": "template",
        "mimeType": "application/json",
    }
]

PROMPTS = [
    {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
    {
        "name": "test_prompt_with_arguments",
        "description": "A prompt with required arguments",
        "arguments": [
            {"name": "arg1", "description": "First test argument", "required": True},
            {"name": "arg2", "description": "Second test argument", "required": True},
        ],
    },
    {
        "name": "test_prompt_with_embedded_resource",
        "description": "A prompt that includes an embedded resource",
        "arguments": [{"name": "resourceUri", "required": True}],
    },
    {"name": "test_prompt_with_image", "description": "A prompt that includes image content"},
]

SEP1034_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {
            "type": "string",
            "description": "User status",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    },
}

SEP1330_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
        },
        "titledMulti": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    value = getattr(obj, name, default)
    return default if value is None or type(value).__name__ == "UnsetType" else value


async def call_tool(call: Call) -> Any:
    name = _get(call.params, "name")
    args = _get(call.params, "arguments", {}) or {}
    if name == "test_simple_text":
        return {"content": [text("This is a simple text response for testing.")]}
    if name == "test_image_content":
        return {"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}
    if name == "test_audio_content":
        return {"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}
    if name == "test_embedded_resource":
        resource = {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }
        return {"content": [{"type": "resource", "resource": resource}]}
    if name == "test_multiple_content_types":
        resource = {
            "uri": "test://mixed-content-resource",
            "mimeType": "application/json",
            "text": json.dumps({"test": "data", "value": 123}),
        }
        return {
            "content": [
                text("Multiple content types test:"),
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": resource},
            ]
        }
    if name == "test_tool_with_logging":
        for message in (
            "Tool execution started",
            "Tool processing data",
            "Tool execution completed",
        ):
            call.notify("notifications/message", {"level": "info", "data": message})
            await asyncio.sleep(0.05)
        return {"content": [text("Tool with logging executed successfully")]}
    if name == "test_tool_with_progress":
        meta = _get(call.params, "meta")
        token = None
        if meta is not None:
            token = _get(meta, "progress_token")
        for step in (0, 50, 100):
            if token is not None:
                call.progress(step, 100, f"Completed step {step} of 100")
            await asyncio.sleep(0.05)
        return {"content": [text(str(token))]}
    if name == "test_error_handling":
        return {
            "content": [text("This tool intentionally returns an error for testing")],
            "isError": True,
        }
    if name == "test_sampling":
        result = await call.request(
            "sampling/createMessage",
            {
                "messages": [{"role": "user", "content": text(str(args.get("prompt", "")))}],
                "maxTokens": 100,
            },
        )
        content = _get(result, "content")
        answer = _get(content, "text", "No response") if content is not None else "No response"
        return {"content": [text(f"LLM response: {answer}")]}
    if name in (
        "test_elicitation",
        "test_elicitation_sep1034_defaults",
        "test_elicitation_sep1330_enums",
    ):
        if name == "test_elicitation":
            schema: dict[str, Any] = {
                "type": "object",
                "properties": {"response": {"type": "string", "description": "User's response"}},
                "required": ["response"],
            }
            message = str(args.get("message", ""))
        elif name == "test_elicitation_sep1034_defaults":
            schema, message = (
                SEP1034_SCHEMA,
                "Please review and update the form fields with defaults",
            )
        else:
            schema, message = SEP1330_SCHEMA, "Please select options from the enum fields"
        result = await call.request(
            "elicitation/create", {"mode": "form", "message": message, "requestedSchema": schema}
        )
        action = _get(result, "action")
        content = _get(result, "content", {})
        return {
            "content": [
                text(f"Elicitation completed: action={action}, content={json.dumps(content)}")
            ]
        }
    raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name!r}")


def read_resource(call: Call) -> Any:
    uri = str(_get(call.params, "uri"))
    if uri == "test://static-text":
        body = {"text": "This is the content of the static text resource."}
        return {"contents": [{"uri": uri, "mimeType": "text/plain", **body}]}
    if uri == "test://static-binary":
        return {"contents": [{"uri": uri, "mimeType": "image/png", "blob": PNG}]}
    if uri == "test://watched-resource":
        return {
            "contents": [{"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"}]
        }
    prefix, suffix = "test://template/", "/data"
    if uri.startswith(prefix) and uri.endswith(suffix):
        ident = uri[len(prefix) : -len(suffix)]
        data = {"id": ident, "templateTest": True, "data": f"Data for ID: {ident}"}
        return {
            "contents": [{"uri": uri, "mimeType": "application/json", "text": json.dumps(data)}]
        }
    raise ProtocolError(-32002, f"Resource not found: {uri}", {"uri": uri})


def get_prompt(call: Call) -> Any:
    name = _get(call.params, "name")
    args = _get(call.params, "arguments", {}) or {}
    if name == "test_simple_prompt":
        return {
            "messages": [{"role": "user", "content": text("This is a simple prompt for testing.")}]
        }
    if name == "test_prompt_with_arguments":
        line = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
        return {"messages": [{"role": "user", "content": text(line)}]}
    if name == "test_prompt_with_embedded_resource":
        resource = {
            "uri": args.get("resourceUri"),
            "mimeType": "text/plain",
            "text": "Embedded resource content for testing.",
        }
        return {
            "messages": [
                {"role": "user", "content": {"type": "resource", "resource": resource}},
                {"role": "user", "content": text("Please process the embedded resource above.")},
            ]
        }
    if name == "test_prompt_with_image":
        return {
            "messages": [
                {
                    "role": "user",
                    "content": {"type": "image", "data": PNG, "mimeType": "image/png"},
                },
                {"role": "user", "content": text("Please analyze the image above.")},
            ]
        }
    raise ProtocolError(INVALID_PARAMS, f"Unknown prompt: {name!r}")


def cacheable(call: Call, result: dict[str, Any]) -> dict[str, Any]:
    """The result with caching hints where the request's revision defines them: the fixtures
    change only when the process restarts, so any client may keep them for a minute."""
    cls = bindings(call.revision).FACTS.wires[call.method].result
    is_struct = isinstance(cls, type) and issubclass(cls, msgspec.Struct)
    names = {f.encode_name for f in msgspec.structs.fields(cls)} if is_struct else set()
    if "cacheScope" in names:
        result = {**result, "cacheScope": "public", "ttlMs": 60_000}
    return result


async def handle(call: Call) -> Any:
    """Answer one request of any revision the server speaks."""
    result = await answer(call)
    return cacheable(call, result) if isinstance(result, dict) else result


async def answer(call: Call) -> Any:
    method = call.method
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return await call_tool(call)
    if method == "resources/list":
        return {"resources": RESOURCES}
    if method == "resources/templates/list":
        return {"resourceTemplates": TEMPLATES}
    if method == "resources/read":
        return read_resource(call)
    if method in ("resources/subscribe", "resources/unsubscribe"):
        return {}
    if method == "prompts/list":
        return {"prompts": PROMPTS}
    if method == "prompts/get":
        return get_prompt(call)
    if method == "logging/setLevel":
        return {}
    if method == "completion/complete":
        return {"completion": {"values": [], "total": 0, "hasMore": False}}
    raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method!r}")


def app() -> StreamableHTTPServer:
    """The ASGI application (also what tests mount in-process)."""
    return StreamableHTTPServer(handle, revisions=REVISIONS, capabilities=CAPABILITIES, info=INFO)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args()
    uvicorn.run(app(), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
