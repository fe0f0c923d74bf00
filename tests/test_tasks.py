"""The tasks extension (SEP-2663) on StreamableHTTPServer: tool calls that become tasks, the
extension's methods, its gate, and the bounds of mcpbind.tasks.Tasks (docs/tasks.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from mcpbind import ProtocolError
from mcpbind._extensions import TASKS
from mcpbind.errors import INTERNAL_ERROR
from mcpbind.tasks import TaskContext, Tasks
from mcpbind.transports.http_server import HEADER_MISMATCH, Call, StreamableHTTPServer
from tests.test_http_transport import ACCEPT, INFO, URL, http, run

EXT = "io.modelcontextprotocol/tasks"
OPTED_IN = {"extensions": {EXT: {}}}


def meta(capabilities: dict[str, Any]) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }


async def handler(call: Call) -> Any:
    if call.method == "tools/list":
        return {"tools": [], "cacheScope": "private", "ttlMs": 0}
    return {"content": [{"type": "text", "text": "answered synchronously"}]}


async def quick(context: TaskContext, params: dict[str, Any]) -> Any:
    return {"content": [{"type": "text", "text": f"done {params['arguments'].get('n')}"}]}


async def forever(context: TaskContext, params: dict[str, Any]) -> Any:
    await asyncio.Event().wait()


async def asking(context: TaskContext, params: dict[str, Any]) -> Any:
    ask = {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}
    answers = await context.ask({"a": ask, "b": ask})
    return {"content": [{"type": "text", "text": ",".join(sorted(answers))}]}


async def broken(context: TaskContext, params: dict[str, Any]) -> Any:
    raise ProtocolError(INTERNAL_ERROR, "Internal error: broken", {"why": "test"})


async def malformed(context: TaskContext, params: dict[str, Any]) -> Any:
    return {"content": 5}


def layer(**bounds: Any) -> Tasks:
    tasks = Tasks(**bounds)
    tasks.tool("quick", quick)
    tasks.tool("forever", forever)
    tasks.tool("asking", asking, required=True)
    tasks.tool("broken", broken)
    tasks.tool("malformed", malformed)
    tasks.tool("later", quick, when=lambda params: "inputResponses" in params)
    return tasks


def server(tasks: Tasks) -> StreamableHTTPServer:
    return StreamableHTTPServer(
        handler, revisions=("2026-07-28",), capabilities={"tools": {}}, info=INFO, tasks=tasks
    )


class Peer:
    """A stateless 2026-07-28 client posting raw JSON-RPC with the routing headers."""

    def __init__(self, client: httpx.AsyncClient, capabilities: dict[str, Any]) -> None:
        self.client = client
        self.capabilities = capabilities
        self.ids = 0

    async def post(
        self, method: str, params: dict[str, Any], name: str | None = None
    ) -> httpx.Response:
        self.ids += 1
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        body["params"] = {**params, "_meta": meta(self.capabilities)}
        headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": method}
        target = name if name is not None else params.get("name", params.get("taskId"))
        if target is not None:
            headers["mcp-name"] = target
        return await self.client.post(URL, content=json.dumps(body), headers=headers)

    async def result(self, method: str, params: dict[str, Any]) -> Any:
        response = await self.post(method, params)
        assert response.status_code == 200, response.text
        return response.json()["result"]

    async def error(self, method: str, params: dict[str, Any]) -> tuple[int, Any]:
        response = await self.post(method, params)
        return response.status_code, response.json()["error"]

    async def until(self, task_id: str, *statuses: str) -> Any:
        """tasks/get until the task's status is one of ``statuses`` (the task runs on this loop)."""
        for _ in range(1000):
            task = await self.result("tasks/get", {"taskId": task_id})
            if task["status"] in statuses:
                return task
            await asyncio.sleep(0.001)
        raise AssertionError(f"task {task_id} never reached {statuses}: {task}")


def scenario(test: Any, capabilities: dict[str, Any] = OPTED_IN, **bounds: Any) -> Any:
    async def go() -> Any:
        tasks = layer(**bounds)
        try:
            async with http(server(tasks)) as client:
                return await test(Peer(client, capabilities))
        finally:
            await tasks.aclose()

    return run(go())


def test_the_facts_are_the_pinned_packages() -> None:
    facts = TASKS["2026-07-28"]
    assert (facts.package, facts.version) == ("@modelcontextprotocol/ext-tasks", "0.2.2")
    assert (facts.extension, facts.get, facts.update, facts.cancel) == (
        EXT,
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
    )
    assert (facts.task_result, facts.complete_result, facts.eligible) == (
        "task",
        "complete",
        "tools/call",
    )
    assert "ttlMs" in facts.task_fields and "ttl" not in facts.task_fields


def test_discover_advertises_the_extension() -> None:
    async def test(peer: Peer) -> Any:
        return await peer.result("server/discover", {})

    assert scenario(test)["capabilities"]["extensions"] == {EXT: {}}


def test_a_call_becomes_a_task_whose_result_tasks_get_inlines() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "quick", "arguments": {"n": 7}})
        first = await peer.result("tasks/get", {"taskId": created["taskId"]})
        done = await peer.until(created["taskId"], "completed")
        return created, first, done

    created, first, done = scenario(test)
    assert created["resultType"] == "task"
    assert created["status"] == "working"
    assert {"taskId", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(created)
    assert not {"result", "error", "inputRequests", "requestState", "ttl"} & set(created)
    assert first["taskId"] == created["taskId"] and first["resultType"] == "complete"
    assert done["result"]["content"][0]["text"] == "done 7"
    assert done["result"]["resultType"] == "complete"


def test_without_the_extension_methods_are_refused_and_optional_tools_run_synchronously() -> None:
    async def test(peer: Peer) -> Any:
        gated = await peer.error("tasks/get", {"taskId": "no-such-task"})
        required = await peer.error("tools/call", {"name": "asking", "arguments": {}})
        sync = await peer.result("tools/call", {"name": "quick", "arguments": {}})
        return gated, required, sync

    gated, required, sync = scenario(test, capabilities={})
    # The gate comes before the lookup: the unknown id is not what the client is told.
    assert gated == (
        400,
        {
            "code": -32021,
            "message": gated[1]["message"],
            "data": {"requiredCapabilities": {"extensions": {EXT: {}}}},
        },
    )
    assert required[0] == 400 and required[1]["code"] == -32021
    assert sync["content"][0]["text"] == "answered synchronously"


def test_unknown_task_and_removed_methods() -> None:
    async def test(peer: Peer) -> Any:
        unknown = await peer.error("tasks/get", {"taskId": "no-such-task"})
        removed = await peer.error("tasks/result", {"taskId": "no-such-task"})
        return unknown, removed

    unknown, removed = scenario(test)
    assert unknown[0] == 400 and unknown[1]["code"] == -32602
    assert removed[1]["code"] == -32601


def test_mcp_name_must_be_the_task_id() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "forever", "arguments": {}})
        return await peer.post("tasks/get", {"taskId": created["taskId"]}, name="another")

    response = scenario(test)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == HEADER_MISMATCH


def test_input_requests_are_answered_one_at_a_time() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "asking", "arguments": {}})
        task_id = created["taskId"]
        asked = await peer.until(task_id, "input_required")
        update = {"taskId": task_id, "inputResponses": {"a": {"action": "accept"}, "zz": {}}}
        ack = await peer.result("tasks/update", update)
        partial = await peer.result("tasks/get", {"taskId": task_id})
        rest = {"taskId": task_id, "inputResponses": {"b": {"action": "accept"}}}
        await peer.result("tasks/update", rest)
        done = await peer.until(task_id, "completed")
        return asked, ack, partial, done

    asked, ack, partial, done = scenario(test)
    assert sorted(asked["inputRequests"]) == ["a", "b"]
    assert asked["inputRequests"]["a"]["method"] == "elicitation/create"
    assert ack == {"resultType": "complete"}
    assert partial["status"] == "input_required" and list(partial["inputRequests"]) == ["b"]
    assert done["result"]["content"][0]["text"] == "a,b"


def test_cancel_settles_a_running_task_and_is_idempotent() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "forever", "arguments": {}})
        first = await peer.result("tasks/cancel", {"taskId": created["taskId"]})
        after = await peer.result("tasks/get", {"taskId": created["taskId"]})
        again = await peer.result("tasks/cancel", {"taskId": created["taskId"]})
        return first, after, again

    first, after, again = scenario(test)
    assert first == again == {"resultType": "complete"}
    assert after["status"] == "cancelled" and "result" not in after and "error" not in after


@pytest.mark.parametrize("tool", ["broken", "malformed"])
def test_a_protocol_error_or_an_invalid_result_fails_the_task(tool: str) -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": tool, "arguments": {}})
        return await peer.until(created["taskId"], "failed")

    failed = scenario(test)
    assert "result" not in failed
    if tool == "broken":
        assert failed["error"] == {
            "code": INTERNAL_ERROR,
            "message": "Internal error: broken",
            "data": {"why": "test"},
        }
    else:  # the tool's result is checked against the revision's generated CallToolResult
        assert failed["error"]["code"] == -32602
        assert "$.result.content" in failed["error"]["message"]


def test_when_leaves_a_call_to_the_handler() -> None:
    async def test(peer: Peer) -> Any:
        first = await peer.result("tools/call", {"name": "later", "arguments": {}})
        second = await peer.result(
            "tools/call", {"name": "later", "arguments": {}, "inputResponses": {}}
        )
        return first, second

    first, second = scenario(test)
    assert first["content"][0]["text"] == "answered synchronously"
    assert second["resultType"] == "task"


def test_max_tasks_refuses_one_more() -> None:
    async def test(peer: Peer) -> Any:
        await peer.result("tools/call", {"name": "forever", "arguments": {}})
        return await peer.error("tools/call", {"name": "forever", "arguments": {}})

    status, error = scenario(test, max_tasks=1)
    # busy, not failed: 503 (with Retry-After), as every "Server busy" answering a POST alone
    assert status == 503 and error["code"] == INTERNAL_ERROR
    assert error["message"].startswith("Server busy: too many tasks")
    assert "at most 1" in error["message"] and error["data"] == {"max_tasks": 1}


def test_max_input_requests_fails_a_task_that_asks_more() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "asking", "arguments": {}})
        return await peer.until(created["taskId"], "failed")

    failed = scenario(test, max_input_requests=1)
    assert failed["error"]["code"] == INTERNAL_ERROR
    assert "at most 1" in failed["error"]["message"]


def test_a_task_is_forgotten_after_its_ttl() -> None:
    async def test(peer: Peer) -> Any:
        created = await peer.result("tools/call", {"name": "forever", "arguments": {}})
        return created, await peer.error("tasks/get", {"taskId": created["taskId"]})

    created, (status, error) = scenario(test, ttl_ms=0)
    assert created["ttlMs"] == 0
    assert status == 400 and error["code"] == -32602


def test_a_task_belongs_to_its_owner_and_each_owner_has_a_bound() -> None:
    async def go() -> Any:
        tasks = layer(max_tasks_per_owner=1)
        call = {"name": "forever", "arguments": {}, "_meta": meta(OPTED_IN)}
        try:
            created = tasks.answer("tools/call", call, "alice")
            get = {"taskId": created["taskId"], "_meta": meta(OPTED_IN)}
            with pytest.raises(ProtocolError) as foreign:
                tasks.answer("tasks/get", get, "bob")
            with pytest.raises(ProtocolError) as more:
                tasks.answer("tools/call", call, "alice")
            return foreign.value, more.value, tasks.answer("tools/call", call, "bob")
        finally:
            await tasks.aclose()

    foreign, more, other = run(go())
    assert foreign.code == -32602  # another owner's task is unknown, not forbidden
    assert more.code == INTERNAL_ERROR and "at most 1 of one client" in more.message
    assert more.message.startswith("Server busy") and more.data == {"max_tasks_per_owner": 1}
    assert other["resultType"] == "task"


def test_a_call_of_a_tool_the_layer_does_not_run_is_left_to_the_handler() -> None:
    async def go() -> Any:
        call = {"name": "unregistered", "arguments": {}, "_meta": meta(OPTED_IN)}
        return layer().answer("tools/call", call)

    assert run(go()) is None


def test_a_malformed_call_or_envelope_is_refused_before_any_task() -> None:
    async def test(peer: Peer) -> Any:
        bad_call = await peer.error("tools/call", {"name": "quick", "arguments": "not an object"})
        no_caps = await peer.client.post(
            URL,
            content=json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 9,
                    "method": "tasks/get",
                    "params": {
                        "taskId": "t",
                        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
                    },
                }
            ),
            headers={
                **ACCEPT,
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tasks/get",
                "mcp-name": "t",
            },
        )
        return bad_call, no_caps

    (status, error), no_caps = scenario(test)
    assert status == 400 and error["code"] == -32602
    assert "$.params.arguments" in error["message"]
    assert no_caps.status_code == 400 and no_caps.json()["error"]["code"] == -32602
    assert "clientCapabilities" in no_caps.json()["error"]["message"]


def test_closing_the_server_cancels_its_running_tasks() -> None:
    async def go() -> Any:
        tasks = layer()
        srv = server(tasks)
        async with http(srv) as client:
            peer = Peer(client, OPTED_IN)
            created = await peer.result("tools/call", {"name": "forever", "arguments": {}})
            runner = tasks._tasks[created["taskId"]].runner
            await srv.aclose()
            return runner, await peer.error("tasks/get", {"taskId": created["taskId"]})

    runner, (status, error) = run(go())
    assert runner is not None and runner.cancelled()
    assert error["code"] == -32602
