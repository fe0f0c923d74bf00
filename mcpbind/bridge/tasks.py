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

Every method, key and status comes from the generated facts (``TASKS``, ``FACTS``); the results
are checked against the generated classes of the server's revision by its session. docs/bridge.md
("Tasks") lists what maps and what is a loss.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

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
from ..session._common import checked, speech
from . import crossing  # (which imports this module: its names are read when called)

if TYPE_CHECKING:
    from .core import Bridge

__all__ = [
    "MAX_TASKS",
    "MAX_TOOLS",
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

_JSON = msgspec.json.Encoder()


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
    extensions = caps.get("extensions")
    if not isinstance(extensions, dict) or facts.extension not in extensions:
        return caps
    log.append(
        f"loss: the client's capabilities into MCP {target}: $.extensions.{facts.extension} "
        f"dropped (its MCP {facts.core} tasks capability: a server of the extension would "
        "answer calls the client did not make task-augmented with tasks; the HTTP gateway "
        "declares it on the task-augmented ones, which it translates)"
    )
    rest = {k: v for k, v in extensions.items() if k != facts.extension}
    out = {k: v for k, v in caps.items() if k != "extensions"}
    if rest:
        out["extensions"] = rest
    return out


@dataclass(eq=False)
class _Task:
    """A task the server created for a call of the client, and what the bridge knows of it."""

    id: str
    revision: str  # the client's
    method: str  # the call it answers
    payload: tuple[str, Any] | None = None  # ("result", JSON) or ("error", JSON) once it came
    asked: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    # input name -> (the server's request id, the input request as the extension writes it)
    waiting: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    # the client's get requests held until the payload or an input request comes: (id, task)
    told: bool = False  # the log said its status notifications are not forwarded


class TaskBridge:
    """The translator of one bridge (module docstring)."""

    def __init__(self, bridge: Bridge, facts: TasksFacts) -> None:
        self.bridge = bridge
        self.facts = facts
        assert facts.core is not None  # ``between`` builds one only then
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
        kinds = speech(facts.revision).facts.result_kinds
        assert kinds is not None  # the extension's results are told apart by it
        self.kind = kinds.key
        self.methods = {facts.get, facts.update, facts.cancel}
        self._marks = tuple(m.encode() for m in self.methods)
        self.tools: dict[str, bool] = {}  # tool name -> whether its calls may be tasks
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
        if not self._declared(params.get("_meta")):
            raise ProtocolError(
                MISSING_REQUIRED_CLIENT_CAPABILITY,
                f"Missing required client capability: {method!r} needs the {f.extension} "
                f"extension declared in the request's _meta {self.caps_key}",
                {"requiredCapabilities": {"extensions": {f.extension: {}}}},
            )
        task_id = params.get("taskId")
        if not isinstance(task_id, str):
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {method!r} needs a string taskId")
        task = self.tasks.get(task_id)
        if task is None:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        if method == f.update:
            self._update(id, task, params.get(f.input_responses))
            return
        if len(self.mine) >= self.bridge.max_in_flight:
            raise crossing.too_many(id, self.bridge.max_in_flight, "the client", "the server")
        down = self.bridge.back.request(
            self.get if method == f.get else self.cancel, {"taskId": task.id}
        )
        self.mine[down] = (method, task, id)

    def _declared(self, meta: Any) -> bool:
        caps = meta.get(self.caps_key) if isinstance(meta, dict) else None
        extensions = caps.get("extensions") if isinstance(caps, dict) else None
        return isinstance(extensions, dict) and isinstance(
            extensions.get(self.facts.extension), dict
        )

    def _update(self, id: Any, task: _Task, responses: Any) -> None:
        if not isinstance(responses, dict):
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: {self.facts.input_responses} must be an object of responses",
            )
        bridge = self.bridge
        target = bridge.back.revision
        assert target is not None
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
            bridge._quietly(bridge.back.respond, sid, answer)
        self._answer(id, {self.kind: self.facts.complete_result})

    def down(self, e: RequestReceived, params: Any) -> Any:
        """The params of the client's request ``e`` going down: a call of a tool whose calls may
        be tasks, from a client that declared the extension, asks the server for a task."""
        if e.method != self.facts.eligible or params is UNSET or params is None:
            return params
        plain = msgspec.to_builtins(params)
        if not self.tools.get(plain.get("name")):
            return params
        meta = _plain(getattr(e.params, "meta", None))
        if not self._declared(meta):
            return params
        if len(self.tasks) >= MAX_TASKS:
            self.bridge.log.append(
                f"bridge: a call of {plain.get('name')!r} goes down without its task: the bridge "
                f"keeps at most {MAX_TASKS} tasks"
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
        bridge = self.bridge
        up = bridge._down.get(e.id)
        if up is None or up.revision != self.client:
            return False
        del bridge._down[e.id]
        bridge._up.pop(up.id, None)
        core = msgspec.to_builtins(e.result)[self.core.task_id[0]]
        task = _Task(e.task_id, up.revision, up.method)
        self.tasks[task.id] = task
        # The payload request carries the task's input requests and, at its end, its outcome.
        down = bridge.back.request(self.payload, {"taskId": task.id})
        self.mine[down] = ("payload", task, None)
        created = {**extension_task(core, self.facts), self.kind: self.facts.task_result}
        self._answer(up.id, created, session=True)
        return True

    def _asks(self, e: RequestReceived) -> bool:
        """A server's request tied to one of these tasks becomes one of its input requests."""
        meta = _plain(getattr(e.params, "meta", None))
        key = self.facts.related_task_key
        related = meta.get(key) if isinstance(meta, dict) and key else None
        task_id = related.get("taskId") if isinstance(related, dict) else None
        task = self.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            return False
        bridge = self.bridge
        params = e.params
        if isinstance(meta, dict) and len(meta) == 1:  # the tie to the task is the task here
            params = msgspec.structs.replace(params, meta=UNSET)
        try:
            params = bridge._carry(
                params, task.revision, f"the params of the server's {e.method!r}"
            )
        except ProtocolError as err:
            bridge._quietly(bridge.back.respond_error, e.id, err.code, err.message, err.data)
            return True
        request: dict[str, Any] = {"method": e.method}
        if params is not None and params is not UNSET:
            request["params"] = msgspec.to_builtins(params)
        self.input_names += 1
        task.asked[f"input-{self.input_names}"] = (e.id, request)
        self._release(task)
        return True

    def _status(self, e: NotificationReceived) -> bool:
        task_id = (_plain(e.params) or {}).get("taskId")
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
            result = self.bridge._up_result(result, task.revision, task.method)
            plain = msgspec.to_builtins(result)
            plain.setdefault(self.kind, f.complete_result)
            task.payload = ("result", plain)
            self._release(task)
        elif what == f.cancel:
            self._answer(id, {self.kind: f.complete_result})
        else:  # the get
            snapshot = extension_task(msgspec.to_builtins(result), f)
            if not self._reply(id, task, snapshot):
                if len(task.waiting) >= self.bridge.max_in_flight:
                    self._error(
                        id,
                        crossing.too_many(
                            id, self.bridge.max_in_flight, "the client", "the server"
                        ),
                    )
                else:
                    task.waiting.append((id, snapshot))

    def _failed(self, what: str, task: _Task, id: Any, error: ProtocolError) -> None:
        if what == "payload":
            err: dict[str, Any] = {"code": error.code, "message": error.message}
            if error.data is not None:
                err["data"] = msgspec.to_builtins(error.data)
            task.payload = ("error", err)
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
        status = snapshot.get("status")
        out = {**snapshot, self.kind: f.complete_result}
        if task.payload is not None and status != f.cancelled:
            kind, value = task.payload
            if kind == "result" and status == f.failed:  # a failure the payload does not say
                value = {
                    "code": INTERNAL_ERROR,
                    "message": snapshot.get("statusMessage") or "the task failed",
                    "data": {"result": value},
                }
                kind = "error"
            out["status"] = f.completed if kind == "result" else f.failed
            out[kind] = value
        elif status in (f.completed, f.failed):
            return False
        elif status == f.input_required:
            if not task.asked:
                return False
            out["inputRequests"] = {name: request for name, (_, request) in task.asked.items()}
        self._answer(id, out)
        return True

    def _release(self, task: _Task) -> None:
        """Answer the client's gets held for what just came (the payload, an input request)."""
        waiting, task.waiting = task.waiting, []
        for id, snapshot in waiting:
            if not self._reply(id, task, snapshot):
                task.waiting.append((id, snapshot))

    # -- answering the client -----------------------------------------------------------------

    def _answer(self, id: Any, result: dict[str, Any], session: bool = False) -> None:
        """Send the client ``result`` for its request ``id``; ``session``: a request its session
        read (a call), which then stops awaiting an answer there."""
        front = self.bridge.front
        if session:
            incoming = front._incoming.get(id)
            if incoming is None:
                return  # the client cancelled it meanwhile
            front._answer(id, incoming)
        front._out.append(_JSON.encode({"jsonrpc": "2.0", "id": id, "result": result}))

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
