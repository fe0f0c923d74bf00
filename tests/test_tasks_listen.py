"""Task status notifications on a subscription stream (optional in SEP-2663): a
``subscriptions/listen`` whose filter names ``taskIds`` is served by the tasks layer of
StreamableHTTPServer (docs/tasks.md, "Status notifications"), with its bounds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from mcpbind._extensions import TASKS
from tests.test_http_transport import ACCEPT, URL
from tests.test_tasks import OPTED_IN, Peer, layer, meta, scenario

FACTS = TASKS["2026-07-28"]
SUBSCRIPTION = "io.modelcontextprotocol/subscriptionId"


async def listen(peer: Peer, task_ids: list[str], id: int = 900) -> list[dict[str, Any]]:
    """Open a subscription stream for ``task_ids`` and read it to its end: its messages."""
    body = {
        "jsonrpc": "2.0",
        "id": id,
        "method": "subscriptions/listen",
        "params": {"notifications": {"taskIds": task_ids}, "_meta": meta(peer.capabilities)},
    }
    headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": body["method"]}
    messages = []
    async with peer.client.stream("POST", URL, content=json.dumps(body), headers=headers) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        async for line in r.aiter_lines():
            if line.startswith("data: "):
                messages.append(json.loads(line[6:]))
    return messages


def test_a_listener_hears_each_status_of_its_task_to_the_end() -> None:
    async def test(peer: Peer) -> list[dict[str, Any]]:
        created = await peer.result("tools/call", {"name": "asking", "arguments": {}})
        task_id = created["taskId"]
        hearing = asyncio.ensure_future(listen(peer, [task_id]))
        await peer.until(task_id, FACTS.input_required)
        await asyncio.sleep(0.01)  # the stream is open and has said input_required
        answer = {"action": "accept", "content": {}}
        await peer.result(
            "tasks/update", {"taskId": task_id, "inputResponses": {"a": answer, "b": answer}}
        )
        return await hearing

    messages = scenario(test)
    ack, *notes, end = messages
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    [task_id] = ack["params"]["notifications"]["taskIds"]
    assert ack["params"]["_meta"] == {SUBSCRIPTION: 900}
    assert {n["method"] for n in notes} == {FACTS.notification}
    assert all(n["params"]["_meta"] == {SUBSCRIPTION: 900} for n in notes)
    assert all(n["params"]["taskId"] == task_id for n in notes)
    statuses = [n["params"]["status"] for n in notes]
    assert FACTS.input_required in statuses and statuses[-1] == FACTS.completed
    asking = next(n for n in notes if n["params"]["status"] == FACTS.input_required)
    assert set(asking["params"]["inputRequests"]) == {"a", "b"}
    assert notes[-1]["params"]["result"]["content"][0]["text"] == "a,b"
    assert end == {
        "jsonrpc": "2.0",
        "id": 900,
        "result": {"resultType": "complete", "_meta": {SUBSCRIPTION: 900}},
    }


def test_only_the_listeners_own_known_tasks_are_acknowledged() -> None:
    async def test(peer: Peer) -> Any:
        mine = (await peer.result("tools/call", {"name": "quick", "arguments": {}}))["taskId"]
        await peer.until(mine, FACTS.completed)
        return await listen(peer, [mine, "nobody's", mine])

    ack, note, end = scenario(test)
    assert len(ack["params"]["notifications"]["taskIds"]) == 1  # unknown dropped, dupes once
    assert note["params"]["status"] == FACTS.completed  # its state at once
    assert "result" in end


def test_the_bounds_of_listening() -> None:
    async def test(peer: Peer) -> Any:
        task_id = (await peer.result("tools/call", {"name": "forever", "arguments": {}}))["taskId"]
        first = asyncio.ensure_future(listen(peer, [task_id]))
        await asyncio.sleep(0.01)
        busy = await peer.error("subscriptions/listen", {"notifications": {"taskIds": []}})
        too_many = await peer.error(
            "subscriptions/listen", {"notifications": {"taskIds": ["x", "y", "z"]}}
        )
        not_strings = await peer.error("subscriptions/listen", {"notifications": {"taskIds": [1]}})
        await peer.result("tasks/cancel", {"taskId": task_id})
        heard = await first
        return busy, too_many, not_strings, heard

    busy, too_many, not_strings, heard = scenario(test, max_listeners=1, max_listen_tasks=2)
    assert busy[1]["code"] == -32603 and "subscription streams" in busy[1]["message"]
    assert too_many[1]["code"] == -32602 and "at most 2" in too_many[1]["message"]
    assert not_strings[1]["code"] == -32602 and "taskIds" in not_strings[1]["message"]
    assert heard[-2]["params"]["status"] == FACTS.cancelled  # the stream ends with the task


def test_a_listen_without_task_ids_is_left_to_the_server() -> None:
    tasks = layer()
    params = {"notifications": {"toolsListChanged": True}, "_meta": meta(OPTED_IN)}
    assert tasks.listen(1, params) is None


def test_a_listener_that_leaves_is_forgotten() -> None:
    async def test(peer: Peer) -> Any:
        task_id = (await peer.result("tools/call", {"name": "forever", "arguments": {}}))["taskId"]
        body = {
            "jsonrpc": "2.0",
            "id": 5,
            "method": "subscriptions/listen",
            "params": {"notifications": {"taskIds": [task_id]}, "_meta": meta(OPTED_IN)},
        }
        headers = {**ACCEPT, "mcp-protocol-version": "2026-07-28", "mcp-method": body["method"]}
        async with peer.client.stream("POST", URL, content=json.dumps(body), headers=headers) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    break  # the acknowledgement: leave
        await asyncio.sleep(0.05)
        again = await peer.post(
            "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, name=None
        )
        return again

    again: httpx.Response = scenario(test, max_listeners=1)
    assert again.status_code == 200  # the one stream allowed was given back
