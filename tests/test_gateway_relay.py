"""bridge/gateway/relay.py between two processes' ends sharing one store (the project's MemoryStore with
``shared=True``, as servers of one process share it): request states naming their holder, the
answer carried back, and the bounds (``max_relayed``, ``relay_timeout``, the holder gone); and a
real Redis (a redis-server of the test's own) stopped or frozen while a retry waits: an error
well before ``relay_timeout``."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from mcpbind.bridge.crossing import Crossing
from mcpbind.bridge.gateway.relay import Relay, RelayedCall
from mcpbind.bridge.limits import STATE_PREFIX
from mcpbind.errors import ProtocolError
from mcpbind.transports.store import MemoryStore, RedisStore
from tests.conftest import own_redis


def run(test: Any) -> Any:
    """The async ``test`` as a test function (run in a new event loop, 30 s at most)."""

    @functools.wraps(test)
    def sync() -> None:
        asyncio.run(asyncio.wait_for(test(), 30))

    return sync


class Retry:
    """What the forwarding side knows of the client's retry."""

    method = "tools/call"
    revision = "2026-07-28"

    def __init__(self) -> None:
        self.params = {"name": "t", "requestState": "s"}


def pair(resume: Any, **options: Any) -> tuple[Relay, Relay]:
    store = MemoryStore(shared=True)
    logged: list[str] = []
    holder = Relay(store, resume, log=logged.append)
    other = Relay(store, resume, log=logged.append, **options)
    return holder, other


def test_a_state_names_its_holder_and_keeps_its_random_part() -> None:
    relay, _ = pair(None)
    token = Crossing.new_state()
    state = relay.state(token)
    assert state.startswith(STATE_PREFIX) and state.endswith(token[len(STATE_PREFIX) :])
    assert relay.holder(state) == relay.worker
    assert relay.holder(token) is None  # a state of a gateway without a shared store
    assert relay.holder(STATE_PREFIX + "zz" * 8 + ".x") is None


@run
async def test_the_holder_answers_the_retry_it_was_sent() -> None:
    seen: list[tuple[str, str, Any]] = []

    async def resume(call: RelayedCall, state: str, identity: str) -> Any:
        seen.append((state, identity, call.params))
        return {"content": [], "resultType": "complete"}

    holder, other = pair(resume)
    await holder.start()
    await other.start()
    state = holder.state(Crossing.new_state())
    answer = await other.forward(holder.worker, state, "who", Retry())
    assert answer == {"content": [], "resultType": "complete"}
    assert seen == [(state, "who", {"name": "t", "requestState": "s"})]


@run
async def test_the_holders_error_comes_back_as_it_was() -> None:
    async def resume(call: RelayedCall, state: str, identity: str) -> Any:
        raise ProtocolError(-32602, "Invalid params: no such round", {"why": "expired"})

    holder, other = pair(resume)
    await holder.start()
    await other.start()
    with pytest.raises(ProtocolError) as caught:
        await other.forward(holder.worker, holder.state(Crossing.new_state()), "who", Retry())
    assert (caught.value.code, caught.value.message) == (-32602, "Invalid params: no such round")
    assert caught.value.data == {"why": "expired"}


@run
async def test_past_relay_timeout_the_retry_fails_naming_it() -> None:
    cancelled = asyncio.Event()

    async def resume(call: RelayedCall, state: str, identity: str) -> Any:
        try:
            await asyncio.Event().wait()  # the server never answers
        except asyncio.CancelledError:
            cancelled.set()
            raise

    holder, other = pair(resume, timeout=0.2)
    await holder.start()
    await other.start()
    with pytest.raises(ProtocolError) as caught:
        await other.forward(holder.worker, holder.state(Crossing.new_state()), "who", Retry())
    assert caught.value.code == -32000
    assert "within relay_timeout (0.2 s)" in caught.value.message
    assert caught.value.data["reason"] == "timeout"
    assert not other._waiting
    await asyncio.wait_for(cancelled.wait(), 5)  # nobody waits for it: ended on the holder


@run
async def test_a_holder_that_does_not_listen_fails_the_retry_at_once() -> None:
    holder, other = pair(None)
    await other.start()  # the holder never started (or its process is gone)
    with pytest.raises(ProtocolError) as caught:
        await other.forward(holder.worker, holder.state(Crossing.new_state()), "who", Retry())
    assert caught.value.code == -32000 and caught.value.data["reason"] == "holder gone"
    assert "(before the retry)" in caught.value.message


@run
async def test_past_max_relayed_a_retry_is_refused() -> None:
    release = asyncio.Event()

    async def resume(call: RelayedCall, state: str, identity: str) -> Any:
        await release.wait()
        return {"content": []}

    holder, other = pair(resume, max_relayed=1)
    await holder.start()
    await other.start()
    state = holder.state(Crossing.new_state())
    first = asyncio.ensure_future(other.forward(holder.worker, state, "who", Retry()))
    await asyncio.sleep(0.01)
    with pytest.raises(ProtocolError) as caught:
        await other.forward(holder.worker, state, "who", Retry())
    assert "(the gateway's max_relayed)" in caught.value.message
    assert caught.value.data == {"max_relayed": 1}
    release.set()
    assert await first == {"content": []}


@run
async def test_a_retry_cancelled_here_is_cancelled_on_the_holder() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def resume(call: RelayedCall, state: str, identity: str) -> Any:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    holder, other = pair(resume)
    await holder.start()
    await other.start()
    waiting = asyncio.ensure_future(
        other.forward(holder.worker, holder.state(Crossing.new_state()), "who", Retry())
    )
    await asyncio.wait_for(started.wait(), 5)
    waiting.cancel()
    await asyncio.wait_for(cancelled.wait(), 5)


# -- a real Redis failing while a retry waits for its holder ----------------------------------------


async def _redis_fails_mid_round(fail: Callable[[subprocess.Popen[bytes]], None]) -> Any:
    """A retry forwarded through a real Redis to a holder that works on it; ``fail`` done to
    Redis once the holder took it. What the forwarding side then gets, and how soon."""
    taken = asyncio.Event()

    async def resume(call: RelayedCall, state: str, identity: str) -> Any:
        taken.set()
        await asyncio.Event().wait()  # the server answers late: the round is mid-way

    with own_redis() as (url, process):
        stores = [RedisStore(url), RedisStore(url)]
        logged: list[str] = []
        holder = Relay(stores[0], resume, log=logged.append)
        other = Relay(stores[1], resume, timeout=60, silence=2, log=logged.append)
        await holder.start()
        await other.start()
        state = holder.state(Crossing.new_state())
        waiting = asyncio.ensure_future(other.forward(holder.worker, state, "who", Retry()))
        await asyncio.wait_for(taken.wait(), 10)
        await asyncio.sleep(1.5)  # acknowledged, and said it still works on it
        assert not waiting.done()
        fail(process)
        started = time.monotonic()
        try:
            with pytest.raises(ProtocolError) as caught:
                await asyncio.wait_for(waiting, 20)  # relay_timeout is 60 s
            return caught.value, time.monotonic() - started
        finally:
            process.send_signal(signal.SIGCONT)  # (a frozen one) gone before the clients close
            process.kill()
            process.wait()
            for closing in (holder.close(), other.close(), *(s.close() for s in stores)):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closing, 5)


@run
async def test_redis_stopped_mid_round_fails_the_waiting_retry_soon() -> None:
    def stop(process: subprocess.Popen[bytes]) -> None:
        process.terminate()
        process.wait()

    error, waited = await _redis_fails_mid_round(stop)
    assert error.code == -32603 and error.data == {"reason": "store failed"}, error
    assert "the shared store (--redis) failed" in error.message
    assert "without requestState" in error.message
    assert waited < 20  # (relay_timeout is 60 s; a generous bound, not a timing check)


@run
async def test_redis_frozen_mid_round_fails_the_waiting_retry_instead_of_a_hang() -> None:
    error, _ = await _redis_fails_mid_round(lambda process: process.send_signal(signal.SIGSTOP))
    assert error.data["reason"] in ("store failed", "holder silent"), error
    if error.data["reason"] == "store failed":  # the check of the holder was not answered
        assert error.code == -32603 and "no answer within 2 s" in error.message
    else:  # nothing came from the holder meanwhile
        assert error.code == -32000 and "holder_silence (2 s)" in error.message
