"""How a Client reaches its server: a link opens the session, sends requests and gives back their
results. ``PipeLink`` carries messages over any two-way message channel (a subprocess's stdio, an
App in memory); the HTTP link is in ``http``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from .._repeats import Repeats
from ..app.reply import reply
from ..errors import INTERNAL_ERROR, ProtocolError
from ..events import (
    ErrorReceived,
    Event,
    InputRequired,
    MessageRejected,
    Negotiated,
    NegotiationFailed,
    NotificationReceived,
    ProgressReceived,
    RequestReceived,
    ResultReceived,
    TaskCreated,
)
from ..session import ClientSession
from ..session.raw import RawResults
from ..session.tasks import TaskSpeech
from ..transports._answer import answer_rounds
from ..transports.deadline import Deadline  # (named here too: where it was first)

__all__ = ["Deadline", "Link", "ObservedSession", "PipeLink", "Serve"]

log = logging.getLogger("mcpbind.client")


def warn(line: str) -> None:
    """Log ``line`` as a warning of ``mcpbind.client`` (what ``Repeats`` says, rate-limited)."""
    log.warning("%s", line)


Serve = Callable[[RequestReceived], Awaitable[Any]]
# Requests of the server (sampling, elicitation, roots) answered at once; past it, -32603.
MAX_SERVER_REQUESTS = 64
_OPENING = object()  # the key the handshake's waiter is filed under


class ObservedSession(ClientSession):
    """A ``ClientSession`` that shows every notification and progress event it reports to
    ``observe``, keeps the ``Negotiated`` event of its handshake (``negotiated``), remembers the
    id of the last request of each method, and binds a progress callback set with
    ``expect_progress`` to the next request sent.

    Where the agreed revision has the tasks extension, a task status notification (the session
    reads it: ``NotificationReceived`` with the generated class) is shown to ``observe_task``
    (its params: one generated class per status) instead, when one is given; a listen request
    naming tasks (the client's own streams, one per followed task) is not remembered as the
    last of its method (that is the user's subscription stream)."""

    def __init__(
        self,
        *args: Any,
        observe: Callable[[Event], None],
        observe_task: Callable[[Any], None] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._observe = observe
        self._observe_task = observe_task
        self.negotiated: Negotiated | None = None
        self.last_ids: dict[str, Any] = {}
        self.progress_of: dict[Any, Callable[..., Any]] = {}
        self._next_progress: Callable[..., Any] | None = None
        self.raw = RawResults()  # (none kept until keep_raw)

    def expect_progress(self, callback: Callable[..., Any] | None) -> None:
        self._next_progress = callback

    def keep_raw(self, methods: Iterable[str]) -> None:
        """Keep the raw JSON of each result of ``methods`` until ``raw_of`` takes it
        (``mcpbind.session.raw``)."""
        self.raw = RawResults(methods)

    def raw_of(self, result: Any) -> Any:
        """The raw JSON of ``result`` (a decoded result of a method given to ``keep_raw``),
        taken: None when it was not kept."""
        return self.raw.take(result)

    def request(self, method: str, params: Any = None, **options: Any) -> Any:
        callback, self._next_progress = self._next_progress, None
        if callback is not None:
            options["progress"] = True
        rid = super().request(method, params, **options)
        ext = self._tasks_speech()
        if ext is None or method != ext.listen or not ext.names_tasks(params):
            self.last_ids[method] = rid
        if callback is not None:
            self.progress_of[rid] = callback
        return rid

    def receive(self, data: bytes | str) -> list[Event]:
        events = super().receive(data)
        if self.raw.methods:
            self.raw.keep(data, events)
        for event in events:
            if type(event) in (NotificationReceived, ProgressReceived):
                if self._observe_task is not None and self._is_task_status(event):
                    self._observe_task(event.params)  # type: ignore[union-attr]
                else:
                    self._observe(event)
            elif type(event) in (ResultReceived, ErrorReceived):
                self.progress_of.pop(event.id, None)  # type: ignore[union-attr]
            elif type(event) is Negotiated:
                self.negotiated = event
        return events

    def _tasks_speech(self) -> TaskSpeech | None:
        """The tasks extension as the agreed revision's session speaks it, or None."""
        sp = self._speech
        return sp.ext if sp is not None else None

    def _is_task_status(self, event: Event) -> bool:
        ext = self._tasks_speech()
        return ext is not None and type(getattr(event, "message", None)) is ext.types.notification


class Link(Protocol):
    """What a Client needs of its way to the server."""

    session: ObservedSession

    async def open(self) -> Negotiated: ...

    async def call(self, method: str, params: Any = None, *, stream: bool = False) -> Any: ...

    async def notify(self, method: str, params: Any = None) -> None: ...

    async def cancel(self, request_id: Any, reason: str) -> None: ...

    async def close(self) -> None: ...


class PipeLink:
    """A link over a two-way message channel. Subclasses ``start`` the channel, ``write`` one
    message, and call ``feed`` with each message that arrives (and ``ended`` when none will).
    ``serve`` answers the server's requests and the input requests of multi-round-trip results;
    ``timeout`` bounds the wait for each answer (None: no bound); ``max_rounds`` the input rounds
    of one request."""

    def __init__(
        self, session: ObservedSession, serve: Serve, timeout: float | None, max_rounds: int
    ) -> None:
        self.session = session
        self.serve = serve
        self.timeout = timeout
        self.max_rounds = max_rounds
        self._waiting: dict[Any, asyncio.Future[Event]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._ended: BaseException | None = None
        self.note = Repeats(warn)  # what the server may do again on every message, logged

    # -- the channel (subclasses) ---------------------------------------------------------------

    async def start(self) -> None:
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    # -- in --------------------------------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        """One message from the server."""
        for event in self.session.receive(data):
            t = type(event)
            key: Any = None
            if t is Negotiated or t is NegotiationFailed:
                key = _OPENING
            elif t in (ResultReceived, ErrorReceived, TaskCreated, InputRequired):
                key = event.id  # type: ignore[union-attr]
            elif t is MessageRejected:
                assert isinstance(event, MessageRejected)
                self.note("rejected", event.error.message)
                if not event.answered:
                    key = event.error.id
            elif t is RequestReceived:
                assert isinstance(event, RequestReceived)
                if len(self._tasks) >= MAX_SERVER_REQUESTS:
                    with contextlib.suppress(ProtocolError):  # the server cancelled it meanwhile
                        self.session.respond_error(
                            event.id,
                            INTERNAL_ERROR,
                            f"Client busy: {len(self._tasks)} requests of the server are being "
                            "answered (the limit)",
                        )
                    continue
                task = asyncio.ensure_future(self._answer(event))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            waiter = self._waiting.pop(key, None) if key is not None else None
            if waiter is not None and not waiter.done():
                waiter.set_result(event)
        self.flush()

    def ended(self, why: BaseException) -> None:
        """No more messages will come: everything waiting fails with ``why``."""
        self._ended = why
        self.note.flush()
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(why)
        self._waiting.clear()

    async def _answer(self, event: RequestReceived) -> None:
        what = f"answering the server's {event.method!r}"
        await reply(self.session, event.id, self.serve(event), log, what)
        self.flush()

    # -- out -------------------------------------------------------------------------------------

    def flush(self) -> None:
        if self._ended is not None:
            return
        for data in self.session.data_to_send():
            self.write(data)

    async def _wait(self, key: Any, timeout: float | None) -> Event:
        if self._ended is not None:
            raise self._ended
        waiter: asyncio.Future[Event] = asyncio.get_running_loop().create_future()
        self._waiting[key] = waiter
        self.flush()
        try:
            async with asyncio.timeout(timeout):  # (not wait_for: see client/http.py, call)
                return await waiter
        except TimeoutError:
            self._waiting.pop(key, None)
            if key is not _OPENING:
                with contextlib.suppress(ProtocolError):
                    self.session.cancel(key, "timed out")
                self.flush()
            raise TimeoutError(f"no answer from the server within {timeout} s") from None
        except asyncio.CancelledError:
            if self._waiting.pop(key, None) is not None and key is not _OPENING:
                with contextlib.suppress(ProtocolError):
                    self.session.cancel(key, "cancelled")
                self.flush()
            raise

    async def open(self) -> Negotiated:
        await self.start()
        self.session.connect()
        event = await self._wait(_OPENING, self.timeout)
        if isinstance(event, NegotiationFailed):
            raise event.error
        assert isinstance(event, Negotiated)
        self.flush()  # the initialized notification
        return event

    async def call(self, method: str, params: Any = None, *, stream: bool = False) -> Any:
        """The result of a request (``stream``: one that stays open, waited for unbounded)."""
        timeout = None if stream else self.timeout
        first = await self._wait(self.session.request(method, params), timeout)

        def retry(request_id: Any) -> Awaitable[Event]:
            return self._wait(request_id, timeout)

        event = await answer_rounds(self.session, first, self.serve, retry, method, self.max_rounds)
        assert event is not None  # (what _wait returns is never None)
        return result_of(event)

    async def notify(self, method: str, params: Any = None) -> None:
        self.session.notify(method, params)
        self.flush()

    async def cancel(self, request_id: Any, reason: str) -> None:
        """Tell the server this side no longer waits for ``request_id`` (if it still did)."""
        with contextlib.suppress(ProtocolError):
            self.session.cancel(request_id, reason)
        self.flush()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.stop()
        self.ended(ConnectionError("the client closed the connection"))


def result_of(event: Event) -> Any:
    """The result an answering event carries, or the error it means, raised."""
    if isinstance(event, ResultReceived):
        return event.result
    if isinstance(event, ErrorReceived):
        raise ProtocolError(event.code, event.message, event.data, event.id)
    if isinstance(event, MessageRejected):
        raise event.error
    if isinstance(event, TaskCreated):
        return event.result  # the generated task result (Client follows it: client/tasks.py)
    raise ProtocolError(INTERNAL_ERROR, f"unexpected answer {type(event).__name__}")
