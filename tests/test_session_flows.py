"""Sessions refuse what cannot be sent, report what the peer got wrong, and drive the flows:
ping, cancellation, progress, tasks, multi-round-trip requests."""

from __future__ import annotations

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from tests._session_pairs import connected, of, pump

TEXT = {"content": [{"type": "text", "text": "ok"}]}


# -- refusals: raised before anything is queued -------------------------------------------------


def test_a_result_that_does_not_fit_the_method_is_refused() -> None:
    client, server = connected(("2025-11-25",), ("2025-11-25",))
    client.request("tools/call", {"name": "echo"})
    _, events = pump(client, server)
    (call,) = of(events, ev.RequestReceived)
    M = mcpbind.bindings("2025-11-25")
    with pytest.raises(mcpbind.ProtocolError, match="ListToolsResult .* is not CallToolResult"):
        server.respond(call.id, M.ListToolsResult(tools=[]))
    with pytest.raises(
        mcpbind.ProtocolError, match=r"\$\.result.*2025-11-25|2025-11-25.*\$\.result"
    ):
        server.respond(call.id, {"content": 3})
    assert server.data_to_send() == []
    old = mcpbind.bindings("2025-06-18")
    with pytest.raises(mcpbind.ProtocolError, match="v2025_06_18"):
        server.respond(call.id, old.CallToolResult(content=[]))
    server.respond(call.id, M.CallToolResult(content=[]))
    assert len(server.data_to_send()) == 1
    with pytest.raises(mcpbind.ProtocolError, match="already answered"):
        server.respond(call.id, TEXT)
    with pytest.raises(mcpbind.ProtocolError, match="not received"):
        server.respond(999, TEXT)


def test_params_are_checked_with_path_and_revision_and_other_revisions_refused() -> None:
    client, _ = connected(("2025-06-18",), ("2025-06-18",))
    with pytest.raises(mcpbind.ProtocolError) as info:
        client.request("tools/call", {"name": 5})
    assert info.value.code == -32602
    assert "$.params.name" in info.value.message and "2025-06-18" in info.value.message
    new = mcpbind.bindings("2025-11-25")
    with pytest.raises(mcpbind.ProtocolError, match="v2025_11_25"):
        client.request("tools/call", new.CallToolRequestParams(name="x"))
    with pytest.raises(mcpbind.ProtocolError, match="not part of MCP 2025-06-18") as info:
        client.request("tasks/get", {"taskId": "t"})
    assert info.value.code == -32601
    assert client.data_to_send() == []


def test_duplicate_outgoing_id_and_unadvertised_method_are_refused() -> None:
    client, _ = connected(("2025-11-25",), ("2025-11-25",), server_caps={"tools": {}})
    client.request("tools/list", id="a")
    with pytest.raises(mcpbind.ProtocolError, match="duplicate request id 'a'"):
        client.request("tools/list", id="a")
    with pytest.raises(mcpbind.ProtocolError, match="'prompts'") as info:
        client.request("prompts/list")
    assert info.value.code == -32601
    assert len(client.data_to_send()) == 1


def test_a_generated_params_struct_is_sent_as_it_is() -> None:
    client, server = connected(("2025-11-25",), ("2025-11-25",))
    M = mcpbind.bindings("2025-11-25")
    params = M.CallToolRequestParams(name="echo", arguments={"a": 1})
    rid = client.request("tools/call", params)
    _, events = pump(client, server)
    (call,) = of(events, ev.RequestReceived)
    assert call.id == rid and call.params == params


# -- peer mistakes: events ----------------------------------------------------------------------


def test_undecodable_request_is_answered_and_reported() -> None:
    _, server = connected(("2025-11-25",), ("2025-11-25",))
    (rejected,) = server.receive(b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{}}')
    assert isinstance(rejected, ev.MessageRejected)
    assert rejected.answered and rejected.sender == "client"
    assert rejected.error.message.startswith("from the client:")
    (answer,) = server.data_to_send()
    error = msgspec.json.decode(answer)
    assert error["id"] == 41 and error["error"]["code"] == -32602
    (rejected,) = server.receive(b"{not json")
    assert rejected.answered
    assert msgspec.json.decode(server.data_to_send()[0])["id"] is None


def test_bad_notification_and_response_get_no_answer() -> None:
    client, server = connected(("2025-11-25",), ("2025-11-25",))
    (rejected,) = server.receive(b'{"jsonrpc":"2.0","method":"notifications/progress","params":{}}')
    assert not rejected.answered and server.data_to_send() == []
    (unexpected,) = client.receive(b'{"jsonrpc":"2.0","id":77,"result":{}}')
    assert isinstance(unexpected, ev.MessageRejected) and not unexpected.answered
    assert "from the server" in unexpected.error.message and "77" in unexpected.error.message
    assert client.data_to_send() == []


def test_duplicate_incoming_id_is_reported() -> None:
    _, server = connected(("2025-11-25",), ("2025-11-25",))
    raw = b'{"jsonrpc":"2.0","id":5,"method":"tools/list"}'
    assert isinstance(server.receive(raw)[0], ev.RequestReceived)
    (dup,) = server.receive(raw)
    assert isinstance(dup, ev.MessageRejected) and "duplicate request id 5" in dup.error.message


# -- flows --------------------------------------------------------------------------------------


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_ping_is_answered_by_the_session_both_ways(revision: str) -> None:
    client, server = connected((revision,), (revision,))
    client.request("ping")
    client_events, server_events = pump(client, server)
    assert of(server_events, ev.PingReceived)
    (pong,) = of(client_events, ev.ResultReceived)
    assert pong.method == "ping"
    server.request("ping")
    client_events, server_events = pump(client, server)
    assert of(client_events, ev.PingReceived) and of(server_events, ev.ResultReceived)


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25", "2026-07-28"])
def test_cancellation_is_correlated_and_the_late_response_dropped(revision: str) -> None:
    client, server = connected((revision,), (revision,))
    rid = client.request("tools/call", {"name": "slow"})
    _, events = pump(client, server)
    (call,) = of(events, ev.RequestReceived)
    client.cancel(rid, "too slow")
    with pytest.raises(mcpbind.ProtocolError, match="cannot cancel"):
        client.cancel(rid)
    (note,) = client.data_to_send()
    (cancelled,) = server.receive(note)
    assert cancelled == ev.RequestCancelled(id=call.id, reason="too slow")
    server.respond(call.id, TEXT)  # cancelled: nothing is sent
    assert server.data_to_send() == []
    # A response that crossed the cancellation is dropped with an event.
    late = msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": TEXT})
    assert client.receive(late) == [ev.ResponseDropped(id=rid, method="tools/call")]


@pytest.mark.parametrize("revision", ["2025-03-26", "2025-11-25", "2026-07-28"])
def test_progress_is_correlated_through_the_token(revision: str) -> None:
    client, server = connected((revision,), (revision,))
    rid = client.request("tools/call", {"name": "long"}, progress=True)
    _, events = pump(client, server)
    (call,) = of(events, ev.RequestReceived)
    server.progress(call.id, 1, total=4, message="a quarter")
    client_events, _ = pump(client, server)
    assert client_events == [
        ev.ProgressReceived(id=rid, token=rid, progress=1, total=4, message="a quarter")
    ]
    result = dict(TEXT, resultType="complete") if revision >= "2026" else TEXT
    server.respond(call.id, result)
    client_events, _ = pump(client, server)
    assert of(client_events, ev.ResultReceived)
    with pytest.raises(mcpbind.ProtocolError, match="not in flight"):
        server.progress(call.id, 2)


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-11-25", "2026-07-28"])
def test_results_answered_out_of_order_each_end_their_request(revision: str) -> None:
    """Two requests in flight, one with a progress token, answered last first: each result is
    its request's event, the token and both ids free again (2025-03-26 reads member by member,
    as batches; the others take the client's shortcut for a plain result)."""
    client, server = connected((revision,), (revision,))
    first = client.request("tools/call", {"name": "a"})
    second = client.request("tools/call", {"name": "b"}, progress=True)
    _, events = pump(client, server)
    a, b = of(events, ev.RequestReceived)
    result = dict(TEXT, resultType="complete") if revision >= "2026" else TEXT
    server.respond(b.id, result)
    server.respond(a.id, result)
    client_events, _ = pump(client, server)
    M = mcpbind.bindings(revision)
    assert [(e.id, e.method, type(e.result)) for e in client_events] == [
        (second, "tools/call", M.CallToolResult),
        (first, "tools/call", M.CallToolResult),
    ]
    assert client._outgoing == {} and client._tokens == {}
    assert client._codec is not None and client._codec.pending == {}
    assert client.request("tools/call", {"name": "c"}, id=second) == second  # free again


def test_tasks_created_polled_and_their_result_typed() -> None:
    caps = {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}}
    client, server = connected(("2025-11-25",), ("2025-11-25",), server_caps=caps)
    rid = client.request("tools/call", {"name": "job", "task": {"ttl": 1000}})
    _, events = pump(client, server)
    (call,) = of(events, ev.RequestReceived)
    task = {
        "taskId": "t1",
        "status": "working",
        "createdAt": "2025-01-01T00:00:00Z",
        "lastUpdatedAt": "2025-01-01T00:00:00Z",
        "ttl": 1000,
    }
    server.respond(call.id, {"task": task})
    client_events, _ = pump(client, server)
    (created,) = of(client_events, ev.TaskCreated)
    assert (created.id, created.method, created.task_id) == (rid, "tools/call", "t1")
    client.request("tasks/get", {"taskId": "t1"})
    _, events = pump(client, server)
    (get,) = of(events, ev.RequestReceived)
    server.respond(get.id, dict(task, status="completed"))
    client_events, _ = pump(client, server)
    assert of(client_events, ev.ResultReceived)[0].result.status == "completed"
    client.request("tasks/result", {"taskId": "t1"})
    _, events = pump(client, server)
    (payload,) = of(events, ev.RequestReceived)
    M = mcpbind.bindings("2025-11-25")
    with pytest.raises(mcpbind.ProtocolError, match="CallToolResult"):
        server.respond(payload.id, M.ListToolsResult(tools=[]))
    server.respond(payload.id, TEXT)
    client_events, _ = pump(client, server)
    (done,) = of(client_events, ev.ResultReceived)
    assert type(done.result) is M.CallToolResult


def test_input_required_is_answered_by_retrying_with_responses_and_state() -> None:
    client, server = connected(("2026-07-28",), ("2026-07-28",))
    rid = client.request("tools/call", {"name": "ask"})
    _, events = pump(client, server)
    (call,) = of(events, ev.RequestReceived)
    server.respond(
        call.id,
        {
            "resultType": "input_required",
            "requestState": "s1",
            "inputRequests": {
                "who": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "name?",
                        "requestedSchema": {"type": "object", "properties": {}},
                    },
                }
            },
        },
    )
    client_events, _ = pump(client, server)
    (needed,) = of(client_events, ev.InputRequired)
    assert needed.id == rid and needed.request_state == "s1"
    assert type(needed.input_requests["who"]).__name__ == "ElicitRequest"
    retry = client.answer(needed, {"who": {"action": "accept", "content": {"n": "x"}}})
    assert retry != rid
    _, events = pump(client, server)
    (again,) = of(events, ev.RequestReceived)
    assert again.params.request_state == "s1"
    assert again.params.input_responses["who"].action == "accept"
    assert again.params.name == "ask"


def test_listen_stream_is_a_request_whose_result_ends_it() -> None:
    client, server = connected(
        ("2026-07-28",), ("2026-07-28",), server_caps={"tools": {"listChanged": True}}
    )
    rid = client.request("subscriptions/listen", {"notifications": {"toolsListChanged": True}})
    _, events = pump(client, server)
    (listen,) = of(events, ev.RequestReceived)
    assert listen.method == "subscriptions/listen"
    server.notify(
        "notifications/tools/list_changed",
        {"_meta": {"io.modelcontextprotocol/subscriptionId": rid}},
    )
    client_events, _ = pump(client, server)
    (changed,) = of(client_events, ev.NotificationReceived)
    assert changed.method == "notifications/tools/list_changed"
    server.respond(
        listen.id,
        {"resultType": "complete", "_meta": {"io.modelcontextprotocol/subscriptionId": rid}},
    )
    client_events, _ = pump(client, server)
    (ended,) = of(client_events, ev.ResultReceived)
    assert ended.id == rid and ended.method == "subscriptions/listen"


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
def test_an_unreadable_response_ends_its_request(revision: str) -> None:
    # server-everything answers tools/call with resource_link content at 2024-11-05 (a later
    # revision's shape): the rejected response is still the request's answer, so the session
    # and its codec stop waiting for it and a second response with that id is unexpected.
    client, server = connected((revision,), (revision,))
    rid = client.request("tools/call", {"name": "links"}, progress=True)
    pump(client, server)
    bad = {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}
    if revision != "2024-11-05":
        bad = {"content": 3}
    raw = msgspec.json.encode({"jsonrpc": "2.0", "id": rid, "result": bad})
    (rejected,) = client.receive(raw)
    assert isinstance(rejected, ev.MessageRejected) and not rejected.answered
    assert rejected.error.id == rid and "$.result.content" in rejected.error.message
    assert client._codec is not None and client._codec.pending == {}
    with pytest.raises(mcpbind.ProtocolError, match="cannot cancel"):
        client.cancel(rid)
    (again,) = client.receive(raw)
    assert isinstance(again, ev.MessageRejected) and "unexpected response" in again.error.message
    assert client.data_to_send() == []
