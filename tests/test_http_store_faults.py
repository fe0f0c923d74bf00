"""The Streamable HTTP server on a real Redis that fails: stopped, frozen (SIGSTOP), restarted on
its port, full (maxmemory with noeviction), or refusing the server's password. Whatever Redis
does, every request gets its answer or a JSON-RPC error naming the store, never an empty event
stream, a text/plain 500 or a hang; and once Redis is back, requests are answered again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.store import RedisStore
from tests._net import free_port, stopped, wait_port
from tests.conftest import own_redis
from tests.test_http_store import ACCEPT, INFO, Peer, count_call, data, run, server
from tests.test_http_transport import URL, http


async def counted(peers: list[Peer], app: Any, rid: int) -> list[Any]:
    """One streamed call (three notifications, then its answer) on each peer, all at once."""
    return await asyncio.gather(*(peer.post(app, count_call(rid)) for peer in peers))


# -- a Redis restarted on its port ------------------------------------------------------------------


def test_after_redis_restarts_on_its_port_the_pooled_connections_serve_again() -> None:
    # Redis stopped and started again on the same port (its data gone): every connection the
    # worker's pools held died with it. Each fails once and is replaced, so new sessions opened a
    # while later are answered in full (before: "Connection closed by server" on each dead
    # connection's next use, for minutes, and the streams came back empty).
    port = free_port()

    async def go() -> list[list[int]]:
        with own_redis(port) as (url, _):
            store = RedisStore(url, prefix="restart:")
            app = server(store)
            peers = [Peer() for _ in range(8)]
            for peer in peers:
                await peer.open(app)
            assert [len(data(a)) for a in await counted(peers, app, 1)] == [4] * 8
        got = []
        with own_redis(port):
            await asyncio.sleep(1.5)  # (the channel's listener subscribes again within a second)
            for rid in (2, 3, 4):
                peers = [Peer() for _ in range(8)]
                for peer in peers:
                    await peer.open(app)
                got.append([len(data(a)) for a in await counted(peers, app, rid)])
            await app.aclose()
            await store.close()
        return got

    assert run(go(), 60) == [[4] * 8] * 3


# -- a Redis the server cannot use: a wrong password, a wrong address -------------------------------

MODERN = "2026-07-28"
STATELESS = {**ACCEPT, "mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "x"}


def stateless_call(rid: int) -> str:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": INFO,
    }
    params = {"name": "x", "arguments": {}, "_meta": meta}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


def both_eras(store: RedisStore) -> StreamableHTTPServer:
    """A server of a session revision and of the stateless one, on ``store``."""

    async def answer(call: Call) -> Any:
        return {"content": [{"type": "text", "text": f"answered {call.method}"}]}

    return StreamableHTTPServer(
        answer,
        revisions=("2025-11-25", MODERN),
        capabilities={"tools": {}},
        info=INFO,
        store=store,
    )


def assert_store_failed(response: httpx.Response, store: str) -> None:
    """503 with Retry-After, and a JSON-RPC error naming the store (without its password)."""
    assert response.status_code == 503, (response.status_code, response.text)
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["retry-after"]) >= 1
    error = response.json()["error"]
    assert error["code"] == -32603, error
    assert error["data"] == {"reason": "store failed", "store": store}, error
    assert f"the session store failed ({store}: " in error["message"], error
    assert "wrong" not in response.text  # the password given is not shown


async def refused_everywhere_but_stateless(url: str, store: str) -> None:
    app = both_eras(RedisStore(url, prefix="wrong:"))
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
    }
    session = {**ACCEPT, "mcp-session-id": "0" * 32, "mcp-protocol-version": "2025-11-25"}
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
    async with http(app) as client:
        for _ in range(2):  # (the second time too: nothing is left half done by the first)
            assert_store_failed(
                await client.post(URL, content=json.dumps(init), headers=ACCEPT), store
            )
            assert_store_failed(await client.post(URL, content=ping, headers=session), store)
            get = {**session, "accept": "text/event-stream"}
            assert_store_failed(await client.get(URL, headers=get), store)
            assert_store_failed(await client.delete(URL, headers=session), store)
            # A stateless request never touches the store: answered as ever.
            answered = await client.post(URL, content=stateless_call(3), headers=STATELESS)
            assert answered.status_code == 200, answered.text
            assert answered.json()["result"]["content"][0]["text"] == "answered tools/call"
        assert not app.sessions  # the refused initialize left no session behind
    await app.aclose()


def test_a_wrong_redis_password_is_a_503_naming_the_store_and_stateless_requests_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import redis

    async def go() -> None:
        with own_redis() as (url, _):
            redis.Redis.from_url(url).config_set("requirepass", "right")
            wrong = url.replace("redis://", "redis://:wrong@")
            await refused_everywhere_but_stateless(wrong, url)

    run(go())
    # No failed start left for asyncio to report ("Future exception was never retrieved").
    assert not [r.getMessage() for r in caplog.records if r.name == "asyncio"]


def test_a_wrong_redis_address_is_a_503_naming_the_store_and_stateless_requests_go_on() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    run(refused_everywhere_but_stateless(url, url))


# -- an outage: requests fail fast, saying why --------------------------------------------------------


async def ping(app: Any, peer: Peer, rid: int) -> tuple[httpx.Response, float]:
    """A ping on ``peer``'s session: the response, and how long it took."""
    started = time.monotonic()
    async with http(app) as client:
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        response = await client.post(URL, content=body, headers=peer.headers())
    return response, time.monotonic() - started


@pytest.mark.parametrize("fault", ["stopped", "frozen"])
def test_during_a_redis_outage_requests_fail_fast_saying_why_and_recover(fault: str) -> None:
    # A session's request a second after its last (so its worker asks Redis about it again):
    # Redis stopped answers at once, frozen within the store's timeout (2 s), and while it stays
    # frozen the next requests are not each made to wait that long. Before: ~5 s each (the
    # client's default socket timeout), then a 500 "Internal error" without a reason.
    async def go() -> None:
        with own_redis() as (url, process):
            store = RedisStore(url, prefix="outage:")
            app = server(store)
            peers = [Peer() for _ in range(6)]
            for peer in peers:
                await peer.open(app)
            await asyncio.sleep(1.1)  # past SESSION_RECHECK: each request asks Redis
            if fault == "stopped":
                process.terminate()
                process.wait()
            else:
                process.send_signal(signal.SIGSTOP)
            first, took = await ping(app, peers[0], 1)
            assert_store_failed(first, url)
            reason = first.json()["error"]["message"]
            if fault == "stopped":
                assert took < 1.5 and "Error 111 connecting" in reason, (took, reason)
            else:
                assert took < 4 and "Timeout" in reason, (took, reason)
            for n, peer in enumerate(peers[1:], 2):  # the outage goes on
                response, took = await ping(app, peer, n)
                assert_store_failed(response, url)
                if fault == "frozen":  # (not each after the timeout)
                    assert took < 1.5, took
            if fault == "frozen":
                process.send_signal(signal.SIGCONT)
                await asyncio.sleep(1.1)
                for n, peer in enumerate(peers, 10):
                    response, _ = await ping(app, peer, n)
                    assert response.status_code == 200 and response.json()["result"] == {}
            await app.aclose()
            await store.close()

    run(go(), 60)


# -- Redis failing while a request's event stream is logged -------------------------------------------


def fill(url: str) -> None:
    """Redis full: maxmemory below what it holds, and no eviction (every write refused: OOM)."""
    import redis

    db = redis.Redis.from_url(url)
    db.config_set("maxmemory-policy", "noeviction")
    db.config_set("maxmemory", max(1, int(db.info("memory")["used_memory"]) // 2))
    db.close()


async def streamed(app: Any, peer: Peer, rid: int, fail: Any) -> tuple[str, list[Any]]:
    """A streamed call on ``peer``'s session, ``fail()`` done once its first event came: the
    response's content type and the messages of its events."""
    async with (
        http(app) as client,
        client.stream(
            "POST", URL, content=json.dumps(count_call(rid)), headers=peer.headers()
        ) as response,
    ):
        kind = response.headers["content-type"]
        assert response.status_code == 200, await response.aread()
        got: list[dict[str, str]] = []
        event: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line:
                name, _, value = line.partition(":")
                event[name] = value.removeprefix(" ")
                continue
            if event:
                got.append(event)
                if len(got) == 1:
                    fail()
            event = {}
    return kind, data(got)


@pytest.mark.parametrize("fault", ["frozen", "full", "killed"])
def test_a_store_failing_while_a_stream_is_logged_answers_its_request_with_an_error(
    fault: str,
) -> None:
    # Frozen or full before the stream's first event is logged, killed after it was sent: the
    # POST's event stream ends with a JSON-RPC error answering the request, naming the store
    # (before: an empty 200 event stream, after 5 s when frozen, and no answer at all).
    async def go() -> tuple[str, list[Any], str]:
        with own_redis() as (url, process):
            store = RedisStore(url, prefix="failing:")
            app = server(store)
            peer = Peer()
            await peer.open(app)  # (its copy is fresh: the POST itself needs no Redis)
            if fault == "frozen":
                process.send_signal(signal.SIGSTOP)
            elif fault == "full":
                fill(url)
            kind, got = await streamed(
                app, peer, 1, lambda: process.kill() if fault == "killed" else None
            )
            process.send_signal(signal.SIGCONT)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(app.aclose(), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(store.close(), 5)
            return kind, got, url

    kind, got, url = run(go(), 60)
    assert kind.startswith("text/event-stream")
    assert got, "an empty event stream"
    answer = got[-1]
    assert answer["id"] == 1 and "result" not in answer, got
    error = answer["error"]
    assert error["code"] == -32603 and error["data"] == {"reason": "store failed", "store": url}
    assert "the session store failed" in error["message"] and "given up" in error["message"]
    if fault == "killed":  # what was logged before Redis went was sent first
        assert [m.get("params", {}).get("data") for m in got[:-1]][:1] in ([], [1]), got


# -- the deep run: two servers on one Redis under load while it fails ------------------------------

DEEP = os.environ.get("MCPBIND_DEEP") == "1"
ROOT = Path(__file__).resolve().parents[1]


class Tally:
    """What the clients of the load got, by outcome; ``lost``: what was not an answer nor a
    JSON-RPC error (an empty event stream, a body that is no JSON-RPC response, no response)."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.lost: list[str] = []
        self.healthy: list[str] = []  # what was not an answer once Redis had been back a while
        self.watching_health = False

    def add(self, outcome: str, what: str) -> None:
        self.counts[outcome] = self.counts.get(outcome, 0) + 1
        if outcome == "lost":
            self.lost.append(what)
        if self.watching_health and outcome != "answer":
            self.healthy.append(f"{outcome}: {what}")


def outcome_of(response: httpx.Response, body: bytes, rid: int) -> tuple[str, str]:
    """``answer``, ``error`` (a JSON-RPC error: in the body, or the stream's last message) or
    ``lost``; and what it was."""
    kind = response.headers.get("content-type", "")
    what = f"{response.status_code} {kind} {body[:300]!r}"
    messages: list[Any] = []
    if kind.startswith("application/json"):
        with contextlib.suppress(ValueError):
            messages = [json.loads(body)]
    elif kind.startswith("text/event-stream"):
        for line in body.decode(errors="replace").splitlines():
            if line.startswith("data:") and line[5:].strip():
                with contextlib.suppress(ValueError):
                    messages.append(json.loads(line[5:]))
    answers = [m for m in messages if isinstance(m, dict) and ("result" in m or "error" in m)]
    if not answers:
        return "lost", what
    last = answers[-1]
    if "result" in last and last.get("id") == rid:
        return "answer", what
    if "error" in last and last.get("id") in (rid, None):
        return "error", what
    return "lost", what


async def loaded_client(urls: list[str], tally: Tally, stop: asyncio.Event, number: int) -> None:
    """One client of the load: a 2025-11-25 session opened on either server, streamed calls
    (progress notifications, then the answer) sent to either; a new session when its own is
    gone (Redis restarted without its data)."""
    sid: str | None = None
    rid = 0
    async with httpx.AsyncClient(timeout=30) as client:
        while not stop.is_set():
            rid += 1
            url = urls[(number + rid) % len(urls)]
            if sid is None:
                message: dict[str, Any] = {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": INFO,
                    },
                }
                headers = dict(ACCEPT)
            else:
                message = {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "tools/call",
                    "params": {
                        "name": "test_tool_with_progress",
                        "arguments": {},
                        "_meta": {"progressToken": f"p{rid}"},
                    },
                }
                headers = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
            try:
                async with client.stream(
                    "POST", url, content=json.dumps(message), headers=headers
                ) as response:
                    body = await response.aread()
            except httpx.HTTPError as error:
                tally.add("lost", f"{message['method']}: {error!r}")
                continue
            outcome, what = outcome_of(response, body, rid)
            tally.add(outcome, f"{message['method']}: {what}")
            if message["method"] == "initialize" and outcome == "answer":
                sid = response.headers["mcp-session-id"]
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                with contextlib.suppress(httpx.HTTPError):
                    await client.post(
                        url,
                        content=json.dumps(note),
                        headers={
                            **ACCEPT,
                            "mcp-session-id": sid,
                            "mcp-protocol-version": "2025-11-25",
                        },
                    )
            elif response.status_code == 404:
                sid = None  # the session went with Redis's data
            if outcome != "answer":
                await asyncio.sleep(0.2)


def everything_server(port: int, redis_url: str, log: Any) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            sys.executable,
            "examples/everything_server.py",
            "--port",
            str(port),
            "--redis",
            redis_url,
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    wait_port(port, process)
    return process


def blocked_clients(url: str) -> int:
    import redis

    db = redis.Redis.from_url(url)
    try:
        return int(db.info("clients")["blocked_clients"])
    finally:
        db.close()


@pytest.mark.deep
@pytest.mark.skipif(not DEEP, reason="deep run only (MCPBIND_DEEP=1, make test-deep)")
def test_deep_two_servers_on_one_redis_frozen_full_stopped_restarted_lose_no_answer(
    tmp_path: Path,
) -> None:
    """16 clients of two everything_server processes sharing one Redis, which is frozen
    (SIGSTOP), full (maxmemory with noeviction), stopped, and started again on its port: every
    request gets its answer or a JSON-RPC error, and once Redis has been back for two seconds,
    its answer. Then 1,000 made-up event ids: each refused at once, no stream held open."""
    import redis

    redis_port = free_port()
    ports = [free_port(), free_port()]
    urls = [f"http://127.0.0.1:{port}/mcp" for port in ports]
    tally = Tally()
    stop = asyncio.Event()
    servers: list[subprocess.Popen[bytes]] = []
    log = (tmp_path / "servers.log").open("wb")

    async def load(seconds: float) -> None:
        await asyncio.sleep(seconds)

    async def go() -> None:
        with own_redis(redis_port) as (url, process):
            servers.extend(everything_server(port, url, log) for port in ports)
            clients = [
                asyncio.ensure_future(loaded_client(urls, tally, stop, n)) for n in range(16)
            ]
            await load(3)
            process.send_signal(signal.SIGSTOP)  # frozen
            await load(3)
            process.send_signal(signal.SIGCONT)
            await load(2)
            fill(url)  # full
            await load(3)
            db = redis.Redis.from_url(url)
            db.config_set("maxmemory", 0)
            db.close()
            await load(2)
            process.terminate()  # stopped
            process.wait()
            await load(3)
        with own_redis(redis_port) as (url, process):  # started again on its port, empty
            await load(2)
            tally.watching_health = True
            await load(5)
            tally.watching_health = False
            stop.set()
            await asyncio.gather(*clients)
            await forged_ids(urls, url)

    try:
        run(go(), 240)
    finally:
        for server_process in servers:
            stopped(server_process)
        log.close()
    said = (tmp_path / "servers.log").read_text(errors="replace")
    assert tally.counts.get("answer", 0) > 200, tally.counts
    assert not tally.lost, (tally.counts, tally.lost[:5])
    assert not tally.healthy, (tally.counts, tally.healthy[:5])
    assert "Traceback" not in said, said[-3000:]
    assert said.count("\n") < 400, said[-3000:]  # the outage is a few lines, not one a request


async def forged_ids(urls: list[str], redis_url: str) -> None:
    """1,000 made-up Last-Event-IDs on a session of the two servers: each 400 (never issued) or
    410 (a stream the session has no log of), at once; no reader left waiting in Redis; and
    another client opens a session afterwards."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": INFO},
    }
    async with httpx.AsyncClient(timeout=30) as client:
        opened = await client.post(urls[0], content=json.dumps(init), headers=ACCEPT)
        sid = opened.headers["mcp-session-id"]
        session = {**ACCEPT, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await client.post(urls[0], content=json.dumps(note), headers=session)
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {
                "name": "test_tool_with_progress",
                "arguments": {},
                "_meta": {"progressToken": "p"},
            },
        }
        streamed = await client.post(urls[1], content=json.dumps(call), headers=session)
        ids = [line[4:] for line in streamed.text.splitlines() if line.startswith("id: ")]
        key, _, position = ids[1].partition(":")
        ms = int(position.split("-")[0])
        forms = [
            lambda n: f"{secrets.token_hex(8)}:0-0",
            lambda n: "get:0-0",
            lambda n: f"get:{ms}-{n + 1}",
            lambda n: f"{key}:0-{n % 5 + 1}",
            lambda n: f"{key}:{ms}-{n + 100}",
            lambda n: f"{key}:{ms + n + 1}-2",
            lambda n: f"{secrets.token_hex(8)}:{ms}-{n + 1}",
            lambda n: f"{key}:{'9' * (20 + n % 5)}-1",
        ]
        get = {**session, "accept": "text/event-stream"}

        async def forged(n: int) -> int:
            last = forms[n % len(forms)](n)
            async with asyncio.timeout(10):
                response = await client.get(urls[n % 2], headers={**get, "last-event-id": last})
            assert response.status_code in (400, 410), (last, response.status_code)
            assert response.json()["error"]["code"] == -32600
            return response.status_code

        statuses: list[int] = []
        for start in range(0, 1000, 50):
            statuses += await asyncio.gather(*(forged(n) for n in range(start, start + 50)))
        assert len(statuses) == 1000 and statuses.count(400) >= 500, statuses.count(400)
        assert blocked_clients(redis_url) == 0
        # The session's GET stream, held open: on its worker a second one is refused, whatever
        # the GET carries; the readers waiting in Redis stay that one.
        async with client.stream("GET", urls[0], headers=get) as held:
            assert held.status_code == 200
            again = [{}, {"last-event-id": "get:0-0"}, {"last-event-id": f"{key}:0-0"}] * 20
            refused = await asyncio.gather(
                *(client.get(urls[0], headers={**get, **extra}) for extra in again)
            )
            assert {r.status_code for r in refused} <= {400, 409}, {r.status_code for r in refused}
            assert blocked_clients(redis_url) <= 1
        # The real id still resumes, and one GET stream per session stays one.
        rest = await client.get(urls[0], headers={**get, "last-event-id": ids[1]})
        assert rest.status_code == 200 and '"result"' in rest.text
        other = await client.post(urls[1], content=json.dumps(init), headers=ACCEPT)
        assert other.status_code == 200 and "mcp-session-id" in other.headers
