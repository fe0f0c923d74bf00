"""`mcpbind bridge --listen` between real peers (`make interop`): the official `mcp` client (PyPI,
pinned in the dev extras) at 2026-07-28 and 2025-11-25 in front of
`@modelcontextprotocol/server-everything` (npm, a child per session), and a 2024-11-05 client over
HTTP+SSE in front of a server on the official `mcp` SDK at 2026-07-28 over Streamable HTTP. Every
message each client receives is recorded at the gateway's door and validated against the
client's own revision (``Wire`` of tests/test_gateway.py)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import mcpbind
from mcpbind.transports.sse_client import SSEClient
from tests._net import wait_port

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import driver  # noqa: E402
from test_gateway import Served, free_port, run  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

EVERYTHING = ["node", str(driver.EVERYTHING), "stdio"]


def need_peers() -> None:
    pytest.importorskip("mcp.client", reason="the pinned `mcp` package (dev extras) is needed")
    if shutil.which("node") is None or not driver.EVERYTHING.exists():
        pytest.fail("server-everything is not installed: run `make interop-setup`")


async def everything_through_the_gateway(client: Any) -> dict[str, Any]:
    """What the official client gets from server-everything through the gateway."""
    from mcp import types

    tools = await client.list_tools()
    resources = await client.list_resources()
    prompts = await client.list_prompts()
    return {
        "version": client.protocol_version,
        "tools": {t.name for t in tools.tools},
        "echo": await client.call_tool("echo", {"message": "through"}),
        "sum": await client.call_tool("get-sum", {"a": 2, "b": 40}),
        "read": await client.read_resource(resources.resources[0].uri),
        "prompt": await client.get_prompt("simple-prompt"),
        "prompts": {p.name for p in prompts.prompts},
        "sampled": await client.call_tool(
            "trigger-sampling-request", {"prompt": "hello", "maxTokens": 5}
        ),
        "elicited": await client.call_tool("trigger-elicitation-request", {}),
        "types": types,
    }


@pytest.mark.parametrize("revision", ["2026-07-28", "2025-11-25"])
def test_the_official_client_reaches_server_everything_through_the_gateway(revision: str) -> None:
    need_peers()
    from mcp import Client, types

    asked: list[str] = []

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        asked.append("sampling")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="sampled through the gateway"),
            model="test-model",
        )

    async def elicitation(context: Any, params: Any) -> types.ElicitResult:
        asked.append("elicitation")
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True})

    async def main() -> tuple[dict[str, Any], list[str], list[str]]:
        served = Served(command=EVERYTHING, server_revisions=("2025-11-25",))
        async with served.running():
            mode = revision if revision == "2026-07-28" else "legacy"
            async with Client(
                served.url,
                mode=mode,
                cache=None,
                sampling_callback=sampling,
                elicitation_callback=elicitation,
            ) as client:
                found = await everything_through_the_gateway(client)
            keys = list(served.wire.by)
            invalid = [line for key in keys for line in served.wire.invalid(key, revision)]
            lines = [line for key in keys for line in served.wire.by[key]]
        return found, invalid, lines

    found, invalid, lines = run(main())
    assert found["version"] == revision
    assert {"echo", "get-sum", "trigger-sampling-request"} <= found["tools"]
    assert found["echo"].content[0].text == "Echo: through"
    assert "42" in found["sum"].content[0].text
    assert found["read"].contents and "simple-prompt" in found["prompts"]
    assert found["prompt"].messages
    assert "sampled through the gateway" in found["sampled"].content[0].text
    assert not found["elicited"].is_error and "Ada" in str(found["elicited"].content)
    assert asked == ["sampling", "elicitation"]
    # The 2026-07-28 client was asked through input-required results (it has no such methods);
    # the 2025-11-25 client through requests of the server's own on the call's stream.
    rounds = sum('"resultType":"input_required"' in line for line in lines)
    assert rounds == (2 if revision == "2026-07-28" else 0)
    assert invalid == []


@pytest.fixture
def sdk_server_2026() -> Any:
    """tests/interop/server_2026.py's server (the official SDK) over Streamable HTTP."""
    pytest.importorskip("mcp.server", reason="the pinned `mcp` package (dev extras) is needed")
    port = free_port()
    code = (
        "import sys, uvicorn; sys.path.insert(0, sys.argv[1]); import server_2026; "
        "uvicorn.run(server_2026.server.streamable_http_app(), host='127.0.0.1', "
        "port=int(sys.argv[2]), log_level='warning')"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(HERE), str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_port(port, process)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def test_a_2024_11_05_client_over_http_sse_reaches_a_2026_07_28_sdk_server(
    sdk_server_2026: str,
) -> None:
    """The oldest client, on the older HTTP transport, in front of the newest server on the
    official SDK: tools, prompts and resources cross, each result of the client's own class."""
    asked: list[Any] = []

    async def on_request(event: Any) -> Any:
        asked.append((event.method, event.params.message))
        return {"action": "accept", "content": {"ok": True}}

    async def main() -> tuple[Any, ...]:
        served = Served(upstream=sdk_server_2026, server_revisions=("2026-07-28",))
        async with served.running():
            session = mcpbind.ClientSession(
                "2024-11-05", capabilities={"sampling": {}}, info={"name": "old", "version": "1"}
            )
            old = SSEClient(served.sse_url, session, on_request=on_request)
            try:
                await old.connect()
                tools = await old.call("tools/list")
                added = await old.call("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
                prompts = await old.call("prompts/list")
                resources = await old.call("resources/list")
                try:
                    confirmed: Any = await old.call(
                        "tools/call", {"name": "confirm", "arguments": {"question": "go?"}}
                    )
                except mcpbind.ProtocolError as error:
                    confirmed = error
            finally:
                await old.close()
            invalid = served.wire.invalid(old.session_id or "", "2024-11-05")
        return tools, added, prompts, resources, confirmed, invalid

    tools, added, prompts, resources, confirmed, invalid = run(main())
    M = mcpbind.bindings("2024-11-05")
    assert {"add", "echo", "confirm"} <= {t.name for t in tools.tools}
    assert type(added) is M.CallToolResult and added.content[0].text == "5"
    assert type(prompts) is M.ListPromptsResult and type(resources) is M.ListResourcesResult
    # 2024-11-05 has no elicitation: the server's input request cannot reach the client, and the
    # call is answered with an error saying so (never a hang, never a silent default).
    assert asked == []
    assert isinstance(confirmed, mcpbind.ProtocolError)
    assert confirmed.message == (
        "the server needs 'elicitation/create' input to answer 'tools/call', which MCP "
        "2024-11-05 (the client's revision) cannot ask for"
    )
    assert invalid == []
