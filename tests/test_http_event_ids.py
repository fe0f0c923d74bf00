"""Last-Event-ID on both stores (memory, and a real Redis): an id the store did not issue is refused
with 400, one whose events are no longer kept with 410, and neither holds a stream open; a real
id resumes exactly what followed it; and a stream is read by one reader per worker however many
times it is resumed."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import pytest

from mcpbind.transports.http_server import Call
from mcpbind.transports.store import NotIssued
from tests.test_http_store import MakeStore, Peer, count_call, data, run, server
from tests.test_http_store import make_store as make_store  # the fixture: memory and Redis


def forged(key: str, position: str) -> list[str]:
    """Event ids of stream ``key`` that its store never issued, in the form of ``position`` (a
    real one of entry 2 of the stream's five)."""
    other = secrets.token_hex(8)
    if "-" in position:  # Redis: <ms>-<n>
        ms = int(position.split("-")[0])
        return [
            f"{other}:0-0",  # any stream, before its first entry
            "get:0-0",
            f"{key}:0-0",
            f"{key}:0-2",  # entry 2's number, at another time: it would replay entry 1 and 2
            f"{key}:{ms + 1}-2",
            f"{key}:{ms}-02",
            f"{key}:{ms}-0",
            f"{key}:{ms}-99",  # past the last entry
            f"{key}:99999999999999999999-1",  # out of Redis's range (was a 500 and a traceback)
            f"{key}:1-99999999999999999999",
            f"{key}:18446744073709551615-18446744073709551615",
            f"{key}:{ms}",
            f"{key}:{ms}-2-1",
            f"{key}:-1",
        ]
    return [  # the memory store: <n>
        f"{other}:0",
        "get:0",
        f"{key}:0",  # (was accepted: a stream held open)
        f"{key}:02",
        f"{key}:+2",
        f"{key}: 2",
        f"{key}:99",
        f"{key}:99999999999999999999",
        f"{key}:-1",
        f"{key}:2.0",
    ]


def test_a_position_a_log_never_had_is_not_issued(make_store: MakeStore) -> None:
    async def go() -> None:
        store = make_store()
        positions = await store.append("s", "k", [b"a", b"b"], 60)
        assert "-" in positions[0] or positions == ["1", "2"]
        made_up = ["0", "0-0", "\u0662", "1\u0662", "3", "1-1", " 1", "1 ", "1-", "-"]
        for position in made_up:
            if position in positions:
                continue
            with pytest.raises(NotIssued):
                await store.read("s", "k", position)
        with pytest.raises(NotIssued):  # a log that is not there has no position 0 either
            await store.read("s", "none", "0-0" if "-" in positions[0] else "0")
        assert await store.read("s", "none", positions[0]) is None  # (it may have been: gone)
        assert await store.read("s", "k", positions[0]) == [(positions[1], b"b")]
        await store.close()

    run(go())


def test_an_event_id_the_store_did_not_issue_is_refused_with_400(make_store: MakeStore) -> None:
    async def go() -> None:
        app = server(make_store())
        peer = Peer()
        await peer.open(app)
        first = await peer.post(app, count_call(1))  # priming, three notifications, answer
        assert len(first) == 5
        key, _, position = first[1]["id"].partition(":")
        for last in forged(key, position):
            assert await asyncio.wait_for(peer.get(app, last), 5) == 400, last
        assert not app.sessions[peer.sid or ""].readers  # none held open
        # The real id resumes what followed it, once: entries 3 to 5.
        rest = await peer.get(app, first[1]["id"])
        assert [e["id"] for e in rest] == [e["id"] for e in first[2:]]
        # Another session's real id names no stream of this one: nothing is kept for it here.
        other = Peer()
        await other.open(app)
        assert await asyncio.wait_for(other.get(app, first[1]["id"]), 5) == 410

    run(go())


def test_a_stream_resumed_many_times_is_read_by_one_reader(make_store: MakeStore) -> None:
    release = asyncio.Event()

    async def held(call: Call) -> Any:
        call.notify("notifications/message", {"level": "info", "data": "started"})
        await release.wait()
        return {"content": [{"type": "text", "text": "released"}]}

    async def go() -> None:
        app = server(make_store())
        app.handler = held
        peer = Peer()
        await peer.open(app)
        first = await peer.post(app, count_call(1), keep=2)  # priming, "started": dropped
        live = app.sessions[peer.sid or ""]
        resumes = [asyncio.ensure_future(peer.get(app, first[-1]["id"])) for _ in range(20)]
        while len(live.reading) < 1 or sum(not r.done() for r in resumes) > 1:
            await asyncio.sleep(0.01)
        assert len(live.readers) == 1  # each resume ended the one before it
        release.set()
        answers = [data(await r) for r in resumes]
        got = [a for a in answers if a]
        assert len(got) == 1 and got[0][-1]["result"]["content"][0]["text"] == "released"

    run(go())
