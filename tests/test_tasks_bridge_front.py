"""The stdio bridge's translation of a 2025-11-25 client's tasks to a 2026-07-28 server of the
tasks extension (mcpbind/bridge/stdio/tasks_core_to_extension.py over
bridge/tasks_core_to_extension.py), on an event loop: the
``Bridge`` between mcpbind's 2025-11-25 ``ClientSession`` and a real App with a tasks layer
(``app.connect(write, tasks=...)``, in this process). The bounds, the client's cancel, the end of
the bridge, lost answers and a server's answer that does not fit (the App's answer rewritten)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from mcpbind.app import App
from mcpbind.app.tasks import app_tasks
from mcpbind.bridge import Bridge
from mcpbind.bridge import tasks_core_to_extension as core_tasks
from mcpbind.errors import CONNECTION_CLOSED
from mcpbind.events import ErrorReceived, Negotiated, RequestReceived, ResultReceived, TaskCreated
from mcpbind.session import ClientSession
from mcpbind.tasks import Tasks
from mcpbind.transports.stdio import envelope

CORE, EXTENDED = "2025-11-25", "2026-07-28"
CAPS: dict[str, Any] = {"elicitation": {"form": {}}, "tasks": {"list": {}, "cancel": {}}}
ANSWERS = (ResultReceived, TaskCreated, ErrorReceived)


def _app() -> tuple[App, Tasks]:
    app = App("tasks-behind", revisions=(EXTENDED,))

    @app.tool
    async def slow(seconds: float) -> str:
        """Sleeps"""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    async def confirm(context: Any, params: Any) -> Any:
        asked: dict[str, Any] = {"method": "elicitation/create", "params": {"message": "Sure?"}}
        asked["params"]["requestedSchema"] = {"type": "object", "properties": {}}
        answers = await context.ask({"ok": asked})
        return {"content": [{"type": "text", "text": answers["ok"]["action"]}]}

    layer = Tasks(poll_interval_ms=10)
    layer.tool("confirm", confirm, required=True)
    return app, app_tasks(app, "slow", layer=layer)


class Wire:
    """The client session, the bridge and the App's connection, moved by ``pump`` (the bridge's
    ``wake``); ``rewrite`` may change a line of the App's before the bridge reads it."""

    def __init__(self, max_in_flight: int = 16, driven: bool = True) -> None:
        self.bridge = Bridge(CORE, EXTENDED, max_in_flight=max_in_flight)
        if driven:
            self.bridge.wake = self.pump
        self.opened: Any = None
        self.client = ClientSession([CORE], CAPS, {"name": "unit", "version": "1"})
        self.events: list[Any] = []
        self.from_server: list[bytes] = []
        self.methods: dict[Any, str] = {}  # the bridge's request ids to the server -> method
        self.rewrite: Callable[[dict[str, Any], str | None], dict[str, Any]] = lambda m, _: m
        # whether a line of the App's is dropped as overlong (as stdio.serve's reader does)
        self.overlong: Callable[[dict[str, Any], str | None], bool] = lambda m, _: False
        # the client's answer to the bridge's request (None: left for the test)
        self.answer: Callable[[RequestReceived], Any] | None = lambda e: {"action": "accept"}
        self._pumping = False
        self.app, self.layer = _app()
        self.conn: Any = None

    def pump(self) -> None:
        if self._pumping:
            return
        self._pumping = True
        try:
            moved = True
            while moved:
                moved = False
                for data in self.client.data_to_send():
                    moved = True
                    self.bridge.from_client(data)
                for data in self.bridge.to_server():
                    moved = True
                    message = json.loads(data)
                    if "method" in message and "id" in message:
                        self.methods[message["id"]] = message["method"]
                    if not self.bridge.closed:
                        self.conn.receive(data)
                lines, self.from_server = self.from_server, []
                for data in lines:
                    moved = True
                    message = json.loads(data)
                    method = self.methods.get(message.get("id"))
                    if self.overlong(message, method):
                        self.bridge.discarded_from_server(envelope(data), "it is too long")
                        continue
                    message = self.rewrite(message, method)
                    self.bridge.from_server(json.dumps(message).encode())
                for data in self.bridge.to_client():
                    moved = True
                    for event in self.client.receive(data):
                        if isinstance(event, RequestReceived) and self.answer is not None:
                            self.client.respond(event.id, self.answer(event))
                            continue
                        self.events.append(event)
        finally:
            self._pumping = False

    def _written(self, data: bytes) -> None:
        self.from_server.append(data)
        asyncio.get_running_loop().call_soon(self.pump)

    async def open(self) -> Any:
        self.conn = self.app.connect(self._written, tasks=self.layer)
        self.client.connect()
        self.pump()
        self.opened = await self.until(lambda e: isinstance(e, Negotiated))

    async def until(self, done: Callable[[Any], bool]) -> Any:
        for _ in range(500):
            for event in self.events:
                if done(event):
                    self.events.remove(event)
                    return event
            await asyncio.sleep(0.01)
            self.pump()
        raise AssertionError(f"no such event; the events: {self.events}")

    def send(self, method: str, params: dict[str, Any]) -> Any:
        rid = self.client.request(method, params)
        self.pump()
        return rid

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        rid = self.send(method, params)
        return await self.until(lambda e: isinstance(e, ANSWERS) and e.id == rid)

    async def task(self, name: str, arguments: dict[str, Any]) -> str:
        created = await self.request(
            "tools/call", {"name": name, "arguments": arguments, "task": {}}
        )
        assert isinstance(created, TaskCreated), created
        return str(created.result.task.task_id)


def run(test: Callable[[Wire], Any], **options: Any) -> Any:
    async def main() -> Any:
        wire = Wire(**options)
        async with wire.app.running():
            try:
                await wire.open()
                return await test(wire)
            finally:
                wire.bridge.close("the test is over")
                await wire.layer.aclose()

    return asyncio.run(asyncio.wait_for(main(), 30))


def test_the_client_is_told_of_tasks_only_when_the_bridge_runs_on_a_loop() -> None:
    async def told(wire: Wire) -> Any:
        return wire.opened.capabilities.tasks

    tasks = msgspec.to_builtins(run(told))
    assert tasks == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert run(told, driven=False) is msgspec.UNSET  # sans-IO: no timers to poll with


def test_a_cancelled_tasks_result_stops_polling_and_is_not_answered() -> None:
    async def cancel(wire: Wire) -> Any:
        task_id = await wire.task("slow", {"seconds": 5})
        rid = wire.send("tasks/result", {"taskId": task_id})
        await asyncio.sleep(0.1)
        assert wire.bridge.pending() == 1  # the poll runs
        wire.client.cancel(rid, "changed my mind")
        wire.pump()
        await asyncio.sleep(0.1)
        assert wire.bridge.pending() == 0
        polls = list(wire.methods.values()).count("tasks/get")
        await asyncio.sleep(0.2)  # (a poll every 50 ms while it ran)
        assert list(wire.methods.values()).count("tasks/get") == polls  # it stopped
        got = await wire.request("tasks/get", {"taskId": task_id})
        assert not any(isinstance(e, ANSWERS) and e.id == rid for e in wire.events)
        return got

    got = run(cancel)
    assert isinstance(got, ResultReceived) and got.result.status == "working"


def test_the_end_of_the_bridge_answers_a_polling_tasks_result() -> None:
    async def end(wire: Wire) -> Any:
        task_id = await wire.task("slow", {"seconds": 5})
        rid = wire.send("tasks/result", {"taskId": task_id})
        await asyncio.sleep(0.1)
        wire.bridge.close("the server exited")
        wire.pump()
        return await wire.until(lambda e: isinstance(e, ErrorReceived) and e.id == rid)

    error = run(end)
    assert error.code == CONNECTION_CLOSED and "the server exited" in error.message


def test_task_requests_past_max_in_flight_are_refused() -> None:
    async def busy(wire: Wire) -> Any:
        task_id = await wire.task("slow", {"seconds": 5})
        wire.send("tasks/result", {"taskId": task_id})
        await asyncio.sleep(0.05)
        return await wire.request("tasks/result", {"taskId": task_id})

    error = run(busy, max_in_flight=1)
    assert isinstance(error, ErrorReceived) and error.code == -32603
    assert "Server busy" in error.message and error.data == {"max_in_flight": 1}


def test_past_max_tasks_the_oldest_task_over_is_forgotten_else_the_call_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core_tasks, "MAX_TASKS", 2)
    call = {"name": "slow", "arguments": {"seconds": 5}, "task": {}}

    async def many(wire: Wire) -> Any:
        first = await wire.task("slow", {"seconds": 0})
        await wire.request("tasks/result", {"taskId": first})  # seen over
        second = await wire.task("slow", {"seconds": 5})
        third = await wire.task("slow", {"seconds": 5})  # the first is forgotten
        listed = await wire.request("tasks/list", {})
        forgotten = await wire.request("tasks/get", {"taskId": first})
        refused = await wire.request("tools/call", call)  # both working
        return [t.task_id for t in listed.result.tasks], [second, third], forgotten, refused

    listed, kept, forgotten, refused = run(many)
    assert listed == kept
    assert isinstance(forgotten, ErrorReceived) and forgotten.code == -32602
    assert isinstance(refused, ErrorReceived) and refused.code == -32603
    assert "at most 2" in refused.message and "none of them is over" in refused.message
    assert refused.message.startswith("Server busy") and refused.data == {"max_tasks": 2}


def test_a_servers_answer_that_is_no_task_is_an_error_not_a_hang() -> None:
    def broken(message: dict[str, Any], method: str | None) -> dict[str, Any]:
        if method == "tasks/get" and "result" in message:
            message["result"] = {"resultType": "complete", "status": "sleeping"}
        return message

    async def get(wire: Wire) -> Any:
        task_id = await wire.task("slow", {"seconds": 5})
        wire.rewrite = broken
        return await wire.request("tasks/get", {"taskId": task_id}), await wire.request(
            "tasks/result", {"taskId": task_id}
        )

    for error in run(get):
        assert isinstance(error, ErrorReceived) and error.code == -32603
        assert "tasks/get" in error.message and EXTENDED in error.message


def test_the_clients_refusal_of_the_tasks_input_is_the_answer_of_tasks_result() -> None:
    async def refused(wire: Wire) -> Any:
        wire.answer = None
        task_id = await wire.task("confirm", {})
        rid = wire.send("tasks/result", {"taskId": task_id})
        asked = await wire.until(lambda e: isinstance(e, RequestReceived))
        wire.client.respond_error(asked.id, -32600, "no thanks")
        wire.pump()
        return await wire.until(lambda e: isinstance(e, ANSWERS) and e.id == rid)

    error = run(refused)
    assert isinstance(error, ErrorReceived) and error.code == -32600
    assert "the client refused input the task asked for: no thanks" in error.message


def test_a_lost_answer_of_the_client_ends_its_tasks_result_with_an_error() -> None:
    async def lost(wire: Wire) -> Any:
        wire.answer = None
        task_id = await wire.task("confirm", {})
        rid = wire.send("tasks/result", {"taskId": task_id})
        question = await wire.until(lambda e: isinstance(e, RequestReceived))
        line = json.dumps({"jsonrpc": "2.0", "id": question.id, "result": {}}).encode()
        wire.bridge.discarded_from_client(envelope(line), "a message of 99 bytes is too long")
        assert not wire.bridge.front.awaits(question.id)  # the bridge stopped waiting for it
        wire.pump()
        return await wire.until(lambda e: isinstance(e, ANSWERS) and e.id == rid)

    error = run(lost)
    assert isinstance(error, ErrorReceived) and error.code == -32603
    assert "too long" in error.message


def test_a_lost_answer_of_the_server_ends_that_request_only() -> None:
    async def lost(wire: Wire) -> Any:
        task_id = await wire.task("slow", {"seconds": 5})
        wire.overlong = lambda m, method: method == "tasks/get" and "result" in m
        error = await wire.request("tasks/get", {"taskId": task_id})
        [sent] = [rid for rid, method in wire.methods.items() if method == "tasks/get"]
        assert not wire.bridge.back.awaits(sent)  # the bridge stopped waiting for it
        wire.overlong = lambda m, method: False
        return error, await wire.request("tasks/get", {"taskId": task_id}), wire.bridge.closed

    error, again, closed = run(lost)
    assert isinstance(error, ErrorReceived) and error.code == -32603
    assert "too long" in error.message
    assert isinstance(again, ResultReceived) and not closed  # the bridge goes on


def test_a_clients_answer_that_does_not_fit_ends_its_tasks_result_with_an_error() -> None:
    async def unfit(wire: Wire) -> Any:
        wire.answer = None
        task_id = await wire.task("confirm", {})
        rid = wire.send("tasks/result", {"taskId": task_id})
        question = await wire.until(lambda e: isinstance(e, RequestReceived))
        line = {"jsonrpc": "2.0", "id": question.id, "result": {"action": 5}}
        wire.bridge.from_client(json.dumps(line).encode())  # (the client's session checks)
        wire.pump()
        return await wire.until(lambda e: isinstance(e, ANSWERS) and e.id == rid)

    error = run(unfit)
    assert isinstance(error, ErrorReceived) and error.code == -32603
    assert "$.result.action" in error.message


async def _cancelled_on_its_way(wire: Wire) -> Any:
    """A task-augmented call the client cancels once it reached the server (before the bridge
    read the answer); the statuses of the App's tasks once the bridge settled it."""
    rid = wire.send("tools/call", {"name": "slow", "arguments": {"seconds": 5}, "task": {}})
    for _ in range(100):
        if "tools/call" in wire.methods.values():
            break
        await asyncio.sleep(0)
    assert "tools/call" in wire.methods.values()
    wire.client.cancel(rid, "changed my mind")
    wire.pump()
    for _ in range(200):
        await asyncio.sleep(0.01)
        wire.pump()
        if wire.bridge.pending() == 0 and not wire.bridge.tasks.settling:
            break
    assert not any(isinstance(e, ANSWERS) and e.id == rid for e in wire.events)
    return [task.status for task in wire.layer._tasks.values()], list(wire.bridge.log)


def test_a_call_cancelled_on_its_way_has_the_task_it_created_cancelled() -> None:
    statuses, log = run(_cancelled_on_its_way)
    assert statuses == ["cancelled"], log  # without the fix: ["working"], left running
    said = [line for line in log if "the client cancelled:" in line and "is cancelled" in line]
    assert said and "'tasks/cancel'" in said[0], log


def test_a_failed_cancel_of_an_orphan_task_is_logged_and_the_bridge_goes_on() -> None:
    def refused(message: dict[str, Any], method: str | None) -> dict[str, Any]:
        if method == "tasks/cancel" and "result" in message:
            return {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": -32603, "message": "no"},
            }
        return message

    async def failed(wire: Wire) -> Any:
        wire.rewrite = refused
        statuses, log = await _cancelled_on_its_way(wire)
        wire.rewrite = lambda m, _: m
        again = await wire.task("slow", {"seconds": 0})
        return statuses, log, again, wire.bridge.closed

    statuses, log, again, closed = run(failed)
    assert any("could not be cancelled" in line and "no" in line for line in log), log
    assert again and not closed
