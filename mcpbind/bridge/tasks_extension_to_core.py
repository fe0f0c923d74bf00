"""Tasks from a client of the tasks extension (``io.modelcontextprotocol/tasks``, the revision it
extends) to a server of the core revision's tasks it replaces: the translation both fronts share
(``TaskBridge``); the stdio bridge's port is ``stdio/tasks_extension_to_core.py``, the HTTP
gateway's ``gateway/tasks_extension_to_core.py`` (the reverse direction is
``tasks_core_to_extension.py``). What it asks of the bridge it serves is ``TaskHost``; where its
answers go (``limit``, ``_respond``, ``_answer``, ``_error``, ``_created``) each port says.

- a call the client makes as a declarer of the extension, of a tool the server listed as one
  whose calls may be tasks, goes down task-augmented; the server's task creation comes up as the
  extension's task result, and the bridge asks the server for the task's payload at once (the
  core revision's payload request, which also carries the input requests the task makes);
- the extension's get, update and cancel requests are answered from the server's get and
  cancel, the payload and the input requests: a get carries the result (or the error) once the
  payload came, and the input requests the server sent for the task while it needs input; an
  update answers those requests;
- the server's status notifications of these tasks have no counterpart on a client of the
  extension (it polls): they are not forwarded, said once per task in the log.

Every method, key and status comes from the generated facts (``TASKS``, ``FACTS``); the results
are checked against the generated classes of the server's revision by its session. docs/bridge.md
("Tasks") lists what maps and what is a loss.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec
from msgspec import UNSET

from .._extension_tasks import TASK_TYPES
from .._extensions import TasksFacts
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from ..events import (
    ErrorReceived,
    Event,
    NotificationReceived,
    RequestCancelled,
    RequestReceived,
    ResultReceived,
    TaskCreated,
)
from ..session import ClientSession
from ..session._common import checked, speech
from ..session.tasks import declares
from .limits import MAX_TASKS, too_many
from .task_facts import extension_task, plain, undeclared, wire_key

__all__ = ["MAX_TASKS", "MAX_TOOLS", "TaskBridge", "TaskHost", "TranslatedTask"]

# Tasks one bridge keeps (created through it, until the server forgets them or the bridge ends);
# a call past it goes down without its task, said in the log.
# Tool names whose task support the bridge remembers from the server's tool lists.
MAX_TOOLS = 10_000


class TaskHost(Protocol):
    """What the translation asks of the bridge it serves (a ``Crossing``)."""

    @property
    def back(self) -> ClientSession:
        """The session facing the server."""
        ...

    @property
    def log(self) -> list[str]:
        """What the bridge has to say."""
        ...

    def note(self, kind: str, line: str) -> None:
        """Log ``line``, once per ``kind`` while it repeats."""
        ...

    def carry(self, obj: Any, target: str, what: str) -> Any:
        """``obj`` into the revision ``target``, its losses logged."""
        ...

    def up_result(self, result: Any, revision: str, method: str) -> Any:
        """The server's result of ``method`` for a client of ``revision``."""
        ...


@dataclass(eq=False)
class TranslatedTask:
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
        self, bridge: TaskHost, facts: TasksFacts, tools: dict[str, bool] | None = None
    ) -> None:
        self.bridge = bridge  # a stdio ``Bridge``, or a gateway ``Link``
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
        self.tasks: dict[str, TranslatedTask] = {}
        # the bridge's requests to the server -> (what it is, the task, the client's request id)
        self.mine: dict[Any, tuple[str, TranslatedTask, Any]] = {}
        self.input_names = 0

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
            raise too_many(id, limit, "the client", "the server")
        down = self.bridge.back.request(
            self.get if method == f.get else self.cancel, {self.core_task_key: task.id}
        )
        self.mine[down] = (method, task, id)
        self._sent()

    def _update(self, id: Any, task: TranslatedTask, responses: Any) -> None:
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
        for tool in plain(getattr(result, "tools", None)) or ():
            if len(self.tools) >= MAX_TOOLS and tool.get("name") not in self.tools:
                break
            value: Any = tool
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            self.tools[tool.get("name")] = value in self.facts.core_taskable

    def _created(self, e: TaskCreated) -> bool:
        """Whether the server's task creation ``e`` answers a call of the client's (which the
        port answers with ``_made``)."""
        raise NotImplementedError

    def _made(self, e: TaskCreated, revision: str, method: str) -> dict[str, Any]:
        """Keep the task ``e`` the server created for the client's ``method`` and ask for its
        payload; the extension's task result that answers the client's call."""
        core = msgspec.to_builtins(e.result)[self.core.task_id[0]]
        task = TranslatedTask(e.task_id, revision, method)
        self.tasks[task.id] = task
        # The payload request carries the task's input requests and, at its end, its outcome.
        down = self.bridge.back.request(self.payload, {self.core_task_key: task.id})
        self.mine[down] = ("payload", task, None)
        self._sent()
        return {**extension_task(core, self.facts), self.kind: self.facts.task_result}

    def _asks(self, e: RequestReceived) -> bool:
        """A server's request tied to one of these tasks becomes one of its input requests."""
        meta = plain(getattr(e.params, "meta", None))
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
        task_id = (plain(e.params) or {}).get(self.core_task_key)
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

    def _result(self, what: str, task: TranslatedTask, id: Any, result: Any) -> None:
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
                    self._error(id, too_many(id, self.limit(), "the client", "the server"))
                else:
                    task.waiting.append((id, snapshot))

    def _failed(self, what: str, task: TranslatedTask, id: Any, error: ProtocolError) -> None:
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

    def _reply(self, id: Any, task: TranslatedTask, snapshot: dict[str, Any]) -> bool:
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

    def _release(self, task: TranslatedTask) -> None:
        """Answer the client's gets held for what just came (the payload, an input request)."""
        waiting, task.waiting = task.waiting, []
        for id, snapshot in waiting:
            if not self._reply(id, task, snapshot):
                task.waiting.append((id, snapshot))

    # -- where the answers go (each port's) -------------------------------------------------------

    def limit(self) -> int:
        """The requests of the client it may hold at once."""
        raise NotImplementedError

    def _sent(self) -> None:
        """A request to the server was queued (the stdio bridge sends it when it is done)."""

    def _respond(self, sid: Any, answer: Any) -> None:
        """Answer the server's request ``sid`` (an input request of a task) with ``answer``, a
        result or a ``ProtocolError``."""
        raise NotImplementedError

    def _answer(self, id: Any, result: dict[str, Any], session: bool = False) -> None:
        """Send the client ``result`` for its request ``id``; ``session``: a request its session
        read (a call), which then stops awaiting an answer there."""
        raise NotImplementedError

    def _error(self, id: Any, error: ProtocolError) -> None:
        """Send the client ``error`` for its request ``id``."""
        raise NotImplementedError

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
