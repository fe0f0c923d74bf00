"""The tasks of ``mcpbind.tasks.Tasks`` seen by every worker that shares one Redis.

A server whose store is a ``RedisStore`` (``--redis``) hands it to its tasks layer
(``Tasks.share``), which then keeps each task's state in Redis as well as in the process that
runs it: any worker answers ``tasks/get`` from there, and ``tasks/update`` and ``tasks/cancel``
reach the worker running the task as messages on a channel of their own. The same client and
key prefix as the store's (``RedisStore.redis``, ``.prefix``): key ``<prefix>t:<task id>`` (the
task's record, expiring with the task), channel ``<prefix>t`` (the messages between workers).
docs/tasks.md ("Several workers") says what is shared and what is not.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import msgspec

__all__ = ["RedisTasks", "Unreachable"]

_log = logging.getLogger(__name__)

# Write a task's record unless the one kept is already over (a status in ARGV[3], "|a|b|"):
# the first worker to settle a task settles it for all.
_SAVE = """
local old = redis.call('GET', KEYS[1])
if old then
  local status = cjson.decode(old)['task']['status']
  if string.find(ARGV[3], '|' .. status .. '|', 1, true) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

OnMessage = Callable[[str, str, Any], None]


class Unreachable(Exception):
    """Redis did not answer (what the client raised is the cause)."""


class RedisTasks:
    """Task records and the messages about them in the Redis of ``redis`` (a ``redis.asyncio``
    client), under ``prefix``; ``over``: the statuses after which a record is never written
    again; ``on_message(op, task_id, data)`` gets what any worker ``publish``es."""

    def __init__(self, redis: Any, prefix: str, over: Iterable[str], on_message: OnMessage) -> None:
        self.redis = redis
        self.prefix = prefix
        self.channel = f"{prefix}t"
        self._over = "|" + "|".join(over) + "|"
        self._save = redis.register_script(_SAVE)
        self._on_message = on_message
        self._listener: asyncio.Task[None] | None = None
        self._started: asyncio.Future[None] | None = None

    def _key(self, task_id: str) -> str:
        return f"{self.prefix}t:{task_id}"

    async def start(self) -> None:
        """Listen to the channel (once; later calls wait until the first is subscribed)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            pubsub = self.redis.pubsub()
            try:
                async with self._guard():
                    await pubsub.subscribe(self.channel)
            except BaseException as error:
                self._started.set_exception(error)
                self._started.exception()  # (retrieved: a later start tries again)
                self._started = None
                raise
            self._listener = asyncio.ensure_future(self._listen(pubsub))
            self._started.set_result(None)
        await asyncio.shield(self._started)

    async def _listen(self, pubsub: Any) -> None:
        try:
            while True:
                # A finite wait: redis 5 fails a wait without one at the store's command timeout.
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                if message is None:
                    continue
                try:
                    op, task_id, data = msgspec.json.decode(message["data"])
                    self._on_message(op, task_id, data)
                except Exception:  # one bad message must not stop the others
                    _log.exception("a message about a task on %s", self.channel)
        finally:
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def save(self, task_id: str, record: dict[str, Any], ttl_ms: int) -> bool:
        """Keep ``record`` for ``ttl_ms``; False when the kept one is already over."""
        data = msgspec.json.encode(record)
        async with self._guard():
            done = await self._save(
                keys=[self._key(task_id)], args=[data, max(1, ttl_ms), self._over]
            )
        return bool(done)

    async def load(self, task_id: str) -> dict[str, Any] | None:
        async with self._guard():
            data = await self.redis.get(self._key(task_id))
        if data is None:
            return None
        record = msgspec.json.decode(data)
        return record if isinstance(record, dict) else None

    async def publish(self, op: str, task_id: str, data: Any = None) -> None:
        async with self._guard():
            await self.redis.publish(self.channel, msgspec.json.encode([op, task_id, data]))

    @contextlib.asynccontextmanager
    async def _guard(self) -> AsyncIterator[None]:
        """Redis's failures (connection, timeout, its own errors) as ``Unreachable``."""
        from redis.exceptions import RedisError

        try:
            yield
        except (RedisError, OSError) as error:
            raise Unreachable(str(error) or type(error).__name__) from error

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._listener
            self._listener = None
        self._started = None
