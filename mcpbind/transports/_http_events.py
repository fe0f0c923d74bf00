"""The event streams of the Streamable HTTP server's sessions (``EventStreams``, the layer of
``StreamableHTTPServer`` above its session table): each stream's log in the store, written by a
pump and read by one reader at a time on any worker, resumed by a GET with ``Last-Event-ID``,
closed for polling, and given up when the store fails; and the session's GET stream."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import msgspec
from starlette.requests import Request
from starlette.responses import Response

from ..auth.resource import AuthInfo
from ..errors import INTERNAL_ERROR, ProtocolError
from ._http_answers import EventStream, plain_error
from ._http_calls import Live, read_client
from ._http_head import media_types
from ._http_streams import CLOSE, Stop, Stream, quiet
from ._http_table import SessionTable, log, store_failed
from .store import Entry, NotIssued, StoreError

__all__ = ["SESSION_HEADER", "STANDALONE", "EventStreams", "store_failure"]


SESSION_HEADER = "mcp-session-id"

# The stream id of a session's GET stream in event ids (``get:<position>``); a POST's stream is
# named by 16 hex digits.
STANDALONE = "get"


# How long one read of an event log waits before a reader looks again (a reader is also woken when
# its stream is closed or its session ends).
_READ_BLOCK = 5.0


# How long a reader that follows its stream from memory (the store failing to read it back)
# waits before it asks the store again.
_REREAD = 0.5


def store_failure(error: Exception) -> tuple[str, dict[str, str]]:
    """What an error answer says of a store that failed (``error``), and its ``data``."""
    if isinstance(error, StoreError):
        return f"the session store failed ({error})", {
            "reason": "store failed",
            "store": error.store,
        }
    return f"the session store failed ({error!r})", {"reason": "store failed"}


def _logged_after(stream: Stream, cursor: str | None) -> list[Entry] | None:
    """What the pump of ``stream`` logged after position ``cursor`` (None: from the start), as
    this worker remembers it; None when it no longer remembers that far back."""
    logged = list(stream.logged or ())
    if cursor is None:
        kept = stream.logged
        return logged if kept is None or len(logged) < (kept.maxlen or 0) else None
    for at, (position, _) in enumerate(logged):
        if position == cursor:
            return logged[at + 1 :]
    return None


def _stream_key(key: str) -> bool:
    """Whether ``key`` names a stream in this server's event ids."""
    return key == STANDALONE or (len(key) == 16 and all(c in "0123456789abcdef" for c in key))


class EventStreams(SessionTable):
    """The sessions' event streams (module docstring)."""

    retry_ms: int
    resume_timeout: float

    def _resumable(self, live: Live, stream: Stream, key: str, first: list[Any]) -> None:
        """Make ``stream`` one of the session's logged streams: what is queued on it goes to the
        store's log under ``key``, where its readers (on any worker) read it."""
        stream.key = key
        stream.resume_timeout = self.resume_timeout
        stream.readers = set()
        if key != STANDALONE:  # (a POST's stream has one writer: this worker's pump)
            stream.logged = deque(maxlen=self.store.max_events)
        live.streams[key] = stream
        stream.pump = self._spawn(self._pump(live, stream, first))

    async def _pump(self, live: Live, stream: Stream, batch: list[Any]) -> None:
        """Move what is queued on ``stream`` to its log, in order, until the stream ends; a
        ``Call.close_stream`` on the way stops its readers after what came before it. When the
        store fails, the stream is given up: its requests are cancelled, and its readers here
        end their responses with what was logged and an error answering each (``_failed``)."""
        sid, key = live.sid, stream.key
        assert sid is not None and key is not None
        last: str | None = None  # the position of the last entry appended
        logged = stream.logged if stream.logged is not None else deque(maxlen=0)
        try:
            while True:
                while not stream.empty():
                    batch.append(stream.get_nowait())
                items: list[bytes | None] = []
                ended = False
                for item in batch:
                    if item is CLOSE:
                        if items:
                            positions = await self.store.append(
                                sid, key, items, self.session_idle_timeout
                            )
                            logged.extend(zip(positions, items, strict=True))
                            last, items = positions[-1], []
                        stream.stop_readers("close", last)
                        continue
                    items.append(item)
                    ended = ended or item is None
                if items:
                    positions = await self.store.append(sid, key, items, self.session_idle_timeout)
                    logged.extend(zip(positions, items, strict=True))
                    last = positions[-1]
                if ended:
                    return
                batch = [await stream.get()]
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the store failed: the stream cannot carry anything any more
            store_failed(f"logging the events of session {sid} stream {key}", error)
            self._failed(stream, batch, error)
            if live.streams.get(key) is stream:  # (the GET stream too: a new one next time)
                del live.streams[key]
        finally:
            if live.streams.get(key) is stream and key != STANDALONE:
                del live.streams[key]

    def _failed(self, stream: Stream, batch: list[Any], error: Exception) -> None:
        """The store failed to log ``stream`` (``batch``: what the pump held): it is given up.
        Each request it owed an answer (still being handled, or answered by a message not
        logged) gets a JSON-RPC error naming the store, which this worker's readers send after
        what was logged; its handlers are cancelled, its requests to the client fail."""
        while not stream.empty():
            batch.append(stream.get_nowait())
        kept = {id(message) for _, message in stream.logged or ()}
        owed = dict.fromkeys(rid for rid in stream.pending if type(rid) in (str, int))
        for message in batch:
            if not isinstance(message, bytes) or not message or id(message) in kept:
                continue
            try:
                peek = read_client.decode(message)
            except (msgspec.DecodeError, ValueError, RecursionError):
                continue
            if peek.method is None and type(peek.id) in (str, int):  # an answer, not logged
                owed[peek.id] = None
        why, data = store_failure(error)
        message = (
            f"Internal error: {why} while this request's answer was being logged: the request "
            "was given up, and no event after the last one sent can be resumed; send it again"
        )
        stream.failure = [
            ProtocolError(INTERNAL_ERROR, message, data, rid).to_json() for rid in owed
        ]
        stream.given_up = True
        stream.stop_readers("failed")
        stream.abandon(" (the event log failed)")

    def _attach(self, live: Live, key: str, local: Stream | None) -> asyncio.Future[Stop]:
        """Count a new reader of stream ``key`` (``local``: its ``Stream`` on this worker, if
        any) before its response starts, so that a ``close_stream`` already on its way stops it;
        its "stop now" future."""
        assert live.sid is not None
        stop: asyncio.Future[Stop] = asyncio.get_running_loop().create_future()
        live.readers.add(stop)
        before = live.reading.get(key)
        if before is not None and not before.done():  # one reader a stream: the new one reads
            before.set_result(Stop("end"))
        live.reading[key] = stop
        if local is not None:
            local.readers = local.readers or set()
            local.readers.add(stop)
            local.attached()
        if self._shared:
            self._spawn(self._publish(live.sid, "attached", key.encode()))
        return stop

    def _release(
        self, live: Live, key: str, local: Stream | None, stop: asyncio.Future[Stop]
    ) -> None:
        """The reader of ``stop`` is gone (once, however its response ended)."""
        if stop not in live.readers:
            return
        live.readers.discard(stop)
        if live.reading.get(key) is stop:
            del live.reading[key]
        if local is not None and local.readers is not None:
            local.readers.discard(stop)
            if live.standalone is local and not local.readers:
                live.standalone = None
                self._touch(live, time.monotonic())
            local.detached()
        if self._shared and live.sid is not None:
            self._spawn(self._publish(live.sid, "detached", key.encode()))

    def _stream_response(
        self,
        live: Live,
        key: str,
        after: str | None,
        local: Stream | None,
        entries: list[Entry] | None = None,
        greet: bool = False,
        headers: dict[str, str] | None = None,
    ) -> Response:
        """The event-stream response of a reader of stream ``key`` from ``after`` on."""
        stop = self._attach(live, key, local)
        return EventStream(
            self._events(live, key, after, stop, entries, greet, local),
            media_type="text/event-stream",
            headers={**(headers or {}), "cache-control": "no-cache"},
            on_close=functools.partial(self._release, live, key, local, stop),
        )

    async def _events(
        self,
        live: Live,
        key: str,
        after: str | None,
        stop: asyncio.Future[Stop],
        entries: list[Entry] | None = None,
        greet: bool = False,
        local: Stream | None = None,
    ) -> AsyncIterator[bytes]:
        """The server-sent events of one stream's log from position ``after`` on, as they come,
        until the stream ends, its session ends (``stop``: "end"), or its handler closes the
        response (``stop``: "close"); ``greet``: a comment first, so that the response starts
        at once. When the store fails, a reader of a POST's stream on the worker that logs it
        (``local``) goes on with what that worker logged, and once the store failed to log it
        (``stop``: "failed"), ends with the errors answering what the stream owed; any other
        reader ends, and its client may resume the stream later."""
        sid = live.sid
        assert sid is not None
        prefix = key.encode() + b":"
        cursor = after
        if greet:
            yield b": stream open\n\n"
        try:
            while True:
                if entries is None:
                    entries = await self._read_next(sid, key, cursor, stop, local)
                    if entries is None:
                        return
                for position, message in entries:
                    if message is None:  # the stream ended
                        return
                    cursor = position
                    yield self._event(prefix, position, message)
                    if stop.done() and stop.result() == ("close", position):
                        break  # what follows the close is for the client's next GET
                entries = None
                if stop.done():
                    why, until = stop.result()
                    if why == "failed" and local is not None:
                        for event in self._after_failure(local, prefix, cursor):
                            yield event
                    if why != "close":
                        return
                    # Closed for polling: what was logged before the close, then the retry.
                    async for event in self._until_close(sid, key, prefix, cursor, until):
                        yield event
                    return
        except StoreError as error:  # the client may resume the stream later
            store_failed(f"reading the events of session {sid} stream {key}", error)
        except Exception:  # a bug of ours: the client may resume the stream later
            log.exception("reading the events of session %s stream %s", sid, key)

    async def _read_next(
        self,
        sid: str,
        key: str,
        cursor: str | None,
        stop: asyncio.Future[Stop],
        local: Stream | None,
    ) -> list[Entry] | None:
        """What a reader of ``_events`` at ``cursor`` sends next: what the store read (or, when it
        fails on a POST's stream this worker logs, what this worker logged), empty when ``stop``
        came first; None when the reader ends (the events after ``cursor`` are no longer kept)."""
        read = asyncio.ensure_future(self.store.read(sid, key, cursor, _READ_BLOCK))
        try:
            await asyncio.wait((read, stop), return_when=asyncio.FIRST_COMPLETED)
            if read.done():
                entries: list[Entry] | None
                failed = read.exception()
                if failed is None:
                    entries = read.result()
                elif isinstance(failed, NotIssued):  # the log was dropped, and begun again
                    entries = None
                elif local is None or local.logged is None:
                    raise failed
                else:  # follow what this worker logged, from memory
                    store_failed(f"reading the events of session {sid} stream {key}", failed)
                    entries = _logged_after(local, cursor)
                    if entries is None:
                        return None  # no longer remembered that far: the client resumes
                    if not entries:
                        await asyncio.wait((stop,), timeout=_REREAD)
            else:
                read.cancel()
                # (a read failing as it is cancelled: what stopped it says what follows)
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await read
                entries = []
        finally:
            if not read.done():
                read.cancel()  # the response ended while it waited
                read.add_done_callback(quiet)
        if entries is None:
            log.warning(
                "session %s stream %s: the events after %s are no longer kept, so "
                "its reader is ended",
                sid,
                key,
                cursor,
            )
        return entries

    async def _until_close(
        self, sid: str, key: str, prefix: bytes, cursor: str | None, until: str | None
    ) -> AsyncIterator[bytes]:
        """The events of a stream closed for polling from ``cursor`` to the close (``until``),
        then the retry delay."""
        while cursor != until:
            more = await self.store.read(sid, key, cursor)
            if not more:
                break
            for position, message in more:
                if message is None:
                    return
                cursor = position
                yield self._event(prefix, position, message)
                if position == until:
                    break
        yield b"retry: %d\n\n" % self.retry_ms

    def _after_failure(self, local: Stream, prefix: bytes, cursor: str | None) -> list[bytes]:
        """What a reader at ``cursor`` of a stream the store failed to log still sends: what this
        worker logged after the cursor, then the errors answering what the stream owed (these
        are in no log: events without an id)."""
        events = []
        for position, message in _logged_after(local, cursor) or ():
            if message is None:
                break
            events.append(self._event(prefix, position, message))
        for answer in local.failure or ():
            events.append(b"event: message\ndata: " + answer + b"\n\n")
        return events

    def _event(self, prefix: bytes, position: str, message: bytes) -> bytes:
        """One server-sent event of a logged stream (empty: the priming event, with the retry
        delay)."""
        head = b"id: " + prefix + position.encode()
        if not message:
            return head + b"\nretry: %d\ndata: \n\n" % self.retry_ms
        return head + b"\nevent: message\ndata: " + message + b"\n\n"

    async def _get(self, request: Request, auth: AuthInfo | None = None) -> Response:
        if "text/event-stream" not in media_types(request.headers.get("accept", "")):
            return plain_error(406, "Not Acceptable: a GET stream needs Accept: text/event-stream")
        sid = request.headers.get(SESSION_HEADER)
        if sid is None:
            return plain_error(405, "no MCP session for a standalone stream")
        found = await self._lookup(sid, auth)
        if isinstance(found, Response):
            return found
        if found is None:
            return plain_error(404, f"Not Found: no MCP session {sid!r}")
        live = found
        last = request.headers.get("last-event-id")
        if last is not None:
            return await self._resume(live, last)
        if live.standalone is not None:
            return plain_error(409, "Conflict: this session already has a GET stream")
        stream = self._standalone(live)
        after = await self.store.last(sid, STANDALONE)  # only what comes from now on
        if live.standalone is not None:
            return plain_error(409, "Conflict: this session already has a GET stream")
        live.standalone = stream
        return self._stream_response(live, STANDALONE, after, stream, greet=True)

    async def _resume(self, live: Live, last: str) -> Response:
        """A GET with ``Last-Event-ID``: the rest of the stream that event belongs to."""
        assert live.sid is not None
        key, sep, position = last.partition(":")
        if not (sep and position and len(last) <= 64 and _stream_key(key)):
            return plain_error(
                400, f"Bad Request: Last-Event-ID {last[:64]!r} is no event id of this server"
            )
        try:
            entries = await self.store.read(live.sid, key, position)
        except NotIssued:
            return plain_error(
                400, f"Bad Request: Last-Event-ID {last[:64]!r} is no event id of this server"
            )
        if entries is None:
            return plain_error(
                410,
                f"Gone: the events after {last!r} are no longer kept (max_events, "
                "event_max_age), or this session has no such stream",
            )
        local = live.streams.get(key)
        if key == STANDALONE:
            if live.standalone is not None:
                return plain_error(409, "Conflict: this session already has a GET stream")
            local = live.standalone = self._standalone(live)
        return self._stream_response(live, key, position, local, entries)

    def _standalone(self, live: Live) -> Stream:
        """The session's GET stream on this worker: what belongs to no request goes to its log
        through it (read by a GET stream open on any worker)."""
        stream = live.streams.get(STANDALONE)
        if stream is None:
            stream = Stream(max_queued=self.max_queued)
            stream.pending.add(object())  # open until the session closes
            self._resumable(live, stream, STANDALONE, [])
        return stream
