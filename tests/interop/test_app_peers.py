"""mcpbind.App and mcpbind.Client with real peers (`make interop`): a tool server in fifteen lines
serves the official `mcp` client (PyPI, pinned in the dev extras) at 2025-11-25 and 2026-07-28,
over stdio and over Streamable HTTP, and the official `ClientSession` held to 2024-11-05; the
typed Client speaks to `@modelcontextprotocol/server-everything` (npm) in each of its
revisions, every result of the precise generated class, on its stdio and, at a URL, in its HTTP+SSE
mode (the fall-back from Streamable HTTP)."""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TypeVar

import pytest

import mcpbind
from tests._net import free_port

sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402
from test_sse_peers import everything as everything_sse  # noqa: E402,F401 - its fixture

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

T = TypeVar("T")

# The whole server: a tool, its schemas from the type hints, every released revision (or those
# given on the command line), on stdio.
SERVER = '''\
import sys

from mcpbind import App

app = App("adder", revisions=sys.argv[1:] or None)


@app.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    app.run()
'''


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        return await asyncio.wait_for(coro, 120)

    return asyncio.run(bounded())


@pytest.fixture
def server(tmp_path: Path) -> Path:
    path = tmp_path / "adder.py"
    path.write_text(SERVER)
    return path


def test_the_server_is_at_most_fifteen_lines() -> None:
    assert len(SERVER.splitlines()) <= 15


def need_mcp() -> None:
    pytest.importorskip("mcp.client", reason="the pinned `mcp` package (dev extras) is needed")


async def official_calls(client: Any) -> dict[str, Any]:
    tools = await client.list_tools()
    added = await client.call_tool("add", {"a": 2, "b": 40})
    bad = await client.call_tool("add", {"a": "two", "b": 40})
    return {
        "version": client.protocol_version,
        "tools": [(t.name, t.description, t.input_schema, t.output_schema) for t in tools.tools],
        "added": (added.content[0].text, added.structured_content, added.is_error),
        "bad": (bad.content[0].text, bad.is_error),
    }


ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"result": {"type": "integer"}},
    "required": ["result"],
}


def check_official(found: dict[str, Any], version: str) -> None:
    assert found["version"] == version
    assert found["tools"] == [("add", "Add two integers.", ADD_SCHEMA, OUTPUT_SCHEMA)]
    assert found["added"] == ("42", {"result": 42}, False)
    # From 2025-11-25 on a bad argument is a tool error the model reads, naming the path.
    assert found["bad"] == (
        "Invalid arguments for tool 'add': Expected `int`, got `str` - at `$.a`",
        True,
    )


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_the_official_client_over_stdio(revision: str, server: Path, tmp_path: Path) -> None:
    need_mcp()
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, args=[str(server)])
        mode = revision if revision == "2026-07-28" else "legacy"
        with open(tmp_path / "server.err", "w") as errlog:
            transport = stdio_client(params, errlog=errlog)
            async with Client(transport, mode=mode, cache=None) as client:  # type: ignore[arg-type]
                return await official_calls(client)

    check_official(run(main()), revision)


def test_the_official_client_session_held_to_2024_11_05(server: Path) -> None:
    need_mcp()
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError

    async def main() -> dict[str, Any]:
        # The server speaks 2024-11-05 only: the official session's initialize is answered so.
        params = StdioServerParameters(command=sys.executable, args=[str(server), "2024-11-05"])
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            added = await session.call_tool("add", {"a": 2, "b": 3})
            try:
                await session.call_tool("add", {"a": "two", "b": 3})
            except MCPError as error:
                refused: Any = (error.error.code, error.error.message)
            else:
                refused = None
            return {"init": init, "tools": tools, "added": added, "refused": refused}

    found = run(main())
    assert found["init"].protocol_version == "2024-11-05"
    (tool,) = found["tools"].tools
    assert (tool.name, tool.input_schema, tool.output_schema) == ("add", ADD_SCHEMA, None)
    assert found["added"].content[0].text == "5" and found["added"].structured_content is None
    # In 2024-11-05 invalid arguments are a protocol error.
    assert found["refused"] == (
        -32602,
        "Invalid arguments for tool 'add': Expected `int`, got `str` - at `$.a`",
    )


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_the_official_client_over_http(revision: str) -> None:
    need_mcp()
    import uvicorn
    from mcp import Client

    namespace: dict[str, Any] = {}
    exec(SERVER.replace("sys.argv[1:] or None", "None"), namespace)
    app: mcpbind.App = namespace["app"]

    async def main() -> dict[str, Any]:
        port = free_port()
        config = uvicorn.Config(app.asgi(), host="127.0.0.1", port=port, log_level="warning")
        web = uvicorn.Server(config)
        serving = asyncio.ensure_future(web.serve())
        try:
            while not web.started:
                await asyncio.sleep(0.05)
            mode = revision if revision == "2026-07-28" else "legacy"
            url = f"http://127.0.0.1:{port}/mcp"
            async with Client(url, mode=mode, cache=None) as client:
                return await official_calls(client)
        finally:
            web.should_exit = True
            await serving

    check_official(run(main()), revision)


# -- the typed Client against server-everything ---------------------------------------------------


@pytest.mark.parametrize("revision", driver.EVERYTHING_REVISIONS)
def test_the_typed_client_with_server_everything(revision: str) -> None:
    if shutil.which("node") is None or not driver.EVERYTHING.exists():
        pytest.fail("server-everything is not installed: run `make interop-setup`")
    sampled: list[Any] = []

    def sampling(params: Any) -> dict[str, Any]:
        sampled.append(params)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled by mcpbind"},
            "model": "mcpbind-test",
        }

    async def main() -> dict[str, Any]:
        client = mcpbind.Client(
            ["node", str(driver.EVERYTHING), "stdio"],
            revisions=[revision],
            sampling=sampling,
            roots=lambda: ["file:///tmp/mcpbind"],
        )
        async with client:
            assert client.revision == revision
            resources = await client.list_resources()
            return {
                "tools": await client.list_tools(),
                "echo": await client.call_tool("echo", {"message": "hi"}),
                "sum": await client.call_tool("get-sum", {"a": 2, "b": 3}),
                "sampled": await client.call_tool(
                    "trigger-sampling-request", {"prompt": "hello", "maxTokens": 5}
                ),
                "prompts": await client.list_prompts(),
                "prompt": await client.get_prompt("simple-prompt"),
                "resources": resources,
                "read": await client.read_resource(resources[0].uri),
                "templates": await client.list_resource_templates(),
            }

    found = run(main())
    M = mcpbind.bindings(revision)
    assert {type(t) for t in found["tools"]} == {M.Tool} and len(found["tools"]) >= 10
    assert type(found["echo"]) is M.CallToolResult and found["echo"].content[0].text == "Echo: hi"
    assert "5" in found["sum"].content[0].text
    assert len(sampled) == 1 and type(sampled[0]) is M.CreateMessageRequestParams
    assert "sampled by mcpbind" in found["sampled"].content[0].text
    assert {type(p) for p in found["prompts"]} == {M.Prompt}
    assert type(found["prompt"]) is M.GetPromptResult
    assert {type(r) for r in found["resources"]} == {M.Resource}
    assert type(found["read"]) is M.ReadResourceResult
    assert {type(t) for t in found["templates"]} == {M.ResourceTemplate}


# -- the typed Client against an HTTP+SSE server (2024-11-05's HTTP transport) --------------------


@pytest.mark.parametrize("revision", driver.EVERYTHING_REVISIONS)
def test_the_typed_client_at_a_url_falls_back_to_http_sse(
    everything_sse: str, revision: str  # noqa: F811 - the fixture
) -> None:
    """``Client(url)`` of a server that speaks only HTTP+SSE (server-everything's ``sse`` mode
    refuses the Streamable HTTP POST to its stream's URL): the same typed client, over the old
    transport, the server's requests answered too."""
    from mcpbind.transports.sse_client import SSEClient

    def sampling(params: Any) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "sampled over sse"},
            "model": "mcpbind-test",
        }

    async def main() -> dict[str, Any]:
        client = mcpbind.Client(
            everything_sse,
            revisions=[revision],
            sampling=sampling,
            roots=lambda: ["file:///tmp/mcpbind-sse"],
        )
        async with client:
            return {
                "revision": client.revision,
                "transport": type(client._link.http),  # type: ignore[union-attr]
                "tools": await client.list_tools(),
                "echo": await client.call_tool("echo", {"message": "over sse"}),
                "sampled": await client.call_tool(
                    "trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}
                ),
                "roots": await client.call_tool("get-roots-list", {}),
            }

    found = run(main())
    M = mcpbind.bindings(revision)
    assert found["revision"] == revision and found["transport"] is SSEClient
    assert {type(t) for t in found["tools"]} == {M.Tool} and len(found["tools"]) >= 10
    assert type(found["echo"]) is M.CallToolResult
    assert found["echo"].content[0].text == "Echo: over sse"
    assert "sampled over sse" in found["sampled"].content[0].text
    assert "file:///tmp/mcpbind-sse" in " ".join(c.text for c in found["roots"].content)
