"""How a Client reaches its server: a link opens the session, sends requests and gives back their
results. ``PipeLink`` carries messages over any two-way message channel (a subprocess's stdio, an
App in memory); the HTTP link is in ``http``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from .._extension_tasks import TASK_TYPES
from .._extensions import TASKS
from .._support import convert
from ..app.reply import reply
from ..app.revision import rev
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
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

__all__ = ["Link", "ObservedSession", "PipeLink", "Serve"]

log = logging.getLogger("mcpbind.client")

Serve = Callable[[RequestReceived], Awaitable[Any]]
# Requests of the server (sampling, elicitation, roots) answered at once; past it, -32603.
MAX_SERVER_REQUESTS = 64
_OPENING = object()  # the key the handshake's waiter is filed under


class ObservedSession(ClientSession):
    """A ``ClientSession`` that shows every notification and progress event it reports to
    ``observe``, keeps the ``Negotiated`` event of its handshake (``negotiated``), remembers the
    id of the last request of each method, and binds a progress callback set with
    ``expect_progress`` to the next request sent.

    Where the agreed revision has the tasks extension, it also speaks the extension's part of
    subscription streams, which the revision's classes do not hold: a listen request whose
    filter names task ids (``TASKS.listen_filter``) is sent with them, and each task status
    notification is read with its generated class and shown to ``observe_task`` (the params:
    one generated class per status) instead of the session."""

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
        self._held: list[bytes] = []  # queued messages, one of them rewritten (``_with_tasks``)

    def expect_progress(self, callback: Callable[..., Any] | None) -> None:
        self._next_progress = callback

    def request(self, method: str, params: Any = None, **options: Any) -> Any:
        callback, self._next_progress = self._next_progress, None
        if callback is not None:
            options["progress"] = True
        ext = _EXTENDED.get(self.revision or "")
        task_ids = ext.task_ids(method, params) if ext is not None else None
        if task_ids is not None:
            assert ext is not None
            params = ext.without_task_ids(params)
        rid = super().request(method, params, **options)
        if task_ids is not None:
            assert ext is not None
            self._with_tasks(ext, task_ids)
        else:  # (a subscription stream of tasks is not the one the client reopens)
            self.last_ids[method] = rid
        if callback is not None:
            self.progress_of[rid] = callback
        return rid

    def _with_tasks(self, ext: _Extended, task_ids: list[str]) -> None:
        """The listen request just queued (the last message) with the task ids in its filter."""
        queued = [*self._held, *super().data_to_send()]
        queued[-1] = ext.with_task_ids(queued[-1], task_ids)
        self._held = queued

    def data_to_send(self) -> list[bytes]:
        held, self._held = self._held, []
        return [*held, *super().data_to_send()] if held else super().data_to_send()

    def receive(self, data: bytes | str) -> list[Event]:
        ext = _EXTENDED.get(self.revision or "")
        if ext is not None and self._observe_task is not None:
            status = ext.status(data)
            if status is not None:
                self._observe_task(status)
                return []
        events = super().receive(data)
        for event in events:
            if type(event) in (NotificationReceived, ProgressReceived):
                self._observe(event)
            elif type(event) in (ResultReceived, ErrorReceived):
                self.progress_of.pop(event.id, None)  # type: ignore[union-attr]
            elif type(event) is Negotiated:
                self.negotiated = event
        return events


class _Extended:
    """The tasks extension's part of subscription streams in one revision (``ObservedSession``):
    the listen method, the filter member and key naming tasks, the status notification."""

    def __init__(self, revision: str) -> None:
        facts, types = TASKS[revision], TASK_TYPES[revision]
        assert types.listen_filter is not None
        self.listen = rev(revision).facts.lifecycle["listen"]
        self.member = types.listen_filter[0]  # the listen params member holding the filter
        self.key = facts.listen_filter  # the filter's key naming the tasks
        self.marker = msgspec.json.encode(facts.notification)  # in every such notification
        self.notification = types.notification

    def task_ids(self, method: str, params: Any) -> list[str] | None:
        """The task ids a listen request's plain params name, or None (not such a request);
        ids that are not strings are -32602."""
        if method != self.listen or not isinstance(params, dict):
            return None
        wanted = params.get(self.member)
        if not isinstance(wanted, dict) or self.key not in wanted:
            return None
        try:
            return msgspec.convert(wanted[self.key], list[str])
        except msgspec.ValidationError as exc:
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid params: $.params.{self.member}.{self.key}: {exc}"
            ) from None

    def without_task_ids(self, params: dict[str, Any]) -> dict[str, Any]:
        wanted = {k: v for k, v in params[self.member].items() if k != self.key}
        return {**params, self.member: wanted}

    def with_task_ids(self, data: bytes, task_ids: list[str]) -> bytes:
        message = msgspec.json.decode(data)
        message["params"][self.member][self.key] = task_ids
        return msgspec.json.encode(message)

    def status(self, data: bytes | str) -> Any:
        """The params of ``data`` when it is a task status notification (its generated class
        by status), else None (a malformed one is left to the session, which refuses it)."""
        raw = data.encode() if isinstance(data, str) else data
        if self.marker not in raw:
            return None
        try:
            return convert(msgspec.json.decode(raw), self.notification).params
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None


# By revision: where the tasks extension and subscription streams meet.
_EXTENDED = {
    r: _Extended(r)
    for r in TASKS
    if r in TASK_TYPES
    and TASK_TYPES[r].listen_filter is not None
    and "listen" in rev(r).facts.lifecycle
}


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
                log.warning("%s", event.error.message)
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
            return await asyncio.wait_for(waiter, timeout)
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
        event = await self._wait(self.session.request(method, params), timeout)
        rounds = 0
        while isinstance(event, InputRequired):
            rounds += 1
            if rounds > self.max_rounds:
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"the server asked for input more than {self.max_rounds} times for {method!r}",
                )
            responses = {
                name: await self.serve(asked)
                for name, asked in event.asked(self.session.revision or "").items()
            }
            event = await self._wait(self.session.answer(event, responses), timeout)
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
