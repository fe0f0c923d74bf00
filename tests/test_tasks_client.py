"""The tasks extension's generated classes (``mcpbind._extension_tasks``), their generator, and
the sans-IO ``ClientSession``'s checks of the extension's answers (given the bytes a server
would send; the live exchanges: tests/interop/test_tasks_client_peers.py and
test_tasks_client_session.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from codegen import extensions
from codegen.model import build
from codegen.pin import PinError
from mcpbind import convert
from mcpbind._extension_tasks import TASK_TYPES
from mcpbind._extensions import TASKS
from mcpbind.errors import ProtocolError
from mcpbind.events import MessageRejected, ResultReceived, TaskCreated
from tests._session_pairs import connected, pump

REVISION = "2026-07-28"
FACTS = TASKS[REVISION]
TYPES = TASK_TYPES[REVISION]
DECLARED = {"extensions": {FACTS.extension: {}}}
TASK = {
    "taskId": "t1",
    "createdAt": "2026-07-28T00:00:00Z",
    "lastUpdatedAt": "2026-07-28T00:00:01Z",
    "ttlMs": None,
    "pollIntervalMs": 250,
}


def _names(cls: Any) -> set[str]:
    return {f.encode_name for f in msgspec.structs.fields(cls)}


def test_the_classes_follow_the_facts() -> None:
    assert set(TYPES.by_status) == set(FACTS.statuses)
    assert set(TYPES.requests) == {FACTS.get, FACTS.update, FACTS.cancel}
    base = set(FACTS.task_fields) - {"status"}
    assert _names(TYPES.create_result) == base | {"status", "resultType", "_meta"}
    for status, cls in TYPES.by_status.items():
        assert cls.__struct_config__.tag == status
        assert base | {"resultType", "_meta"} <= _names(cls)
    assert FACTS.input_responses in _names(TYPES.requests[FACTS.update][1])


def test_a_detailed_task_decodes_by_its_status_and_re_encodes() -> None:
    answers = {
        FACTS.working: {},
        FACTS.completed: {"result": {"content": [], "resultType": "complete"}},
        FACTS.failed: {"error": {"code": -32603, "message": "broke", "data": [1]}},
        FACTS.cancelled: {"statusMessage": "stopped"},
        FACTS.input_required: {
            "inputRequests": {"q": {"method": "roots/list", "params": {"_meta": {}}}}
        },
    }
    for status, extra in answers.items():
        wire = {**TASK, "status": status, "resultType": FACTS.complete_result, **extra}
        typed = convert(wire, TYPES.get_result)
        assert type(typed) is TYPES.by_status[status]
        assert msgspec.to_builtins(typed) == wire
    with pytest.raises(msgspec.ValidationError, match="result"):
        convert({**TASK, "status": FACTS.completed, "resultType": "complete"}, TYPES.get_result)


def _patched(monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    text = extensions.module_text(extensions.read_extension_pins()[0])
    assert old in text
    monkeypatch.setattr(extensions, "module_text", lambda p, module=None: text.replace(old, new))


def test_the_generator_refuses_a_field_it_cannot_type(monkeypatch: pytest.MonkeyPatch) -> None:
    rev, core = build(REVISION), build(FACTS.core or "")
    assert extensions.tasks_types(FACTS, rev, core).structs  # as pinned: fine
    _patched(monkeypatch, "ttlMs: z.int().nullable(),", "ttlMs: z.bigint().nullable(),")
    with pytest.raises(PinError, match=r"cannot type field 'ttlMs' declared as z\.bigint\(\)"):
        extensions.tasks_types(FACTS, rev, core)


def test_the_generator_checks_the_task_against_the_core_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rev, core = build(REVISION), build(FACTS.core or "")
    _patched(monkeypatch, "pollIntervalMs: z.int().optional(),", "pollIntervalMs: z.int(),")
    with pytest.raises(PinError, match="differ from MCP 2025-11-25's Task"):
        extensions.tasks_types(FACTS, rev, core)


def _answer(client: Any, rid: Any, result: Any) -> list[Any]:
    return client.receive(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}))


def test_an_answer_that_does_not_fit_is_refused_with_its_path() -> None:
    client, _ = connected([REVISION], [REVISION], client_caps=DECLARED)
    rid = client.request(FACTS.get, {"taskId": "t1"})
    client.data_to_send()
    [event] = _answer(client, rid, {**TASK, "status": FACTS.failed, "resultType": "complete"})
    assert isinstance(event, MessageRejected)
    assert event.error.code == -32602
    assert "`$.result`" in event.error.message and "error" in event.error.message
    assert rid not in client._outgoing  # that was its answer
    rid = client.request(FACTS.eligible, {"name": "x"})
    client.data_to_send()
    [event] = _answer(client, rid, {**TASK, "status": "done", "resultType": FACTS.task_result})
    assert isinstance(event, MessageRejected) and "`$.result.status`" in event.error.message


def test_a_task_answer_counts_only_for_a_client_that_declared_the_extension() -> None:
    created = {**TASK, "status": FACTS.working, "resultType": FACTS.task_result}
    for caps, expected in ((DECLARED, TaskCreated), ({}, ResultReceived)):
        client, _ = connected([REVISION], [REVISION], client_caps=caps)
        rid = client.request(FACTS.eligible, {"name": "x"})
        client.data_to_send()
        [event] = _answer(client, rid, created)
        assert type(event) is expected
        if expected is TaskCreated:
            assert event.task_id == "t1" and type(event.result) is TYPES.create_result
            assert msgspec.to_builtins(event.result) == created


def test_the_extensions_requests_carry_the_envelope() -> None:
    client, server = connected([REVISION], [REVISION])  # not declared by the session
    client.request(FACTS.update, {"taskId": "t1", FACTS.input_responses: {"q": {"roots": []}}})
    [data] = client.data_to_send()
    sent = json.loads(data)
    assert sent["method"] == FACTS.update
    meta = sent["params"]["_meta"]
    assert meta[FACTS.capabilities_key]["extensions"] == {FACTS.extension: {}}
    assert msgspec.to_builtins(convert(sent, TYPES.requests[FACTS.update][0])) == sent
    with pytest.raises(ProtocolError, match="progress"):
        client.request(FACTS.get, {"taskId": "t1"}, progress=True)
    with pytest.raises(ProtocolError, match="Invalid params"):
        client.request(FACTS.cancel, {"taskId": 7})
    assert client.data_to_send() == []


def test_older_revisions_have_no_task_requests() -> None:
    client, server = connected(["2025-11-25"], ["2025-11-25"])
    with pytest.raises(ProtocolError) as raised:
        client.request(FACTS.update, {"taskId": "t1"})
    assert raised.value.code == -32601
    pump(client, server)
