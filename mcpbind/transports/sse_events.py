"""Server-sent events read from an HTTP body, the one parser of mcpbind's HTTP clients (the
Streamable HTTP client's POST and GET streams, HTTP+SSE's stream, the gateway's upstream).

The HTML standard's event stream format, on bytes: lines end with CRLF, LF or CR (a CRLF split
between two chunks counts once); a leading byte order mark is skipped; a line starting with a
colon is a comment; a field's value loses one leading space; ``data`` lines are joined with LF;
an ``id`` holding NUL is ignored; ``retry`` counts only when it is digits. A blank line ends an
event. Each event is given whenever it set a field, with its ``data`` (bytes, maybe empty), its
type (``message`` unless ``event`` said), the stream's last event id so far and its ``retry``.

An event (its fields and the line being read) longer than ``max_event`` bytes ends the stream
with ``HttpError``: a server cannot make the reader hold more. ``read_stream`` takes a ``retry``
of more than ``MAX_RETRY_MS`` as that much: a server cannot make a resumption wait for days.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, NamedTuple

from .http_wire import HttpError

__all__ = ["MAX_EVENT", "MAX_RETRY_MS", "EventParser", "ServerEvent", "events", "read_stream"]

MAX_EVENT = 16 * 1024 * 1024  # bytes of one event (as stdio's MAX_LINE bounds one message)
MAX_RETRY_MS = 60_000  # the longest wait before a resumption a server's ``retry`` may set
_BOM = b"\xef\xbb\xbf"


class ServerEvent(NamedTuple):
    """One event of a stream."""

    data: bytes
    event: str = "message"
    id: str | None = None  # the stream's last event id, as of this event
    retry: int | None = None  # milliseconds, when this event set it


class EventParser:
    """Bytes in (``feed``), the events they complete out."""

    def __init__(self, max_event: int = MAX_EVENT) -> None:
        self.max_event = max_event
        self.last_id: str | None = None
        self._line = b""  # the line being read
        self._cr = False  # the last chunk ended with CR: an LF opening the next belongs to it
        self._started = False  # the byte order mark is looked for once, at the start
        self._size = 0  # bytes of the event being read so far
        self._data: list[bytes] = []
        self._event: str | None = None
        self._retry: int | None = None
        self._fields = False  # the event being read set a field

    def feed(self, chunk: bytes) -> list[ServerEvent]:
        """The events ``chunk`` completes (``HttpError`` past ``max_event``)."""
        if not self._started:
            if len(self._line) + len(chunk) < len(_BOM) and _BOM.startswith(self._line + chunk):
                self._line += chunk  # (too short yet to tell)
                return []
            chunk, self._line = self._line + chunk, b""
            self._started = True
            chunk = chunk.removeprefix(_BOM)
        if self._cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if not chunk:
            return []
        self._cr = chunk[-1:] == b"\r"
        if b"\r" in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        lines[0] = self._line + lines[0]
        self._line = lines.pop()
        if len(self._line) + self._size > self.max_event:
            self._overlong()
        found: list[ServerEvent] = []
        for line in lines:
            if line:
                self._field(line)
            elif self._fields:
                found.append(self._dispatch())
        return found

    def _field(self, line: bytes) -> None:
        if line[:1] == b":":
            return  # a comment
        self._size += len(line) + 1
        if self._size > self.max_event:
            self._overlong()
        name, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\0" not in value:
                self.last_id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self._retry = int(value)
        else:
            return  # a field the format does not define: ignored
        self._fields = True

    def _dispatch(self) -> ServerEvent:
        data = self._data
        event = ServerEvent(
            data[0] if len(data) == 1 else b"\n".join(data),
            self._event or "message",
            self.last_id,
            self._retry,
        )
        self._data, self._event, self._retry, self._fields, self._size = [], None, None, False, 0
        return event

    def _overlong(self) -> None:
        raise HttpError(f"an event of the stream exceeds {self.max_event} bytes (max_event)")


async def events(reply: Any, max_event: int = MAX_EVENT) -> AsyncGenerator[ServerEvent, None]:
    """The events of ``reply``'s body (a ``http_wire.Reply``) as they come."""
    parser = EventParser(max_event)
    async for chunk in reply.chunks():
        for event in parser.feed(chunk):
            yield event


async def read_stream(
    reply: Any,
    owed: set[Any],
    receive: Callable[[bytes, set[Any]], Awaitable[None]],
    retry: Callable[[int], None],
) -> str | None:
    """Feed the messages of an answer's event stream to ``receive`` (with ``owed``, the ids of
    the requests it still owes answers to, which ``receive`` takes off) until the stream ends or
    owes nothing more; ``retry`` gets each ``retry`` the server sets (at most
    ``MAX_RETRY_MS``). The stream's last event id
    (to resume from), or None: nothing remains owed, or there is no id to resume from (none was
    given, or an empty ``id`` field reset it)."""
    last: str | None = None
    async with contextlib.aclosing(events(reply)) as stream:
        async for event in stream:
            last = event.id or None
            if event.retry is not None:
                retry(min(event.retry, MAX_RETRY_MS))
            if event.data:
                await receive(event.data, owed)
            if not owed:
                return None  # the rest of the stream is not waited for (nor kept)
    return last
