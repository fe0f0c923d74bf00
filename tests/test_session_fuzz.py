"""Junk of every shape, fed to ``ServerSession.receive`` and ``ClientSession.receive`` in every state
of every revision: only the events of ``mcpbind.events`` come out, nothing is raised, everything
queued is a JSON-RPC message, and the session still works afterwards (a valid request is answered
by a server, a valid response correlated by a client).

The junk is the real messages recorded from the interop peers (bench/sessions/, every released
revision) and those of the flows the recordings lack (progress, cancellation, tasks, input-required
results) as real sessions of every revision, the draft included, send them, mutated by a seeded
random mutator: values of every JSON type in any place (huge and non-finite numbers, deep
nesting, any method name, ids of every type), keys dropped and added, batches of them, bytes cut,
invalid UTF-8, lone surrogates in a str. The default run feeds 60,000 messages; ``make test-deep``
(``MCPBIND_DEEP=1``) 1,000,000.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

import mcpbind
from mcpbind import events as ev

ROOT = Path(__file__).resolve().parent.parent
DEEP = os.environ.get("MCPBIND_DEEP") == "1"
EVENTS = frozenset(get_args(ev.Event))
INFO = {"name": "fuzz", "version": "1"}
CAPS = {"tools": {}, "prompts": {}, "resources": {"subscribe": True}, "logging": {}}
CLIENT_CAPS = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
REVISION_SETS: list[tuple[str, ...]] = [(r,) for r in mcpbind.REVISIONS] + [
    tuple(mcpbind.REVISIONS),
    ("2026-07-28", "2025-06-18"),
]
CHUNK = 40  # junk messages per session before it is probed and replaced

_encode = msgspec.json.encode
_decode = msgspec.json.decode


def _recorded() -> list[bytes]:
    out = []
    for path in sorted((ROOT / "bench" / "sessions").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            out.append(_encode(json.loads(line)["message"]))
    return out


TASK = {
    "taskId": "t1",
    "status": "working",
    "createdAt": "2025-01-01T00:00:00Z",
    "lastUpdatedAt": "2025-01-01T00:00:00Z",
    "ttl": 1000,
}
ASK = {
    "resultType": "input_required",
    "requestState": "s1",
    "inputRequests": {
        "who": {
            "method": "elicitation/create",
            "params": {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}},
        }
    },
}


def _flows(revision: str) -> list[bytes]:
    """What the recordings lack, as real sessions of ``revision`` send it: progress,
    cancellation, tasks, input-required results and their retry, pings both ways."""
    facts = mcpbind.bindings(revision).FACTS
    caps = dict(CAPS, tasks={"requests": {"tools": {"call": {}}}}) if facts.tasks else CAPS
    client = mcpbind.ClientSession((revision,), capabilities=CLIENT_CAPS, info=INFO)
    server = mcpbind.ServerSession((revision,), capabilities=caps, info=INFO)
    wire: list[bytes] = []
    answers: list[Any] = []

    def pump() -> list[Any]:
        got: list[Any] = []
        for _ in range(6):
            for raw in client.data_to_send():
                wire.append(raw)
                got += server.receive(raw)
            for raw in server.data_to_send():
                wire.append(raw)
                got += client.receive(raw)
        return got

    def served(got: list[Any]) -> Any:
        return [e for e in got if type(e) is ev.RequestReceived][-1]

    client.connect()
    pump()
    call = {"name": "echo", "arguments": {"x": 1}}
    rid = client.request("tools/call", call, progress=True)
    request = served(pump())
    server.progress(request.id, 1, total=2)
    pump()
    client.cancel(rid, "enough")
    pump()
    client.request("tools/call", call)
    result: dict[str, Any] = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    server.respond(served(pump()).id, result)
    answers += pump()
    if "ping" in facts.lifecycle:
        client.request("ping")
        server.request("ping")
        pump()
    if facts.tasks is not None:
        client.request("tools/call", dict(call, task={"ttl": 1000}))
        server.respond(served(pump()).id, {"task": TASK})
        pump()
        client.request("tasks/result", {"taskId": "t1"})
        server.respond(served(pump()).id, result)
        pump()
    if facts.round_trip is not None:
        client.request("tools/call", call)
        server.respond(served(pump()).id, ASK)
        (needed,) = [e for e in pump() if type(e) is ev.InputRequired]
        client.answer(needed, {"who": {"action": "accept", "content": {"n": "x"}}})
        pump()
    return wire


SEEDS = _recorded() + [raw for r in mcpbind.REVISIONS for raw in _flows(r)]
METHODS = sorted({m for r in mcpbind.REVISIONS for m in mcpbind.bindings(r).METHODS})
KEYS = [
    "jsonrpc",
    "id",
    "method",
    "params",
    "result",
    "error",
    "code",
    "message",
    "data",
    "_meta",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
    "protocolVersion",
    "supportedVersions",
    "capabilities",
    "requestId",
    "progressToken",
    "progress",
    "name",
    "task",
    "taskId",
    "resultType",
    "inputRequests",
    "requestState",
]
STRINGS = [
    "",
    "2.0",
    "\x00",
    "\u2028\ud7ff\ue000\U0010ffff",
    "x" * 300,
    "complete",
    "input_required",
    *mcpbind.REVISIONS,
]
NUMBERS = [0, -1, 1, 2, 2**31, 2**53 + 1, 2**63, -(2**63) - 1, 2**64, 10**40, -(10**40)]
FLOATS = [0.5, -0.0, 1e-320, 1.7976931348623157e308, -1e308]
SPLICES = [
    b"\xff",
    b"\xc0\xaf",
    b"\xed\xa0\x80",  # a surrogate in UTF-8: invalid
    b"\xf4\x90\x80\x80",  # past U+10FFFF
    b"[" * 3000,
    b"{" * 3000,
    b"1e999",
    b"-",
    b'"',
    b"}",
    b",",
    b"\\u",
    b"NaN",
    b"Infinity",
    b'"id":[],',
    b'"method":{},',
    b" ",
]


class Mutator:
    """Junk made from the recorded messages, reproducibly from a seed."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        k = rng.randrange(16)
        if k == 0:
            return None
        if k == 1:
            return rng.random() < 0.5
        if k == 2:
            return rng.choice(NUMBERS)
        if k == 3:
            return rng.choice(FLOATS)
        if k == 4:
            return rng.choice(STRINGS)
        if k in (5, 6):
            return rng.choice(METHODS)
        if k == 7 and depth < 3:
            return [self.value(depth + 1) for _ in range(rng.randrange(4))]
        if k == 8 and depth < 3:
            return {rng.choice(KEYS): self.value(depth + 1) for _ in range(rng.randrange(4))}
        if k == 9 and depth < 2:
            return _decode(rng.choice(SEEDS))
        if k == 10:
            return rng.choice(([], {}, [[[]]], {"": {}}))
        if k == 11:  # nesting past the decoder's depth limit
            nest = rng.choice((600, 2000, 100_000))
            return msgspec.Raw(b"[" * nest + b"]" * nest)
        return rng.randrange(1, 8)  # ids the recorded requests use

    def mutate(self, obj: Any) -> Any:
        """``obj`` with one to three of its places changed."""
        rng = self.rng
        for _ in range(rng.randrange(1, 4)):
            node = obj
            while True:  # a random walk down to a container
                children = list(node.values() if type(node) is dict else node)
                inner = [c for c in children if type(c) in (dict, list) and c]
                if not inner or rng.random() < 0.15:
                    break
                node = rng.choice(inner)
            if type(node) is dict and node:
                key = rng.choice(list(node))
                op = rng.randrange(4)
                if op == 0:
                    del node[key]
                elif op == 1:
                    node[rng.choice(KEYS)] = self.value()
                else:
                    node[key] = self.value()
            elif type(node) is list and node:
                node[rng.randrange(len(node))] = self.value()
            else:
                return self.value()
        return obj

    def junk(self) -> bytes | str:
        rng = self.rng
        k = rng.randrange(20)
        if k < 11:
            data = _encode(self.mutate(_decode(rng.choice(SEEDS))))
        elif k < 13:  # a batch: recorded and mutated members, or junk as members
            members = [
                self.mutate(_decode(s)) if rng.random() < 0.5 else _decode(s)
                for s in rng.sample(SEEDS, rng.randrange(0, 4))
            ]
            if rng.random() < 0.2:
                members.append(members[:])
            data = _encode(members)
        elif k == 13:  # the method of a recorded message swapped for any other
            obj = _decode(rng.choice(SEEDS))
            if type(obj) is dict:
                obj["method"] = rng.choice(METHODS)
            data = _encode(obj)
        elif k == 14:
            data = _encode(self.value())
        else:
            data = rng.choice(SEEDS) if k < 17 else _encode(self.mutate(_decode(rng.choice(SEEDS))))
        k = rng.randrange(16)  # most junk stays JSON; some is broken bytes
        if k < 2:  # bytes spliced in
            at = rng.randrange(len(data) + 1)
            data = data[:at] + rng.choice(SPLICES) + data[at:]
        elif k == 2:
            data = data[: rng.randrange(len(data) + 1)]
        elif k == 3:
            at = rng.randrange(len(data))
            data = data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
        elif k == 4:  # a str, maybe holding a lone surrogate
            text = data.decode("utf-8", "replace")
            return text if rng.random() < 0.5 else text.replace('"', '"\ud800', 1)
        elif k == 5:
            data = b" \n\t" + data + b"\r\n"
        return data


# -- sessions in every state --------------------------------------------------------------------


def _pump(client: mcpbind.ClientSession, server: mcpbind.ServerSession) -> None:
    for _ in range(10):
        up, down = client.data_to_send(), server.data_to_send()
        if not up and not down:
            return
        for raw in up:
            for e in server.receive(raw):
                if type(e) is ev.RequestReceived:
                    server.respond_error(e.id, -32601, "not served")
        for raw in down:
            for e in client.receive(raw):
                if type(e) is ev.RequestReceived:
                    client.respond_error(e.id, -32601, "not served")


def _handshake(revision: str) -> str:
    return str(mcpbind.bindings(revision).FACTS.handshake)


def server_states(revisions: tuple[str, ...]) -> Iterator[tuple[str, Callable[[], Any]]]:
    def fresh() -> mcpbind.ServerSession:
        return mcpbind.ServerSession(revisions=revisions, capabilities=CAPS, info=INFO)

    def opened(client_revisions: tuple[str, ...], initialized: bool) -> Any:
        def make() -> mcpbind.ServerSession:
            server = fresh()
            client = mcpbind.ClientSession(client_revisions, capabilities=CLIENT_CAPS, info=INFO)
            client.connect()
            if initialized:
                _pump(client, server)
                assert server.state == "ready", server
            else:
                for raw in client.data_to_send():
                    server.receive(raw)
                server.data_to_send()
            if (
                server.revision is not None
                and server.state == "ready"
                and (_handshake(server.revision) == "initialize")
            ):
                server.request("ping")  # a request of its own awaiting the client's answer
                server.data_to_send()
            return server

        return make

    yield "idle", fresh
    yield "idle (no capabilities, no info)", lambda: mcpbind.ServerSession(revisions)
    initialize = [r for r in revisions if _handshake(r) == "initialize"]
    discover = [r for r in revisions if _handshake(r) != "initialize"]
    if initialize:
        yield "initializing", opened((initialize[0],), False)
        yield "ready (initialize)", opened((initialize[-1],), True)
    if discover:
        yield "ready (per request)", opened((discover[0],), True)


def client_states(revisions: tuple[str, ...]) -> Iterator[tuple[str, Callable[[], Any]]]:
    def connecting() -> mcpbind.ClientSession:
        client = mcpbind.ClientSession(revisions, capabilities=CLIENT_CAPS, info=INFO)
        client.connect()  # its opening stays queued: the first receive's output holds it
        return client

    def ready() -> mcpbind.ClientSession:
        client = mcpbind.ClientSession(revisions, capabilities=CLIENT_CAPS, info=INFO)
        server = mcpbind.ServerSession(mcpbind.REVISIONS, capabilities=CAPS, info=INFO)
        client.connect()
        _pump(client, server)
        assert client.state == "ready", client
        for _ in range(3):  # requests of its own, whose ids the junk's responses may carry
            client.request(_plain_method(client.revision))
        client.data_to_send()
        return client

    outside = [r for r in mcpbind.REVISIONS if r not in revisions and _handshake(r) == "initialize"]

    def failed() -> mcpbind.ClientSession:
        client = mcpbind.ClientSession(revisions, capabilities=CLIENT_CAPS, info=INFO)
        server = mcpbind.ServerSession(outside[:1], capabilities=CAPS, info=INFO)
        client.connect()
        _pump(client, server)
        assert client.state == "failed", client
        return client

    yield "negotiating", connecting
    yield "ready", ready
    if outside:
        yield "failed", failed


def _plain_method(revision: Any) -> str:
    """A request any server answers in ``revision``: ping, or discover where there is no ping."""
    lifecycle = mcpbind.bindings(revision).FACTS.lifecycle
    return str(lifecycle.get("ping") or lifecycle["discover"])


STATES: list[tuple[str, Callable[[], Any]]] = [
    (f"{kind} {state} {'+'.join(revisions)}", make)
    for revisions in REVISION_SETS
    for kind, states in (("server", server_states), ("client", client_states))
    for state, make in states(revisions)
]


# -- checks -------------------------------------------------------------------------------------


def _check_events(events: list[Any]) -> None:
    for e in events:
        assert type(e) in EVENTS, e
        if type(e) is ev.MessageRejected:
            assert isinstance(e.error, mcpbind.ProtocolError) and type(e.error.code) is int
        elif type(e) is ev.NegotiationFailed:
            assert isinstance(e.error, mcpbind.UnsupportedRevision)


def _check_sent(out: list[bytes]) -> list[dict[str, Any]]:
    messages = []
    for raw in out:
        msg = _decode(raw)
        assert type(msg) is dict and msg.get("jsonrpc") == "2.0", raw
        assert sum(k in msg for k in ("method", "result", "error")) == 1, raw
        messages.append(msg)
    return messages


def _feed(session: Any, data: bytes | str, sent: list[dict[str, Any]], held: list[Any]) -> None:
    events = session.receive(data)
    _check_events(events)
    for e in events:
        if type(e) is ev.RequestReceived:  # answered now, or held for the junk to cancel
            held.append(e.id)
    while len(held) > 4 or (held and len(held) % 2):
        session.respond_error(held.pop(0), -32601, "not served")  # nothing if it was cancelled
    sent += _check_sent(session.data_to_send())


def _probe_server(server: mcpbind.ServerSession, rid: str) -> None:
    """A valid request of the revision the server now speaks is answered: ping where there is
    one, else tools/list (the application answers) or, with no tools, server/discover."""
    revision = server.revision or server.revisions[0]
    if _handshake(revision) == "initialize":
        request = {"jsonrpc": "2.0", "id": rid, "method": "ping"}
    else:
        facts = mcpbind.bindings(revision).FACTS.request_meta
        assert facts is not None
        meta = {facts.version_key: mcpbind.bindings(revision).FACTS.versions[0]}
        meta[facts.capabilities_key] = {}
        method = "tools/list" if "tools" in server.capabilities else "server/discover"
        request = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"_meta": meta}}
    events = server.receive(_encode(request))
    _check_events(events)
    for e in events:
        if type(e) is ev.RequestReceived and e.id == rid:
            server.respond(e.id, {"tools": [], "cacheScope": "private", "ttlMs": 0})
    answers = [m for m in _check_sent(server.data_to_send()) if m.get("id") == rid]
    assert len(answers) == 1 and "result" in answers[0], (server, request, answers)


def _probe_client(client: mcpbind.ClientSession, rid: str, sent: list[dict[str, Any]]) -> None:
    """A valid response to a request of the client is correlated with it (in state negotiating:
    the answer to its handshake opens the session)."""
    if client.state == "failed":
        with pytest.raises(mcpbind.ProtocolError, match="'failed'"):
            client.request("ping")
        return
    if client.state == "negotiating":
        opening = [m for m in sent if m.get("method") in ("initialize", "server/discover")]
        server = mcpbind.ServerSession(mcpbind.REVISIONS, capabilities=CAPS, info=INFO)
        server.receive(_encode(opening[-1]))
        events: list[Any] = []
        for raw in server.data_to_send():
            events += client.receive(raw)
        _check_events(events)
        assert [type(e) for e in events] == [ev.Negotiated], events
        client.data_to_send()
    method = _plain_method(client.revision)
    client.request(method, id=rid)
    (request,) = client.data_to_send()
    server = mcpbind.ServerSession(mcpbind.REVISIONS, capabilities=CAPS, info=INFO)
    if method != "ping":
        server.receive(request)
        (answer,) = server.data_to_send()
    else:
        answer = _encode({"jsonrpc": "2.0", "id": rid, "result": {}})
    events = client.receive(answer)
    assert [(type(e), e.id, e.method) for e in events] == [(ev.ResultReceived, rid, method)]


def fuzz(count: int, seed: int) -> int:
    """Feed ``count`` junk messages, ``CHUNK`` to each session, over every state in turn; each
    session is probed after its junk. Returns the number of messages fed."""
    mutator = Mutator(seed)
    fed = 0
    probe = 0
    while fed < count:
        for name, make in STATES:
            session = make()
            sent: list[dict[str, Any]] = []
            held: list[Any] = []
            for _ in range(CHUNK):
                data = mutator.junk()
                try:
                    _feed(session, data, sent, held)
                except Exception as exc:
                    raise AssertionError(
                        f"{name}: {type(exc).__name__}: {exc} after {data[:400]!r}"
                    ) from exc
                fed += 1
            probe += 1
            rid = f"probe-{probe}"
            try:
                if isinstance(session, mcpbind.ServerSession):
                    _probe_server(session, rid)
                else:
                    _probe_client(session, rid, sent)
            except Exception as exc:
                raise AssertionError(f"{name}: after junk: {type(exc).__name__}: {exc}") from exc
            if fed >= count:
                break
    return fed


def test_every_state_survives_junk_and_still_works() -> None:
    assert fuzz(60_000, seed=21) >= 60_000


@pytest.mark.deep
@pytest.mark.skipif(not DEEP, reason="deep run only (MCPBIND_DEEP=1, make test-deep)")
def test_a_million_junk_messages() -> None:
    assert fuzz(1_000_000, seed=2121) >= 1_000_000
