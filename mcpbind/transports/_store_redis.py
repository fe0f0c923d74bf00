"""The Redis store (``RedisStore``): every worker sharing one Redis serves any session and resumes
any stream (``mcpbind.transports.store`` says what a store holds; docs/http.md, "Sessions in
Redis")."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .._repeats import Repeats
from ._store_common import (
    EVENT_MAX_AGE,
    MAX_EVENTS,
    Entry,
    NotIssued,
    OnAddressed,
    OnMessage,
    Store,
    StoreError,
)

if TYPE_CHECKING:  # the redis client is imported only by RedisStore
    import redis.asyncio

__all__ = ["HEALTH_CHECK_INTERVAL", "HOLD_OFF", "REDIS_TIMEOUT", "RedisStore"]

_log = logging.getLogger("mcpbind.transports.store")  # the stores' log, as before their split

# Seconds one Redis command may take, connecting included, before the store counts Redis as
# failed (a read that waits for the next event may take its wait plus this).
REDIS_TIMEOUT = 2.0
# Seconds a pooled Redis connection may sit unused before its next use checks it with a PING.
HEALTH_CHECK_INTERVAL = 30
# Seconds the store fails at once, without asking Redis, after a command timed out (Redis frozen
# or overloaded): the requests meanwhile are answered at once, not each after ``timeout``.
HOLD_OFF = 1.0
# Seconds a listener waits for a message before it looks again (a finite wait: redis 5 reads a
# wait without one under the command timeout, and fails it).
_LISTEN_WAIT = 1.0


# Positions are Redis stream entry ids "<ms>-<n>": <ms> the time of the append (for trimming by
# age with MINID), <n> counting the log's entries from 1 without a gap, so that whether entries
# after a position were trimmed is one comparison with the first kept entry.
_LUA_HELPERS = """
local function split(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end
local function last_id(key)
  if redis.call('EXISTS', key) == 0 then return nil end
  local info = redis.call('XINFO', 'STREAM', key)
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then return info[i + 1] end
  end
  return nil
end
"""

# KEYS: log, the session's set of logs. ARGV: now (ms), max_events, max_age (ms), idle (ms),
# then one (kind, data) pair per message: kind "d" with the message, "e" for the end.
_APPEND = _LUA_HELPERS + """
local ms, n = 0, 0
local last = last_id(KEYS[1])
if last then ms, n = split(last) end
local now = tonumber(ARGV[1])
if now > ms then ms = now end
local ids = {}
for i = 5, #ARGV, 2 do
  n = n + 1
  local id = ms .. '-' .. n
  redis.call('XADD', KEYS[1], id, ARGV[i], ARGV[i + 1])
  ids[#ids + 1] = id
end
redis.call('XTRIM', KEYS[1], 'MAXLEN', tonumber(ARGV[2]))
redis.call('XTRIM', KEYS[1], 'MINID', now - tonumber(ARGV[3]))
if ARGV[#ARGV - 1] == 'e' then
  -- the stream ended: kept while it may be read, and no longer the session's to keep alive
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  redis.call('SREM', KEYS[2], KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('SADD', KEYS[2], KEYS[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
end
return ids
"""

# KEYS: log. ARGV: after ('' for the start), count, now (ms), max_age (ms). Returns {1, entries};
# {0} when entries after `after` are no longer kept (or the log is gone); {-1} when `after` is no
# position this log ever had: not of the form, 0, past its last, or not the id of the entry whose
# number it bears (an entry kept has exactly that id; the one just before the first kept, if it
# was trimmed, had the last id or one not after the first kept's time).
_READ = _LUA_HELPERS + """
redis.call('XTRIM', KEYS[1], 'MINID', tonumber(ARGV[3]) - tonumber(ARGV[4]))
local after = ARGV[1]
local after_ms, after_n = 0, 0
if after ~= '' then
  local ms_text, n_text = string.match(after, '^(%d+)%-(%d+)$')
  if not ms_text or #ms_text > 15 or #n_text > 15 then return {-1} end
  after_ms, after_n = tonumber(ms_text), tonumber(n_text)
  if after_n == 0 then return {-1} end
end
local last = last_id(KEYS[1])
if not last then
  if after_n == 0 then return {1, {}} end
  return {0}
end
local _, last_n = split(last)
if after_n > last_n then return {-1} end
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
local first_ms, first_n = nil, last_n + 1
if #first > 0 then first_ms, first_n = split(first[1][1]) end
if after_n < first_n - 1 then return {0} end
if after_n >= first_n then
  local found = redis.call('XRANGE', KEYS[1], after, after)
  if #found == 0 or found[1][1] ~= after then return {-1} end
elseif after_n > 0 then
  if after_n == last_n then
    if after ~= last then return {-1} end
  elseif after_ms > first_ms then
    return {-1}
  end
end
local from = '-'
if after_n > 0 then from = '(' .. after end
return {1, redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', tonumber(ARGV[2]))}
"""

# KEYS: log.
_LAST = _LUA_HELPERS + "return last_id(KEYS[1])\n"

# KEYS: record, the table of sessions. ARGV: sid, record, now (ms), idle (ms), max_sessions.
_OPEN = """
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
redis.call('ZADD', KEYS[2], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[1])
return 1
"""

# KEYS: record, the table of sessions, the session's set of logs. ARGV: sid, now (ms), idle (ms),
# and a new record ('' to keep it). Returns the record, or false when the session is gone.
_TOUCH = """
local record = redis.call('GET', KEYS[1])
if not record then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
if ARGV[4] ~= '' then record = ARGV[4] end
redis.call('SET', KEYS[1], record, 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[3]), ARGV[1])
if redis.call('EXISTS', KEYS[3]) == 1 then
  for _, log in ipairs(redis.call('SMEMBERS', KEYS[3])) do
    if redis.call('PEXPIRE', log, ARGV[3]) == 0 then redis.call('SREM', KEYS[3], log) end
  end
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
end
return record
"""

# KEYS: record, the table of sessions, the session's set of logs. ARGV: sid.
_END = """
local found = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
for _, log in ipairs(redis.call('SMEMBERS', KEYS[3])) do redis.call('DEL', log) end
redis.call('DEL', KEYS[3])
return found
"""


class RedisStore(Store):
    """A store in Redis (``url``: ``redis://host:port/db``, ``rediss://`` or ``unix://``), shared
    by every worker that uses the same ``url`` and ``prefix``, on the official ``redis`` client's
    asyncio API. Each key is named ``<prefix>...``.

    Keys: ``<prefix>s:<sid>`` (a session's record, with the session's idle time as its TTL),
    ``<prefix>sessions`` (a sorted set of session ids by deadline: the count ``max_sessions``
    bounds), ``<prefix>e:<sid>:<stream>`` (a stream's log, a Redis stream trimmed to
    ``max_events`` entries and ``event_max_age`` seconds), ``<prefix>l:<sid>`` (the set of a
    session's open streams' logs, kept alive with it; an ended stream's log leaves the set and
    expires ``event_max_age`` after its end however long the session lives); channel ``<prefix>m`` carries the messages between workers, and
    ``<prefix>c:<channel>`` the messages ``send`` addresses to one ``channel``. Each change is
    one Lua script, so workers never see half of one. One Redis server (or a primary with
    replicas); the scripts touch several keys, so not Redis Cluster.

    A read that waits (``block``) holds one connection for that long, of a pool of its own: a
    worker needs about one connection per event stream it serves (``max_connections``, 2048 in
    each of the two pools; Redis's own ``maxclients`` is 10,000 by default).

    Failures: a command that takes longer than ``timeout`` seconds (2), connecting included,
    fails (a read that waits may take its wait plus ``timeout``). A command that fails on a
    connection error is sent once more on a new connection (not after a timeout: it may have run,
    and an append would be logged twice), and a connection unused for ``HEALTH_CHECK_INTERVAL``
    seconds is checked with a PING before its next command: the connections a Redis restart
    killed each fail once, then serve again.
    """

    shared = True

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "mcpbind:",
        max_events: int = MAX_EVENTS,
        event_max_age: float = EVENT_MAX_AGE,
        max_connections: int = 2048,
        timeout: float = REDIS_TIMEOUT,
    ) -> None:
        try:
            import redis.asyncio as aioredis
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff
            from redis.exceptions import ConnectionError as RedisConnectionError
        except ImportError as error:  # pragma: no cover - the http extra installs it
            raise ImportError(
                'RedisStore needs the redis client: pip install "mcpbind[http]"'
            ) from error
        if max_events <= 0 or event_max_age <= 0:
            raise ValueError("max_events and event_max_age must be positive")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, not {timeout!r}")
        self.url = url
        self.name = _without_credentials(url)  # what errors and logs name it by
        self.prefix = prefix
        self.max_events = max_events
        self.event_max_age = event_max_age
        self.timeout = timeout
        self._guard = _Guard(self.name, timeout)
        options: dict[str, Any] = {
            "max_connections": max_connections,
            "socket_connect_timeout": timeout,
            "retry": Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,)),
            "health_check_interval": HEALTH_CHECK_INTERVAL,
        }
        self.redis: redis.asyncio.Redis = aioredis.Redis.from_url(
            url, socket_timeout=timeout, **options
        )
        # The reads that wait for the next event: their own connections, each read bounded by
        # its wait plus ``timeout`` (read), not by the commands' socket timeout.
        self._waits: redis.asyncio.Redis = aioredis.Redis.from_url(
            url, socket_timeout=None, **options
        )
        self._append = self.redis.register_script(_APPEND)
        self._read = self.redis.register_script(_READ)
        self._last = self.redis.register_script(_LAST)
        self._open = self.redis.register_script(_OPEN)
        self._touch = self.redis.register_script(_TOUCH)
        self._end = self.redis.register_script(_END)
        self._listener: asyncio.Task[None] | None = None
        self._channels: dict[str, asyncio.Task[None]] = {}  # channel -> its listener (listen)

    def __repr__(self) -> str:
        return f"RedisStore({self.name!r}, prefix={self.prefix!r})"

    def _keys(self, sid: str) -> list[str]:
        return [f"{self.prefix}s:{sid}", f"{self.prefix}sessions", f"{self.prefix}l:{sid}"]

    # -- lifetime

    async def start(self, on_message: OnMessage) -> None:
        if self._listener is not None:
            return
        pubsub = await self._subscribed(f"{self.prefix}m")
        deliver = functools.partial(self._deliver, on_message=on_message)
        self._listener = asyncio.ensure_future(self._listen(pubsub, f"{self.prefix}m", deliver))

    async def _subscribed(self, channel: str) -> Any:
        """A new pub/sub connection subscribed to ``channel`` (``StoreError`` when Redis fails)."""
        pubsub: Any = self.redis.pubsub()
        try:
            with self._guard:
                await pubsub.subscribe(channel)
        except BaseException:
            with contextlib.suppress(Exception):
                await pubsub.aclose()
            raise
        return pubsub

    async def _listen(self, pubsub: Any, channel: str, deliver: Any) -> None:
        """Deliver the channel's messages; when the connection to Redis drops, subscribe again
        (a second later, and then every second until Redis answers). An outage is one warning
        when it starts and one when it ends (each failed try in between is a debug line): a
        Redis down for an hour does not write 3,600 tracebacks."""
        failing = False
        while True:
            try:
                await deliver(pubsub)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                raise
            except Exception as exc:  # noqa: BLE001 - Redis gone, or its answer unreadable
                if failing:
                    _log.debug("listening to %s: Redis still fails (%r)", channel, exc)
                else:
                    failing = True
                    _log.warning(
                        "listening to %s failed (%r): subscribing again every second until "
                        "Redis answers",
                        channel,
                        exc,
                        exc_info=_log.isEnabledFor(logging.DEBUG),
                    )
                with contextlib.suppress(Exception):
                    await pubsub.aclose()
                await asyncio.sleep(1.0)
                try:
                    pubsub = self.redis.pubsub()
                    await pubsub.subscribe(channel)
                except Exception as exc:  # noqa: BLE001 - still down: the next turn tries again
                    _log.debug("listening to %s: subscribing failed (%r)", channel, exc)
                else:
                    if failing:
                        failing = False
                        _log.warning("listening to %s again", channel)

    async def _deliver(self, pubsub: Any, on_message: OnMessage) -> None:
        note = Repeats(_log.warning)  # what others publish on the channel, logged at a bounded rate
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=_LISTEN_WAIT)
            if message is None:
                continue
            try:
                sid, data = msgspec.msgpack.decode(message["data"], type=tuple[str, bytes])
            except msgspec.DecodeError:
                note("foreign", f"a message on {self.prefix}m that no worker sent: ignored")
                continue
            try:
                on_message(sid, data)
            except Exception:  # one bad message must not stop the others
                _log.exception("handling a message from another worker")

    async def close(self) -> None:
        listeners = list(self._channels.values())
        self._channels.clear()
        if self._listener is not None:
            listeners.append(self._listener)
            self._listener = None
        for listener in listeners:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener
        await self.redis.aclose()
        await self._waits.aclose()

    # -- session records

    @staticmethod
    def _ms(seconds: float) -> int:
        return max(1, int(seconds * 1000))

    async def open_session(self, sid: str, record: bytes, idle: float, max_sessions: int) -> bool:
        keys = self._keys(sid)
        now = int(time.time() * 1000)
        with self._guard:
            done = await self._open(
                keys=keys[:2], args=[sid, record, now, self._ms(idle), max_sessions]
            )
        return bool(done)

    async def load_session(self, sid: str, idle: float) -> bytes | None:
        now = int(time.time() * 1000)
        with self._guard:
            record = await self._touch(keys=self._keys(sid), args=[sid, now, self._ms(idle), ""])
        return bytes(record) if record else None

    async def save_session(self, sid: str, record: bytes, idle: float) -> bool:
        now = int(time.time() * 1000)
        with self._guard:
            done = await self._touch(keys=self._keys(sid), args=[sid, now, self._ms(idle), record])
        return bool(done)

    async def end_session(self, sid: str) -> bool:
        with self._guard:
            return bool(await self._end(keys=self._keys(sid), args=[sid]))

    # -- event logs

    def _log_key(self, sid: str, stream: str) -> str:
        return f"{self.prefix}e:{sid}:{stream}"

    async def append(
        self, sid: str, stream: str, messages: Sequence[bytes | None], idle: float
    ) -> list[str]:
        args: list[Any] = [
            int(time.time() * 1000),
            self.max_events,
            self._ms(self.event_max_age),
            self._ms(max(idle, self.event_max_age)),
        ]
        for message in messages:
            args += ["e", b""] if message is None else ["d", message]
        with self._guard:
            ids = await self._append(
                keys=[self._log_key(sid, stream), self._keys(sid)[2]], args=args
            )
        return [i.decode() if isinstance(i, bytes) else str(i) for i in ids]

    async def read(
        self, sid: str, stream: str, after: str | None, block: float = 0.0, count: int = 100
    ) -> list[Entry] | None:
        key = self._log_key(sid, stream)
        now = int(time.time() * 1000)
        with self._guard:
            found = await self._read(
                keys=[key], args=[after or "", count, now, self._ms(self.event_max_age)]
            )
        if not found or found[0] == 0:
            return None
        if found[0] == -1:
            raise NotIssued(after)
        entries = _entries(found[1])
        if entries or block <= 0:
            return entries
        with self._guard:
            async with asyncio.timeout(block + self.timeout):
                answer: Any = await self._waits.xread(
                    {key: after or "0-0"}, count=count, block=self._ms(block)
                )
        if not answer:
            return []
        if isinstance(answer, dict):  # RESP3: by key
            return _entries(next(iter(answer.values()))[0])
        return _entries(answer[0][1])

    async def last(self, sid: str, stream: str) -> str | None:
        with self._guard:
            found = await self._last(keys=[self._log_key(sid, stream)], args=[])
        return found.decode() if isinstance(found, bytes) else found or None

    # -- messages between workers

    async def publish(self, sid: str, data: bytes) -> None:
        payload = msgspec.msgpack.encode((sid, data))
        with self._guard:
            await self.redis.publish(f"{self.prefix}m", payload)

    # -- addressed messages

    async def listen(self, channel: str, on_message: OnAddressed) -> None:
        if channel in self._channels:
            return
        name = f"{self.prefix}c:{channel}"
        pubsub = await self._subscribed(name)
        deliver = functools.partial(_addressed, on_message=on_message)
        self._channels[channel] = asyncio.ensure_future(self._listen(pubsub, name, deliver))

    async def unlisten(self, channel: str) -> None:
        listener = self._channels.pop(channel, None)
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener

    async def send(self, channel: str, data: bytes) -> int:
        with self._guard:
            return int(await self.redis.publish(f"{self.prefix}c:{channel}", data))

    async def listeners(self, channel: str) -> int:
        name = f"{self.prefix}c:{channel}"
        with self._guard:
            found: Any = await self.redis.pubsub_numsub(name)
        return int(dict((_text(k), v) for k, v in found).get(name, 0))


async def _addressed(pubsub: Any, on_message: OnAddressed) -> None:
    """Deliver what is sent to one channel (``RedisStore.listen``)."""
    while True:
        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=_LISTEN_WAIT)
        if message is None:
            continue
        try:
            on_message(bytes(message["data"]))
        except Exception:  # one bad message must not stop the others
            _log.exception("handling a message sent to this process")


class _Guard:
    """Redis's failures (its errors, a connection's, a wait past its bound) as ``StoreError``
    naming the store: ``with guard:`` around each command. After a command timed out, every
    command fails at once for ``HOLD_OFF`` seconds, with the same reason."""

    __slots__ = ("name", "timeout", "until", "why", "failures", "timeouts")

    def __init__(self, name: str, timeout: float) -> None:
        from redis.exceptions import RedisError
        from redis.exceptions import TimeoutError as RedisTimeout

        self.name = name
        self.timeout = timeout
        self.until = 0.0  # time.monotonic() until which Redis is not asked
        self.why = ""
        self.failures = (RedisError, OSError)  # (imported once: not while Python shuts down)
        self.timeouts = (RedisTimeout, TimeoutError)

    def __enter__(self) -> None:
        if self.until and time.monotonic() < self.until:
            raise StoreError(self.name, self.why)

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> None:
        if error is None or isinstance(error, StoreError) or not isinstance(error, self.failures):
            return
        reason = (str(error) or f"no answer within {self.timeout:g} s")[:300]
        if isinstance(error, self.timeouts):
            self.until = time.monotonic() + HOLD_OFF
            self.why = f"{reason} (not asked again for {HOLD_OFF:g} s)"
        raise StoreError(self.name, reason) from error


def _without_credentials(url: str) -> str:
    """A Redis URL as errors and logs may show it: no user, password or query."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(
        (parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", "")
    )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _entries(raw: Any) -> list[Entry]:
    """Entries of XRANGE/XREAD (``[id, fields]`` each; fields a flat list from a script, a dict
    from the client) as (position, message or None)."""
    out: list[Entry] = []
    for rid, fields in raw:
        if isinstance(fields, list):
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        position = rid.decode() if isinstance(rid, bytes) else str(rid)
        data = fields.get(b"d", fields.get("d"))
        out.append((position, None if data is None else bytes(data)))
    return out
