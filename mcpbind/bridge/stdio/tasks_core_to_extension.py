"""Tasks across the stdio bridge, from a client of the core revision's tasks (2025-11-25) in front of
a server of the tasks extension of the revision that replaced them (2026-07-28): the stdio
bridge's port of the translation ``bridge/tasks_core_to_extension.py`` holds (the HTTP gateway's
is ``gateway/tasks_core_to_extension.py``; the reverse direction ``tasks_extension_to_core.py``).
What it asks of the bridge is ``CoreTaskHost``.

``StdioTasks.between(bridge, negotiated, client)`` is the translator when the server offers the
extension, the client speaks the core revision, and the bridge runs on an event loop (``Bridge``'s
``wake``, which ``process.serve`` sets: a sans-IO ``Bridge`` without a driver has no timers to
poll with, and its client is not told of ``tasks``). ``Bridge`` asks it first about each
request of the client (``client_request``); each request it takes runs as a coroutine on that
loop:

- its requests to the server go on the bridge's one server side session, which declares the
  extension on the extension's own requests; the task-augmented call declares it in its
  ``_meta`` (the session's capabilities do not: ``task_facts.undeclared_tasks``); their answers come
  back through ``server_event``;
- the client is asked through the bridge's client side session, its answers come back through
  ``client_event``;
- the wait between two polls is the loop's; after each step the coroutine calls ``wake``, which
  writes what the sessions queued.

A client's ``notifications/cancelled`` of a request ends its coroutine (a task-augmented call
on its way to the server runs on to the server's answer, and the task it creates is cancelled:
``tasks_core_to_extension``); the end of the bridge
answers every request still running with the bridge's error (``close``). At most
``max_in_flight`` of the client's task requests run at once (counting the cancelled calls still
awaiting the server's answer), past it -32603.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from msgspec import UNSET

from ...errors import INTERNAL_ERROR, ProtocolError
from ...events import (
    ANSWERS,
    ErrorReceived,
    Event,
    InputRequired,
    MessageRejected,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
)
from ...session import ServerSession
from ..crossing import Back
from ..limits import too_many
from ..tasks_core_to_extension import Conversions, CoreTasks, Table

if TYPE_CHECKING:
    from ...events import Negotiated

__all__ = ["CoreTaskHost", "StdioTasks"]


class CoreTaskHost(Conversions, Protocol):
    """What the stdio bridge's translator asks of the ``Bridge``: its conversions, its two
    sessions, its log and bound, its driver (``wake``) and its error answers."""

    @property
    def back(self) -> Back:
        """The session facing the server."""
        ...

    @property
    def front(self) -> ServerSession:
        """The session facing the client."""
        ...

    @property
    def log(self) -> list[str]: ...

    @property
    def max_in_flight(self) -> int: ...

    @property
    def wake(self) -> Callable[[], None] | None:
        """Write what the sessions queued (None: the bridge runs sans-IO, with no driver)."""
        ...

    def answer_error(self, id: Any, error: ProtocolError) -> None:
        """Answer the client's request ``id`` with ``error``."""
        ...


class StdioTasks:
    """The translator of one stdio bridge (module docstring); it is also the translation's
    ``Port`` for every request it serves."""

    def __init__(self, bridge: CoreTaskHost, tasks: CoreTasks) -> None:
        self.bridge = bridge
        self.tasks = tasks
        self.table: Table = {}
        self.running: dict[Any, asyncio.Task[None]] = {}  # the client's request id -> its work
        self.sent: dict[Any, asyncio.Future[Any]] = {}  # id to the server -> its answer to come
        self.asked: dict[Any, asyncio.Future[Any]] = {}  # id to the client -> its answer to come
        # What runs after a request of the client is over (``Port.later``), counted in flight.
        self.settling: set[asyncio.Task[None]] = set()

    @classmethod
    def between(cls, bridge: CoreTaskHost, negotiated: Negotiated, client: str | None) -> Any:
        """The translator when the server ``negotiated`` offers the extension, the ``client``
        speaks the core revision it replaced and the bridge has a driver, else None."""
        if bridge.wake is None:
            return None
        tasks = CoreTasks.offered(negotiated)
        if tasks is None or client != tasks.core:
            return None
        return cls(bridge, tasks)

    # -- the Port --------------------------------------------------------------------------------

    @property
    def crossing(self) -> CoreTaskHost:
        return self.bridge

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        back = self.bridge.back
        id = back.request(method, self.tasks.declared(method, params, back.capabilities))
        future = self.sent[id] = asyncio.get_running_loop().create_future()
        try:
            self._wake()
            return await future  # type: ignore[no-any-return]
        finally:
            self.sent.pop(id, None)

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        id = self.bridge.front.request(method, params)
        future = self.asked[id] = asyncio.get_running_loop().create_future()
        try:
            self._wake()
            return await future
        finally:
            self.asked.pop(id, None)

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    @property
    def gone(self) -> ProtocolError | None:
        return None  # the bridge's end cancels the requests it serves (``close``)

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self.settling.add(task)
        task.add_done_callback(self._settled)

    def _settled(self, task: asyncio.Task[None]) -> None:
        self.settling.discard(task)
        self._wake()

    def note(self, line: str) -> None:
        self.bridge.log.append(line)

    def _wake(self) -> None:
        wake = self.bridge.wake
        if wake is not None:
            wake()

    # -- the client's messages -------------------------------------------------------------------

    def from_client(self, data: bytes) -> bool:
        return False  # the core revision's task requests are the client side session's

    def down(self, e: RequestReceived, params: Any) -> Any:
        return params

    def client_request(self, e: RequestReceived) -> bool:
        """Whether the client's request ``e`` is the translation's (which answers it)."""
        if not self.tasks.mine(e.method, e.revision, e.params):
            return False
        limit = self.bridge.max_in_flight
        if len(self.running) + len(self.settling) >= limit:
            self.bridge.answer_error(e.id, too_many(e.id, limit, "the client", "the server"))
            return True
        loop = asyncio.get_running_loop()
        self.running[e.id] = loop.create_task(self._serve(e))
        return True

    async def _serve(self, e: RequestReceived) -> None:
        bridge = self.bridge
        try:
            result = await self.tasks.answer(self.table, self, e.method, e.params)
        except ProtocolError as error:
            bridge.answer_error(e.id, error)
        except Exception as exc:  # noqa: BLE001 - a fault of the bridge's own: still an answer
            bridge.log.append(f"internal error ({type(exc).__name__}: {exc}) on {e.method!r}")
            bridge.answer_error(
                e.id,
                ProtocolError(INTERNAL_ERROR, f"Internal error: {type(exc).__name__}: {exc}"),
            )
        else:
            try:
                bridge.front.respond(e.id, result)
            except ProtocolError as error:
                bridge.answer_error(e.id, error)
        finally:
            if self.running.get(e.id) is asyncio.current_task():
                del self.running[e.id]
            self._wake()

    def client_event(self, e: Event) -> bool:
        """Whether the client's event ``e`` was the translation's: an answer to its question,
        or the cancel of a request it serves."""
        if isinstance(e, (ResultReceived, ErrorReceived)):
            future = self.asked.get(e.id)
            if future is None:
                return False
            if future.done():
                return True
            if isinstance(e, ResultReceived):
                future.set_result(msgspec.to_builtins(e.result))
            else:
                data = None if e.data is UNSET else e.data
                future.set_exception(
                    ProtocolError(
                        e.code, f"the client refused input the task asked for: {e.message}", data
                    )
                )
            return True
        if isinstance(e, RequestCancelled):
            running = self.running.pop(e.id, None)
            if running is None:
                return False
            running.cancel()
            return True
        return False  # (an unreadable answer: ``Bridge`` on an answer it cannot read asks ``answer_lost``)

    def answer_lost(self, id: Any, why: str) -> bool:
        """Whether ``id`` names a request of the translation's whose answer (from the client or
        the server) cannot be read (``why``): the request it serves gets an error."""
        future = self.asked.get(id) or self.sent.get(id)
        if future is None:
            return False
        if not future.done():
            future.set_exception(
                ProtocolError(
                    INTERNAL_ERROR, f"Internal error: the answer to the bridge's request: {why}"
                )
            )
        return True

    # -- the server's messages -------------------------------------------------------------------

    def server_event(self, e: Event) -> bool:
        """Whether the server's event ``e`` was the translation's: an answer to its request."""
        if isinstance(e, MessageRejected):  # an unreadable answer: the session stopped awaiting it
            id = e.error.id
            if e.answered or id not in self.sent or self.bridge.back.awaits(id):
                return False
            return self.answer_lost(id, e.error.message)
        if not isinstance(e, ANSWERS):
            return False
        future = self.sent.get(e.id)
        if future is None:
            return False
        if future.done():
            return True
        if isinstance(e, ErrorReceived):
            future.set_exception(ProtocolError(e.code, e.message, e.data))
        elif isinstance(e, InputRequired):
            future.set_exception(
                ProtocolError(
                    INTERNAL_ERROR,
                    "Internal error: the server asked for input in the answer to a request of "
                    "the bridge's own, which asks for none",
                )
            )
        else:
            future.set_result(msgspec.to_builtins(e.result))
        return True

    # -- the end ---------------------------------------------------------------------------------

    def pending(self) -> Iterable[Any]:
        """The client's requests this translator still owes an answer (ids)."""
        return list(self.running)

    def close(self, error: ProtocolError) -> None:
        """The bridge ends: every request of the client still running gets ``error``."""
        running, self.running = self.running, {}
        for id, task in running.items():
            task.cancel()
            self.bridge.answer_error(id, error)
        for settling in list(self.settling):
            settling.cancel()
        for future in (*self.sent.values(), *self.asked.values()):
            if not future.done():
                future.cancel()
