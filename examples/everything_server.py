"""The fixture server of the MCP conformance suite, written as an ``mcpbind.App``.

Run as ``python examples/everything_server.py --port PORT``; it serves http://127.0.0.1:PORT/mcp
to clients of every released revision from 2025-06-18 on (initialize for the older ones, the
stateless per-request ``_meta`` for 2026-07-28), with the tools, resources and prompts the suite's
server scenarios call (`make conformance` runs them). Each fixture is written once: the App answers
it in every revision, asking the client by requests or by multi-round-trip results as the revision
has it. Everything protocol-related is mcpbind's; this file holds only the fixtures.

``--redis URL`` keeps sessions and event logs in Redis, so that several processes (``--workers
N`` on one port, or servers on several ports sharing the URL) serve the same sessions and resume
each other's streams. The workers of one run sign 2026-07-28 request states with one key of the
run; servers started apart sign with the key in ``--state-key-file PATH`` (32 bytes or more,
e.g. ``head -c 32 /dev/urandom``), so that a client's retry may reach any of them.
``--auth-server URL`` requires bearer tokens of that authorization server.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import functools
import importlib.util
import json
import secrets
from pathlib import Path
from typing import Annotated, Any

import msgspec

from mcpbind import v2026_07_28 as M
from mcpbind.app import App, Context
from mcpbind.auth.resource import ResourceServer
from mcpbind.transports.serving import serve
from mcpbind.transports.store import MemoryStore, RedisStore, Store

REVISIONS = ("2025-06-18", "2025-11-25", "2026-07-28")

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="
IMAGE = M.ImageContent(data=PNG, mime_type="image/png")

# The fixtures change only when the process restarts: any client may keep a result for a minute.
mcp = App(
    "mcpbind-everything-server",
    revisions=REVISIONS,
    cache_scope="public",
    ttl_ms=60_000,
)

# Every fixture is ``async def``: none blocks, so none needs the worker thread a plain function
# runs in (the hop costs more than the fixture).

# -- content -----------------------------------------------------------------------------------


@mcp.tool
async def test_simple_text() -> str:
    """Tests simple text content response"""
    return "This is a simple text response for testing."


@mcp.tool
async def test_image_content() -> Any:
    """Tests image content response"""
    return [IMAGE]


@mcp.tool
async def test_audio_content() -> Any:
    """Tests audio content response"""
    return [M.AudioContent(data=WAV, mime_type="audio/wav")]


def embedded(uri: str, text: str, mime_type: str = "text/plain") -> M.EmbeddedResource:
    return M.EmbeddedResource(
        resource=M.TextResourceContents(uri=uri, text=text, mime_type=mime_type)
    )


@mcp.tool
async def test_embedded_resource() -> Any:
    """Tests embedded resource content response"""
    return [embedded("test://embedded-resource", "This is an embedded resource content.")]


@mcp.tool
async def test_multiple_content_types() -> Any:
    """Tests response with text, image and resource content"""
    data = json.dumps({"test": "data", "value": 123})
    return [
        M.TextContent(text="Multiple content types test:"),
        IMAGE,
        embedded("test://mixed-content-resource", data, "application/json"),
    ]


@mcp.tool
async def test_error_handling() -> Any:
    """Tests error response handling"""
    text = M.TextContent(text="This tool intentionally returns an error for testing")
    return M.CallToolResult(content=[text], is_error=True)


# -- notifications about a request ---------------------------------------------------------------


@mcp.tool
async def test_tool_with_logging(ctx: Context) -> str:
    """Tests tool that emits log messages during execution"""
    for message in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        ctx.info(message)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool
async def test_logging_tool(ctx: Context) -> str:
    """Logs only when the client asked for log messages (in 2026-07-28, by the request's _meta)"""
    ctx.info("test_logging_tool ran")
    return "Logged only when asked to"


@mcp.tool
async def test_tool_with_progress(ctx: Context) -> str:
    """Tests tool that reports progress notifications"""
    for step in (0, 50, 100):
        ctx.progress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    return "Progress reported"


@mcp.tool
async def test_reconnection(ctx: Context) -> str:
    """Closes its response stream mid-call (SEP-1699): the client resumes it with Last-Event-ID"""
    # The response is cut before the answer: the client polls with Last-Event-ID and gets the
    # answer from the stream's log (on whichever worker it reaches).
    closed = ctx.close_stream()
    await asyncio.sleep(0.1)
    note = "after the stream was closed" if closed else "(this revision has no polling)"
    return f"Reconnection test completed {note}"


# -- asking the client (requests up to 2025-11-25, input-required results from 2026-07-28) ------

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def form(**properties: Any) -> dict[str, Any]:
    """A flat elicitation schema of required properties."""
    return {"type": "object", "properties": properties, "required": list(properties)}


def plain(value: Any) -> dict[str, Any]:
    found = msgspec.to_builtins(value)
    return found if isinstance(found, dict) else {}


def first_text(result: Any) -> str:
    content = plain(result).get("content")
    if isinstance(content, list) and content:
        content = content[0]
    return str(content.get("text", "No response")) if isinstance(content, dict) else "No response"


def elicited(result: Any) -> str:
    answer = plain(result)
    content = json.dumps(answer.get("content", {}))
    return f"Elicitation completed: action={answer.get('action')}, content={content}"


@mcp.tool
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling (LLM completion request)"""
    return f"LLM response: {first_text(await ctx.sample(prompt, max_tokens=100))}"


@mcp.tool
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation (user input request)"""
    schema = form(response={"type": "string", "description": "User's response"})
    return elicited(await ctx.elicit(message, schema))


SEP1034 = {
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


@mcp.tool
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    """Tests elicitation with default values per SEP-1034"""
    message = "Please review and update the form fields with defaults"
    return elicited(await ctx.elicit(message, SEP1034))


def choices(of: str, *titles: str) -> list[dict[str, str]]:
    return [{"const": f"value{i}", "title": f"{t} {of}"} for i, t in enumerate(titles, 1)]


SEP1330 = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": choices("Option", "First", "Second", "Third")},
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
            "items": {"anyOf": choices("Choice", "First", "Second", "Third")},
        },
    },
}


@mcp.tool
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    """Tests elicitation with enum schema improvements"""
    return elicited(await ctx.elicit("Please select options from the enum fields", SEP1330))


async def ask_name(ctx: Context) -> str:
    answer = plain(await ctx.elicit("What is your name?", NAME, key="user_name"))
    return str(answer.get("content", {}).get("name", "stranger"))


def ask_capital(ctx: Context) -> Any:
    return ctx.sample("What is the capital of France?", max_tokens=100, key="capital_question")


@mcp.tool
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the client for the user's name"""
    return f"Hello, {await ask_name(ctx)}!"


@mcp.tool
async def test_streaming_elicitation(ctx: Context) -> str:
    """Asks for input in its result, never by a request on the response stream"""
    return f"Hello, {await ask_name(ctx)}!"


@mcp.tool
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question"""
    return f"Sampled: {first_text(await ask_capital(ctx))}"


@mcp.tool
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Asks the client for its roots"""
    roots = plain(await ctx.roots(key="client_roots")).get("roots", [])
    return "Roots: " + ", ".join(str(root.get("uri")) for root in roots)


async def confirm(ctx: Context) -> str:
    await ctx.elicit("Please confirm", form(ok={"type": "boolean"}), key="confirm")
    return "state-ok: confirmation received"


@mcp.tool
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks for a confirmation; the answer comes back with the signed request state"""
    return await confirm(ctx)


@mcp.tool
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks for a confirmation; a request state the server did not sign is refused"""
    return await confirm(ctx)


@mcp.tool
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks for a name, a greeting and the roots in one round"""
    await ctx.gather(
        ctx.elicit("What is your name?", NAME, key="user_name"),
        ctx.sample("Generate a greeting", max_tokens=50, key="greeting"),
        ctx.roots(key="client_roots"),
    )
    return "All inputs received"


@mcp.tool
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks for a name, then for a favourite color"""
    first = await ctx.elicit("Step 1: What is your name?", NAME, key="step1")
    color = form(color={"type": "string"})
    second = await ctx.elicit("Step 2: What is your favorite color?", color, key="step2")
    name = plain(first).get("content", {}).get("name", "")
    return f"{name} likes {plain(second).get('content', {}).get('color', '')}"


@mcp.tool
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only through the capabilities the client declared"""
    asks = []
    if "elicitation" in ctx.client:
        asks.append(ask_name(ctx))
    if "sampling" in ctx.client:
        asks.append(ask_capital(ctx))
    if "roots" in ctx.client:
        asks.append(ctx.roots(key="client_roots"))
    if not asks:
        return "The client declared no capability to ask through"
    await ctx.gather(*asks)
    return "Inputs received"


@mcp.tool
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability"""
    ctx.require("sampling")
    return "The client declared sampling"


# -- list changes, heard on subscription streams (2026-07-28) or GET streams (older) -------------


@mcp.tool
async def test_trigger_tool_change() -> str:
    """Announces a tool list change to listeners"""
    mcp.tools_changed()
    return "Tool list change announced"


@mcp.tool
async def test_trigger_prompt_change() -> str:
    """Announces a prompt list change to listeners"""
    mcp.prompts_changed()
    return "Prompt list change announced"


# -- input schemas -------------------------------------------------------------------------------

# An argument designated for an Mcp-Param-* header (SEP-2243): the server refuses a call whose
# header disagrees with the argument.
Header = Annotated[str, msgspec.Meta(extra_json_schema={"x-mcp-header": "Region"})]
Priority = Annotated[int, msgspec.Meta(extra_json_schema={"x-mcp-header": "Priority"})]


@mcp.tool
async def test_custom_headers(
    region: Header, priority: Priority | None = None, query: str = ""
) -> str:
    """Mirrors its region into Mcp-Param-Region"""
    return f"Region: {region}"


# The JSON Schema 2020-12 vocabulary (SEP-1613, SEP-2106), which every client must receive exactly
# as written: keywords msgspec does not write, so the schema is given as it is.
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


@mcp.tool(input_schema=SCHEMA_2020_12)
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,  # noqa: N803 (the schema's name)
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features"""
    given = {"name": name, "address": address, "contactMethod": contactMethod}
    given |= {"phone": phone, "email": email}
    return (
        f"Received: {json.dumps({k: v for k, v in given.items() if v is not None}, sort_keys=True)}"
    )


# -- resources -------------------------------------------------------------------------------------


@mcp.resource("test://static-text", name="static-text", mime_type="text/plain")
async def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", mime_type="image/png")
async def static_binary() -> bytes:
    return base64.b64decode(PNG)


@mcp.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
async def watched_resource() -> str:
    return "Watched resource content"


@mcp.resource("test://template/{id}/data", name="template", mime_type="application/json")
async def template(id: str) -> Any:  # noqa: A002 (the template's variable)
    return {"id": id, "templateTest": True, "data": f"Data for ID: {id}"}


# -- prompts ---------------------------------------------------------------------------------------


@mcp.prompt
async def test_simple_prompt() -> str:
    """A simple prompt without arguments"""
    return "This is a simple prompt for testing."


@mcp.prompt
async def test_prompt_with_arguments(
    arg1: Annotated[str, msgspec.Meta(description="First test argument")],
    arg2: Annotated[str, msgspec.Meta(description="Second test argument")],
) -> str:
    """A prompt with required arguments"""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt
async def test_prompt_with_embedded_resource(resourceUri: str) -> Any:  # noqa: N803
    """A prompt that includes an embedded resource"""
    resource = embedded(resourceUri, "Embedded resource content for testing.")
    return [
        M.PromptMessage(role="user", content=resource),
        "Please process the embedded resource above.",
    ]


@mcp.prompt
async def test_prompt_with_image() -> Any:
    """A prompt that includes image content"""
    return [M.PromptMessage(role="user", content=IMAGE), "Please analyze the image above."]


@mcp.prompt
async def test_input_required_result_prompt(ctx: Context) -> str:
    """A prompt that asks the client for its context first"""
    schema = form(context={"type": "string"})
    answer = await ctx.elicit("What context should the prompt use?", schema, key="user_context")
    return f"Context: {plain(answer).get('content', {}).get('context', '')}"


@mcp.completion(prompt="test_prompt_with_arguments", argument="arg1")
async def no_suggestions(value: str, arguments: dict[str, str]) -> list[str]:
    return []


# -- tasks (the tasks extension of 2026-07-28) ----------------------------------------------------

# The fixtures of the suite's tasks-* scenarios live beside this file (examples/ is no package).
_spec = importlib.util.spec_from_file_location(
    "everything_tasks", Path(__file__).with_name("everything_tasks.py")
)
assert _spec is not None and _spec.loader is not None
everything_tasks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(everything_tasks)
TASKS = everything_tasks.add_to(mcp)  # one layer per process: its tasks live in this process

# -- serving ---------------------------------------------------------------------------------------


def app(auth: ResourceServer | None = None, redis: str | None = None) -> Any:
    """The ASGI application (also what tests mount in-process), its bounds written out at their
    defaults (docs/limits.md): bodies, sessions, requests in flight, messages waiting, event
    logs; with ``redis``, sessions and event logs live in that Redis."""
    store: Store = (
        RedisStore(redis, max_events=1000, event_max_age=300.0)
        if redis
        else MemoryStore(max_events=1000, event_max_age=300.0)
    )
    return mcp.asgi(
        tasks=TASKS,
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


def build(
    url: str, auth_server: str | None, redis: str | None, state_key: bytes | None = None
) -> Any:
    """The application one worker process serves (``--workers`` builds one in each, all signing
    request states with the same ``state_key``, so that a retry may reach any of them)."""
    if state_key is not None:
        mcp.sign_with(state_key)
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
    parser.add_argument(
        "--state-key-file",
        type=Path,
        help="sign request states with the bytes of this file (32 or more), the same for every "
        "server a client's retry may reach; a random key of this run by default",
    )
    args = parser.parse_args()
    if args.workers > 1 and not args.redis:
        parser.error("--workers above 1 needs --redis: the workers share sessions through it")
    url = f"http://{args.host}:{args.port}/mcp"
    key = secrets.token_bytes(32)  # this run's, shared by its workers
    if args.state_key_file is not None:
        try:
            key = args.state_key_file.read_bytes()
        except OSError as exc:
            parser.error(f"--state-key-file: {exc.strerror}: {args.state_key_file}")
        if len(key) < 32:
            parser.error(f"--state-key-file: {len(key)} bytes; a key needs 32 or more")
    factory = functools.partial(build, url, args.auth_server, args.redis, key)
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
