"""The messages bound for the responses of the Streamable HTTP server: a POST's or GET's stream
(``Stream``, its queue, when it is closed or given up), waiting for a response's first message
while watching for the client leaving (``first_or_gone``, without a task of its own), reading
the next ASGI message by a deadline, and a POST stream's server-sent events."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import types
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from starlette.types import Message, Receive

from .http_limits import MAX_QUEUED, RESUME_TIMEOUT

if TYPE_CHECKING:
    from ..auth.resource import AuthInfo

CLOSE: Any = object()  # queued by Call.close_stream: end the response, not the stream


class Stop(NamedTuple):
    """Why a reader is told to stop: ``close`` (its response ends after the entry at ``until``:
    polling), ``end`` (at once: the stream or session is over) or ``failed`` (the store failed to
    log the stream: its ``Stream.failure`` answers what it owed)."""

    why: str
    until: str | None = None


class _Queue:
    """A stream's queue: the part of ``asyncio.Queue`` the streams use (``put_nowait``,
    ``get_nowait``, ``get``, ``qsize``, ``empty``) without what they do not (a size bound, the
    putters it wakes, ``task_done``/``join``), each call a few Python calls cheaper, and one
    ``waiter`` set on it woken when a message arrives (a response's first message is awaited
    without a task reading the queue). Unbounded: ``Stream.put`` bounds it (``max_queued``)."""

    __slots__ = ("_items", "_getters", "waiter")

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._getters: collections.deque[asyncio.Future[None]] | None = None  # (made on need)
        self.waiter: asyncio.Future[None] | None = None

    def qsize(self) -> int:
        return len(self._items)

    def empty(self) -> bool:
        return not self._items

    def put_nowait(self, item: Any) -> None:
        self._items.append(item)
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if self._getters:
            _wake_next(self._getters)

    def get_nowait(self) -> Any:
        if not self._items:
            raise asyncio.QueueEmpty
        return self._items.popleft()

    async def get(self) -> Any:
        while not self._items:
            getter = asyncio.get_running_loop().create_future()
            if self._getters is None:
                self._getters = collections.deque()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()  # (it may be done already: a message came with the cancel)
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                if self._items and not getter.cancelled():
                    _wake_next(self._getters)  # the message it was woken for: the next one's
                raise
        return self._items.popleft()


def _wake_next(getters: collections.deque[asyncio.Future[None]]) -> None:
    while getters:
        getter = getters.popleft()
        if not getter.done():
            getter.set_result(None)
            return


class Stream(_Queue):
    """The messages bound for one POST's response (or the GET stream): a queue the response body
    reads (in a session, once it is an event stream, a pump moves it to the store's log, which
    its readers read), closed once every request it carries has been answered, and given up when
    more than ``max_queued`` messages wait on it. It is its own queue (a ``_Queue``): one object a
    POST less than a stream holding one."""

    # Slots and a plain __init__: one is built per POST, and a dataclass's default factories
    # cost a call each.
    __slots__ = (
        "pending",
        "asked",
        "handlers",
        "counter",
        "closed",
        "max_queued",
        "given_up",
        "auth",
        "key",
        "pump",
        "readers",
        "remote",
        "orphaned",
        "resume_timeout",
        "logged",
        "failure",
    )

    def __init__(self, max_queued: int = MAX_QUEUED, auth: AuthInfo | None = None) -> None:
        self._items = collections.deque()  # (_Queue's, written out: a call less)
        self._getters = None
        self.waiter = None
        self.pending: set[Any] = set()
        self.asked: dict[Any, asyncio.Future[Any]] = {}  # requests sent on it
        self.handlers: dict[Any, asyncio.Task[Any]] = {}  # of the requests it answers
        self.counter = 0
        self.closed = False
        self.max_queued = max_queued
        self.given_up = False
        self.auth = auth  # the verified token of the request that opened it
        # Once resumable (an event stream of a session): its id in event ids, the task moving
        # what is queued to the store's log, the "stop now" futures of its readers on this
        # worker, readers on other workers, and the timer that gives it up when no one resumes
        # it.
        self.key: str | None = None
        self.pump: asyncio.Task[None] | None = None
        self.readers: set[asyncio.Future[Stop]] | None = None
        self.remote = 0
        self.orphaned: asyncio.TimerHandle | None = None
        self.resume_timeout = RESUME_TIMEOUT
        # What its pump logged, (position, message), the last max_events of it: what this
        # worker's readers are given when the store fails to read it back; and once the store
        # failed to log it, the JSON-RPC errors answering the requests it owed.
        self.logged: deque[tuple[str, bytes | None]] | None = None
        self.failure: list[bytes] | None = None

    def put(self, messages: Iterable[bytes]) -> None:
        for message in messages:
            if self.given_up:
                return  # nothing more goes on a stream given up
            if len(self._items) >= self.max_queued:  # (its qsize, without the call)
                # The client is not reading: end the stream after what waits, rather than hold
                # more and more for it; what it carried is cancelled as if the client had left.
                self.given_up = True
                self.abandon()
                self.put_nowait(None)
                return
            self.put_nowait(message)

    def abandon(self, why: str = "") -> None:
        """The client went away: the requests sent on this stream will not be answered here, and
        the answers of its handlers could not reach the client any more, so they are cancelled."""
        self.stop_readers("end")
        for rid, future in self.asked.items():
            if not future.done():
                future.set_exception(
                    ConnectionError(
                        f"the stream closed before the client answered request {rid!r}{why}"
                    )
                )
        # Cancelled a step later: a handler awaiting one of those answers hears why first.
        loop = asyncio.get_running_loop()
        for task in self.handlers.values():
            loop.call_soon(task.cancel)

    def done(self, request_id: Any) -> None:
        self.pending.discard(request_id)
        self.handlers.pop(request_id, None)
        if not self.pending:
            self.closed = True
            self.put_nowait(None)

    def stop_readers(self, why: str, until: str | None = None) -> None:
        """Tell this worker's readers to end their responses: ``close`` (after the entries up to
        position ``until``, and a retry field: the client resumes) or ``end`` (at once)."""
        for reader in self.readers or ():
            if not reader.done():
                reader.set_result(Stop(why, until))

    @property
    def owed(self) -> bool:
        """Something on it still waits for the client: an answer, or a request's answer."""
        return bool(self.pending and self.handlers) or bool(self.asked)

    def attached(self) -> None:
        if self.orphaned is not None:
            self.orphaned.cancel()
            self.orphaned = None

    def detached(self) -> None:
        """A reader left: when none is left anywhere while something is owed, the client has
        ``resume_timeout`` seconds to resume the stream before it is given up."""
        if self.readers or self.remote > 0 or self.orphaned is not None or not self.owed:
            return
        why = f" (it was not resumed within resume_timeout, {self.resume_timeout:g} s)"
        self.orphaned = asyncio.get_running_loop().call_later(
            self.resume_timeout, self._orphan, why
        )

    def _orphan(self, why: str) -> None:
        self.orphaned = None
        if not self.readers and self.remote <= 0 and self.owed:
            self.abandon(why)


def quiet(future: asyncio.Future[Any]) -> None:
    """Retrieve the outcome of a future no one awaits any more (so it is not logged)."""
    if not future.cancelled():
        future.exception()


GONE = object()  # the client left before the first message of its response


async def first_or_gone(stream: Stream, receive: Receive) -> bytes | None | object:
    """The first message of a POST's response, or ``GONE`` when the client disconnects before it:
    a handler that sends nothing before its answer is watched for its client leaving too."""
    queue: _Queue = stream  # (its own queue)
    if queue.empty():
        loop = asyncio.get_running_loop()
        departure = _Departure(receive)
        try:
            while queue.empty():
                waiter = queue.waiter = loop.create_future()
                if not departure.watch(waiter):
                    return GONE
                await waiter  # a message came, or the client may have left
        finally:
            queue.waiter = None
            departure.close()
    first: bytes | None | object = queue.get_nowait()
    return first


class _Departure:
    """Watches ``receive`` for the client's disconnect without a task of its own (a task a
    request less): the receive coroutine is stepped here each time what it waits on is done. A
    receive that is not a coroutine, or waits on anything but a future, is left to a task."""

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.pending: Coroutine[Any, Any, Message] | None = None  # the receive being stepped
        self.task: asyncio.Task[None] | None = None

    def watch(self, waiter: asyncio.Future[None]) -> bool:
        """Arrange for ``waiter`` to be woken once the client may have left; False when it has
        (or its receive failed)."""
        wake = functools.partial(_wake, waiter)
        if self.task is not None:
            if self.task.done():
                return False
            self.task.add_done_callback(wake)
            return True
        while True:
            if self.pending is None:
                pending = self.receive()
                if not isinstance(pending, types.CoroutineType):
                    return self._to_task(pending, wake)
                self.pending = pending
            try:
                step = self.pending.send(None)
            except StopIteration as done:
                self.pending = None
                if done.value["type"] == "http.disconnect":
                    return False
                continue  # another message than a disconnect: read past it
            except Exception:
                self.pending = None
                return False
            if isinstance(step, asyncio.Future):
                step.add_done_callback(wake)
                return True
            resumed, self.pending = _Resumed(self.pending, step), None
            return self._to_task(resumed, wake)

    def _to_task(self, first: Awaitable[Message], wake: Callable[[Any], None]) -> bool:
        self.task = asyncio.ensure_future(_disconnected(self.receive, first))
        self.task.add_done_callback(wake)
        return True

    def close(self) -> None:
        if self.pending is not None:
            self.pending.close()
            self.pending = None
        if self.task is not None:
            self.task.cancel()


def _wake(waiter: asyncio.Future[None], gone: asyncio.Future[None]) -> None:
    """The client left (or its receive failed, which is told no further): wake ``waiter``."""
    quiet(gone)
    if not waiter.done():
        waiter.set_result(None)


def next_message(receive: Receive) -> tuple[Message, None] | tuple[None, Awaitable[Message]]:
    """``receive()`` run up to where it waits: (the next ASGI message, None) when it is ready
    at once (the common case: the body came with the request head), else (None, what to await
    for it, in the same task)."""
    pending = receive()
    if isinstance(pending, types.CoroutineType):
        try:
            step = pending.send(None)
        except StopIteration as done:
            return done.value, None
        return None, _Resumed(pending, step)
    return None, pending


class _Resumed(Awaitable[Any]):
    """A coroutine run up to its first suspension (``step``, what it yielded), awaited on from
    there in the same task: the task waits on ``step``, then everything goes to the coroutine."""

    def __init__(self, coroutine: Coroutine[Any, Any, Any], step: Any) -> None:
        self._coroutine = coroutine
        self._step = step

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine, step = self._coroutine, self._step
        while True:
            try:
                sent = yield step
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as error:  # thrown in by the task (a cancellation): passed on
                try:
                    step = coroutine.throw(error)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    step = coroutine.send(sent)
                except StopIteration as done:
                    return done.value


async def _disconnected(receive: Receive, first: Awaitable[Message] | None = None) -> None:
    """Return once the client of a request whose body was read disconnects (``first``: a
    receive already under way, awaited first)."""
    if first is not None and (await first)["type"] == "http.disconnect":
        return
    while (await receive())["type"] != "http.disconnect":
        pass


async def stream_events(first: bytes, stream: Stream) -> AsyncIterator[bytes]:
    """Server-sent events of a POST stream: each message one ``message`` event with an id."""
    message: bytes | None = first
    try:
        while message is not None:
            stream.counter += 1
            yield b"id: %d\nevent: message\ndata: " % stream.counter + message + b"\n\n"
            message = await stream.get()  # (its queue's)
    finally:
        stream.abandon()
