"""Lines about a peer's repeated misbehaviour, said at a bounded rate.

A peer can send what the runtime cannot take (a notification no client can carry, a line over the
limit, a message its revision refuses) as fast as it writes; one log line per message lets it
fill the log and spend the CPU writing it (a child flooding the gateway after its client left:
68,687 lines, 365 KB/s). ``Repeats`` says the first line of a kind at once, counts the ones that
follow, and says how many there were once per ``interval`` (10 s)::

    server: 'notifications/message' notification dropped: the client has no stream open to carry
    it (and 68,686 more like it in the last 10 s)

A kind quiet for a whole interval starts over: its next line is said at once. ``flush`` says the
counts not said yet (the peer is gone). Kinds are names fixed by the code (never a peer's data),
so what ``Repeats`` keeps is bounded by them.

The count of an interval is said by a timer of the running asyncio loop, when there is one (then
``wake`` is called, for a caller whose lines wait in a list to be drained); without a loop, by the
first line of the kind after the interval, or by ``flush``. One ``Repeats`` serves one loop (or
one thread): it takes no lock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["INTERVAL", "Repeats"]

INTERVAL = 10.0  # seconds between two lines saying how often a kind came


class _Kind:
    __slots__ = ("count", "line", "start", "timer")

    def __init__(self, start: float, line: str) -> None:
        self.start = start  # when its interval began
        self.count = 0  # lines of the interval not said
        self.line = line  # the latest of them
        self.timer: asyncio.TimerHandle | None = None


class Repeats:
    """``say`` a line of each kind at once, then at most one line per ``interval`` counting the
    others (module docstring)."""

    def __init__(
        self,
        say: Callable[[str], None],
        interval: float = INTERVAL,
        *,
        wake: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive, not {interval!r}")
        self._say = say
        self.interval = interval
        self._wake = wake
        self._clock = clock
        self._kinds: dict[str, _Kind] = {}

    def __call__(self, kind: str, line: str) -> None:
        """One more misdeed of ``kind``, which ``line`` describes."""
        now = self._clock()
        found = self._kinds.get(kind)
        if found is None or (not found.count and now - found.start >= self.interval):
            self._kinds[kind] = _Kind(now, line)
            self._say(line)
            return
        found.count += 1
        found.line = line
        if now - found.start >= self.interval:  # no timer said it (no loop runs)
            self._due(kind, now)
        elif found.timer is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
            found.timer = loop.call_later(found.start + self.interval - now, self._timed, kind)

    def flush(self) -> None:
        """Say every count not said yet, and forget every kind (the next line of one is said)."""
        now = self._clock()
        for kind in list(self._kinds):
            self._due(kind, now)
        self._kinds.clear()

    def _timed(self, kind: str) -> None:
        found = self._kinds.get(kind)
        if found is not None:
            found.timer = None
            self._due(kind, self._clock())
            if self._wake is not None:
                self._wake()

    def _due(self, kind: str, now: float) -> None:
        """Say how many lines of ``kind`` came since its interval began; a new one begins."""
        found = self._kinds[kind]
        if found.timer is not None:
            found.timer.cancel()
            found.timer = None
        if found.count:
            seconds = f"{now - found.start:.1f}".removesuffix(".0")
            self._say(f"{found.line} (and {found.count:,} more like it in the last {seconds} s)")
            found.start, found.count = now, 0
