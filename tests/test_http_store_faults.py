"""The Streamable HTTP server on a real Redis that fails: stopped, frozen (SIGSTOP), restarted on
its port, full (maxmemory with noeviction), or refusing the server's password. Whatever Redis
does, every request gets its answer or a JSON-RPC error naming the store, never an empty event
stream, a text/plain 500 or a hang; and once Redis is back, requests are answered again."""

from __future__ import annotations

import asyncio
from typing import Any

from mcpbind.transports.store import RedisStore
from tests._net import free_port
from tests.conftest import own_redis
from tests.test_http_store import Peer, count_call, data, run, server


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
