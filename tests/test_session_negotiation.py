"""Sessions agree on a revision: initialize, discover, and the fall back from one to the other."""

from __future__ import annotations

import itertools

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev
from tests._session_pairs import CLIENT_INFO, RELEASED, SERVER_INFO, connected, of, pair, pump

# The oracle below is written from the specification, not from the facts the sessions read:
# revisions from 2026-07-28 on open with server/discover, older ones with initialize.
DISCOVER = ("2026-07-28", "draft")
ORDER = mcpbind.REVISIONS


def newest(revisions: object) -> list[str]:
    return sorted(revisions, key=ORDER.index, reverse=True)  # type: ignore[call-overload]


def expected(client: tuple[str, ...], server: tuple[str, ...]) -> str | None:
    """What the two sides must agree on (None: nothing)."""
    c_disc = [r for r in newest(client) if r in DISCOVER]
    c_init = [r for r in newest(client) if r not in DISCOVER]
    s_disc = [r for r in newest(server) if r in DISCOVER]
    s_init = [r for r in newest(server) if r not in DISCOVER]
    # draft carries the 2026-07-28 version string, so a draft client and a 2026-07-28 server meet
    # in 2026-07-28 terms: the client picks among its own revisions the newest whose version the
    # server lists.
    sent = {"draft": "2026-07-28"}
    if c_disc and s_disc:
        listed = {sent.get(r, r) for r in server}
        common = [r for r in c_disc if sent.get(r, r) in listed]
        if common:
            return common[0]
        if s_disc:  # the server said what it supports: initialize in the newest common one
            common_init = [r for r in c_init if r in s_init]
            return common_init[0] if common_init else None
    if not c_init or not s_init:
        if c_disc and s_disc:
            return None
        if c_disc and not s_disc and not c_init:
            return None
        if not s_init:
            return None
    if s_disc and c_disc:
        common_init = [r for r in c_init if r in s_init]
        return common_init[0] if common_init else None
    requested = c_init[0]
    answered = requested if requested in s_init else s_init[0]
    return answered if answered in c_init else None


SETS = [tuple(s) for n in (1, 2) for s in itertools.combinations(RELEASED, n)] + [
    RELEASED,
    ("draft",),
    ("draft", "2025-06-18"),
]
SERVER_SETS = SETS + [ORDER]


@pytest.mark.parametrize("client_revisions", SETS, ids="+".join)
def test_every_pair_agrees_on_the_revision_the_rules_give(
    client_revisions: tuple[str, ...],
) -> None:
    for server_revisions in SERVER_SETS:
        client, server = pair(client_revisions, server_revisions)
        client.connect()
        client_events, server_events = pump(client, server)
        want = expected(client_revisions, server_revisions)
        where = f"client {client_revisions} server {server_revisions}"
        if want is None:
            assert client.state == "failed", where
            (failed,) = of(client_events, ev.NegotiationFailed)
            for r in client_revisions:
                assert r in failed.error.message, where
            assert client.revision is None
            continue
        assert client.state == "ready", (where, client_events)
        assert client.revision == want, where
        # draft sends and reads the 2026-07-28 version string (the pinned draft is 2026-07-28):
        # a server reads that string as 2026-07-28 when it has it, else as draft.
        served = want
        if want in DISCOVER:
            served = "2026-07-28" if "2026-07-28" in server_revisions else "draft"
        assert server.revision == served, where
        (agreed,) = of(client_events, ev.Negotiated)
        assert agreed.revision == want
        assert of(server_events, ev.Negotiated)[-1].revision == served
        # And they talk: a tool call by method name, answered by the server.
        rid = client.request("tools/call", {"name": "echo", "arguments": {"x": 1}})
        _, server_events = pump(client, server)
        (call,) = of(server_events, ev.RequestReceived)
        assert (call.id, call.method, call.params.name, call.revision) == (
            rid,
            "tools/call",
            "echo",
            served,
        )
        server.respond(call.id, {"content": [{"type": "text", "text": "hi"}]})
        client_events, _ = pump(client, server)
        (done,) = of(client_events, ev.ResultReceived)
        assert done.id == rid and done.result.content[0].text == "hi"
        assert type(done.result) is mcpbind.bindings(want).CallToolResult


def test_initialize_then_initialized_on_the_wire() -> None:
    client, server = pair(("2025-11-25", "2025-06-18"), ("2025-06-18",))
    client.connect()
    (opening,) = client.data_to_send()
    sent = msgspec.json.decode(opening)
    assert sent["method"] == "initialize"
    assert sent["params"]["protocolVersion"] == "2025-11-25"
    assert sent["params"]["clientInfo"] == CLIENT_INFO
    server_events = server.receive(opening)
    assert server.state == "initializing"
    (agreed,) = of(server_events, ev.Negotiated)
    assert agreed.revision == "2025-06-18" and agreed.info.name == "test-client"
    (answer,) = server.data_to_send()
    assert msgspec.json.decode(answer)["result"]["protocolVersion"] == "2025-06-18"
    client_events = client.receive(answer)
    assert client.revision == "2025-06-18" and client.state == "ready"
    (negotiated,) = of(client_events, ev.Negotiated)
    assert negotiated.info.name == SERVER_INFO["name"]
    assert type(negotiated.result) is mcpbind.bindings("2025-06-18").InitializeResult
    (initialized,) = client.data_to_send()
    assert msgspec.json.decode(initialized) == {
        "jsonrpc": "2.0",
        "method": "notifications/initialized",
    }
    assert of(server.receive(initialized), ev.Initialized)
    assert server.state == "ready"


def test_server_answers_a_version_it_lacks_with_its_newest_and_the_client_gives_up() -> None:
    client, server = pair(("2025-11-25",), ("2025-06-18", "2024-11-05"))
    client.connect()
    client_events, _ = pump(client, server)
    (failed,) = of(client_events, ev.NegotiationFailed)
    assert failed.error.code == -32602
    assert "'2025-06-18'" in failed.error.message and "2025-11-25" in failed.error.message
    assert failed.error.data == {"supported": ["2025-11-25"], "requested": "2025-06-18"}
    with pytest.raises(mcpbind.ProtocolError, match="state 'failed'"):
        client.request("tools/list")


def test_discover_probe_falls_back_to_initialize_on_method_not_found() -> None:
    client, server = pair(("2026-07-28", "2025-11-25"), ("2025-11-25",))
    client.connect()
    (probe,) = client.data_to_send()
    assert msgspec.json.decode(probe)["method"] == "server/discover"
    events = server.receive(probe)
    (rejected,) = of(events, ev.MessageRejected)
    assert rejected.answered and rejected.sender == "client"
    (refusal,) = server.data_to_send()
    assert msgspec.json.decode(refusal)["error"]["code"] == -32601
    assert client.receive(refusal) == []
    (initialize,) = client.data_to_send()
    assert msgspec.json.decode(initialize)["params"]["protocolVersion"] == "2025-11-25"
    server.receive(initialize)
    client.receive(server.data_to_send()[0])
    assert client.revision == server.revision == "2025-11-25"


def test_discover_names_the_versions_and_the_client_picks_its_newest_common() -> None:
    client, server = pair(("2026-07-28", "2025-11-25"), ("2026-07-28", "2025-11-25"))
    client.connect()
    client_events, server_events = pump(client, server)
    (agreed,) = of(client_events, ev.Negotiated)
    assert agreed.result.supported_versions == ["2026-07-28", "2025-11-25"]
    assert agreed.info.name == SERVER_INFO["name"]
    assert client.revision == "2026-07-28"
    (seen,) = of(server_events, ev.Negotiated)
    assert seen.info.name == CLIENT_INFO["name"]


def test_unsupported_version_in_meta_is_answered_with_the_server_versions() -> None:
    server = mcpbind.ServerSession(
        revisions=("2026-07-28", "2025-11-25"), capabilities={}, info=SERVER_INFO
    )
    raw = (
        b'{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":'
        b'{"io.modelcontextprotocol/protocolVersion":"2099-01-01",'
        b'"io.modelcontextprotocol/clientCapabilities":{}}}}'
    )
    (rejected,) = server.receive(raw)
    assert isinstance(rejected, ev.MessageRejected) and rejected.answered
    (answer,) = server.data_to_send()
    error = msgspec.json.decode(answer)
    assert error["id"] == 7
    assert error["error"]["code"] == -32022
    assert error["error"]["data"] == {
        "supported": ["2026-07-28", "2025-11-25"],
        "requested": "2099-01-01",
    }


PV = "io.modelcontextprotocol/protocolVersion"
CC = "io.modelcontextprotocol/clientCapabilities"
MIXED = ("2026-07-28", "2025-11-25", "2025-06-18")  # the conformance example server's set


@pytest.mark.parametrize("revisions", [MIXED, ("2026-07-28",)])
@pytest.mark.parametrize("method", ["server/discover", "tools/list"])
@pytest.mark.parametrize("meta,missing", [({CC: {}}, PV), ({PV: "2026-07-28"}, CC)])
def test_an_incomplete_meta_envelope_is_invalid_params_naming_the_key(
    revisions: tuple[str, ...], method: str, meta: dict[str, object], missing: str
) -> None:
    server = mcpbind.ServerSession(revisions=revisions, capabilities={}, info=SERVER_INFO)
    raw = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": 9, "method": method, "params": {"_meta": meta}}
    )
    (rejected,) = server.receive(raw)
    assert isinstance(rejected, ev.MessageRejected) and rejected.answered
    error = msgspec.json.decode(server.data_to_send()[0])
    assert error["id"] == 9
    assert error["error"]["code"] == -32602
    text = error["error"]["message"]
    assert "$.params._meta" in text and missing in text and "2026-07-28" in text


@pytest.mark.parametrize("method", ["initialize", "ping"])
def test_a_method_the_meta_revision_lacks_is_not_found_there(method: str) -> None:
    server = mcpbind.ServerSession(revisions=MIXED, capabilities={}, info=SERVER_INFO)
    raw = msgspec.json.encode(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": method,
            "params": {"_meta": {PV: "2026-07-28", CC: {}}},
        }
    )
    (rejected,) = server.receive(raw)
    assert isinstance(rejected, ev.MessageRejected) and rejected.answered
    error = msgspec.json.decode(server.data_to_send()[0])
    assert error["id"] == 4
    assert error["error"]["code"] == -32601
    assert "2026-07-28" in error["error"]["message"]
    assert server.state == "idle" and server.revision is None


def test_initialize_and_ping_without_a_meta_version_keep_the_initialize_revision() -> None:
    server = mcpbind.ServerSession(revisions=MIXED, capabilities={}, info=SERVER_INFO)
    (pinged,) = server.receive(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert isinstance(pinged, ev.PingReceived)
    assert msgspec.json.decode(server.data_to_send()[0])["result"] == {}
    client = mcpbind.ClientSession(revisions=("2025-11-25",), capabilities={}, info=CLIENT_INFO)
    client.connect()
    pump(client, server)
    assert client.revision == server.revision == "2025-11-25"


def test_one_server_session_serves_requests_of_several_discover_revisions() -> None:
    server = mcpbind.ServerSession(
        revisions=mcpbind.REVISIONS, capabilities={"tools": {}}, info=SERVER_INFO
    )
    for rid, version in enumerate(("2026-07-28", "draft", "2026-07-28")):
        raw = msgspec.json.encode(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "method": "tools/list",
                "params": {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": version,
                        "io.modelcontextprotocol/clientCapabilities": {},
                    }
                },
            }
        )
        (listed,) = server.receive(raw)
        assert isinstance(listed, ev.RequestReceived)
        assert listed.revision == version == server.revision
        assert type(listed.message) is mcpbind.bindings(version).ListToolsRequest
        server.respond(listed.id, {"tools": [], "cacheScope": "private", "ttlMs": 0})
        (answer,) = server.data_to_send()
        assert msgspec.json.decode(answer)["result"]["tools"] == []


def test_a_client_of_each_discover_revision_talks_to_one_server_session() -> None:
    server = mcpbind.ServerSession(
        revisions=mcpbind.REVISIONS, capabilities={"tools": {}}, info=SERVER_INFO
    )
    for revision in ("2026-07-28", "draft"):
        client = mcpbind.ClientSession(revisions=(revision,), capabilities={}, info=CLIENT_INFO)
        client.connect()
        pump(client, server)
        assert client.revision == revision
        client.request("tools/list")
        _, events = pump(client, server)
        (listed,) = of(events, ev.RequestReceived)
        server.respond(listed.id, {"tools": [], "cacheScope": "private", "ttlMs": 0})
        client_events, _ = pump(client, server)
        assert of(client_events, ev.ResultReceived)[0].result.tools == []


def test_initialize_for_a_discover_only_server_is_method_not_found() -> None:
    client, server = pair(("2025-11-25",), ("2026-07-28",))
    client.connect()
    client_events, server_events = pump(client, server)
    (failed,) = of(client_events, ev.NegotiationFailed)
    assert "-32601" in failed.error.message
    assert of(server_events, ev.MessageRejected)


def test_state_is_named_when_used_out_of_order() -> None:
    client, _ = pair()
    with pytest.raises(mcpbind.ProtocolError, match="state 'idle'"):
        client.request("tools/list")
    with pytest.raises(mcpbind.ProtocolError, match="state 'idle'"):
        client.receive(b"{}")
    client.connect()
    with pytest.raises(mcpbind.ProtocolError, match="state 'negotiating'"):
        client.connect()
    with pytest.raises(mcpbind.ProtocolError, match="state 'negotiating'"):
        client.request("tools/list")


def test_server_refuses_requests_before_initialize() -> None:
    server = mcpbind.ServerSession(revisions=("2025-06-18",), capabilities={}, info=SERVER_INFO)
    (rejected,) = server.receive(b'{"jsonrpc":"2.0","id":3,"method":"tools/list"}')
    assert isinstance(rejected, ev.MessageRejected) and "state 'idle'" in rejected.error.message
    (answer,) = server.data_to_send()
    assert msgspec.json.decode(answer)["id"] == 3


def test_session_revision_names_are_checked() -> None:
    with pytest.raises(ValueError, match="1999-01-01"):
        mcpbind.ClientSession(revisions=("1999-01-01",))


def test_revision_is_none_before_agreement() -> None:
    client, server = pair()
    assert client.revision is None and server.revision is None
    client, server = connected()
    assert client.revision == mcpbind.LATEST


def test_negotiate_stays_the_function_once_a_session_is_used() -> None:
    # The sessions import the submodule mcpbind.negotiate, which used to rebind the package's
    # `negotiate` to that module ("'module' object is not callable" in the interop driver).
    import subprocess
    import sys

    code = (
        "import mcpbind\n"
        "mcpbind.ServerSession(revisions=('2025-11-25',))\n"
        "assert mcpbind.negotiate('2025-11-25', supported=['2025-11-25']) == '2025-11-25'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _refuse_listing(client: mcpbind.ClientSession, listed: list[str]) -> list[ev.Event]:
    """Answer the client's pending discover probe with -32022 listing ``listed``."""
    (probe,) = client.data_to_send()
    sent = msgspec.json.decode(probe)
    assert sent["method"] == "server/discover"
    refusal = {
        "jsonrpc": "2.0",
        "id": sent["id"],
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": listed, "requested": sent["params"]["_meta"][PV]},
        },
    }
    return client.receive(msgspec.json.encode(refusal))


def test_a_refused_probe_listing_the_offered_version_is_retried_once() -> None:
    client = mcpbind.ClientSession(revisions=("2026-07-28",), capabilities={}, info=CLIENT_INFO)
    server = mcpbind.ServerSession(revisions=("2026-07-28",), capabilities={}, info=SERVER_INFO)
    client.connect()
    assert _refuse_listing(client, ["2026-07-28"]) == []
    assert client.state == "negotiating"
    client_events, _ = pump(client, server)
    (agreed,) = of(client_events, ev.Negotiated)
    assert agreed.revision == client.revision == "2026-07-28"


def test_the_retry_of_a_listed_version_is_bounded() -> None:
    client = mcpbind.ClientSession(revisions=("2026-07-28",), capabilities={}, info=CLIENT_INFO)
    client.connect()
    assert _refuse_listing(client, ["2026-07-28"]) == []
    (failed,) = of(_refuse_listing(client, ["2026-07-28"]), ev.NegotiationFailed)
    assert "-32022" in failed.error.message
    assert client.state == "failed" and client.data_to_send() == []


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_a_handshake_answer_that_cannot_be_read_ends_the_negotiation(revision: str) -> None:
    """The server's mistake is reported, and the session fails instead of negotiating forever."""
    client = mcpbind.ClientSession(revisions=(revision,), info=CLIENT_INFO)
    client.connect()
    (sent,) = client.data_to_send()
    answer = {"jsonrpc": "2.0", "id": msgspec.json.decode(sent)["id"], "result": {"x": 1}}
    rejected, failed = client.receive(msgspec.json.encode(answer))
    assert isinstance(rejected, ev.MessageRejected) and rejected.error.code == -32602
    assert isinstance(failed, ev.NegotiationFailed)
    assert "answer to the handshake could not be read" in failed.error.message
    assert "$.result" in failed.error.message
    assert client.state == "failed"
    with pytest.raises(mcpbind.ProtocolError, match="failed"):
        client.request("ping")


def test_a_server_request_carrying_the_handshake_id_does_not_end_the_negotiation() -> None:
    client = mcpbind.ClientSession(revisions=("2025-11-25",), info=CLIENT_INFO)
    client.connect()
    (sent,) = client.data_to_send()
    rid = msgspec.json.decode(sent)["id"]
    bad = {"jsonrpc": "2.0", "id": rid, "method": "roots/list", "params": 5}
    (rejected,) = client.receive(msgspec.json.encode(bad))
    assert isinstance(rejected, ev.MessageRejected) and rejected.answered
    assert client.state == "negotiating"
