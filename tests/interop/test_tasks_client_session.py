"""The tasks extension of 2026-07-28 on our client side (make interop): a ``ClientSession`` over
``StreamableHTTPClient`` in front of examples/everything_server.py, which serves the extension.
A call of a client that declared the extension, answered with a task, is a ``TaskCreated`` with
the generated task result; ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` go out and come
back as their generated classes. Every message either way converts into its generated class
and re-encodes to the same JSON."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpbind import convert
from mcpbind._extension_tasks import TASK_TYPES
from mcpbind._extensions import TASKS
from mcpbind.events import ErrorReceived, Event, ResultReceived, TaskCreated
from mcpbind.session import ClientSession
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.validate import validate_lines

pytestmark = [pytest.mark.interop, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
REVISION = "2026-07-28"
FACTS = TASKS[REVISION]
TYPES = TASK_TYPES[REVISION]
DECLARED = {"extensions": {FACTS.extension: {}}}


@pytest.fixture(scope="module")
def url(everything_server: str) -> str:
    return everything_server


class Recorded(ClientSession):
    """A ClientSession keeping every message either way (its JSON)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sent: list[Any] = []
        self.received: list[Any] = []
        self.wire: list[str] = []  # both ways, in order (what ``mcpbind validate`` reads)

    def receive(self, data: bytes | str) -> list[Event]:
        self.received.append(json.loads(data))
        self.wire.append(data if isinstance(data, str) else data.decode())
        return super().receive(data)

    def data_to_send(self) -> list[bytes]:
        out = super().data_to_send()
        self.sent.extend(json.loads(m) for m in out)
        self.wire.extend(m.decode() for m in out)
        return out


def _exact(value: Any, cls: Any) -> None:
    """``value`` (JSON) converts into ``cls`` and re-encodes to itself."""
    assert msgspec.to_builtins(convert(value, cls)) == value


def _check_wire(s: Recorded) -> None:
    """Every extension message of the session converts into its generated class and re-encodes
    to the same JSON: the requests sent, the answers received (by the method they answer); and
    ``mcpbind validate --strict`` finds nothing in the whole transcript."""
    assert list(validate_lines(s.wire, REVISION, strict=True)) == []
    methods = {}
    for message in s.sent:
        if message.get("method") in TYPES.requests:
            _exact(message, TYPES.requests[message["method"]][0])
        methods[message.get("id")] = message.get("method")
    seen = set()
    for message in s.received:
        method = methods.get(message.get("id"))
        result = message.get("result")
        if result is None or method is None:
            continue
        if method in TYPES.results:
            _exact(result, TYPES.results[method])
            seen.add(method)
        elif result.get("resultType") == FACTS.task_result:
            _exact(result, TYPES.create_result)
            seen.add(FACTS.task_result)
    return seen  # type: ignore[return-value]


async def _one(h: StreamableHTTPClient, s: ClientSession, method: str, params: Any) -> Event:
    rid = s.request(method, params)
    [event] = [e for e in await h.flush() if getattr(e, "id", None) == rid]
    return event


async def _until(
    h: StreamableHTTPClient, s: ClientSession, task_id: str, status: str
) -> ResultReceived:
    for _ in range(100):
        event = await _one(h, s, FACTS.get, {"taskId": task_id})
        assert isinstance(event, ResultReceived), event
        if type(event.result) is TYPES.by_status[status]:
            return event
        await asyncio.sleep(0.05)
    raise AssertionError(f"task {task_id} never became {status}: {event.result}")


async def _session(url: str, capabilities: Any = DECLARED) -> tuple[Recorded, StreamableHTTPClient]:
    s = Recorded([REVISION], capabilities=capabilities)
    h = StreamableHTTPClient(url, s)
    await h.connect()
    return s, h


def test_a_task_is_created_polled_and_completed(url: str) -> None:
    async def main() -> Recorded:
        s, h = await _session(url)
        async with h:
            call = {"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "x"}}
            created = await _one(h, s, FACTS.eligible, call)
            assert isinstance(created, TaskCreated)
            assert type(created.result) is TYPES.create_result
            assert created.result.status == FACTS.working
            assert created.task_id == created.result.task_id
            assert created.result.poll_interval_ms == 500
            done = await _until(h, s, created.task_id, FACTS.completed)
            assert type(done.result.result) is TYPES.call_result
            assert done.result.result.content[0].text == "Computed 'x' in 0.2 s"
        return s

    s = asyncio.run(main())
    assert _check_wire(s) == {FACTS.task_result, FACTS.get}


def test_input_asked_by_a_task_is_answered_with_update(url: str) -> None:
    async def main() -> Recorded:
        s, h = await _session(url)
        async with h:
            call = {"name": "confirm_delete", "arguments": {"filename": "notes.txt"}}
            created = await _one(h, s, FACTS.eligible, call)
            assert isinstance(created, TaskCreated)
            asking = await _until(h, s, created.task_id, FACTS.input_required)
            [(key, asked)] = asking.result.input_requests.items()
            assert asked.params.message == "Delete notes.txt?"
            answers = {key: {"action": "accept", "content": {"confirm": True}}}
            updated = await _one(
                h, s, FACTS.update, {"taskId": created.task_id, FACTS.input_responses: answers}
            )
            assert isinstance(updated, ResultReceived)
            assert updated.result.result_type == FACTS.complete_result
            done = await _until(h, s, created.task_id, FACTS.completed)
            assert done.result.result.content[0].text == "Deleted notes.txt"
        return s

    s = asyncio.run(main())
    assert _check_wire(s) == {FACTS.task_result, FACTS.get, FACTS.update}


def test_a_task_is_cancelled(url: str) -> None:
    async def main() -> Recorded:
        s, h = await _session(url)
        async with h:
            call = {"name": "slow_compute", "arguments": {"seconds": 30}}
            created = await _one(h, s, FACTS.eligible, call)
            assert isinstance(created, TaskCreated)
            cancelled = await _one(h, s, FACTS.cancel, {"taskId": created.task_id})
            assert isinstance(cancelled, ResultReceived)
            assert cancelled.result.result_type == FACTS.complete_result
            await _until(h, s, created.task_id, FACTS.cancelled)
            unknown = await _one(h, s, FACTS.get, {"taskId": "no-such-task"})
            assert isinstance(unknown, ErrorReceived) and unknown.code == -32602
        return s

    s = asyncio.run(main())
    assert _check_wire(s) == {FACTS.task_result, FACTS.get, FACTS.cancel}


def test_without_the_extension_a_call_gets_its_result(url: str) -> None:
    async def main() -> None:
        s, h = await _session(url, capabilities=None)
        async with h:
            call = {"name": "slow_compute", "arguments": {"seconds": 0}}
            answered = await _one(h, s, FACTS.eligible, call)
            assert isinstance(answered, ResultReceived)
            assert type(answered.result) is TYPES.call_result

    asyncio.run(main())
