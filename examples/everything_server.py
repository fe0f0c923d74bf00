"""The fixture server of the MCP conformance suite, on mcpbind's sessions and HTTP transport.

Run as ``python examples/everything_server.py --port PORT``; it serves http://127.0.0.1:PORT/mcp
to clients of every released revision from 2025-06-18 on (initialize for the older ones, the
stateless per-request ``_meta`` for 2026-07-28), with the tools, resources and prompts the suite's
server scenarios call (`make conformance` runs them). Everything protocol-related is mcpbind's;
this file holds only the fixtures.

``--redis URL`` keeps sessions and event logs in Redis, so that several processes (``--workers
N`` on one port, or servers on several ports sharing the URL) serve the same sessions and resume
each other's streams.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import hashlib
import hmac
import json
import secrets
from typing import Any

import msgspec

from mcpbind import ProtocolError, bindings, missing_capabilities
from mcpbind.auth.resource import ResourceServer
from mcpbind.errors import INVALID_PARAMS, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.serving import serve
from mcpbind.transports.store import MemoryStore, RedisStore, Store

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
    tool(
        "test_reconnection",
        "Closes its response stream mid-call (SEP-1699): the client resumes it with Last-Event-ID",
    ),
]

# A tool whose input schema uses the JSON Schema 2020-12 vocabulary (SEP-1613, SEP-2106): every
# keyword must reach the client exactly as written.
SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
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
TOOLS.append(
    tool("json_schema_2020_12_tool", "Tool with JSON Schema 2020-12 features", SCHEMA_2020_12)
)

# A tool with an argument designated for an Mcp-Param-* header (SEP-2243): the server refuses a
# call whose header disagrees with the argument.
HEADER_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "query": {"type": "string"},
    },
    "required": ["region"],
}

ROUND_TRIP_TOOLS = (
    "test_streaming_elicitation",
    "test_input_required_result_elicitation",
    "test_input_required_result_sampling",
    "test_input_required_result_list_roots",
    "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state",
    "test_input_required_result_capabilities",
)

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
    trip = round_trip(call, name) if name in ROUND_TRIP_TOOLS else None
    if trip is not None:
        return trip
    if name == "test_trigger_tool_change":
        changed("toolsListChanged", "notifications/tools/list_changed")
        return {"content": [text("Tool list change announced")]}
    if name == "test_trigger_prompt_change":
        changed("promptsListChanged", "notifications/prompts/list_changed")
        return {"content": [text("Prompt list change announced")]}
    if name == "test_missing_capability":
        # Needs sampling: a client that did not declare it gets the missing-capability error.
        wire_meta = msgspec.to_builtins(call.params).get("_meta") or {}
        declared = wire_meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        required: dict[str, Any] = {"sampling": {}}
        missing = missing_capabilities(required, declared)
        if missing is not None:
            raise ProtocolError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                "Missing required client capability: sampling",
                {"requiredCapabilities": missing},
            )
        return {"content": [text("The client declared sampling")]}
    if name == "test_logging_tool":
        # A stateless client opts in to log messages per request, by its _meta log level.
        wire_meta = msgspec.to_builtins(call.params).get("_meta") or {}
        if "io.modelcontextprotocol/logLevel" in wire_meta:
            call.notify("notifications/message", {"level": "info", "data": "test_logging_tool ran"})
        return {"content": [text("Logged only when asked to")]}
    if name == "test_simple_text":
        return {"content": [text("This is a simple text response for testing.")]}
    if name == "test_custom_headers":
        return {"content": [text(f"Region: {args.get('region')}")]}
    if name == "json_schema_2020_12_tool":
        return {"content": [text(f"Received: {json.dumps(args, sort_keys=True)}")]}
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
    if name == "test_reconnection":
        # The response is cut before the answer: the client polls with Last-Event-ID and gets the
        # answer from the stream's log (on whichever worker it reaches).
        closed = call.close_stream()
        await asyncio.sleep(0.1)
        note = "after the stream was closed" if closed else "(this revision has no polling)"
        return {"content": [text(f"Reconnection test completed {note}")]}
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


# Multi-round-trip fixtures (2026-07-28 and later): each tool asks the client for input by
# returning an input-required result, and completes once the retry carries the answers. The
# request state is signed, so a client cannot forge or alter it between rounds.
STATE_KEY = secrets.token_bytes(32)

ELICIT_NAME = {
    "method": "elicitation/create",
    "params": {
        "message": "What is your name?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        },
    },
}
SAMPLE_CAPITAL = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [
            {"role": "user", "content": text("What is the capital of France?")},
        ],
        "maxTokens": 100,
    },
}
LIST_ROOTS = {"method": "roots/list", "params": {}}


def sign(state: dict[str, Any]) -> str:
    payload = base64.urlsafe_b64encode(json.dumps(state).encode()).decode()
    mac = hmac.new(STATE_KEY, payload.encode(), hashlib.sha256).hexdigest()
    return f"{payload}.{mac}"


def verify(token: Any) -> dict[str, Any]:
    """The state a request carried back, or -32602 when it was not issued by this server."""
    if not isinstance(token, str) or "." not in token:
        raise ProtocolError(INVALID_PARAMS, "Invalid params: requestState is missing or malformed")
    payload, mac = token.rsplit(".", 1)
    good = hmac.new(STATE_KEY, payload.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, good):
        raise ProtocolError(
            INVALID_PARAMS, "Invalid params: requestState failed its integrity check"
        )
    state: dict[str, Any] = json.loads(base64.urlsafe_b64decode(payload))
    return state


def needs(requests: dict[str, Any], state: dict[str, Any] | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        result["requestState"] = sign(state)
    return result


def answered(responses: Any, *keys: str) -> bool:
    """Whether every key was answered with an object (extra keys are ignored)."""
    return isinstance(responses, dict) and all(isinstance(responses.get(k), dict) for k in keys)


def first_text(value: Any) -> str:
    content = value.get("content") if isinstance(value, dict) else None
    if isinstance(content, list) and content:
        content = content[0]
    return str(content.get("text", "")) if isinstance(content, dict) else ""


def round_trip(call: Call, name: str) -> Any | None:
    """The multi-round-trip fixtures' answers; None when ``name`` is none of them."""
    wire = msgspec.to_builtins(call.params)
    responses = wire.get("inputResponses")
    token = wire.get("requestState")
    if name in ("test_input_required_result_elicitation", "test_input_required_result_prompt"):
        key = "user_name" if name.endswith("elicitation") else "user_context"
        if not answered(responses, key):
            request = ELICIT_NAME
            if key == "user_context":
                request = {
                    "method": "elicitation/create",
                    "params": {
                        "message": "What context should the prompt use?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {"context": {"type": "string"}},
                            "required": ["context"],
                        },
                    },
                }
            return needs({key: request})
        content = responses[key].get("content") or {}
        if key == "user_context":
            line = f"Context: {content.get('context', '')}"
            return {"messages": [{"role": "user", "content": text(line)}]}
        return {"content": [text(f"Hello, {content.get('name', 'stranger')}!")]}
    if name == "test_input_required_result_sampling":
        if not answered(responses, "capital_question"):
            return needs({"capital_question": SAMPLE_CAPITAL})
        return {"content": [text(f"Sampled: {first_text(responses['capital_question'])}")]}
    if name == "test_input_required_result_list_roots":
        if not answered(responses, "client_roots"):
            return needs({"client_roots": LIST_ROOTS})
        roots = responses["client_roots"].get("roots") or []
        uris = ", ".join(str(r.get("uri")) for r in roots if isinstance(r, dict))
        return {"content": [text(f"Roots: {uris}")]}
    if name in (
        "test_input_required_result_request_state",
        "test_input_required_result_tampered_state",
    ):
        if token is None:
            confirm = {
                "method": "elicitation/create",
                "params": {
                    "message": "Please confirm",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                        "required": ["ok"],
                    },
                },
            }
            return needs({"confirm": confirm}, {"tool": name, "round": 1})
        state = verify(token)
        if state.get("tool") != name or not answered(responses, "confirm"):
            raise ProtocolError(INVALID_PARAMS, "Invalid params: requestState is not for this call")
        return {"content": [text("state-ok: confirmation received")]}
    if name == "test_input_required_result_multiple_inputs":
        keys = ("user_name", "greeting", "client_roots")
        if token is None or not answered(responses, *keys):
            requests = {
                "user_name": ELICIT_NAME,
                "greeting": {
                    "method": "sampling/createMessage",
                    "params": {
                        "messages": [{"role": "user", "content": text("Generate a greeting")}],
                        "maxTokens": 50,
                    },
                },
                "client_roots": LIST_ROOTS,
            }
            return needs(requests, {"tool": name, "round": 1})
        verify(token)
        return {"content": [text("All inputs received")]}
    if name == "test_input_required_result_multi_round":
        state = verify(token) if token is not None else {"round": 0}
        step = state.get("round", 0)
        if step == 0 or (step == 1 and not answered(responses, "step1")):
            request = {
                "method": "elicitation/create",
                "params": {
                    "message": "Step 1: What is your name?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}},
                        "required": ["name"],
                    },
                },
            }
            return needs({"step1": request}, {"tool": name, "round": 1})
        if step == 1 or not answered(responses, "step2"):
            name_given = (responses.get("step1") or {}).get("content", {}).get("name", "")
            request = {
                "method": "elicitation/create",
                "params": {
                    "message": "Step 2: What is your favorite color?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"color": {"type": "string"}},
                        "required": ["color"],
                    },
                },
            }
            return needs({"step2": request}, {"tool": name, "round": 2, "name": name_given})
        color = responses["step2"].get("content", {}).get("color", "")
        return {"content": [text(f"{state.get('name', '')} likes {color}")]}
    if name == "test_streaming_elicitation":
        # Input is asked for in the result, never by a request on the response stream.
        return needs({"user_name": ELICIT_NAME})
    if name == "test_input_required_result_capabilities":
        if answered(responses, *(responses or {}).keys()) and responses:
            return {"content": [text("Inputs received")]}
        meta = wire.get("_meta") or {}
        declared = meta.get("io.modelcontextprotocol/clientCapabilities") or {}
        requests = {}
        if "elicitation" in declared:
            requests["user_name"] = ELICIT_NAME
        if "sampling" in declared:
            requests["capital_question"] = SAMPLE_CAPITAL
        if "roots" in declared:
            requests["client_roots"] = LIST_ROOTS
        if not requests:
            return {"content": [text("The client declared no capability to ask through")]}
        return needs(requests)
    return None


# Open subscriptions/listen streams (2026-07-28 and later): each listening call and what it asked
# for. Keyed by the call itself, not its request id: every client picks its own ids, so two
# clients may well both listen with id 1. A stream ends by itself after LISTEN_SECONDS, and at
# once when its client leaves (the server cancels the handler).
LISTENERS: dict[Call, dict[str, Any]] = {}
LISTEN_SECONDS = 30.0
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


async def listen(call: Call) -> Any:
    """Acknowledge what the server can deliver of the requested filter, then keep the stream
    open for list-changed notifications, each tagged with the subscription (the request id)."""
    asked = msgspec.to_builtins(call.params).get("notifications") or {}
    offered = {
        key: value
        for key, value in asked.items()
        if key in ("toolsListChanged", "promptsListChanged", "resourcesListChanged") and value
    }
    tag = {"_meta": {SUBSCRIPTION_ID: call.id}}
    call.notify("notifications/subscriptions/acknowledged", {"notifications": offered, **tag})
    LISTENERS[call] = offered
    try:
        await asyncio.sleep(LISTEN_SECONDS)
    finally:
        del LISTENERS[call]
    return {"resultType": "complete", **tag}


def changed(kind: str, method: str) -> None:
    """Tell every listener that asked for ``kind`` that a list changed."""
    for listener, offered in list(LISTENERS.items()):
        if offered.get(kind):
            listener.notify(method, {"_meta": {SUBSCRIPTION_ID: listener.id}})


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
    if name == "test_input_required_result_prompt":
        return round_trip(call, name)
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
    if _caches(call.revision, call.method):
        result = {**result, "cacheScope": "public", "ttlMs": 60_000}
    return result


@functools.cache  # one entry per (revision, method): msgspec.structs.fields evaluates annotations
def _caches(revision: str, method: str) -> bool:
    """Whether the result of ``method`` in ``revision`` has the caching hints."""
    cls = bindings(revision).FACTS.wires[method].result
    is_struct = isinstance(cls, type) and issubclass(cls, msgspec.Struct)
    return is_struct and "cacheScope" in {f.encode_name for f in msgspec.structs.fields(cls)}


async def handle(call: Call) -> Any:
    """Answer one request of any revision the server speaks."""
    result = await answer(call)
    return cacheable(call, result) if isinstance(result, dict) else result


async def answer(call: Call) -> Any:
    method = call.method
    if method == "tools/list":
        # The multi-round-trip tools exist only where the revision has input-required results.
        trips = bindings(call.revision).FACTS.round_trip is not None
        extra = [tool(n, "Asks the client for input across rounds") for n in ROUND_TRIP_TOOLS]
        extra += [
            tool("test_missing_capability", "Needs the client's sampling capability"),
            tool("test_logging_tool", "Logs only when the request's _meta sets a log level"),
            tool("test_trigger_tool_change", "Announces a tool list change to listeners"),
            tool("test_trigger_prompt_change", "Announces a prompt list change to listeners"),
            tool("test_custom_headers", "Mirrors its region into Mcp-Param-Region", HEADER_SCHEMA),
        ]
        return {"tools": TOOLS + extra if trips else TOOLS}
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
    if method == "subscriptions/listen":
        return await listen(call)
    if method == "completion/complete":
        return {"completion": {"values": [], "total": 0, "hasMore": False}}
    raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {method!r}")


def app(auth: ResourceServer | None = None, redis: str | None = None) -> StreamableHTTPServer:
    """The ASGI application (also what tests mount in-process), its bounds written out at their
    defaults (docs/limits.md): bodies, sessions, requests in flight, messages waiting, event
    logs; with ``redis``, sessions and event logs live in that Redis."""
    store: Store = (
        RedisStore(redis, max_events=1000, event_max_age=300.0)
        if redis
        else MemoryStore(max_events=1000, event_max_age=300.0)
    )
    return StreamableHTTPServer(
        handle,
        revisions=REVISIONS,
        capabilities=CAPABILITIES,
        info=INFO,
        max_body_size=4 * 1024 * 1024,
        body_timeout=30.0,
        max_sessions=1024,
        session_idle_timeout=30 * 60.0,
        session_evictable_after=60.0,
        max_in_flight=128,
        max_queued=1000,
        retry_ms=1000,
        resume_timeout=30.0,
        store=store,
        auth=auth,
    )


def build(url: str, auth_server: str | None, redis: str | None) -> StreamableHTTPServer:
    """The application one worker process serves (``--workers`` builds one in each)."""
    auth = ResourceServer(url, auth_server) if auth_server else None
    return app(auth, redis)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--auth-server", help="require tokens of this authorization server")
    parser.add_argument("--redis", help="keep sessions and event logs in this Redis (a URL)")
    parser.add_argument(
        "--workers", type=int, default=1, help="worker processes on the port (needs --redis)"
    )
    args = parser.parse_args()
    if args.workers > 1 and not args.redis:
        parser.error("--workers above 1 needs --redis: the workers share sessions through it")
    url = f"http://{args.host}:{args.port}/mcp"
    factory = functools.partial(build, url, args.auth_server, args.redis)
    # The server's bounds, at their defaults too: connections, and deadlines for a request head
    # and for a client that stops reading.
    serve(
        factory() if args.workers == 1 else factory,
        args.host,
        args.port,
        workers=args.workers,
        max_connections=1000,
        header_timeout=10.0,
        write_timeout=30.0,
        keep_alive_timeout=5,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
