"""Tasks across the HTTP gateway, from a client of the tasks extension (the revision it extends)
to a server of the core revision's tasks it replaces: the gateway's ports of the translation
``bridge/tasks_extension_to_core.py`` holds (the reverse of ``tasks_core_to_extension.py``).

``GatewayTasks`` is its front's tasks layer (the extension's get, update and cancel reach it,
not the front's session, and go to the link whose translator holds the task), ``LinkTasks`` the
translator of one link (its answers go to the gateway's handlers awaiting them, the task's input
requests are answered through the link's ``serve``). What a translator asks of its link is
``TaskLink``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from collections.abc import Iterable
from typing import Any, Protocol

from ..._extensions import TASKS, TasksFacts
from ...errors import INVALID_PARAMS, ProtocolError
from ...events import Event, Negotiated, RequestCancelled, RequestReceived, TaskCreated
from ...packages import bindings
from ...session._common import speech
from ...session.tasks import declares
from ..limits import NOT_MINE
from ..task_facts import undeclared
from ..tasks_extension_to_core import TaskBridge, TaskHost, TranslatedTask

__all__ = ["GatewayTasks", "LinkTasks", "TaskAnswer", "TaskLink"]

_KEYS = itertools.count(1)  # the gateway's handlers awaiting a translator's answer


class TaskAnswer(dict[str, Any]):
    """A result of the extension's that answers a client's call through the HTTP gateway (the
    task the server created): no class of the client's revision has it, so the front's session
    sends it as it is (``front.GatewayFront``)."""


class _LinkBounds(Protocol):
    @property
    def max_in_flight(self) -> int:
        """Requests of one link awaiting the server at once."""
        ...


class TaskLink(TaskHost, Protocol):
    """What a translator asks of its gateway ``Link`` beyond ``TaskHost``."""

    used: float  # when it was last used (its idle sweep)
    tasks: LinkTasks | None  # its translator, once it has one

    @property
    def gateway(self) -> _LinkBounds: ...

    @property
    def pending(self) -> dict[Any, Any]:
        """The client's requests sent down the link (``link.Pending``), by id to the server."""
        ...

    def settle(self, pending: Any, event: Any) -> None:
        """End the client's request ``pending`` with ``event``, its answer."""
        ...

    def flush(self) -> None:
        """Send what the link's session queued for the server."""
        ...

    def say(self) -> None:
        """Log what the link has to say."""
        ...


def _owner(auth: Any) -> str | None:
    """Who a gateway client's request is from, as the Streamable HTTP server names a task's
    owner (``auth.resource.principal``; None without authorization)."""
    if auth is None:
        return None
    from ...auth.resource import principal  # (a token came: the HTTP extra is there)

    return principal(auth)


class LinkTasks(TaskBridge):
    """The translator of one HTTP gateway ``Link`` whose client speaks the extension's revision
    and whose server the core revision: the shared translation (``TaskBridge``), its answers given to the gateway's handlers awaiting them instead of written to a client
    stream, and the task's input requests answered through the link's ``serve``."""

    bridge: TaskLink

    def __init__(self, link: TaskLink, facts: TasksFacts, front: GatewayTasks) -> None:
        super().__init__(link, facts, front.tools)
        self.front = front
        self.calls: dict[int, asyncio.Future[Any]] = {}  # the handlers awaiting an answer
        self.inputs: dict[Any, asyncio.Future[Any]] = {}  # the server's input requests' answers
        self.owners: dict[str, str | None] = {}  # task id -> who made it

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """The answer to the client's extension request (get, update, cancel)."""
        self.bridge.used = time.monotonic()  # the link is in use (its idle sweep)
        key = next(_KEYS)
        future = asyncio.get_running_loop().create_future()
        self.calls[key] = future
        try:
            self._request(key, method, params)
            return await future
        finally:
            self.calls.pop(key, None)
            self.bridge.say()

    def asked(self, e: RequestReceived) -> asyncio.Future[Any] | None:
        """The answer to come to the server's request ``e`` when it is an input request of one
        of these tasks (asked of the client through its gets, answered by its update)."""
        if len(self.inputs) >= self.limit():
            return None  # the link answers it as any other request of the server's
        future = asyncio.get_running_loop().create_future()
        self.inputs[e.id] = future
        if not self._asks(e):
            del self.inputs[e.id]
            return None
        return future

    def server_event(self, e: Event) -> bool:
        if isinstance(e, RequestReceived):
            return False  # the link's ``serve`` asks ``asked``
        if isinstance(e, RequestCancelled):
            future = self.inputs.pop(e.id, None)
            if future is not None:
                future.cancel()
        return super().server_event(e)

    def _created(self, e: TaskCreated) -> bool:
        link = self.bridge
        pending = link.pending.get(e.id)
        call = pending.call if pending is not None else None
        if call is None or call.revision != self.client:
            return False
        del link.pending[e.id]
        created = self._made(e, call.revision, call.method)
        self.owners[e.task_id] = _owner(getattr(call, "auth", None))
        self.front.where[e.task_id] = self
        link.settle(pending, TaskAnswer(created))  # the handler returns it as it is
        return True

    def _failed(self, what: str, task: TranslatedTask, id: Any, error: ProtocolError) -> None:
        super()._failed(what, task, id, error)
        if task.id not in self.tasks:  # forgotten by the server
            self.owners.pop(task.id, None)
            if self.front.where.get(task.id) is self:
                del self.front.where[task.id]

    def limit(self) -> int:
        return int(self.bridge.gateway.max_in_flight)

    def _sent(self) -> None:
        self.bridge.flush()

    def _respond(self, sid: Any, answer: Any) -> None:
        future = self.inputs.pop(sid, None)
        if future is None or future.done():
            return
        if isinstance(answer, ProtocolError):
            future.set_exception(answer)
        else:
            future.set_result(answer)

    def _answer(self, id: Any, result: dict[str, Any], session: bool = False) -> None:
        future = self.calls.pop(id, None)
        if future is not None and not future.done():
            future.set_result(result)

    def _error(self, id: Any, error: ProtocolError) -> None:
        future = self.calls.pop(id, None)
        if future is not None and not future.done():
            future.set_exception(ProtocolError(error.code, error.message, error.data))

    def close(self, error: ProtocolError) -> None:
        """The link ended: every handler and input request waiting gets ``error``."""
        for key in list(self.calls):
            self._error(key, error)
        for future in self.inputs.values():
            if not future.done():
                future.set_exception(ProtocolError(error.code, error.message, error.data))
        self.inputs.clear()
        for task_id in self.tasks:
            if self.front.where.get(task_id) is self:
                del self.front.where[task_id]
        super().close(error)


class GatewayTasks:
    """The HTTP gateway's part of the translation for clients of the extension's revision in
    front of a server of the core revision: the tasks layer of its Streamable HTTP front (what
    ``mcpbind.tasks.Tasks`` offers ``StreamableHTTPServer(tasks=...)``: the extension's get,
    update and cancel reach it, not the front's session), a translator per link
    (``LinkTasks``), the task support of the server's tools (learnt from any link's lists),
    and which link's translator holds each task. Off (it owns nothing) until ``between``
    finds such a server."""

    def __init__(self, facts: TasksFacts) -> None:
        self.facts = facts
        self.on = False
        self.methods = frozenset((facts.get, facts.update, facts.cancel))
        meta = speech(facts.revision).facts.request_meta
        assert meta is not None  # the extension rides on the per-request envelope
        self._meta = meta
        self.meta_key = speech(facts.revision).send(facts.eligible).meta_key  # a request's _meta
        self._versions = bindings(facts.revision).FACTS.versions
        self.tools: dict[str, bool] = {}
        self.where: weakref.WeakValueDictionary[str, LinkTasks] = weakref.WeakValueDictionary()

    @classmethod
    def of(cls, client_revisions: Iterable[str]) -> GatewayTasks | None:
        """The layer when one of the gateway's client revisions has an extension that replaces
        a core revision's tasks, else None."""
        for revision in client_revisions:
            facts = TASKS.get(revision)
            if facts is not None and facts.core is not None:
                return cls(facts)
        return None

    def between(self, negotiated: Negotiated) -> bool:
        """Turn on when the server agreed on the core revision the extension replaces."""
        self.on = negotiated.revision == self.facts.core
        return self.on

    async def forward(self, link: TaskLink, call: Any) -> Any:
        """Give the link of a client of the extension's revision its translator; the request
        itself is the link's (``NOT_MINE``)."""
        if link.tasks is None and call.revision == self.facts.revision:
            link.tasks = LinkTasks(link, self.facts, self)
        return NOT_MINE

    # -- the front's tasks layer ------------------------------------------------------------------

    def advertise(self, capabilities: Any) -> Any:
        return capabilities  # each client is told the server's face (``front.Face``)

    def share(self, store: Any) -> None:
        """Tasks live with the links of one gateway process (not shared through a store)."""

    def owns(self, method: str | None, name: str | None) -> bool:
        return self.on and method in self.methods

    def speaks(self, params: Any) -> bool:
        meta = params.get(self.meta_key) if isinstance(params, dict) else None
        version = meta.get(self._meta.version_key) if isinstance(meta, dict) else None
        return version in self._versions

    def listen(self, id: Any, params: dict[str, Any], owner: str | None = None) -> None:
        return None  # no subscription streams of tasks through the gateway

    async def respond(self, method: str, params: dict[str, Any], owner: str | None = None) -> Any:
        """The answer to the extension's ``method`` from the link holding the task."""
        task_id = params.get(self.facts.task_id)
        translator = self.where.get(task_id) if isinstance(task_id, str) else None
        if translator is None or translator.owners.get(str(task_id), "") != owner:
            if not declares(params, self.facts):
                raise undeclared(method, self.facts, self._meta.capabilities_key)
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        return await translator.request(method, params)

    async def aclose(self) -> None:
        """Nothing of its own to end: the links end their translators."""
