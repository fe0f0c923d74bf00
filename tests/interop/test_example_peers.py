"""The examples (examples/stdio_client.py, examples/stdio_server.py) with real MCP peers
(`make interop`): the example client against server-everything (npm) and against a server on the
official `mcp` package, and the official `mcp` client against the example server. Every event
is checked: the revision agreed, results of the precise generated class, and each peer mistake
a known deviation reported as an event, never a crash."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path
from typing import Any, TextIO

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import driver  # noqa: E402
from stdio_client import StdioClient  # noqa: E402
from test_interop import KNOWN_DEVIATIONS  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

EXAMPLE_SERVER = ROOT / "examples" / "stdio_server.py"
INFO = {"name": "mcpbind-example", "version": "1.0"}


def answer(request: ev.RequestReceived) -> Any:
    """The example client's answers to server-everything's and the mcp server's requests."""
    if request.method == "elicitation/create":
        return {"action": "accept", "content": {"ok": True}}
    return driver.SERVER_REQUEST_ANSWERS[request.method](request)


def check_precise(revision: str, event: ev.Event) -> None:
    """A result event carries the precise result class of its method in ``revision``."""
    if isinstance(event, ev.ResultReceived):
        M = mcpbind.bindings(revision)
        tasks = M.FACTS.tasks
        if tasks is not None and event.method == tasks.payload_method:
            assert type(event.result) is M.CallToolResult  # only tools/call made tasks here
            return
        spec = M.METHODS[event.method]
        expected = tuple(mcpbind._support._runtime_classes([spec.result]))
        assert isinstance(event.result, expected), (event.method, type(event.result))
    if isinstance(event, (ev.RequestReceived, ev.NotificationReceived)):
        assert type(event.message) is mcpbind.bindings(revision).METHODS[event.method].message


def client_for(revision: str) -> StdioClient:
    caps: dict[str, Any] = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
    if "elicitation/create" not in mcpbind.bindings(revision).METHODS:
        del caps["elicitation"]
    session = mcpbind.ClientSession(revisions=(revision,), capabilities=caps, info=INFO)
    return StdioClient(session, on_request=answer)


def result(event: ev.Event, cls: str) -> Any:
    assert isinstance(event, ev.ResultReceived), event
    assert type(event.result).__name__ == cls, event
    return event.result


# -- the example client against server-everything ---------------------------------------------


async def everything(revision: str) -> StdioClient:
    client = client_for(revision)
    opened = await client.start("node", str(driver.EVERYTHING), "stdio")
    try:
        assert isinstance(opened, ev.Negotiated) and opened.revision == revision, opened
        assert client.session.revision == revision
        assert (await client.request("ping")).result == mcpbind.bindings(revision).Result()  # type: ignore[union-attr]
        tools = result(await client.request("tools/list"), "ListToolsResult").tools
        for tool in tools:
            await client.request(
                "tools/call", {"name": tool.name, "arguments": driver.arguments(tool)}
            )
        echo = await client.request("tools/call", {"name": "echo", "arguments": {"message": "hi"}})
        assert "hi" in result(echo, "CallToolResult").content[0].text
        prompts = result(await client.request("prompts/list"), "ListPromptsResult").prompts
        simple = next(p for p in prompts if not p.arguments)
        result(await client.request("prompts/get", {"name": simple.name}), "GetPromptResult")
        resources = result(await client.request("resources/list"), "ListResourcesResult")
        read = await client.request("resources/read", {"uri": resources.resources[0].uri})
        result(read, "ReadResourceResult")
    finally:
        await client.close(grace=0.5)
    return client


@pytest.mark.parametrize("revision", driver.EVERYTHING_REVISIONS)
def test_example_client_with_server_everything(revision: str) -> None:
    if shutil.which("node") is None or not driver.EVERYTHING.exists():
        pytest.fail("server-everything is not installed: run `make interop-setup`")
    client = asyncio.run(everything(revision))
    for event in client.events:
        check_precise(revision, event)
    rejected = [e for e in client.events if isinstance(e, ev.MessageRejected)]
    for event in rejected:  # the known deviations, as events naming the path
        assert event.sender == "server" and event.error.code == -32602, event
        assert any(k in event.error.message for k in KNOWN_DEVIATIONS[revision]), event
    if KNOWN_DEVIATIONS[revision]:
        assert rejected, f"server-everything's known deviation at {revision} did not show"
    served = {e.method for e in client.events if isinstance(e, ev.RequestReceived)}
    assert {"sampling/createMessage", "roots/list"} <= served, served
    assert sum(isinstance(e, ev.ResultReceived) for e in client.events) >= 10
    assert client.session.state == "ready"


# -- the example client against the official `mcp` server -----------------------------------


async def modern(revision: str) -> StdioClient:
    client = client_for(revision)
    opened = await client.start(sys.executable, str(driver.SERVER_2026))
    try:
        assert isinstance(opened, ev.Negotiated) and opened.revision == revision, opened
        names = {
            t.name for t in result(await client.request("tools/list"), "ListToolsResult").tools
        }
        assert {"add", "echo", "confirm", "touch"} <= names, names
        add = await client.request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 3}})
        assert result(add, "CallToolResult").content[0].text == "5"
        await multi_round_trip(client, revision)
        if revision == "2025-11-25":
            await task(client)
        if revision == "2026-07-28":
            await listen(client)
    finally:
        await client.close(grace=0.5)
    return client


async def multi_round_trip(client: StdioClient, revision: str) -> None:
    call = {"name": "confirm", "arguments": {"question": "go?"}}
    first = await client.request("tools/call", call)
    if revision == "2026-07-28":  # the server asks inside its result; the client retries
        assert isinstance(first, ev.InputRequired), first
        (ask,) = first.input_requests.values()
        assert type(ask) is mcpbind.bindings(revision).ElicitRequest
        first = await client.answer(first, {"confirm": answer(ev_request(ask, revision))})
    else:  # the server asked with its own request in the middle of the call
        asked = [e for e in client.events if isinstance(e, ev.RequestReceived)]
        assert asked and asked[-1].method == "elicitation/create", asked
    text = result(first, "CallToolResult").content[0].text
    assert text.startswith("confirmed=True"), text
    if revision == "2026-07-28":
        assert text.endswith("state=asked"), text


def ev_request(message: Any, revision: str) -> ev.RequestReceived:
    return ev.RequestReceived(
        id=0, method=message.method, params=message.params, message=message, revision=revision
    )


async def task(client: StdioClient) -> None:
    caps = msgspec.to_builtins(client.session._codec.peer_capabilities)  # type: ignore[union-attr]
    assert mcpbind.supports(caps, "tasks.requests.tools.call"), caps
    call = {"name": "add", "arguments": {"a": 4, "b": 5}, "task": {"ttl": 1000}}
    created = await client.request("tools/call", call)
    assert isinstance(created, ev.TaskCreated) and created.method == "tools/call", created
    got = result(await client.request("tasks/get", {"taskId": created.task_id}), "GetTaskResult")
    assert got.status == "completed"
    payload = await client.request("tasks/result", {"taskId": created.task_id})
    assert result(payload, "CallToolResult").content[0].text == "9"


async def listen(client: StdioClient) -> None:
    stream = client.session.request(
        "subscriptions/listen", {"notifications": {"toolsListChanged": True}}
    )
    await client.request("tools/call", {"name": "echo", "arguments": {"message": "sync"}})
    await client.request("tools/call", {"name": "touch"})
    for _ in range(50):
        changed = [
            e
            for e in client.events
            if isinstance(e, ev.NotificationReceived)
            and e.method == "notifications/tools/list_changed"
        ]
        if changed:
            break
        await asyncio.sleep(0.05)
    assert changed, [type(e).__name__ for e in client.events]
    (event,) = changed
    meta = msgspec.to_builtins(event.params.meta)
    assert meta["io.modelcontextprotocol/subscriptionId"] == stream, meta
    acked = [e for e in client.events if isinstance(e, ev.NotificationReceived)]
    assert any(e.method == "notifications/subscriptions/acknowledged" for e in acked), acked


@pytest.mark.parametrize("revision", ["2025-06-18", "2025-11-25", "2026-07-28"])
def test_example_client_with_the_mcp_server(revision: str) -> None:
    pytest.importorskip("mcp.server", reason="the pinned `mcp` package (dev extras) is needed")
    client = asyncio.run(modern(revision))
    for event in client.events:
        check_precise(revision, event)
    kinds = {type(e).__name__ for e in client.events}
    assert "MessageRejected" not in kinds, [e for e in client.events]


# -- the official `mcp` client against the example server -----------------------------------


async def official(revision: str, errlog: TextIO) -> tuple[str, list[str], str]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(EXAMPLE_SERVER), revision])
    mode = revision if revision == "2026-07-28" else "legacy"
    transport = stdio_client(params, errlog=errlog)
    async with Client(transport, mode=mode, cache=None) as client:  # type: ignore[arg-type]
        tools = await client.list_tools()
        added = await client.call_tool("add", {"a": 2, "b": 40})
        echo = await client.call_tool("echo", {"message": "hello"})
        text = [c.text for c in (*added.content, *echo.content)]  # type: ignore[union-attr]
        return client.protocol_version, [t.name for t in tools.tools], " ".join(text)


@pytest.mark.parametrize("revision", [*driver.EVERYTHING_REVISIONS, "2026-07-28"])
def test_the_mcp_client_with_the_example_server(revision: str, tmp_path: Path) -> None:
    pytest.importorskip("mcp.client", reason="the pinned `mcp` package (dev extras) is needed")
    with open(tmp_path / "server.err", "w+") as errlog:
        agreed, tools, text = asyncio.run(official(revision, errlog))
        errlog.seek(0)
        # The example server reports each message it could not decode on its stderr: none here.
        assert "rejected" not in errlog.read()
    assert agreed == revision
    assert tools == ["echo", "add"]
    assert text == "42 hello"
