"""Where the Streamable HTTP server keeps what outlives one connection: session records, the event
log of every stream, and the messages its workers send each other.

``StreamableHTTPServer(store=...)`` takes a ``Store``: ``MemoryStore()`` (the default) keeps
everything in the process; ``RedisStore(url)`` (or just the URL) keeps it in Redis, so that any
worker process sharing that Redis serves any session and resumes any stream (docs/http.md,
"Sessions in Redis").

What a store holds:

- **Session records**: opaque bytes the server writes when a session opens (what rebuilds its
  ``ServerSession`` on another worker), each expiring after the idle time the server gives, at
  most ``max_sessions`` at once. ``end_session`` drops a record and the session's event logs.
- **Event logs**: per stream of a session, the messages sent on it, in order, each at a
  *position* (a string; the server's event ids are ``<stream>:<position>``). A log keeps at most
  ``max_events`` entries and none older than ``event_max_age`` seconds. ``read`` returns what
  follows a position, or None when entries after it are no longer kept (so that nothing is
  silently skipped); ``None`` in a log marks the end of its stream.
- **Messages between workers**: ``publish(sid, data)`` reaches the ``on_message`` callback every
  worker gave to ``start``, the publisher's own included (what a client sent to one worker for a
  request another worker is waiting on, or the end of a session).

``shared`` says whether the records are seen by other processes: a server whose store is not
shared keeps its sessions in its own table (and never awaits the store for them), as the memory
store's single process needs.

A store that cannot do what it is asked (Redis stopped, frozen, full, refusing the credentials)
raises ``StoreError``, which names the store and says what failed; the server answers a request
that needed it with that reason (docs/http.md, "When the store fails").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import urllib.parse
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from .._repeats import Repeats

if TYPE_CHECKING:  # the redis client is imported only by RedisStore
    import redis.asyncio

__all__ = [
    "Entry",
    "FailureLog",
    "MemoryStore",
    "NotIssued",
    "RedisStore",
    "Store",
    "StoreError",
    "store_from",
]

_log = logging.getLogger(__name__)

# The defaults of the bounds (docs/limits.md).
MAX_EVENTS = 1000
EVENT_MAX_AGE = 300.0
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

#: One entry of an event log: its position and the message (None: the stream ended there).
Entry = tuple[str, bytes | None]

OnMessage = Callable[[str, bytes], None]
OnAddressed = Callable[[bytes], None]


class StoreError(Exception):
    """The store failed: ``store`` names it (a Redis URL without its credentials), ``reason``
    says what failed (Redis's own words, or the time it did not answer within)."""

    def __init__(self, store: str, reason: str) -> None:
        super().__init__(f"{store}: {reason}")
        self.store = store
        self.reason = reason


class NotIssued(LookupError):
    """A position that no entry of the log ever had (``Store.read``): not of the store's form,
    0, past the log's last, or another entry's; what a made-up ``Last-Event-ID`` names."""


class FailureLog:
    """Logs a store's failures to ``log`` at most once every ``interval`` seconds (a warning, with
    how many failed since the last one), the others at debug level: an outage under load is a
    few lines, not one per request."""

    def __init__(self, log: logging.Logger, interval: float = 10.0) -> None:
        self.log = log
        self.interval = interval
        self._last = -interval
        self._since = 0

    def __call__(self, what: str, error: BaseException) -> None:
        now = time.monotonic()
        if now - self._last < self.interval:
            self._since += 1
            self.log.debug("%s failed: %s", what, error)
            return
        since, self._since, self._last = self._since, 0, now
        self.log.warning(
            "%s failed: %s (%d more store failures in the last %g s, logged at debug level)",
            what,
            error,
            since,
            self.interval,
            exc_info=not isinstance(error, StoreError),  # (a bug of ours: its traceback)
        )


class Store(ABC):
    """The interface of a store (module docstring). Every method is safe to call from any task
    of the event loop the server runs on."""

    shared: bool = False
    max_events: int = MAX_EVENTS
    event_max_age: float = EVENT_MAX_AGE

    # -- lifetime -------------------------------------------------------------------------------

    @abstractmethod
    async def start(self, on_message: OnMessage) -> None:
        """Begin delivering what any worker ``publish``es to ``on_message(sid, data)``."""

    @abstractmethod
    async def close(self) -> None:
        """Stop delivering messages and release connections."""

    # -- session records ------------------------------------------------------------------------

    @abstractmethod
    async def open_session(self, sid: str, record: bytes, idle: float, max_sessions: int) -> bool:
        """Keep a new session's record for ``idle`` seconds from now; False (nothing kept) when
        ``max_sessions`` records that have not expired are kept already."""

    @abstractmethod
    async def load_session(self, sid: str, idle: float) -> bytes | None:
        """A session's record, its idle time restarted; None when it ended or expired."""

    @abstractmethod
    async def save_session(self, sid: str, record: bytes, idle: float) -> bool:
        """Replace a session's record (its idle time restarted); False when it is gone."""

    @abstractmethod
    async def end_session(self, sid: str) -> bool:
        """Drop a session's record and its event logs; False when there was none."""

    # -- event logs -----------------------------------------------------------------------------

    @abstractmethod
    async def append(
        self, sid: str, stream: str, messages: Sequence[bytes | None], idle: float
    ) -> list[str]:
        """Add ``messages`` (None: the end of the stream) to a stream's log; their positions.
        The log lives as long as its session (``idle`` seconds past its last append)."""

    @abstractmethod
    async def read(
        self, sid: str, stream: str, after: str | None, block: float = 0.0, count: int = 100
    ) -> list[Entry] | None:
        """Up to ``count`` entries that follow position ``after`` (None: the stream's start),
        waiting up to ``block`` seconds for one when there is none yet; None when entries after
        it are no longer kept (the log itself may be gone); ``NotIssued`` when ``after`` is no
        position this log ever had."""

    @abstractmethod
    async def last(self, sid: str, stream: str) -> str | None:
        """The position of the last entry of a stream's log (None when it has none): where a
        reader that wants only what comes next starts."""

    # -- messages between workers ---------------------------------------------------------------

    @abstractmethod
    async def publish(self, sid: str, data: bytes) -> None:
        """Send ``data`` about session ``sid`` to every worker's ``on_message``."""

    # -- addressed messages ---------------------------------------------------------------------

    @abstractmethod
    async def listen(self, channel: str, on_message: OnAddressed) -> None:
        """Begin delivering what is ``send``-t to ``channel`` to ``on_message(data)`` (until the
        store is closed, or ``unlisten``)."""

    @abstractmethod
    async def unlisten(self, channel: str) -> None:
        """Stop delivering ``channel``'s messages here."""

    @abstractmethod
    async def send(self, channel: str, data: bytes) -> int:
        """Send ``data`` to whoever listens on ``channel``; how many listeners got it."""

    @abstractmethod
    async def listeners(self, channel: str) -> int:
        """How many listen on ``channel`` now (0: the process that did is gone)."""


def store_from(store: Store | str | None) -> Store:
    """The store a server option names: a ``Store``, a ``redis://`` (``rediss://``, ``unix://``)
    URL, or None for a new ``MemoryStore``."""
    if store is None:
        return MemoryStore()
    if isinstance(store, str):
        return RedisStore(store)
    return store


# -- in memory --------------------------------------------------------------------------------------


@dataclass
class _Log:
    entries: deque[tuple[int, bytes | None, float]] = field(default_factory=deque)
    last: int = 0  # the position of the last entry appended (positions count from 1)
    waiters: list[asyncio.Future[None]] = field(default_factory=list)
    deadline: float = 0.0


class MemoryStore(Store):
    """A store in this process: one worker's (the default of ``StreamableHTTPServer``).

    With ``shared=True`` several servers in one process may share it as workers share Redis (each
    rebuilding the others' sessions from their records); otherwise a server keeps its sessions in
    its own table and uses this store for event logs only. ``clock`` (seconds, monotonic) is what
    expiry and age are measured with.
    """

    def __init__(
        self,
        *,
        max_events: int = MAX_EVENTS,
        event_max_age: float = EVENT_MAX_AGE,
        shared: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_events <= 0 or event_max_age <= 0:
            raise ValueError("max_events and event_max_age must be positive")
        self.max_events = max_events
        self.event_max_age = event_max_age
        self.shared = shared
        self.clock = clock
        self._sessions: dict[str, tuple[bytes, float]] = {}  # sid -> (record, deadline)
        self._logs: dict[tuple[str, str], _Log] = {}  # least recently appended first
        # Logs of streams that ended, by when they are dropped (event_max_age after their end).
        self._ended: dict[tuple[str, str], float] = {}
        self._subscribers: list[OnMessage] = []  # the on_message of every server sharing it
        self._channels: dict[str, OnAddressed] = {}  # channel -> its listener (listen)

    async def start(self, on_message: OnMessage) -> None:
        self._subscribers.append(on_message)

    async def close(self) -> None:
        self._subscribers.clear()
        self._channels.clear()

    # -- session records

    def _live(self, sid: str) -> tuple[bytes, float] | None:
        kept = self._sessions.get(sid)
        if kept is not None and kept[1] <= self.clock():
            self._drop(sid)
            return None
        return kept

    def _drop(self, sid: str) -> bool:
        found = self._sessions.pop(sid, None) is not None
        for key in [k for k in self._logs if k[0] == sid]:
            self._ended.pop(key, None)
            self._wake(self._logs.pop(key))
        return found

    async def open_session(self, sid: str, record: bytes, idle: float, max_sessions: int) -> bool:
        now = self.clock()
        for old in [s for s, (_, deadline) in self._sessions.items() if deadline <= now]:
            self._drop(old)
        if len(self._sessions) >= max_sessions:
            return False
        self._sessions[sid] = (record, now + idle)
        return True

    async def load_session(self, sid: str, idle: float) -> bytes | None:
        kept = self._live(sid)
        if kept is None:
            return None
        self._sessions[sid] = (kept[0], self.clock() + idle)
        return kept[0]

    async def save_session(self, sid: str, record: bytes, idle: float) -> bool:
        if self._live(sid) is None:
            return False
        self._sessions[sid] = (record, self.clock() + idle)
        return True

    async def end_session(self, sid: str) -> bool:
        return self._drop(sid)

    # -- event logs

    def _trim(self, log: _Log, now: float) -> None:
        entries = log.entries
        while entries and entries[0][2] <= now - self.event_max_age:
            entries.popleft()

    def _sweep(self, now: float) -> None:
        """Drop the logs of streams that ended ``event_max_age`` ago, and those not appended to
        for as long as their session may idle: both tables are in order of last append, so this
        stops at the first log still alive."""
        while self._ended:
            key, deadline = next(iter(self._ended.items()))
            if deadline > now:
                break
            del self._ended[key]
            log = self._logs.pop(key, None)
            if log is not None:
                self._wake(log)
        while self._logs:
            key, log = next(iter(self._logs.items()))
            if log.deadline > now:
                return
            del self._logs[key]
            self._wake(log)

    @staticmethod
    def _wake(log: _Log) -> None:
        waiters, log.waiters = log.waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def append(
        self, sid: str, stream: str, messages: Sequence[bytes | None], idle: float
    ) -> list[str]:
        return self.append_now(sid, stream, messages, idle)

    def append_now(
        self, sid: str, stream: str, messages: Sequence[bytes | None], idle: float
    ) -> list[str]:
        """``append``, done before it returns (the memory store never waits)."""
        now = self.clock()
        key = (sid, stream)
        log = self._logs.pop(key, None) or _Log()
        self._logs[key] = log  # to the end: appended last
        log.deadline = now + idle
        positions = []
        for message in messages:
            log.last += 1
            log.entries.append((log.last, message, now))
            positions.append(str(log.last))
        while len(log.entries) > self.max_events:
            log.entries.popleft()
        self._trim(log, now)
        if messages and messages[-1] is None:  # nothing more comes: kept while it may be read
            self._ended.pop(key, None)
            self._ended[key] = now + self.event_max_age
        self._sweep(now)
        self._wake(log)
        return positions

    async def read(
        self, sid: str, stream: str, after: str | None, block: float = 0.0, count: int = 100
    ) -> list[Entry] | None:
        found = self.read_now(sid, stream, after, count)
        if found is None or found or block <= 0:
            return found
        log = self._logs.get((sid, stream))
        if log is None:
            log = self._logs[(sid, stream)] = _Log(deadline=self.clock() + block)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        log.waiters.append(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(block):  # (not wait_for: on 3.11 it may drop a cancel)
                    await waiter
        finally:
            with contextlib.suppress(ValueError):
                log.waiters.remove(waiter)
        return self.read_now(sid, stream, after, count)

    def read_now(
        self, sid: str, stream: str, after: str | None, count: int = 100
    ) -> list[Entry] | None:
        """``read`` without waiting."""
        if after is None:
            cursor = 0
        elif after.isascii() and after.isdigit() and after[0] != "0" and len(after) <= 15:
            cursor = int(after)  # (positions count from 1, written without leading zeros)
        else:
            raise NotIssued(after)
        now = self.clock()
        self._sweep(now)
        log = self._logs.get((sid, stream))
        if log is None:
            return [] if cursor == 0 else None
        self._trim(log, now)
        if cursor > log.last:
            raise NotIssued(after)
        first = log.entries[0][0] if log.entries else log.last + 1
        if cursor < first - 1:
            return None  # entries after it were dropped
        start = cursor - first + 1
        return [
            (str(position), message)
            for position, message, _ in list(log.entries)[start : start + count]
        ]

    async def last(self, sid: str, stream: str) -> str | None:
        self._sweep(self.clock())
        log = self._logs.get((sid, stream))
        return str(log.last) if log is not None and log.last else None

    # -- messages between workers

    async def publish(self, sid: str, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        for subscriber in self._subscribers:
            loop.call_soon(subscriber, sid, data)

    async def listen(self, channel: str, on_message: OnAddressed) -> None:
        self._channels[channel] = on_message

    async def unlisten(self, channel: str) -> None:
        self._channels.pop(channel, None)

    async def send(self, channel: str, data: bytes) -> int:
        listener = self._channels.get(channel)
        if listener is None:
            return 0
        asyncio.get_running_loop().call_soon(listener, data)
        return 1

    async def listeners(self, channel: str) -> int:
        return int(channel in self._channels)


# -- in Redis ---------------------------------------------------------------------------------------

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
  redis.call('PEXPIRE', KEYS[1], ARGV[3])  -- the stream ended: kept while it may be read
else
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
end
redis.call('SADD', KEYS[2], KEYS[1])
redis.call('PEXPIRE', KEYS[2], ARGV[4])
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
  for _, log in ipairs(redis.call('SMEMBERS', KEYS[3])) do redis.call('PEXPIRE', log, ARGV[3]) end
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
    session's logs); channel ``<prefix>m`` carries the messages between workers, and
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
