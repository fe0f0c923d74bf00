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
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# isort: off
# The interface and the Redis store live in modules of their own; their names are this module's.
from ._store_common import (
    EVENT_MAX_AGE as EVENT_MAX_AGE,
    MAX_EVENTS as MAX_EVENTS,
    Entry as Entry,
    FailureLog as FailureLog,
    NotIssued as NotIssued,
    OnAddressed as OnAddressed,
    OnMessage as OnMessage,
    Store as Store,
    StoreError as StoreError,
)
from ._store_redis import (
    HEALTH_CHECK_INTERVAL as HEALTH_CHECK_INTERVAL,
    HOLD_OFF as HOLD_OFF,
    REDIS_TIMEOUT as REDIS_TIMEOUT,
    RedisStore as RedisStore,
)

# isort: on

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
