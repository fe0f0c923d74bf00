"""Tasks from a client of the core revision's tasks (2025-11-25) to a server of the tasks
extension of the revision that replaced them (2026-07-28): the translation, whatever carries it
(the reverse direction is ``tasks_extension_to_core.py``).

``CoreTasks.offered(negotiated)`` is the translation when the server agreed on the extension's
revision and offers the extension (and the extension replaces a core revision's tasks), else
None. Each front gives it, per request of the client, a ``Port``: how a request reaches the
server (declaring the extension, as the link's own requests do not: ``task_facts.undeclared_tasks``),
how the client is asked a request of its own, how the wait between two polls runs, and the
conversions between the two revisions (the front's ``Crossing``). The HTTP gateway's port is
``gateway/tasks_core_to_extension.py`` (stateless POSTs of its own, asyncio), the stdio bridge's
``stdio/tasks_core_to_extension.py``
(its one server side session, the bridge's event loop). The tasks of one client connection are a
``Table`` (at most ``MAX_TASKS``).

- a task-augmented ``tools/call`` becomes the extension's call; the task it creates comes back as
  the core ``CreateTaskResult`` (a call the server answers at once becomes a task that is
  already ``completed``, kept in the table); a call the client cancels while it is on its way
  is let run to the server's answer (cancelling the request would drop that answer, and with it
  the id of a task the server made meanwhile), and a task that answer creates is cancelled at
  the server with the extension's ``tasks/cancel``, as is one created for a client whose
  connection ended meanwhile (``Port.gone``); each is logged (``Port.note``), and a failure of
  that cancel is logged too, never raised;
- ``tasks/get`` and ``tasks/cancel`` are the extension's (the cancel answered with the task as
  it then is), ``tasks/list`` lists the table's tasks as last seen;
- ``tasks/result`` polls the extension's ``tasks/get`` at the task's poll interval (bounded by
  ``POLL``) until the task is over and answers with its result (or error); the input a task asks
  for meanwhile is asked of the client as the core revision's own requests, tied to the task by
  the related-task ``_meta`` key, and the answers go back with the extension's update.

Every method, key and status comes from the generated facts (``TASKS``, ``FACTS``) and classes
(``TASK_TYPES``, the revisions' own).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

import msgspec
from msgspec import UNSET

from .._extension_tasks import TASK_TYPES
from .._extensions import TASKS, TasksFacts
from .._support import convert
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from ..session._common import checked, speech
from ..session.tasks import with_extension
from .limits import MAX_TASKS
from .task_facts import core_task, wire_key

if TYPE_CHECKING:
    from ..events import Negotiated

__all__ = ["MAX_TASKS", "POLL", "Conversions", "CoreTasks", "Port", "Table"]

# Tasks one client connection keeps (for tasks/list, and those answered at once); past it the
# oldest that was over when last seen is forgotten, and when none was a task-augmented call is
# answered with -32603 (calls in flight at once may each add one more).
# The bounds of the wait between two polls of tasks/result (seconds), whatever pollIntervalMs
# the server suggests, and the wait when it suggests none.
POLL = (0.05, 5.0)
DEFAULT_POLL = 0.5
# The prefix of the ids of tasks the server answered at once (kept by the translation only).
_OWN = "mcpbind-"

# task id -> the task as last seen (a generated class of the extension's tasks/get answers)
Table = dict[str, Any]


class Conversions(Protocol):
    """The conversions between the client's revision and the server's (a ``Crossing``'s)."""

    def down_params(self, method: str, params: Any, revision: str) -> tuple[Any, Any]:
        """The client's params of ``method`` for the server of ``revision``, and their _meta."""
        ...

    def carry(self, obj: Any, target: str, what: str) -> Any:
        """``obj`` into the revision ``target``, its losses logged."""
        ...

    def up_result(self, result: Any, revision: str, method: str) -> Any:
        """The server's result of ``method`` for a client of ``revision``."""
        ...


class Port(Protocol):
    """How one request of the client reaches the server and the client (module docstring)."""

    @property
    def crossing(self) -> Conversions:
        """The conversions between the client's revision and the server's."""
        ...

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The server's result (plain JSON) of the extension revision's request ``method``
        with ``params`` (plain JSON), the extension declared; an error raises
        ``ProtocolError``."""
        ...

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """The client's result of a request of its own revision (an input request of a
        task); an error raises ``ProtocolError``."""
        ...

    async def wait(self, seconds: float) -> None:
        """The wait between two polls."""
        ...

    @property
    def gone(self) -> ProtocolError | None:
        """The error the client's request gets because its connection ended (None while it is
        open)."""
        ...

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` after the client's request is over (counted in flight on its
        connection until it ends)."""
        ...

    def note(self, line: str) -> None:
        """Log ``line`` (what the translation did that nobody asked it)."""
        ...


class CoreTasks:
    """The translation for one server (module docstring)."""

    def __init__(self, facts: TasksFacts) -> None:
        assert facts.core is not None  # ``offered`` builds one only then
        self.facts = facts
        self.core = facts.core
        self.types = TASK_TYPES[facts.revision]
        sp = speech(facts.core)
        tasks = sp.facts.tasks
        assert tasks is not None  # the core revision has task-augmented requests
        self.when = tasks.when  # the params field that makes a call task-augmented
        self.task_attr = tasks.payload_task_id  # the core task requests' task id attribute
        life = sp.facts.lifecycle
        self.get, self.result = life["task_get"], life["task_result"]
        self.list, self.cancel = life["task_list"], life["task_cancel"]
        self.methods = {self.get, self.result, self.list, self.cancel}
        self.results = {m: sp.facts.wires[m].result for m in self.methods}
        self.call_result = sp.facts.wires[facts.eligible].result  # what tasks/result gives
        self.created = tasks.result  # the core CreateTaskResult, and its task's key
        self.created_key = wire_key(tasks.result, tasks.task_id[0])
        self.listed_key = wire_key(self.results[self.list], "tasks")
        # The core revision's task id key (its requests', and the related-task _meta value's).
        self.task_key = wire_key(sp.methods[self.get].params, self.task_attr)
        self.meta_key = wire_key(sp.methods[self.get].params, "meta")  # every request's _meta
        # The extension's: the key of its requests' task id, of a result's kind.
        self.ext_task_key = facts.task_id
        ext = speech(facts.revision)
        meta_key = ext.send(facts.eligible).meta_key
        assert meta_key is not None and ext.facts.request_meta is not None  # (its envelope)
        self.ext_meta_key = meta_key
        self.caps_key = ext.facts.request_meta.capabilities_key
        kinds = speech(facts.revision).facts.result_kinds
        assert kinds is not None  # the extension's results are told apart by it
        self.kind = kinds.key

    @classmethod
    def offered(cls, negotiated: Negotiated) -> CoreTasks | None:
        """The translation when the server agreed on a revision the tasks extension extends and
        offers the extension (which replaces a core revision's tasks), else None."""
        facts = TASKS.get(negotiated.revision)
        if facts is None or facts.core is None or facts.revision not in TASK_TYPES:
            return None
        caps = msgspec.to_builtins(negotiated.capabilities)
        extensions = caps.get(facts.extensions_key) if isinstance(caps, dict) else None
        if not isinstance(extensions, dict) or facts.extension not in extensions:
            return None
        return cls(facts)

    def declared(self, method: str, params: dict[str, Any], capabilities: Any) -> dict[str, Any]:
        """``params`` of the extension revision's ``method`` for a port that sends it on a
        session whose ``capabilities`` (the client's, as that session declares them on every
        request) leave the extension out: the task-augmented call declares it in its own
        ``_meta`` (the session's envelope keeps what is there); the extension's own requests
        are declared by the session itself."""
        if method != self.facts.eligible:
            return params
        meta = dict(params.get(self.ext_meta_key) or {})
        meta[self.caps_key] = with_extension(capabilities, self.facts)
        return {**params, self.ext_meta_key: meta}

    def mine(self, method: str, revision: str, params: Any) -> bool:
        """Whether the client's request is one this translation answers: a task request of the
        core revision, or a task-augmented call."""
        if revision != self.core:
            return False
        if method == self.facts.eligible:
            return getattr(params, self.when, UNSET) not in (UNSET, None)
        return method in self.methods

    async def answer(self, table: Table, port: Port, method: str, params: Any) -> Any:
        """The answer (a generated result of the core revision) to the client's request
        ``method`` (one ``mine`` takes) on the connection whose tasks ``table`` holds."""
        if method == self.facts.eligible:
            return await self._call(table, port, method, params)
        if method == self.list:
            listed = [self._core_task(task) for task in table.values()]
            return self._typed({self.listed_key: listed}, self.results[method], method)
        task_id = getattr(params, self.task_attr, None)
        if not isinstance(task_id, str) or task_id not in table:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        if method == self.result:
            return await self._payload(table, port, task_id)
        if method == self.cancel:
            if task_id.startswith(_OWN):
                raise ProtocolError(
                    INVALID_PARAMS, f"Invalid params: task {task_id!r} is already completed"
                )
            await port.send(self.facts.cancel, {self.ext_task_key: task_id})
        task = await self._snapshot(table, port, task_id)
        return self._typed(self._core_task(task), self.results[method], method)

    # -- the requests ----------------------------------------------------------------------------

    async def _call(self, table: Table, port: Port, method: str, params: Any) -> Any:
        if len(table) >= MAX_TASKS and not self._forget_one(table):
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: too many tasks (the bridge keeps at most {MAX_TASKS} per client "
                "connection, and none of them is over); send it again once one is over",
                {"max_tasks": MAX_TASKS},
            )
        plain = msgspec.structs.replace(params, **{self.when: UNSET})
        down, _ = port.crossing.down_params(method, plain, self.core)
        # Shielded: a client's cancel must not drop the answer, which names the task to cancel.
        sending = asyncio.ensure_future(port.send(method, msgspec.to_builtins(down)))
        try:
            answer = await asyncio.shield(sending)
        except asyncio.CancelledError:
            port.later(self._orphaned(port, sending, "the client cancelled"))
            raise
        gone = port.gone
        if gone is not None:
            await self._orphaned(port, sending, "of a client whose connection ended")
            raise gone
        f = self.facts
        kind = answer.get(self.kind)
        task: Any
        if kind == f.task_result:
            task = self._ext(answer, self.types.create_result, method)
        elif kind in (None, f.complete_result):
            now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            task = self.types.by_status[f.completed](
                task_id=_OWN + secrets.token_urlsafe(12),
                created_at=now,
                last_updated_at=now,
                ttl_ms=None,
                result_type=f.complete_result,
                result=self._ext(answer, self.types.call_result, method),
            )
        else:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server answered the task-augmented {method!r} with a "
                f"{kind!r} result, which MCP {self.core} tasks cannot carry",
            )
        table[task.task_id] = task
        return self._typed({self.created_key: self._core_task(task)}, self.created, method)

    async def _orphaned(self, port: Port, sending: asyncio.Future[Any], why: str) -> None:
        """The server's answer to a task-augmented call nobody awaits any more (``why``): a task
        it creates is cancelled at the server; what happens is logged, never raised."""
        method, f = self.facts.eligible, self.facts
        try:
            answer = await sending
        except asyncio.CancelledError:
            return  # the bridge ended: the server's end of it goes with it
        except Exception as error:  # noqa: BLE001 - logged: nobody awaits it
            port.note(f"a task-augmented {method!r} {why}: it then failed: {error}")
            return
        if answer.get(self.kind) != f.task_result:
            port.note(f"a task-augmented {method!r} {why}: the server's answer is dropped")
            return
        try:
            task_id = self._ext(answer, self.types.create_result, method).task_id
            await port.send(f.cancel, {self.ext_task_key: task_id})
        except Exception as error:  # noqa: BLE001 - logged: nobody awaits it
            port.note(
                f"a task-augmented {method!r} {why}: the task the server then created could "
                f"not be cancelled ({f.cancel!r}): {error}"
            )
            return
        port.note(
            f"a task-augmented {method!r} {why}: the task {task_id!r} the server then "
            f"created is cancelled ({f.cancel!r})"
        )

    def _forget_one(self, table: Table) -> bool:
        """Forget the oldest task of ``table`` that was over when last seen (False: none)."""
        by_status, f = self.types.by_status, self.facts
        over = (by_status[f.completed], by_status[f.failed], by_status[f.cancelled])
        oldest = next((k for k, task in table.items() if type(task) in over), None)
        if oldest is None:
            return False
        del table[oldest]
        return True

    async def _snapshot(self, table: Table, port: Port, task_id: str) -> Any:
        """The task as the server says it is now (kept: a task answered at once)."""
        if task_id.startswith(_OWN):
            return table[task_id]
        f = self.facts
        answer = await port.send(f.get, {self.ext_task_key: task_id})
        task = table[task_id] = self._ext(answer, self.types.get_result, f.get)
        return task

    async def _payload(self, table: Table, port: Port, task_id: str) -> Any:
        f, by_status = self.facts, self.types.by_status
        asked: set[str] = set()
        while True:
            task = await self._snapshot(table, port, task_id)
            kind = type(task)
            if kind is by_status[f.completed]:
                return self._result(port, task_id, task.result)
            if kind is by_status[f.failed]:
                error = task.error
                data = None if error.data is UNSET else msgspec.to_builtins(error.data)
                raise ProtocolError(error.code, error.message, data)
            if kind is by_status[f.cancelled]:
                raise ProtocolError(
                    INVALID_PARAMS, f"Invalid params: task {task_id!r} was cancelled"
                )
            if kind is by_status[f.input_required]:
                new = {n: r for n, r in task.input_requests.items() if n not in asked}
                if new:
                    answers = {}
                    for name, request in new.items():
                        answers[name] = await self._ask(port, task_id, request)
                        asked.add(name)
                    update = {self.ext_task_key: task_id, f.input_responses: answers}
                    await port.send(f.update, update)
                    continue  # what the answers changed is seen at once
            interval = task.poll_interval_ms
            wait = DEFAULT_POLL if interval is UNSET else interval / 1000
            await port.wait(min(max(wait, POLL[0]), POLL[1]))

    async def _ask(self, port: Port, task_id: str, request: Any) -> Any:
        """One input request of the task, asked of the client as its own request; its answer
        as plain JSON."""
        method = request.method
        if method not in speech(self.core).methods:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the task asks for {method!r} input, which MCP {self.core} "
                "cannot ask for",
            )
        params = port.crossing.carry(
            request.params, self.core, f"the params of the task's {method!r}"
        )
        plain = msgspec.to_builtins(params) if params is not UNSET else {}
        key, meta_key = self.facts.related_task_key, self.meta_key
        if key is not None:
            plain[meta_key] = {**(plain.get(meta_key) or {}), key: {self.task_key: task_id}}
        return msgspec.to_builtins(await port.ask(method, plain))

    def _result(self, port: Port, task_id: str, result: Any) -> Any:
        """The task's result in the core revision, tied to the task as the core revision says
        a payload is."""
        method = self.facts.eligible
        typed = port.crossing.up_result(result, self.core, method)
        key, meta_key = self.facts.related_task_key, self.meta_key
        if key is None:
            return typed
        plain = msgspec.to_builtins(typed)
        plain[meta_key] = {**(plain.get(meta_key) or {}), key: {self.task_key: task_id}}
        return self._typed(plain, self.call_result, method)

    # -- the two revisions' classes -------------------------------------------------------------

    def _ext(self, answer: Any, cls: Any, method: str) -> Any:
        """The server's ``answer`` to ``method`` as the extension's class ``cls``."""
        try:
            return convert(answer, cls)
        except msgspec.ValidationError as exc:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server's answer to {method!r} is not a result of MCP "
                f"{self.facts.revision} ({self.facts.extension}): {exc}",
            ) from None

    def _core_task(self, task: Any) -> dict[str, Any]:
        return core_task(msgspec.to_builtins(task), self.facts)

    def _typed(self, plain: Any, cls: Any, method: str) -> Any:
        return checked(plain, cls, self.core, "$.result")
