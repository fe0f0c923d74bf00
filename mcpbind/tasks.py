"""The tasks extension (SEP-2663) on a server: tools whose call may become a task the client polls.

``Tasks`` keeps the tasks of one server process and answers the extension's methods; give it to
``StreamableHTTPServer(tasks=...)`` (or ``App.asgi(tasks=...)``), which hands it the requests it
owns. Every method name, key and status comes from the generated facts of the pinned extension
(``mcpbind._extensions.TASKS``) and of the revision it extends; the results a task ends with are
checked against that revision's generated result class. docs/tasks.md describes the behaviour
and every bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from ._extension_tasks import TASK_TYPES
from ._extensions import TASKS, TasksFacts
from ._support import meta_key
from .errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ProtocolError,
)
from .packages import bindings
from .session._common import checked

if TYPE_CHECKING:
    from .tasks_redis import RedisTasks

_log = logging.getLogger(__name__)

__all__ = [
    "MAX_INPUT_REQUESTS",
    "MAX_LISTENERS",
    "MAX_LISTEN_TASKS",
    "MAX_TASKS",
    "MAX_TASKS_PER_OWNER",
    "POLL_INTERVAL_MS",
    "TTL_MS",
    "TaskContext",
    "Tasks",
]

MAX_TASKS = 1000
MAX_TASKS_PER_OWNER = 100
TTL_MS = 300_000
POLL_INTERVAL_MS = 500
MAX_INPUT_REQUESTS = 16
MAX_LISTENERS = 100
MAX_LISTEN_TASKS = 100

# The task fields this layer writes besides its id and status (TasksFacts), checked against the
# pinned extension's.
_TASK_FIELDS = ("createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs")

Work = Callable[["TaskContext", dict[str, Any]], Awaitable[Any]]
When = Callable[[dict[str, Any]], bool]


@dataclass(eq=False)
class _Task:
    """One task and what it ended with (a result, or an error object)."""

    id: str
    created: str
    updated: str
    expires: float  # monotonic seconds
    status: str
    owner: str | None  # who created it (the token's subject or client); only they reach it
    runner: asyncio.Task[None] | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    pending: dict[str, Any] = field(default_factory=dict)  # input requests not yet answered
    answers: dict[str, Any] = field(default_factory=dict)
    answered: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(eq=False)
class _Listener:
    """A subscription stream that asked for the status of some tasks: the newest status of each
    one not yet sent (at most one per task, so it holds at most as many as it asked for)."""

    owner: str | None
    ids: frozenset[str]
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    wake: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(frozen=True)
class _Tool:
    work: Work
    required: bool
    when: When | None


class TaskContext:
    """What a task's work can do besides returning its result: ask the client for input."""

    def __init__(self, tasks: Tasks, task: _Task) -> None:
        self._tasks = tasks
        self._task = task

    @property
    def task_id(self) -> str:
        return self._task.id

    async def ask(self, requests: Mapping[str, Any]) -> dict[str, Any]:
        """Put the task in input_required with ``requests`` (key -> an input request such as
        ``{"method": "elicitation/create", "params": {...}}``) and wait until the client has
        answered every one through the update method; the answers, by key. More than
        ``max_input_requests`` at once is a -32603 error."""
        return await self._tasks._ask(self._task, dict(requests))


class Tasks:
    """The tasks of one server process, for the revision the pinned extension extends.

    Bounds (docs/tasks.md): ``max_tasks`` (1000) tasks kept at once, and
    ``max_tasks_per_owner`` (100) of one owner (the subject of the request's bearer token, or its
    client; all unauthenticated requests are one owner), a task created past either is refused
    with -32603; each task is kept ``ttl_ms`` (5 min) after its creation, then forgotten
    (a running one is cancelled first), and its ``ttlMs`` says so; a task asks at most
    ``max_input_requests`` (16) input requests at once. ``poll_interval_ms`` (500) is the
    interval suggested to clients.
    """

    def __init__(
        self,
        *,
        max_tasks: int = MAX_TASKS,
        max_tasks_per_owner: int = MAX_TASKS_PER_OWNER,
        ttl_ms: int = TTL_MS,
        poll_interval_ms: int = POLL_INTERVAL_MS,
        max_input_requests: int = MAX_INPUT_REQUESTS,
        max_listeners: int = MAX_LISTENERS,
        max_listen_tasks: int = MAX_LISTEN_TASKS,
        revision: str | None = None,
    ) -> None:
        if revision is None:
            if len(TASKS) != 1:
                raise ValueError(f"name the revision: the extension extends {sorted(TASKS)}")
            revision = next(iter(TASKS))
        self.facts: TasksFacts = TASKS[revision]
        self.revision = revision
        meta = bindings(revision).FACTS.request_meta
        assert meta is not None  # the extension rides on the per-request envelope
        self._meta = meta
        self._meta_key = bindings(revision).FACTS.meta_key  # where params and results keep it
        wire = bindings(revision).FACTS.wires[self.facts.eligible]
        self._result_class = wire.result
        self._request_class = wire.wire  # the whole request message of a call
        self.max_tasks = max_tasks
        self.max_tasks_per_owner = max_tasks_per_owner
        self._owned: dict[str | None, int] = {}  # tasks kept, by owner
        kinds = bindings(revision).FACTS.result_kinds
        assert kinds is not None  # the extension's results are told apart by it
        self._kind = kinds.key  # the result discriminator's key (resultType)
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.max_input_requests = max_input_requests
        self._tools: dict[str, _Tool] = {}
        self._tasks: dict[str, _Task] = {}  # oldest first
        f = self.facts
        self.methods = frozenset((f.get, f.update, f.cancel))
        # Task status notifications on the core revision's subscription streams (optional in
        # the extension): a stream whose filter names taskIds is this layer's.
        facts = bindings(revision).FACTS
        self._listen = facts.lifecycle.get("listen")
        # the listen params member holding the filter the extension adds its task ids to
        found = TASK_TYPES[revision].listen_filter
        self._filter = found[0] if found is not None else None
        self.listen_method = self._listen  # the core method a task status stream rides on
        self._acknowledged = facts.features.get("acknowledged")
        self.max_listeners = max_listeners
        self.max_listen_tasks = max_listen_tasks
        self._listeners: set[_Listener] = set()
        # Shared with other workers (``share``): the store, and the states waiting to be written.
        self._shared: RedisTasks | None = None
        self._dirty: dict[str, _Task] = {}
        self._writer: asyncio.Task[None] | None = None
        self._subscription_key: str | None = None
        if self._listen is not None and self._acknowledged is not None:
            ack = bindings(revision).METHODS[self._acknowledged].params
            self._subscription_key = meta_key(ack, "subscription_id")
        unknown = set(_TASK_FIELDS) - set(f.task_fields)
        if unknown:  # the pinned extension renamed a field this layer writes
            raise ValueError(f"{f.package} {f.version} has no task fields {sorted(unknown)}")

    # -- configuration ------------------------------------------------------------------------

    def tool(
        self, name: str, work: Work, *, required: bool = False, when: When | None = None
    ) -> None:
        """Run calls of the tool ``name`` as tasks for clients that declare the extension.

        ``work(context, params)`` gets the request's params (plain JSON) and returns the tool's
        result (a result Struct or plain JSON); a ``ProtocolError`` it raises fails the task with
        that error. ``required``: a client that did not declare the extension gets -32021
        instead of a synchronous call. ``when(params)``, if given, decides per call whether
        this call becomes a task (else the server's handler answers it as usual)."""
        self._tools[name] = _Tool(work, required, when)

    def advertise(self, capabilities: Any) -> Any:
        """``capabilities`` (plain JSON, or None) with the extension under its extensions."""
        caps = dict(msgspec.to_builtins(capabilities) or {})
        key = self.facts.extensions_key
        caps[key] = {**(caps.get(key) or {}), self.facts.extension: {}}
        return caps

    # -- serving ------------------------------------------------------------------------------

    def owns(self, method: str | None, name: str | None) -> bool:
        """Whether a request of ``method`` (naming ``name``, its Mcp-Name) may be this layer's:
        one of the extension's methods, a call of a tool registered here, or a subscription
        stream (this layer's when its filter names ``taskIds``)."""
        return (
            method in self.methods
            or (method == self.facts.eligible and name in self._tools)
            or (method is not None and method == self._listen)
        )

    def opted_in(self, params: Any) -> bool:
        """Whether the request's ``_meta`` declares the extension among the client's capabilities."""
        meta = params.get(self._meta_key) if isinstance(params, dict) else None
        caps = meta.get(self._meta.capabilities_key) if isinstance(meta, dict) else None
        extensions = caps.get(self.facts.extensions_key) if isinstance(caps, dict) else None
        return isinstance(extensions, dict) and isinstance(
            extensions.get(self.facts.extension), dict
        )

    def speaks(self, params: Any) -> bool:
        """Whether the request's ``_meta`` names the revision the extension extends."""
        meta = params.get(self._meta_key) if isinstance(params, dict) else None
        version = meta.get(self._meta.version_key) if isinstance(meta, dict) else None
        return version in bindings(self.revision).FACTS.versions

    def answer(self, method: str, params: dict[str, Any], owner: str | None = None) -> Any:
        """The result of a request this layer owns (plain JSON), or None when a tool call is
        to be answered by the server's handler after all. ``owner`` names who sent it (see
        the class); a task of another owner is unknown to it. Raises ``ProtocolError``."""
        self._expire()
        f = self.facts
        if method == f.eligible:
            return self._call(params, owner)
        if method == self._listen:
            return None  # a stream, not a result: ``listen``
        task_id = self._task_id(method, params)
        task = self._tasks.get(task_id)
        if task is None or task.owner != owner:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        if method == f.get:
            return {**self._detailed(task), self._kind: f.complete_result}
        if method == f.update:
            self._update(task, params.get(f.input_responses))
        else:
            self._cancel(task)
        return {self._kind: f.complete_result}

    def _cancel(self, task: _Task) -> None:
        f = self.facts
        if task.status not in (f.completed, f.failed, f.cancelled):
            self._settle(task, f.cancelled)
            if task.runner is not None:
                task.runner.cancel()

    def _task_id(self, method: str, params: dict[str, Any]) -> str:
        """The task a request of the extension names, once its envelope is checked as the
        session checks it (a malformed one is -32602 naming the path) and then its gate."""
        envelope = self._meta_key
        checked(params.get(envelope), self._meta.type, self.revision, f"$.params.{envelope}")
        if not self.opted_in(params):
            raise self._missing(method)
        key = self.facts.task_id
        task_id = params.get(key)
        if not isinstance(task_id, str):
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {method!r} needs a string {key}")
        return task_id

    # -- several workers ----------------------------------------------------------------------

    def share(self, store: Any) -> None:
        """Share the tasks with every worker of ``store`` when it is a ``RedisStore`` (the HTTP
        server calls it with its own store): each task's state is kept there too, and
        ``respond`` answers for tasks another worker runs."""
        from .transports.store import RedisStore

        if isinstance(store, RedisStore) and self._shared is None:
            from .tasks_redis import RedisTasks

            f = self.facts
            over = (f.completed, f.failed, f.cancelled)
            self._shared = RedisTasks(store.redis, store.prefix, over, self._remote)

    async def respond(self, method: str, params: dict[str, Any], owner: str | None = None) -> Any:
        """``answer``, for a server whose workers share the tasks (``share``): a task created
        here is in the shared store before its creation is answered, and a request naming a
        task another worker runs is answered from the store (get) or passed to that worker
        (update, cancel). Without sharing, ``answer`` itself. A store that cannot be reached
        is -32603 (a task it could not record is not kept)."""
        if self._shared is None:
            return self.answer(method, params, owner)
        from .tasks_redis import Unreachable

        try:
            return await self._respond(method, params, owner)
        except Unreachable as error:
            raise ProtocolError(
                INTERNAL_ERROR, f"Internal error: the shared task store cannot be reached: {error}"
            ) from None

    async def _respond(self, method: str, params: dict[str, Any], owner: str | None) -> Any:
        shared = self._shared
        assert shared is not None
        f = self.facts
        if method == f.eligible or method == self._listen:
            result = self.answer(method, params, owner)
            if isinstance(result, dict):
                task = self._tasks.get(result.get(f.task_id))  # type: ignore[arg-type]
                if task is not None and result.get(self._kind) == f.task_result:
                    try:
                        await shared.start()
                        await shared.save(task.id, self._record(task), self._left_ms(task))
                    except BaseException:
                        self._forget(task)  # not recorded: not kept, its work stopped
                        if task.runner is not None:
                            task.runner.cancel()
                        raise
            return result
        self._expire()
        task_id = self._task_id(method, params)
        if task_id in self._tasks:
            return self.answer(method, params, owner)
        record = await shared.load(task_id)
        if record is None or record.get("owner") != owner:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        known = record["task"]
        if method == f.get:
            return {**known, self._kind: f.complete_result}
        await shared.start()
        if method == f.update:
            responses = params.get(f.input_responses)
            if not isinstance(responses, dict):
                raise ProtocolError(
                    INVALID_PARAMS,
                    f"Invalid params: {f.input_responses} must be an object of responses",
                )
            await shared.publish(f.update, task_id, responses)
        elif known.get(f.status) not in (f.completed, f.failed, f.cancelled):
            updated = {k: v for k, v in known.items() if k != f.input_requests}
            updated.update({f.status: f.cancelled, "lastUpdatedAt": _now()})
            left = int(record.get("expires", 0) - time.time() * 1000)
            await shared.save(task_id, {**record, "task": updated}, left)
            await shared.publish(f.cancel, task_id)
        return {self._kind: f.complete_result}

    def _remote(self, op: str, task_id: str, data: Any) -> None:
        """Another worker passed on an update or a cancel of a task: applied if it runs here."""
        task = self._tasks.get(task_id)
        if task is None:
            return
        if op == self.facts.update and isinstance(data, dict):
            self._update(task, data)
        elif op == self.facts.cancel:
            self._cancel(task)

    def _record(self, task: _Task) -> dict[str, Any]:
        """What the shared store keeps of ``task``: its owner, deadline (Unix ms) and state."""
        left = self._left_ms(task)
        return {
            "owner": task.owner,
            "expires": int(time.time() * 1000) + left,
            "task": self._detailed(task),
        }

    @staticmethod
    def _left_ms(task: _Task) -> int:
        return max(1, int((task.expires - time.monotonic()) * 1000))

    def _write_later(self, task: _Task) -> None:
        """Write ``task``'s new state to the shared store, in order, after the change (one
        writer; only the newest state of each task waits, so it never holds more than the
        tasks kept)."""
        self._dirty[task.id] = task
        if self._writer is None or self._writer.done():
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        shared = self._shared
        assert shared is not None
        while self._dirty:
            batch, self._dirty = self._dirty, {}
            for task in batch.values():
                try:
                    await shared.save(task.id, self._record(task), self._left_ms(task))
                except Exception:  # Redis gone a moment: the next change writes it again
                    _log.exception("writing task %s to the shared store", task.id)

    def _missing(self, what: str) -> ProtocolError:
        ext = self.facts.extension
        return ProtocolError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: {what!r} needs the {ext} extension declared "
            f"in the request's _meta {self._meta.capabilities_key}",
            {"requiredCapabilities": {self.facts.extensions_key: {ext: {}}}},
        )

    def _call(self, params: dict[str, Any], owner: str | None) -> Any:
        tool = self._tools.get(params.get("name"))  # type: ignore[arg-type]
        if tool is None:  # the headers named a task tool, the body another: the handler's
            return None
        message = {"jsonrpc": "2.0", "id": 0, "method": self.facts.eligible, "params": params}
        checked(message, self._request_class, self.revision, "$")  # as the session would
        if not self.opted_in(params):
            if tool.required:
                raise self._missing(f"{self.facts.eligible} {params.get('name')}")
            return None
        if tool.when is not None and not tool.when(params):
            return None
        if len(self._tasks) >= self.max_tasks:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: too many tasks (this server keeps at most {self.max_tasks}); "
                "send it again once one is forgotten",
                {"max_tasks": self.max_tasks},
            )
        if self._owned.get(owner, 0) >= self.max_tasks_per_owner:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: too many tasks (this server keeps at most "
                f"{self.max_tasks_per_owner} of one client); send it again once one is forgotten",
                {"max_tasks_per_owner": self.max_tasks_per_owner},
            )
        now = _now()
        task = _Task(
            id=secrets.token_urlsafe(16),
            created=now,
            updated=now,
            expires=time.monotonic() + self.ttl_ms / 1000,
            status=self.facts.working,
            owner=owner,
        )
        self._tasks[task.id] = task  # durable before the creation result is sent
        self._owned[owner] = self._owned.get(owner, 0) + 1
        task.runner = asyncio.get_running_loop().create_task(self._run(task, tool, params))
        return {**self._base(task), self._kind: self.facts.task_result}

    async def _run(self, task: _Task, tool: _Tool, params: dict[str, Any]) -> None:
        f = self.facts
        try:
            result = await tool.work(TaskContext(self, task), params)
            plain = msgspec.to_builtins(result)
            if isinstance(plain, dict):
                plain.setdefault(self._kind, f.complete_result)
            checked(plain, self._result_class, self.revision, "$.result")
        except asyncio.CancelledError:
            if task.status != f.cancelled:
                self._settle(task, f.cancelled)
            raise
        except ProtocolError as error:
            self._fail(task, error)
        except Exception as error:  # the tool's own failure: the task fails, the server goes on
            self._fail(task, ProtocolError(INTERNAL_ERROR, f"Internal error: {error}"))
        else:
            task.result = plain
            self._settle(task, f.completed)

    def _fail(self, task: _Task, error: ProtocolError) -> None:
        task.error = {"code": error.code, "message": error.message}
        if error.data is not None:
            task.error["data"] = msgspec.to_builtins(error.data)
        self._settle(task, self.facts.failed)

    def _settle(self, task: _Task, status: str) -> None:
        if task.status in (self.facts.completed, self.facts.failed, self.facts.cancelled):
            return
        task.status = status
        task.updated = _now()
        task.pending.clear()
        self._changed(task)

    async def _ask(self, task: _Task, requests: dict[str, Any]) -> dict[str, Any]:
        if len(requests) > self.max_input_requests:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Too many input requests: a task asks at most {self.max_input_requests} at once",
            )
        task.pending = {key: msgspec.to_builtins(r) for key, r in requests.items()}
        task.answers = {}
        task.status = self.facts.input_required
        task.updated = _now()
        self._changed(task)
        while task.pending:
            task.answered.clear()
            await task.answered.wait()
        task.status = self.facts.working
        task.updated = _now()
        self._changed(task)
        return task.answers

    def _update(self, task: _Task, responses: Any) -> None:
        if not isinstance(responses, dict):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: {self.facts.input_responses} must be an object of responses",
            )
        # Answers to requests the task is not waiting for are ignored (SEP-2663).
        for key, response in responses.items():
            if key in task.pending and isinstance(response, dict):
                del task.pending[key]
                task.answers[key] = response
        task.answered.set()

    def _base(self, task: _Task) -> dict[str, Any]:
        f = self.facts
        base = {
            f.task_id: task.id,
            f.status: task.status,
            "createdAt": task.created,
            "lastUpdatedAt": task.updated,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        return base

    def _detailed(self, task: _Task) -> dict[str, Any]:
        f = self.facts
        out = self._base(task)
        if task.status == f.input_required:
            out[f.input_requests] = dict(task.pending)
        elif task.status == f.completed:
            out[f.result] = task.result
        elif task.status == f.failed:
            out[f.error] = task.error
        return out

    # -- status notifications on subscription streams ------------------------------------------

    def _changed(self, task: _Task) -> None:
        """Tell the streams listening to ``task`` its new status (the newest replaces one not
        yet sent), and the shared store when there is one."""
        if self._shared is not None:
            self._write_later(task)
        for listener in self._listeners:
            if task.id in listener.ids and listener.owner == task.owner:
                listener.latest[task.id] = self._detailed(task)
                listener.wake.set()

    def listen(
        self, id: Any, params: dict[str, Any], owner: str | None = None
    ) -> AsyncIterator[bytes] | None:
        """``follow``'s messages encoded (what a Streamable HTTP server writes on the stream)."""
        messages = self.follow(id, params, owner)
        return None if messages is None else _encoded(messages)

    def follow(
        self, id: Any, params: dict[str, Any], owner: str | None = None
    ) -> AsyncGenerator[dict[str, Any], None] | None:
        """The subscription stream of the listen request ``id`` whose filter names the tasks
        (``TASKS.listen_filter``; None: it names none, the server's handler serves it): the
        messages to send, plain JSON, whatever the transport. It acknowledges the tasks of
        ``owner`` among them, sends each one's status at once and at every change, and ends
        with the request's response (the one message with an ``id``) once all of them are
        over, or after ``ttl_ms``. Raises ``ProtocolError`` for a malformed request, more than
        ``max_listen_tasks`` ids, or past ``max_listeners`` streams at once. Closing the
        iterator early (the client went away or cancelled) ends the stream."""
        key = self.facts.listen_filter
        if self._filter is None or self._listen is None:
            return None
        filter = params.get(self._filter)
        if not isinstance(filter, dict) or key not in filter:
            return None
        assert self._acknowledged is not None
        message = {"jsonrpc": "2.0", "id": id, "method": self._listen, "params": params}
        checked(message, bindings(self.revision).FACTS.wires[self._listen].wire, self.revision, "$")
        ids = filter[key]
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid params: $.params.{self._filter}.{key} must be strings"
            )
        if len(ids) > self.max_listen_tasks:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: a subscription stream follows at most {self.max_listen_tasks} "
                "tasks",
            )
        if len(self._listeners) >= self.max_listeners:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: {len(self._listeners)} task subscription streams are open "
                "(the limit)",
            )
        self._expire()
        accepted = [i for i in dict.fromkeys(ids) if (t := self._tasks.get(i)) and t.owner == owner]
        listener = _Listener(owner, frozenset(accepted))
        for task_id in accepted:
            listener.latest[task_id] = self._detailed(self._tasks[task_id])
        self._listeners.add(listener)
        return self._stream(id, listener)

    async def _stream(self, id: Any, listener: _Listener) -> AsyncGenerator[dict[str, Any], None]:
        f = self.facts
        assert self._acknowledged is not None and self._listen is not None
        tag = {self._subscription_key: id} if self._subscription_key else {}
        meta = self._meta_key
        over = {f.completed, f.failed, f.cancelled}
        ended: set[str] = set()
        try:
            ack = {self._filter: {f.listen_filter: sorted(listener.ids)}, meta: tag}
            yield {"jsonrpc": "2.0", "method": self._acknowledged, "params": ack}
            deadline = time.monotonic() + self.ttl_ms / 1000
            while True:
                listener.wake.clear()
                latest, listener.latest = listener.latest, {}
                for task_id, task in latest.items():
                    params = {**task, meta: tag}
                    yield {"jsonrpc": "2.0", "method": f.notification, "params": params}
                    if task[f.status] in over:
                        ended.add(task_id)
                if ended >= listener.ids:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await listener.wake.wait()
            result = {self._kind: f.complete_result, meta: tag}
            cls = bindings(self.revision).FACTS.wires[self._listen].result
            checked(dict(result), cls, self.revision, "$.result")
            yield {"jsonrpc": "2.0", "id": id, "result": result}
        finally:
            self._listeners.discard(listener)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.expires > now:
                return
            self._forget(oldest)
            if oldest.runner is not None and not oldest.runner.done():
                oldest.runner.cancel()

    def _forget(self, task: _Task) -> None:
        del self._tasks[task.id]
        left = self._owned[task.owner] - 1
        if left:
            self._owned[task.owner] = left
        else:
            del self._owned[task.owner]

    async def aclose(self) -> None:
        """Cancel every running task (the server is stopping)."""
        if self._shared is not None:
            await self._shared.close()
        runners = [t.runner for t in self._tasks.values() if t.runner is not None]
        self._tasks.clear()
        self._owned.clear()
        for runner in runners:
            runner.cancel()
        for runner in runners:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await runner


_JSON = msgspec.json.Encoder()


async def _encoded(messages: AsyncGenerator[dict[str, Any], None]) -> AsyncIterator[bytes]:
    try:
        async for message in messages:
            yield _JSON.encode(message)
    finally:  # closed early: the stream it reads ends now, not when collected
        await messages.aclose()


def read_request(
    body: bytes, speaks: Callable[[Any], bool]
) -> tuple[Any, str, dict[str, Any]] | None:
    """The id, method and params of ``body`` when it is one request whose params ``speaks``
    (a tasks layer's: its ``_meta`` names the revision the extension extends), or None: a
    message the layer leaves to the session (anything else, malformed ones included)."""
    try:
        message = msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return None
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    rid, method, params = message.get("id"), message.get("method"), message.get("params")
    if type(rid) not in (str, int) or not isinstance(params, dict):
        return None
    if not isinstance(method, str) or not speaks(params):
        return None
    return rid, method, params


def error_object(error: ProtocolError) -> dict[str, Any]:
    """The JSON-RPC error object of a response answering with ``error``."""
    failure: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        failure["data"] = msgspec.to_builtins(error.data)
    return failure


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
