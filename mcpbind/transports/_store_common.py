"""What every store of the Streamable HTTP server is (``mcpbind.transports.store`` says what a
store holds): the ``Store`` interface, the failures it raises, and the log of those failures."""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

__all__ = [
    "EVENT_MAX_AGE",
    "MAX_EVENTS",
    "Entry",
    "FailureLog",
    "NotIssued",
    "OnAddressed",
    "OnMessage",
    "Store",
    "StoreError",
]

# The defaults of the bounds (docs/limits.md).
MAX_EVENTS = 1000
EVENT_MAX_AGE = 300.0

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
