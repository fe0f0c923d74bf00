"""ServerSession.spawn and release: a stateless HTTP server's session per request, built from a
template without working its configuration out again, its codecs reused only when they keep
nothing of the session that gave them back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpbind import ServerSession
from mcpbind.events import Negotiated, NegotiationFailed, RequestReceived

INFO = {"name": "t", "version": "1"}
MODERN = "2026-07-28"


def template() -> ServerSession:
    return ServerSession(
        ("2025-11-25", MODERN), capabilities={"tools": {}}, info=INFO, instructions="hi"
    )


def call(rid: int, client: str = "c") -> bytes:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
    }
    params = {"name": "echo", "arguments": {"who": client}, "_meta": meta}
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    ).encode()


def answer(session: ServerSession, body: bytes) -> Any:
    (event,) = session.receive(body)
    assert isinstance(event, RequestReceived)
    session.respond(event.id, {"content": [{"type": "text", "text": event.params.name}]})
    (out,) = session.data_to_send()
    return json.loads(out)


def test_a_spawned_session_answers_as_a_new_one_with_the_same_arguments() -> None:
    base = template()
    spawned, new = base.spawn(), template()
    assert type(spawned) is ServerSession and spawned.state == "idle" and spawned.revision is None
    assert (spawned.capabilities, spawned.info, spawned.instructions) == (
        new.capabilities,
        new.info,
        new.instructions,
    )
    assert spawned.supported_versions == new.supported_versions
    assert spawned.supported_versions is not base.supported_versions  # a copy of its own
    assert answer(spawned, call(1)) == answer(new, call(1))
    assert spawned.state == "ready" and spawned.revision == MODERN
    assert base.state == "idle" and base.revision is None  # the template is left as it was


def test_a_released_session_gives_its_codec_to_the_next_one_spawned() -> None:
    base = template()
    first = base.spawn()
    answer(first, call(1, "a"))
    used = first._codecs[MODERN]
    first.release()
    second = base.spawn()
    assert answer(second, call(1, "b"))["result"]["content"][0]["text"] == "echo"
    assert second._codecs[MODERN] is used


def test_undeclared_meta_keys_change_what_the_next_session_costs_not_what_it_gets() -> None:
    """A codec latches onto the wire Structs once it reads a _meta with a key its closed twins
    do not declare (Codec._open_wire); a released codec keeps that for the next session, whose
    requests then decode as they did before the twins: the same events and answers."""
    base, fresh = template(), template().spawn()
    first = base.spawn()
    vendor = json.loads(call(1, "a"))
    vendor["params"]["_meta"]["com.example/trace"] = "t"
    (event,) = first.receive(json.dumps(vendor).encode())
    assert isinstance(event, RequestReceived)
    assert event.params.meta["com.example/trace"] == "t"
    used = first._codecs[MODERN]
    assert used._fast is used._t.open  # (latched)
    first.release()
    second = base.spawn()
    (got,) = second.receive(call(2, "b"))
    (want,) = fresh.receive(call(2, "b"))
    assert second._codecs[MODERN] is used and fresh._codecs[MODERN]._fast is not used._fast
    assert type(got) is type(want) and got.id == want.id and got.params == want.params
    assert type(got.params) is type(want.params)
    assert type(got.params.meta) is type(want.params.meta)


def test_sessions_in_flight_at_once_never_share_a_codec() -> None:
    base = template()
    first, second = base.spawn(), base.spawn()
    events = first.receive(call(1, "a")) + second.receive(call(1, "b"))
    assert first._codecs[MODERN] is not second._codecs[MODERN]
    # Each request keeps its own _meta: the client info of "a" stays "a"'s.
    infos = [e.params.meta["io.modelcontextprotocol/clientInfo"].name for e in events]
    assert infos == ["a", "b"]


def test_a_codec_that_learned_capabilities_is_not_given_back() -> None:
    base = template()
    session = base.spawn()
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"sampling": {}},
            "clientInfo": INFO,
        },
    }
    events = session.receive(json.dumps(initialize).encode())
    assert any(isinstance(e, Negotiated) for e in events)
    session.release()
    assert not base._spare.get("2025-11-25")
    again = base.spawn()
    again.receive(json.dumps(initialize).encode())
    assert again._codecs["2025-11-25"] is not session._codecs["2025-11-25"]


def test_a_failed_handshake_does_not_leave_its_capabilities_to_the_next_session() -> None:
    # Without server info the handshake cannot be answered: the session stays unbound, but
    # decoding the initialize taught its codec the client's capabilities.
    base = ServerSession(("2025-11-25", MODERN), capabilities={"tools": {}})
    session = base.spawn()
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {"x": {}}, "clientInfo": INFO},
    }
    (event,) = session.receive(json.dumps(initialize).encode())
    assert isinstance(event, NegotiationFailed)
    assert session._codecs["2025-11-25"].peer_capabilities is not None
    session.release()
    assert not base._spare.get("2025-11-25")


@pytest.mark.parametrize("given_back", [0, 3])
def test_the_codecs_kept_are_bounded(given_back: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpbind.session import server

    monkeypatch.setattr(server, "MAX_SPARE", 2)
    base = template()
    sessions = [base.spawn() for _ in range(given_back)]
    for i, s in enumerate(sessions):
        answer(s, call(i))
    for s in sessions:
        s.release()
    assert len(base._spare.get(MODERN, [])) == min(given_back, 2)


@pytest.mark.parametrize("side", ["capabilities", "peer_capabilities"])
def test_a_codec_knows_capabilities_when_either_side_is_not_none(side: str) -> None:
    from mcpbind.codec import Codec

    codec = Codec(MODERN, role="server", wire_results=True)
    assert codec.capabilities is None and codec.peer_capabilities is None
    assert not codec.knows_capabilities()
    setattr(codec, side, {})
    assert codec.knows_capabilities()
    setattr(codec, side, None)
    assert not codec.knows_capabilities()
