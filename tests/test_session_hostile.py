"""Hostile peers: whatever a peer sends, ``receive`` classifies it into the documented events and
answers what it must; nothing a peer sends makes a session forget what was agreed, rebind to
another revision, or raise (issue 21, items 7 to 9)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from tests._session_pairs import CLIENT_INFO, SERVER_INFO, connected, of, pump

SERVER_SETS = [(r,) for r in mcpbind.REVISIONS] + [tuple(mcpbind.REVISIONS)]
ROUTING_SETS = [tuple(mcpbind.REVISIONS), ("2026-07-28", "2025-06-18"), ("draft", "2024-11-05")]
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


def message(**members: Any) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", **members})


def sent(session: Any) -> list[dict[str, Any]]:
    return [msgspec.json.decode(raw) for raw in session.data_to_send()]


def initialize(rid: Any, revision: str, capabilities: Any) -> bytes:
    params = {"protocolVersion": revision, "capabilities": capabilities, "clientInfo": CLIENT_INFO}
    return message(id=rid, method="initialize", params=params)


# -- item 7: a message of any shape is classified ------------------------------------------------


@pytest.mark.parametrize("revisions", ROUTING_SETS, ids="+".join)
@pytest.mark.parametrize("method", [[1], {}, {"a": []}])
def test_a_method_that_is_not_a_string_is_an_invalid_request(
    revisions: tuple[str, ...], method: Any
) -> None:
    # A server of both handshakes peeks at the method to choose the revision to read it in.
    server = mcpbind.ServerSession(revisions)
    (rejected,) = server.receive(message(id=1, method=method))
    assert type(rejected) is ev.MessageRejected and rejected.answered
    assert rejected.error.code == -32600 and '"method" must be a string' in rejected.error.message
    (answer,) = sent(server)
    assert answer["id"] == 1 and answer["error"]["code"] == -32600


@pytest.mark.parametrize("revisions", SERVER_SETS, ids="+".join)
def test_a_lone_surrogate_in_a_str_is_a_parse_error(revisions: tuple[str, ...]) -> None:
    server = mcpbind.ServerSession(revisions)
    (rejected,) = server.receive('{"jsonrpc":"2.0","id":1,"method":"ping\ud800"}')
    assert rejected.error.code == -32700 and "UTF-8" in rejected.error.message
    client = mcpbind.ClientSession(revisions, info=CLIENT_INFO)
    client.connect()
    (rejected,) = client.receive('{"jsonrpc":"2.0","id":1,"result":{"x":"\ud800"}}')
    assert rejected.error.code == -32700 and not rejected.answered


def test_a_batch_is_received_member_by_member() -> None:
    client, server = connected(("2025-03-26",), ("2025-03-26",))
    bad = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": 5}
    batch = msgspec.json.encode([{"jsonrpc": "2.0", "id": 5, "method": "tools/list"}, bad, [{}]])
    listed, rejected, nested = server.receive(b" \n" + batch)
    assert type(listed) is ev.RequestReceived and listed.id == 5
    assert rejected.error.id == 6 and rejected.error.code == -32602 and rejected.answered
    assert nested.error.code == -32600 and "batch inside a batch" in nested.error.message
    assert [(a["id"], a["error"]["code"]) for a in sent(server)] == [(6, -32602), (None, -32600)]
    server.respond(5, {"tools": []})
    assert sent(server)[0]["result"] == {"tools": []}
    (empty,) = server.receive(b"[]")
    assert "empty batch" in empty.error.message


def test_a_handshake_answer_in_a_batch_with_a_bad_member_still_opens_the_session() -> None:
    client = mcpbind.ClientSession(("2025-03-26",), info=CLIENT_INFO)
    client.connect()
    server = mcpbind.ServerSession(("2025-03-26",), capabilities={}, info=SERVER_INFO)
    (opening,) = client.data_to_send()
    server.receive(opening)
    (answer,) = server.data_to_send()
    events = client.receive(b"[" + answer + b',{"jsonrpc":"2.0","id":3,"method":{}}]')
    assert [type(e) for e in events] == [ev.Negotiated, ev.MessageRejected]
    assert client.state == "ready"
    # The same answer again is a response to nothing, not a second handshake.
    (again,) = client.receive(answer)
    assert type(again) is ev.MessageRejected and "unexpected response" in again.error.message


def test_a_handshake_answered_by_another_kind_of_result_fails_negotiation() -> None:
    client = mcpbind.ClientSession(("2026-07-28",), info=CLIENT_INFO)
    client.connect()
    asking = {"resultType": "input_required", "inputRequests": {}, "requestState": "s"}
    rejected, failed = client.receive(message(id=1, result=asking))
    assert type(rejected) is ev.MessageRejected and "not DiscoverResult" in rejected.error.message
    assert type(failed) is ev.NegotiationFailed and client.state == "failed"


def test_a_peer_cannot_cancel_the_requests_of_this_side() -> None:
    client = mcpbind.ClientSession(("2026-07-28",), info=CLIENT_INFO)
    server = mcpbind.ServerSession(("2026-07-28",), capabilities={"tools": {}}, info=SERVER_INFO)
    client.connect()
    (probe,) = client.data_to_send()
    cancel = message(method="notifications/cancelled", params={"requestId": 1})
    assert client.receive(cancel) == []
    server.receive(probe)
    (answer,) = server.data_to_send()
    assert [type(e) for e in client.receive(answer)] == [ev.Negotiated]
    rid = client.request("tools/list")
    (request,) = client.data_to_send()
    assert (
        client.receive(message(method="notifications/cancelled", params={"requestId": rid})) == []
    )
    (listed,) = server.receive(request)
    server.respond(listed.id, {"tools": [], "cacheScope": "private", "ttlMs": 0})
    (result,) = client.receive(server.data_to_send()[0])
    assert type(result) is ev.ResultReceived and result.id == rid


def test_an_initialize_the_server_cannot_answer_is_an_internal_error_not_an_exception() -> None:
    server = mcpbind.ServerSession(("2025-11-25",))  # no info: initialize needs serverInfo
    (failed,) = server.receive(initialize(1, "2025-11-25", {}))
    assert type(failed) is ev.NegotiationFailed and "serverInfo" in failed.error.message
    (answer,) = sent(server)
    assert answer["id"] == 1 and answer["error"]["code"] == -32603
    assert server.state == "idle" and server.revision is None


def test_a_client_whose_own_info_does_not_fit_the_fall_back_fails_negotiation() -> None:
    client = mcpbind.ClientSession(("2026-07-28", "2024-11-05"))  # no info for initialize
    server = mcpbind.ServerSession(("2024-11-05",), capabilities={}, info=SERVER_INFO)
    client.connect()
    client_events, _ = pump(client, server)
    (failed,) = of(client_events, ev.NegotiationFailed)
    assert "2024-11-05" in failed.error.message and "clientInfo" in failed.error.message
    assert client.state == "failed"


# -- item 8: a second initialize changes nothing ---------------------------------------------------


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_a_refused_second_initialize_leaves_the_client_capabilities_agreed(revision: str) -> None:
    client, server = connected((revision,), (revision,), client_caps={"roots": {}})
    rid = server.request("roots/list")
    _, _ = pump(client, server)
    (again,) = server.receive(initialize("again", revision, {}))
    assert type(again) is ev.MessageRejected and "initialize again" in again.error.message
    assert sent(server)[0]["error"]["code"] == -32600
    assert server.request("roots/list") != rid  # still advertised: not refused with -32601


@pytest.mark.parametrize("revision", ["2024-11-05", "2025-11-25"])
def test_a_client_refuses_to_send_initialize_itself_once_ready(revision: str) -> None:
    client, _ = connected((revision,), (revision,))
    params = {"protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT_INFO}
    with pytest.raises(mcpbind.ProtocolError, match="opens a session") as info:
        client.request("initialize", params)
    assert info.value.code == -32600 and "connect()" in info.value.message
    assert client.data_to_send() == []
    # An answer forged for it is a response to nothing: the server's capabilities stand.
    forged = {"protocolVersion": revision, "capabilities": {}, "serverInfo": SERVER_INFO}
    (unexpected,) = client.receive(message(id=2, result=forged))
    assert type(unexpected) is ev.MessageRejected
    client.request("tools/list")  # tools are still advertised


# -- item 9: a per-request connection is not rebound by initialize -----------------------------


def test_initialize_on_a_connection_serving_per_request_revisions_is_refused() -> None:
    server = mcpbind.ServerSession(mcpbind.REVISIONS, capabilities={"tools": {}}, info=SERVER_INFO)
    listing = message(id=1, method="tools/list", params={"_meta": ENVELOPE})
    (listed,) = server.receive(listing)
    server.respond(listed.id, {"tools": [], "cacheScope": "private", "ttlMs": 0})
    server.data_to_send()
    (refused,) = server.receive(initialize(2, "2025-11-25", {"roots": {}}))
    assert type(refused) is ev.MessageRejected and refused.answered
    (answer,) = sent(server)
    assert answer["id"] == 2 and answer["error"]["code"] == -32600
    assert "per request" in answer["error"]["message"]
    assert answer["error"]["data"] == {"revision": "2026-07-28"}
    assert (server.state, server.revision) == ("ready", "2026-07-28")
    # The client's next request is still read in its own revision.
    (listed,) = server.receive(message(id=3, method="tools/list", params={"_meta": ENVELOPE}))
    assert type(listed) is ev.RequestReceived and listed.revision == "2026-07-28"
    assert type(listed.message) is mcpbind.bindings("2026-07-28").ListToolsRequest
