"""The Streamable HTTP server on a real Redis that fails: stopped, frozen (SIGSTOP), restarted on
its port, full (maxmemory with noeviction), or refusing the server's password. Whatever Redis
does, every request gets its answer or a JSON-RPC error naming the store, never an empty event
stream, a text/plain 500 or a hang; and once Redis is back, requests are answered again."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from typing import Any

import httpx
import pytest

from mcpbind.transports.http_server import Call, StreamableHTTPServer
from mcpbind.transports.store import RedisStore
from tests._net import free_port
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


def test_a_wrong_redis_password_is_a_503_naming_the_store_and_stateless_requests_go_on() -> None:
    import redis

    async def go() -> None:
        with own_redis() as (url, _):
            redis.Redis.from_url(url).config_set("requirepass", "right")
            wrong = url.replace("redis://", "redis://:wrong@")
            await refused_everywhere_but_stateless(wrong, url)

    run(go())


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
