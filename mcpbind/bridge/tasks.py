"""Tasks across the stdio bridge: a client of the tasks extension (``io.modelcontextprotocol/tasks``,
the revision it extends) in front of a server of the core revision's tasks it replaces.

``TaskBridge.between(bridge)`` is the translator when the two sides agreed on such a pair, else
None. It sits beside the bridge's own translations (``core.Bridge`` asks it first):

- a call the client makes as a declarer of the extension, of a tool the server listed as one
  whose calls may be tasks, goes down task-augmented; the server's task creation comes up as the
  extension's task result, and the bridge asks the server for the task's payload at once (the
  core revision's payload request, which also carries the input requests the task makes);
- the extension's get, update and cancel requests are answered from the server's get and
  cancel, the payload and the input requests: a get carries the result (or the error) once the
  payload came, and the input requests the server sent for the task while it needs input; an
  update answers those requests;
- the server's status notifications of these tasks have no counterpart on a stdio client of the
  extension (it polls): they are not forwarded, said once per task in the log.

The same translation serves the HTTP gateway (``mcpbind bridge --listen``) for such a client in
front of such a server: ``GatewayTasks`` is its front's tasks layer (the extension's get, update
and cancel reach it, not the front's session, and go to the link whose translator holds the
task), ``LinkTasks`` the translator of one link (its answers go to the gateway's handlers
awaiting them, the task's input requests are answered through the link's ``serve``).

Every method, key and status comes from the generated facts (``TASKS``, ``FACTS``); the results
are checked against the generated classes of the server's revision by its session. docs/bridge.md
("Tasks") lists what maps and what is a loss.
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from .._extension_tasks import TASK_TYPES
from .._extensions import TASKS, TasksFacts
from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ProtocolError,
)
from ..events import (
    ErrorReceived,
    Event,
    NotificationReceived,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    TaskCreated,
)
from ..packages import bindings
from ..session._common import checked, speech
from ..session.tasks import declares
from . import crossing  # (which imports this module: its names are read when called)

if TYPE_CHECKING:
    from ..events import Negotiated
    from .core import Bridge
    from .crossing import Crossing
    from .gateway import Link

__all__ = [
    "MAX_TASKS",
    "MAX_TOOLS",
    "NOT_MINE",
    "GatewayTasks",
    "LinkTasks",
    "TaskAnswer",
    "TaskBridge",
    "core_task",
    "extension_task",
    "undeclared_tasks",
    "untranslated_tasks",
]

# Tasks one bridge keeps (created through it, until the server forgets them or the bridge ends);
# a call past it goes down without its task, said in the log.
MAX_TASKS = 1000
# Tool names whose task support the bridge remembers from the server's tool lists.
MAX_TOOLS = 10_000

_KEYS = itertools.count(1)  # the gateway's handlers awaiting a translator's answer


class _NotMine:
    """The request is not the task translation's: the gateway's link forwards it as usual."""


NOT_MINE: Any = _NotMine()


class TaskAnswer(dict[str, Any]):
    """A result of the extension's that answers a client's call through the HTTP gateway (the
    task the server created): no class of the client's revision has it, so the front's session
    sends it as it is (``gateway._GatewayFront``)."""


def _plain(value: Any) -> Any:
    """``value`` as plain JSON (None for an absent one)."""
    return None if value is UNSET or value is None else msgspec.to_builtins(value)


def extension_task(core: dict[str, Any], facts: TasksFacts) -> dict[str, Any]:
    """A core revision's task (plain JSON, its wire keys) as the extension's task fields."""
    renamed = dict(facts.core_renamed)
    return {renamed.get(k, k): v for k, v in core.items() if renamed.get(k, k) in facts.task_fields}


def core_task(task: dict[str, Any], facts: TasksFacts) -> dict[str, Any]:
    """The extension's task fields as the core revision's task (the reverse of
    ``extension_task``); the extension's other keys (``resultType``, ``result``...) are left out."""
    back = {new: old for old, new in facts.core_renamed}
    return {back.get(k, k): v for k, v in task.items() if k in facts.task_fields}


def wire_key(cls: Any, attribute: str) -> str:
    """The wire key of the field ``attribute`` of the generated Struct ``cls``."""
    return next(f.encode_name for f in msgspec.structs.fields(cls) if f.name == attribute)


def undeclared(method: str, facts: TasksFacts, caps_key: str) -> ProtocolError:
    """The error for the extension's ``method`` from a client that did not declare it."""
    return ProtocolError(
        MISSING_REQUIRED_CLIENT_CAPABILITY,
        f"Missing required client capability: {method!r} needs the {facts.extension} "
        f"extension declared in the request's _meta {caps_key}",
        {"requiredCapabilities": {facts.extensions_key: {facts.extension: {}}}},
    )


def untranslated_tasks(
    caps: Any, server: str | None, client: str, log: list[str], translated: bool = False
) -> Any:
    """The server's capabilities (plain JSON, in the ``client``'s revision) as to the core
    revision's tasks capability that a ``server`` of the extension's revision advertised as the
    extension (projection moves the one into the other): without it, where the bridge does not
    translate a core client's tasks to the extension (its task requests would find no method;
    said in ``log``); ``translated`` (the HTTP gateway, ``tasks_http.py``): what the
    translation serves (task-augmented calls, get, result, list, cancel)."""
    facts = TASKS.get(server or "")
    if facts is None or facts.core != client or not isinstance(caps, dict):
        return caps
    back = speech(client)
    gates = back.methods[back.facts.lifecycle["task_get"]].gates
    key = next((g.path.split(".")[0] for g in gates if g.side == "receiver"), None)
    if key is None or key not in caps:
        return caps
    if translated:
        served: dict[str, Any] = {}
        methods = (
            back.facts.lifecycle["task_list"],
            back.facts.lifecycle["task_cancel"],
            back.facts.features["call_tool"],
        )
        for method in methods:
            for gate in back.methods[method].gates:
                path = gate.path.split(".")
                if path[0] != key or len(path) < 2:
                    continue
                node = served
                for part in path[1:]:
                    node = node.setdefault(part, {})
        return {**caps, key: served}
    log.append(
        f"loss: the server's capabilities into MCP {client}: $.{key} dropped (the server offers "
        f"tasks as the {facts.extension} extension; the bridge does not translate MCP {client} "
        "tasks to it, so its task requests are refused)"
    )
    return {k: v for k, v in caps.items() if k != key}


def undeclared_tasks(caps: Any, source: Any, target: str | None, log: list[str]) -> Any:
    """The client's capabilities (plain JSON) for a server of ``target`` without the tasks
    extension that projection made of a core revision client's tasks capability (``source``: the
    client's capabilities, in its own revision): such a server would answer that client's calls
    with tasks, which the bridge does not translate back. Said in ``log``."""
    facts = TASKS.get(target or "")
    if facts is None or facts.core is None or not isinstance(caps, dict):
        return caps
    if type(source) is not speech(facts.core).facts.client_capabilities:
        return caps
    key = facts.extensions_key
    extensions = caps.get(key)
    if not isinstance(extensions, dict) or facts.extension not in extensions:
        return caps
    log.append(
        f"loss: the client's capabilities into MCP {target}: $.extensions.{facts.extension} "
        f"dropped (its MCP {facts.core} tasks capability: a server of the extension would "
        "answer calls the client did not make task-augmented with tasks; the bridge declares "
        "it on the task-augmented ones it translates)"
    )
    rest = {k: v for k, v in extensions.items() if k != facts.extension}
    out = {k: v for k, v in caps.items() if k != key}
    if rest:
        out[key] = rest
    return out


@dataclass(eq=False)
class _Task:
    """A task the server created for a call of the client, and what the bridge knows of it."""

    id: str
    revision: str  # the client's
    method: str  # the call it answers
    # (the extension's result key, JSON) or (its error key, JSON) once the payload came
    payload: tuple[str, Any] | None = None
    asked: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    # input name -> (the server's request id, the input request as the extension writes it)
    waiting: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    # the client's get requests held until the payload or an input request comes: (id, task)
    told: bool = False  # the log said its status notifications are not forwarded


class TaskBridge:
    """The translator of one bridge (module docstring)."""

    def __init__(
        self, bridge: Crossing, facts: TasksFacts, tools: dict[str, bool] | None = None
    ) -> None:
        self.bridge: Any = bridge  # a stdio ``Bridge``, or a gateway ``Link`` (``LinkTasks``)
        self.facts = facts
        assert facts.core is not None  # ``between`` builds one only then
        self.core_revision: str = facts.core
        back = speech(facts.core)
        core = back.facts.tasks
        assert core is not None  # the core revision has task-augmented requests
        self.core = core
        self.get = back.facts.lifecycle["task_get"]
        self.payload = core.payload_method
        self.cancel = back.facts.lifecycle["task_cancel"]
        self.status = back.facts.lifecycle.get("task_status")
        self.list_tools = back.facts.features["list_tools"]
        self.client = facts.revision
        meta = speech(facts.revision).facts.request_meta
        assert meta is not None  # the extension rides on the per-request envelope
        self.caps_key = meta.capabilities_key
        self.meta_key = speech(facts.revision).send(facts.eligible).meta_key  # a request's _meta
        # The core revision's task id key (its task requests', the related-task _meta value's).
        self.core_task_key = wire_key(back.methods[self.get].params, core.payload_task_id)
        self.message_key = wire_key(TASK_TYPES[facts.revision].create_result, "status_message")
        kinds = speech(facts.revision).facts.result_kinds
        assert kinds is not None  # the extension's results are told apart by it
        self.kind = kinds.key
        self.methods = {facts.get, facts.update, facts.cancel}
        self._marks = tuple(m.encode() for m in self.methods)
        # tool name -> whether its calls may be tasks (a gateway's links share one)
        self.tools: dict[str, bool] = {} if tools is None else tools
        self.tasks: dict[str, _Task] = {}
        # the bridge's requests to the server -> (what it is, the task, the client's request id)
        self.mine: dict[Any, tuple[str, _Task, Any]] = {}
        self.input_names = 0

    @classmethod
    def between(cls, bridge: Bridge) -> TaskBridge | None:
        """The translator for ``bridge`` once both sides agreed, or None when its client is not
        of a revision the tasks extension extends or its server not of the core revision whose
        tasks the extension replaces."""
        facts = TASKS.get(bridge.front.revision or "")
        if facts is None or facts.core is None or bridge.back.revision != facts.core:
            return None
        return cls(bridge, facts)

    # -- the client's messages ----------------------------------------------------------------

    def from_client(self, data: bytes) -> bool:
        """Whether ``data`` is one of the extension's requests, which the bridge answers here
        (the client side's session has no such methods)."""
        if not any(mark in data for mark in self._marks):
            return False
        try:
            message = msgspec.json.decode(data)
        except msgspec.DecodeError:
            return False
        if not isinstance(message, dict) or message.get("method") not in self.methods:
            return False
        id = message.get("id")
        if not isinstance(id, (str, int)) or isinstance(id, bool):
            return False  # a notification or a malformed id: the session answers it
        try:
            self._request(id, message["method"], message.get("params"))
        except ProtocolError as error:
            self._error(id, error)
        return True

    def _request(self, id: Any, method: str, params: Any) -> None:
        f = self.facts
        if not isinstance(params, dict):
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {method!r} needs params")
        if not declares(params, f):
            raise undeclared(method, f, self.caps_key)
        task_id = params.get(f.task_id)
        if not isinstance(task_id, str):
            raise ProtocolError(
                INVALID_PARAMS, f"Invalid params: {method!r} needs a string {f.task_id}"
            )
        task = self.tasks.get(task_id)
        if task is None:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        if method == f.update:
            self._update(id, task, params.get(f.input_responses))
            return
        limit = self.limit()
        if len(self.mine) >= limit:
            raise crossing.too_many(id, limit, "the client", "the server")
        down = self.bridge.back.request(
            self.get if method == f.get else self.cancel, {self.core_task_key: task.id}
        )
        self.mine[down] = (method, task, id)
        self._sent()

    def _update(self, id: Any, task: _Task, responses: Any) -> None:
        if not isinstance(responses, dict):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: {self.facts.input_responses} must be an object of responses",
            )
        target = self.core_revision  # the server's
        # Answers to requests the task is not waiting for are ignored, as the extension says;
        # every answer is checked (as the result of the server's request) before any is sent.
        answers = {}
        for name in [n for n in responses if n in task.asked]:
            sid, request = task.asked[name]
            result_class = speech(target).facts.wires[request["method"]].result
            where = f"$.params.{self.facts.input_responses}.{name}"
            answers[name] = (sid, checked(responses[name], result_class, target, where))
        for name, (sid, answer) in answers.items():
            del task.asked[name]
            self._respond(sid, answer)
        self._answer(id, {self.kind: self.facts.complete_result})

    def client_request(self, e: RequestReceived) -> bool:
        """Whether the client's request ``e`` is answered here (never: the extension's requests
        are taken by ``from_client``, the calls go down through ``down``)."""
        return False

    def client_event(self, e: Event) -> bool:
        """Whether the client's event ``e`` was this translator's (never: see ``_update``)."""
        return False

    def answer_lost(self, id: Any, why: str) -> bool:
        """Whether ``id`` is a request of this translator's whose answer was lost (never: a lost
        answer to one of its requests ends the bridge, ``Bridge.discarded_from_server``)."""
        return False

    def down(self, e: RequestReceived, params: Any) -> Any:
        """The params of the client's request ``e`` going down: a call of a tool whose calls may
        be tasks, from a client that declared the extension, asks the server for a task."""
        if e.method != self.facts.eligible or params is UNSET or params is None:
            return params
        plain = msgspec.to_builtins(params)
        if not self.tools.get(plain.get("name")):
            return params
        if not declares(e.params, self.facts):
            return params
        if len(self.tasks) >= MAX_TASKS:
            self.bridge.note(
                "tasks full",
                f"bridge: a call of {plain.get('name')!r} goes down without its task: the bridge "
                f"keeps at most {MAX_TASKS} tasks",
            )
            return params
        plain[self.core.when] = {}
        target = self.bridge.back.revision
        assert target is not None
        return checked(plain, type(params), target, "$.params")

    # -- the server's messages ----------------------------------------------------------------

    def server_event(self, e: Event) -> bool:
        """Whether the server's event ``e`` was this translator's (handled here)."""
        if isinstance(e, (ResultReceived, ErrorReceived)):
            mine = self.mine.pop(e.id, None)
            if mine is None:
                if isinstance(e, ResultReceived) and e.method == self.list_tools:
                    self._learn_tools(e.result)
                return False
            if isinstance(e, ResultReceived):
                self._result(*mine, e.result)
            else:
                self._failed(*mine, ProtocolError(e.code, e.message, e.data))
            return True
        if isinstance(e, TaskCreated):
            return self._created(e)
        if isinstance(e, RequestReceived):
            return self._asks(e)
        if isinstance(e, NotificationReceived) and e.method == self.status:
            return self._status(e)
        if isinstance(e, RequestCancelled):
            for task in self.tasks.values():
                for name, (sid, _) in list(task.asked.items()):
                    if sid == e.id:
                        del task.asked[name]
        return False

    def _learn_tools(self, result: Any) -> None:
        path = self.facts.core_tool_execution
        for tool in _plain(getattr(result, "tools", None)) or ():
            if len(self.tools) >= MAX_TOOLS and tool.get("name") not in self.tools:
                break
            value: Any = tool
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            self.tools[tool.get("name")] = value in self.facts.core_taskable

    def _created(self, e: TaskCreated) -> bool:
        up = self.bridge.claim_forwarded(e.id, self.client)
        if up is None:
            return False
        self._answer(up.id, self._made(e, up.revision, up.method), session=True)
        return True

    def _made(self, e: TaskCreated, revision: str, method: str) -> dict[str, Any]:
        """Keep the task ``e`` the server created for the client's ``method`` and ask for its
        payload; the extension's task result that answers the client's call."""
        core = msgspec.to_builtins(e.result)[self.core.task_id[0]]
        task = _Task(e.task_id, revision, method)
        self.tasks[task.id] = task
        # The payload request carries the task's input requests and, at its end, its outcome.
        down = self.bridge.back.request(self.payload, {self.core_task_key: task.id})
        self.mine[down] = ("payload", task, None)
        self._sent()
        return {**extension_task(core, self.facts), self.kind: self.facts.task_result}

    def _asks(self, e: RequestReceived) -> bool:
        """A server's request tied to one of these tasks becomes one of its input requests."""
        meta = _plain(getattr(e.params, "meta", None))
        key = self.facts.related_task_key
        related = meta.get(key) if isinstance(meta, dict) and key else None
        task_id = related.get(self.core_task_key) if isinstance(related, dict) else None
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            return False
        bridge = self.bridge
        params = e.params
        if isinstance(meta, dict) and len(meta) == 1:  # the tie to the task is the task here
            params = msgspec.structs.replace(params, meta=UNSET)
        try:
            params = bridge.carry(params, task.revision, f"the params of the server's {e.method!r}")
        except ProtocolError as err:
            self._respond(e.id, err)
            return True
        request: dict[str, Any] = {"method": e.method}
        if params is not None and params is not UNSET:
            request["params"] = msgspec.to_builtins(params)
        self.input_names += 1
        task.asked[f"input-{self.input_names}"] = (e.id, request)
        self._release(task)
        return True

    def _status(self, e: NotificationReceived) -> bool:
        task_id = (_plain(e.params) or {}).get(self.core_task_key)
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            return False
        if not task.told:
            task.told = True
            self.bridge.log.append(
                f"loss: the server's {e.method!r} notifications of task {task.id!r} into MCP "
                f"{task.revision}: not forwarded (a client of the {self.facts.extension} "
                f"extension polls {self.facts.get!r})"
            )
        return True

    def _result(self, what: str, task: _Task, id: Any, result: Any) -> None:
        f = self.facts
        if what == "payload":
            result = self.bridge.up_result(result, task.revision, task.method)
            plain = msgspec.to_builtins(result)
            plain.setdefault(self.kind, f.complete_result)
            task.payload = (f.result, plain)
            self._release(task)
        elif what == f.cancel:
            self._answer(id, {self.kind: f.complete_result})
        else:  # the get
            snapshot = extension_task(msgspec.to_builtins(result), f)
            if not self._reply(id, task, snapshot):
                if len(task.waiting) >= self.limit():
                    self._error(id, crossing.too_many(id, self.limit(), "the client", "the server"))
                else:
                    task.waiting.append((id, snapshot))

    def _failed(self, what: str, task: _Task, id: Any, error: ProtocolError) -> None:
        if what == "payload":
            err: dict[str, Any] = {"code": error.code, "message": error.message}
            if error.data is not None:
                err["data"] = msgspec.to_builtins(error.data)
            task.payload = (self.facts.error, err)
            self._release(task)
            return
        if error.code == INVALID_PARAMS and what == self.facts.get:
            self.tasks.pop(task.id, None)  # the server forgot it (its ttl)
        self._error(id, error)

    def _reply(self, id: Any, task: _Task, snapshot: dict[str, Any]) -> bool:
        """Answer the client's get ``id`` with ``snapshot`` and what the task carries in that
        status; False when what it carries has not come yet (the payload of a finished task,
        the requests of one that needs input). The payload comes only once the task is over,
        so a task whose payload came is reported finished with it."""
        f = self.facts
        status = snapshot.get(f.status)
        out = {**snapshot, self.kind: f.complete_result}
        if task.payload is not None and status != f.cancelled:
            kind, value = task.payload
            if kind == f.result and status == f.failed:  # a failure the payload does not say
                value = {
                    "code": INTERNAL_ERROR,
                    "message": snapshot.get(self.message_key) or "the task failed",
                    "data": {f.result: value},
                }
                kind = f.error
            out[f.status] = f.completed if kind == f.result else f.failed
            out[kind] = value
        elif status in (f.completed, f.failed):
            return False
        elif status == f.input_required:
            if not task.asked:
                return False
            out[f.input_requests] = {name: request for name, (_, request) in task.asked.items()}
        self._answer(id, out)
        return True

    def _release(self, task: _Task) -> None:
        """Answer the client's gets held for what just came (the payload, an input request)."""
        waiting, task.waiting = task.waiting, []
        for id, snapshot in waiting:
            if not self._reply(id, task, snapshot):
                task.waiting.append((id, snapshot))

    # -- where the answers go (the stdio bridge's; ``LinkTasks`` the gateway's) -----------------

    def limit(self) -> int:
        """The requests of the client it may hold at once (the bridge's ``max_in_flight``)."""
        return int(self.bridge.max_in_flight)

    def _sent(self) -> None:
        """A request to the server was queued (the stdio bridge sends it when it is done)."""

    def _respond(self, sid: Any, answer: Any) -> None:
        """Answer the server's request ``sid`` (an input request of a task) with ``answer``, a
        result or a ``ProtocolError``."""
        bridge = self.bridge
        if isinstance(answer, ProtocolError):
            bridge.quietly(bridge.back.respond_error, sid, answer.code, answer.message, answer.data)
        else:
            bridge.quietly(bridge.back.respond, sid, answer)

    def _answer(self, id: Any, result: dict[str, Any], session: bool = False) -> None:
        """Send the client ``result`` for its request ``id``; ``session``: a request its session
        read (a call), which then stops awaiting an answer there."""
        self.bridge.front.respond_unchecked(id, result, read=session)

    def _error(self, id: Any, error: ProtocolError) -> None:
        self.bridge.front.reject(ProtocolError(error.code, error.message, error.data, id))

    def pending(self) -> Iterable[Any]:
        """The client's requests this translator still owes an answer (ids)."""
        for _, _, id in self.mine.values():
            if id is not None:
                yield id
        for task in self.tasks.values():
            for id, _ in task.waiting:
                yield id

    def close(self, error: ProtocolError) -> None:
        """The bridge ends: every request of the client still owed an answer gets ``error``."""
        for id in list(self.pending()):
            self._error(id, error)
        self.mine.clear()
        self.tasks.clear()


def _owner(auth: Any) -> str | None:
    """Who a gateway client's request is from, as the Streamable HTTP server names a task's
    owner (``auth.resource.principal``; None without authorization)."""
    if auth is None:
        return None
    from ..auth.resource import principal  # (a token came: the HTTP extra is there)

    return principal(auth)


class LinkTasks(TaskBridge):
    """The translator of one HTTP gateway ``Link`` whose client speaks the extension's revision
    and whose server the core revision: the stdio bridge's translation (``TaskBridge``), its
    answers given to the gateway's handlers awaiting them instead of written to a client
    stream, and the task's input requests answered through the link's ``serve``."""

    def __init__(self, link: Link, facts: TasksFacts, front: GatewayTasks) -> None:
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

    def _failed(self, what: str, task: _Task, id: Any, error: ProtocolError) -> None:
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

    async def forward(self, link: Link, call: Any) -> Any:
        """Give the link of a client of the extension's revision its translator; the request
        itself is the link's (``NOT_MINE``)."""
        if link.tasks is None and call.revision == self.facts.revision:
            link.tasks = LinkTasks(link, self.facts, self)
        return NOT_MINE

    # -- the front's tasks layer ------------------------------------------------------------------

    def advertise(self, capabilities: Any) -> Any:
        return capabilities  # each client is told the server's face (``gateway.Face``)

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
