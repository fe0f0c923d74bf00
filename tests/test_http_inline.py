"""The handler of a POST's one request runs in the request's own task (no task of its own, no
wait for an answer that comes at once): what a handler sees of its task, and its cancellations,
are what they were when it had a task of its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpbind.transports.http_server import Call
from tests.test_http_hostile import (
    STATELESS,
    eventually,
    held,
    open_session,
    post,
    run,
    server,
    stateless,
)

CALL = {"name": "echo", "arguments": {}}


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def call_of(stateful_sid: str | None, rid: int) -> tuple[dict[str, Any], list[Any]]:
    if stateful_sid is None:
        return stateless("tools/call", CALL, rid=rid), STATELESS
    message = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": CALL}
    return message, [(b"mcp-session-id", stateful_sid.encode())]


@pytest.mark.parametrize("stateful", [False, True])
def test_a_handler_that_answers_at_once_runs_in_the_requests_own_task(stateful: bool) -> None:
    tasks: list[Any] = []

    async def answer(call: Call) -> Any:
        tasks.append(asyncio.current_task())
        return text("at once")

    async def go() -> None:
        app = server(handler=answer)
        sid = await open_session(app) if stateful else None
        exchange = post(app, *call_of(sid, 21))
        assert (await exchange.json())["result"]["content"][0]["text"] == "at once"
        assert tasks == [exchange.task]

    run(go(), 10)


def test_a_waiting_handler_keeps_its_task_and_its_timeout_fires() -> None:
    """A timeout entered before the handler's first wait cancels that wait: the handler is not
    moved to another task once it waits."""
    tasks: list[Any] = []

    async def patient(call: Call) -> Any:
        tasks.append(asyncio.current_task())
        try:
            async with asyncio.timeout(0.05):
                await asyncio.Event().wait()
        except TimeoutError:
            tasks.append(asyncio.current_task())
            return text("timed out")
        return text("never")

    async def go() -> None:
        app = server(handler=patient)
        exchange = post(app, *call_of(None, 22))
        assert (await exchange.json())["result"]["content"][0]["text"] == "timed out"
        assert tasks == [exchange.task, exchange.task]

    run(go(), 10)


def test_cancelling_the_requests_task_from_outside_leaves_its_handler_running() -> None:
    """An in-process server (or one shutting down) cancelling the request's task ends the
    response, not the handler: it goes on in a task of its own, with what it awaited intact."""
    release = asyncio.Event()
    finished: list[str] = []

    async def slow(call: Call) -> Any:
        await release.wait()
        finished.append("finished")
        return text("late")

    async def go() -> None:
        app = server(handler=slow)
        sid = await open_session(app)
        exchange = post(app, *call_of(sid, 23))
        await eventually(lambda: app.sessions[sid].tasks)
        exchange.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await exchange.task
        release.set()
        await eventually(lambda: finished)
        assert finished == ["finished"]
        await eventually(lambda: not app.sessions[sid].tasks)
        assert not app.sessions[sid].tasks

    run(go(), 10)


def test_the_clients_cancel_reaches_a_waiting_handler_not_its_requests_task() -> None:
    cancelled: list[Any] = []
    started = asyncio.Event()

    async def start(call: Call) -> None:
        started.set()

    async def go() -> None:
        app = server(handler=held(cancelled, start))
        sid = await open_session(app)
        message, headers = call_of(sid, 24)
        exchange = post(app, message, headers)
        await started.wait()
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": 24, "reason": "changed my mind"},
        }
        assert await post(app, cancel, headers).status == 202
        await eventually(lambda: cancelled)
        assert cancelled == [24]
        assert await exchange.status == 202  # cancelled: nothing is owed, the POST just ends
        await asyncio.wait_for(exchange.task, 10)
        assert not exchange.task.cancelled()
        assert not app.sessions[sid].tasks

    run(go(), 10)


def test_a_kind_of_request_seen_to_wait_gets_a_task_of_its_own_after() -> None:
    """A handler that waits costs the request a task to write the response and a relay a wait;
    its kind of request (method and tool name) then runs in a task of its own, as before, and
    the kinds remembered are bounded (the names are the client's)."""
    tasks: list[tuple[str, bool]] = []
    requests: list[Any] = []

    async def waits(call: Call) -> Any:
        name = call.params.name
        if name.startswith("waits"):
            await asyncio.sleep(0)
        tasks.append((name, asyncio.current_task() is requests[-1].task))
        return text(name)

    async def go() -> None:
        app = server(handler=waits)
        for name in ("waits", "waits", "at-once", "at-once"):
            message = stateless("tools/call", {"name": name, "arguments": {}}, rid=len(tasks))
            requests.append(post(app, message, STATELESS))
            assert (await requests[-1].json())["result"]["content"][0]["text"] == name
        assert tasks == [("waits", True), ("waits", False), ("at-once", True), ("at-once", True)]
        for n in range(300):
            message = stateless("tools/call", {"name": f"waits-{n}", "arguments": {}}, rid=n)
            await post(app, message, STATELESS).json()
        assert 0 < len(app._waits) <= 256

    run(go(), 20)


# -- the stream's queue ----------------------------------------------------------------------------


def test_the_streams_queue_hands_a_cancelled_readers_message_to_the_next() -> None:
    """What asyncio.Queue did for the streams: first in, first out; a reader waits for a message;
    a reader cancelled as its message came leaves it to the next reader; the one waiter set on
    the queue is woken by a message."""
    from mcpbind.transports._http_streams import _Queue

    async def go() -> None:
        queue = _Queue()
        with pytest.raises(asyncio.QueueEmpty):
            queue.get_nowait()
        queue.put_nowait(b"a")
        queue.put_nowait(None)
        assert (queue.qsize(), queue.empty()) == (2, False)
        assert [await queue.get(), queue.get_nowait()] == [b"a", None]
        assert queue.empty()

        first = asyncio.ensure_future(queue.get())
        second = asyncio.ensure_future(queue.get())
        await asyncio.sleep(0)
        queue.put_nowait(b"b")  # wakes the first reader...
        first.cancel()  # ...which is cancelled before it runs: the second gets the message
        assert await second == b"b"
        with pytest.raises(asyncio.CancelledError):
            await first
        assert queue.empty()

        waiter = queue.waiter = asyncio.get_running_loop().create_future()
        queue.put_nowait(b"c")
        assert waiter.done() and queue.get_nowait() == b"c"

    run(go(), 10)
