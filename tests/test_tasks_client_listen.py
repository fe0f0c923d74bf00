"""The sans-IO ``ClientSession`` speaks the tasks extension's part of subscription streams: a
listen request whose filter names tasks is sent with them (the extension's classes,
``TaskTypes.listen``; the revision's filter class has no such field), and a task status
notification is a ``NotificationReceived`` carrying its generated class (the live exchange:
tests/interop/test_tasks_listen_stdio.py)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from mcpbind import ServerSession, bindings, convert
from mcpbind._extension_tasks import TASK_TYPES
from mcpbind._extensions import TASKS
from mcpbind.client.links import ObservedSession
from mcpbind.errors import ProtocolError
from mcpbind.events import MessageRejected, NotificationReceived, ResultReceived
from tests._session_pairs import CLIENT_INFO, SERVER_INFO, connected, pump

REVISION = "2026-07-28"
FACTS = TASKS[REVISION]
TYPES = TASK_TYPES[REVISION]
LISTEN = bindings(REVISION).FACTS.lifecycle["listen"]
DECLARED = {"extensions": {FACTS.extension: {}}}
STATUS = {
    "taskId": "t1",
    "createdAt": "2026-07-28T00:00:00Z",
    "lastUpdatedAt": "2026-07-28T00:00:01Z",
    "ttlMs": None,
}


def _client() -> Any:
    client, _ = connected([REVISION], [REVISION], client_caps=DECLARED)
    return client


def test_a_listen_naming_tasks_keeps_them_on_the_wire() -> None:
    client = _client()
    wanted = {FACTS.listen_filter: ["t1", "t2"], "toolsListChanged": True}
    rid = client.request(LISTEN, {"notifications": wanted})
    [data] = client.data_to_send()
    sent = json.loads(data)
    assert sent["id"] == rid and sent["method"] == LISTEN
    assert sent["params"]["notifications"] == wanted
    assert sent["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == REVISION
    # the extension's classes read it, and it re-encodes to the same message
    typed = convert(sent, TYPES.listen[0])
    assert typed.params.notifications.task_ids == ["t1", "t2"]
    assert msgspec.to_builtins(typed) == sent
    # its answer is the listen's own result
    tag = {"io.modelcontextprotocol/subscriptionId": rid}
    done = {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "_meta": tag}}
    [event] = client.receive(json.dumps(done))
    assert isinstance(event, ResultReceived) and event.method == LISTEN
    # the generated params Struct goes as it is
    again = client.request(LISTEN, typed.params)
    [data] = client.data_to_send()
    assert json.loads(data)["params"] == sent["params"] and again != rid


def test_a_listen_naming_no_tasks_is_the_revisions_own() -> None:
    client = _client()
    client.request(LISTEN, {"notifications": {"toolsListChanged": True}})
    [data] = client.data_to_send()
    assert json.loads(data)["params"]["notifications"] == {"toolsListChanged": True}
    [(_, _, params, _)] = client._outgoing.values()
    assert type(params) is bindings(REVISION).METHODS[LISTEN].params


def test_a_task_id_that_is_not_a_string_is_refused_with_its_path() -> None:
    client = _client()
    with pytest.raises(ProtocolError) as raised:
        client.request(LISTEN, {"notifications": {FACTS.listen_filter: ["t1", 7]}})
    assert raised.value.code == -32602
    assert f"`$.params.notifications.{FACTS.listen_filter}[1]`" in raised.value.message
    assert client.data_to_send() == [] and not client._outgoing


def _status(status: str, **more: Any) -> bytes:
    params = {**STATUS, "status": status, **more}
    return json.dumps({"jsonrpc": "2.0", "method": FACTS.notification, "params": params}).encode()


def test_a_task_status_notification_is_an_event_with_its_class() -> None:
    client = _client()
    result = {"content": [{"type": "text", "text": "done"}], "resultType": "complete"}
    tag = {"io.modelcontextprotocol/subscriptionId": 3}
    data = _status(FACTS.completed, result=result, _meta=tag)
    [event] = client.receive(data)
    assert isinstance(event, NotificationReceived)
    assert event.method == FACTS.notification and event.revision == REVISION
    assert type(event.message) is TYPES.notification
    assert type(event.params) is TYPES.noted_by_status[FACTS.completed]
    assert event.params.task_id == "t1" and type(event.params.result) is TYPES.call_result
    assert msgspec.to_builtins(event.message) == json.loads(data)  # re-encodes to the same
    [event] = client.receive(_status(FACTS.working).decode())  # a str as well
    assert type(event.params) is TYPES.noted_by_status[FACTS.working]
    assert client.data_to_send() == []


def test_a_task_status_notification_that_does_not_fit_is_refused_with_its_path() -> None:
    client = _client()
    [event] = client.receive(_status("done"))
    assert isinstance(event, MessageRejected) and not event.answered
    assert event.error.code == -32602 and "`$.params.status`" in event.error.message
    [event] = client.receive(_status(FACTS.failed))  # a failed task without its error
    assert isinstance(event, MessageRejected) and "error" in event.error.message
    assert client.data_to_send() == []  # a notification gets no response


def test_other_unknown_methods_and_older_revisions_are_still_refused() -> None:
    client = _client()
    unknown = {"jsonrpc": "2.0", "method": "notifications/unknown", "params": {}}
    [event] = client.receive(json.dumps(unknown))
    assert isinstance(event, MessageRejected) and event.error.code == -32601
    asked = {"jsonrpc": "2.0", "id": 9, "method": FACTS.notification, "params": {}}
    [event] = client.receive(json.dumps(asked))  # a request of that name: the codec's refusal
    assert isinstance(event, MessageRejected) and event.answered
    [answer] = client.data_to_send()
    assert json.loads(answer)["error"]["code"] == -32601
    older, _ = connected(["2025-11-25"], ["2025-11-25"])
    [event] = older.receive(_status(FACTS.working))
    assert isinstance(event, MessageRejected) and event.error.code == -32601


def _observed(observe_task: Any) -> tuple[Any, list[Any]]:
    seen: list[Any] = []
    client = ObservedSession(
        revisions=[REVISION],
        capabilities=DECLARED,
        info=CLIENT_INFO,
        observe=seen.append,
        observe_task=observe_task,
    )
    server = ServerSession(revisions=[REVISION], capabilities={"tools": {}}, info=SERVER_INFO)
    client.connect()
    pump(client, server)
    assert client.state == "ready"
    return client, seen


def test_the_clients_session_shows_a_task_status_to_its_follower() -> None:
    statuses: list[Any] = []
    client, seen = _observed(statuses.append)
    rid = client.request(LISTEN, {"notifications": {FACTS.listen_filter: ["t1"]}})
    assert json.loads(client.data_to_send()[0])["params"]["notifications"] == {
        FACTS.listen_filter: ["t1"]
    }
    assert LISTEN not in client.last_ids  # a task stream is not the user's
    own = client.request(LISTEN, {"notifications": {"toolsListChanged": True}})
    assert client.last_ids[LISTEN] == own != rid
    client.receive(_status(FACTS.working))
    assert [type(s) for s in statuses] == [TYPES.noted_by_status[FACTS.working]]
    assert not [e for e in seen if isinstance(e, NotificationReceived)]
    # without a follower (tasks=False), it is a notification like any other
    client, seen = _observed(None)
    client.receive(_status(FACTS.working))
    [event] = seen
    assert isinstance(event, NotificationReceived) and type(event.message) is TYPES.notification


def test_a_non_finite_number_in_an_extensions_request_is_refused_not_written_as_null() -> None:
    client = _client()  # (these the session encodes itself: the codec's NaN guard, shared)
    for method, params in (
        (LISTEN, {"notifications": {FACTS.listen_filter: ["t1"]}}),
        (FACTS.get, {"taskId": "t1"}),
    ):
        with pytest.raises(ValueError, match="NaN or Infinity"):
            client.request(method, {**params, "_meta": {"example.com/x": float("nan")}})
        assert client.data_to_send() == [] and not client._outgoing
