"""Tasks across the HTTP gateway: a client of the core revision's tasks (2025-11-25) in front of
a Streamable HTTP server of the tasks extension (the revision it extends), the reverse of
``bridge/tasks.py``.

``UpstreamTasks.between(gateway, negotiated)`` is the translator when the server behind the
gateway (``--upstream URL``, Streamable HTTP) speaks the extension's revision and offers it, else
None. The gateway asks it first about each request of a client of the core revision
(``forward``); it answers the core revision's task requests itself, talking to the server with
stateless requests of the extension's revision of its own (which declare the extension, as the
link's own requests do not: ``bridge/tasks.py``, ``undeclared_tasks``):

- a task-augmented ``tools/call`` becomes the extension's call; the task it creates comes back as
  the core ``CreateTaskResult`` (a call the server answers at once becomes a task that is
  already ``completed``, kept by the gateway);
- ``tasks/get`` and ``tasks/cancel`` are the extension's (the cancel answered with the task as
  it then is), ``tasks/list`` lists the link's tasks as last seen;
- ``tasks/result`` polls the extension's ``tasks/get`` at the task's poll interval until the
  task is over and answers with its result (or error); the input a task asks for meanwhile is
  asked of the client as the core revision's own requests, tied to the task by the related-task
  ``_meta`` key, and the answers go back with the extension's update.

Every method, key and status comes from the generated facts (``TASKS``, ``FACTS``).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import weakref
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx
import msgspec
from msgspec import UNSET

from .._extensions import TASKS, TasksFacts
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from ..session._common import checked, speech
from ..transports.header_check import METHOD_HEADER, NAME_HEADER
from ..transports.http_client import _needs_auth
from .tasks import NOT_MINE, core_task, extension_task
from .upstream import HttpUpstream

if TYPE_CHECKING:
    from ..events import Negotiated
    from ..transports.http_server import Call
    from .gateway import Gateway, Link

__all__ = ["MAX_TASKS", "NOT_MINE", "UpstreamTasks"]

MAX_TASKS = 1000  # tasks one link keeps (for tasks/list, and those answered at once)
_POLL = (0.05, 5.0)  # the bounds of the wait between two polls of tasks/result (seconds)
_IDS = itertools.count(1)
_VERSION_HEADER = "mcp-protocol-version"


class UpstreamTasks:
    """The translator of one gateway (module docstring)."""

    def __init__(self, gateway: Gateway, facts: TasksFacts) -> None:
        assert facts.core is not None and gateway.upstream is not None
        self.gateway = gateway
        self.url = gateway.upstream
        self.facts = facts
        core = speech(facts.core)
        tasks = core.facts.tasks
        assert tasks is not None
        self.when = tasks.when
        self.task_id_attr = tasks.payload_task_id
        # Per link: the tasks made through it, as last seen (weakly: they go with the link).
        self.kept: weakref.WeakKeyDictionary[Link, dict[str, dict[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )
        life = core.facts.lifecycle
        self.get, self.result = life["task_get"], life["task_result"]
        self.list, self.cancel = life["task_list"], life["task_cancel"]
        self.methods = {self.get, self.result, self.list, self.cancel}
        meta = speech(facts.revision).facts.request_meta
        assert meta is not None
        self.meta = meta
        kinds = speech(facts.revision).facts.result_kinds
        assert kinds is not None
        self.kind = kinds.key
        self.call_result = speech(facts.revision).facts.wires[facts.eligible].result

    @classmethod
    def between(cls, gateway: Gateway, negotiated: Negotiated) -> UpstreamTasks | None:
        """The translator when the server offers the extension of its revision (and the
        extension replaces the tasks of a core revision), else None."""
        facts = TASKS.get(negotiated.revision)
        if facts is None or facts.core is None or gateway.upstream is None:
            return None
        caps = msgspec.to_builtins(negotiated.capabilities) or {}
        extensions = caps.get("extensions") if isinstance(caps, dict) else None
        if not isinstance(extensions, dict) or facts.extension not in extensions:
            return None
        return cls(gateway, facts)

    async def forward(self, link: Link, call: Call) -> Any:
        """The answer to ``call`` when it is a core task request (``NOT_MINE`` otherwise)."""
        if call.revision != self.facts.core:
            return NOT_MINE
        if call.method == self.facts.eligible:
            if getattr(call.params, self.when, UNSET) is UNSET:
                return NOT_MINE
            await link.open()
            return await self._call(link, call)
        if call.method not in self.methods:
            return NOT_MINE
        await link.open()
        kept = self.kept.setdefault(link, {})
        if call.method == self.list:
            return {"tasks": [core_task(task, self.facts) for task in kept.values()]}
        task_id = getattr(call.params, self.task_id_attr, None)
        if not isinstance(task_id, str) or task_id not in kept:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: no task {task_id!r}")
        if call.method == self.get:
            return core_task(await self._snapshot(link, task_id, kept), self.facts)
        if call.method == self.cancel:
            if "result" in kept[task_id] and task_id.startswith("mcpbind-"):
                raise ProtocolError(
                    INVALID_PARAMS, f"Invalid params: task {task_id!r} is already completed"
                )
            await self._post(link, self.facts.cancel, {"taskId": task_id})
            return core_task(await self._snapshot(link, task_id, kept), self.facts)
        return await self._payload(link, call, task_id, kept)

    # -- the requests --------------------------------------------------------------------------

    async def _call(self, link: Link, call: Call) -> Any:
        kept = self.kept.setdefault(link, {})
        if len(kept) >= MAX_TASKS:
            raise ProtocolError(
                INTERNAL_ERROR, f"Too many tasks: the gateway keeps at most {MAX_TASKS} per client"
            )
        plain = msgspec.structs.replace(call.params, **{self.when: UNSET})
        params, _ = link._down_params(call.method, plain, call.revision)
        answer = await self._post(link, self.facts.eligible, msgspec.to_builtins(params))
        kind = answer.get(self.kind)
        if kind == self.facts.task_result:
            task = extension_task(answer, self.facts)
        elif kind in (None, self.facts.complete_result):
            now = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            task = {
                "taskId": "mcpbind-" + secrets.token_urlsafe(12),
                "status": self.facts.completed,
                "createdAt": now,
                "lastUpdatedAt": now,
                "ttlMs": None,
                "result": answer,
            }
        else:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server answered the task-augmented {call.method!r} with a "
                f"{kind!r} result, which MCP {call.revision} tasks cannot carry",
            )
        kept[task["taskId"]] = task
        return {"task": core_task(task, self.facts)}

    async def _snapshot(
        self, link: Link, task_id: str, kept: dict[str, dict[str, Any]]
    ) -> dict[str, Any]:
        """The task as the server says it is now (kept: a task answered at once)."""
        if task_id.startswith("mcpbind-"):
            return kept[task_id]
        answer = await self._post(link, self.facts.get, {"taskId": task_id})
        kept[task_id] = answer
        return answer

    async def _payload(
        self, link: Link, call: Call, task_id: str, kept: dict[str, dict[str, Any]]
    ) -> Any:
        f = self.facts
        asked: set[str] = set()
        while True:
            task = await self._snapshot(link, task_id, kept)
            status = task.get("status")
            if status == f.completed:
                return self._result(link, call, task_id, task.get("result"))
            if status == f.failed:
                error = task.get("error") or {}
                raise ProtocolError(
                    error.get("code", INTERNAL_ERROR),
                    error.get("message", "the task failed"),
                    error.get("data"),
                )
            if status == f.cancelled:
                raise ProtocolError(
                    INVALID_PARAMS, f"Invalid params: task {task_id!r} was cancelled"
                )
            if status == f.input_required:
                requests = task.get("inputRequests") or {}
                new = {n: r for n, r in requests.items() if n not in asked}
                if new:
                    answers = {}
                    for name, request in new.items():
                        answers[name] = await self._ask(call, task_id, request)
                        asked.add(name)
                    update = {"taskId": task_id, f.input_responses: answers}
                    await self._post(link, f.update, update)
                    continue
            interval = (task.get("pollIntervalMs") or 500) / 1000
            await asyncio.sleep(min(max(interval, _POLL[0]), _POLL[1]))

    async def _ask(self, call: Call, task_id: str, request: Any) -> Any:
        """One input request of the task, asked of the client as its own request."""
        key = self.facts.related_task_key
        assert key is not None
        method = request.get("method") if isinstance(request, dict) else None
        if not isinstance(method, str) or method not in speech(call.revision).methods:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the task asks for {method!r} input, which MCP "
                f"{call.revision} cannot ask for",
            )
        params = dict(request.get("params") or {})
        params["_meta"] = {**(params.get("_meta") or {}), key: {"taskId": task_id}}
        answer = await call.request(method, params)
        return msgspec.to_builtins(answer)

    def _result(self, link: Link, call: Call, task_id: str, result: Any) -> Any:
        """The task's result in the client's revision, tied to the task as the core revision
        says a payload is."""
        typed = checked(result, self.call_result, self.facts.revision, "$.result")
        plain = msgspec.to_builtins(link._up_result(typed, call.revision, self.facts.eligible))
        key = self.facts.related_task_key
        assert key is not None
        plain["_meta"] = {**(plain.get("_meta") or {}), key: {"taskId": task_id}}
        return plain

    # -- the server ----------------------------------------------------------------------------

    async def _post(self, link: Link, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A stateless request of the extension's revision to the server, declaring the
        extension; its result (an error raises ``ProtocolError``)."""
        f, meta = self.facts, self.meta
        caps = dict(link.back.capabilities or {})
        caps["extensions"] = {**(caps.get("extensions") or {}), f.extension: {}}
        envelope = {
            meta.version_key: speech(f.revision).version,
            meta.capabilities_key: caps,
        }
        if link.back.info is not None:
            envelope[meta.info_key] = link.back.info
        params = {**params, "_meta": {**(params.get("_meta") or {}), **envelope}}
        id = f"mcpbind-task-{next(_IDS)}"
        body = msgspec.json.encode({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            _VERSION_HEADER: speech(f.revision).version,
            METHOD_HEADER: method,
        }
        name = params.get("taskId", params.get("name"))
        if isinstance(name, str):
            headers[NAME_HEADER] = name
        response = await self._authorized_post(link, body, headers)
        answer = _answer(response.content, response.headers.get("content-type", ""), id)
        if answer is None:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server at {self.url} answered {method!r} with no response "
                f"(HTTP {response.status_code})",
            )
        failure = answer.get("error")
        if isinstance(failure, dict):
            raise ProtocolError(
                failure.get("code", INTERNAL_ERROR),
                str(failure.get("message")),
                failure.get("data"),
            )
        result = answer.get("result")
        if not isinstance(result, dict):
            raise ProtocolError(
                INTERNAL_ERROR, f"Internal error: the server's answer to {method!r} is no object"
            )
        return result

    async def _authorized_post(
        self, link: Link, body: bytes, headers: dict[str, str]
    ) -> httpx.Response:
        """POST ``body`` authorized as the link's own requests are (the gateway's credentials,
        ``--upstream-client-id``; never the client's): a challenge goes to the link's
        ``OAuthClient`` and the POST again, at most its ``max_attempts`` times."""
        http = self.gateway._http
        transport = link.transport
        assert http is not None and isinstance(transport, HttpUpstream)
        attempts = 0
        while True:
            try:
                sent = await transport._authorized(dict(headers), "POST")
                response = await http.post(self.url, content=body, headers=sent)
            except ProtocolError:
                raise  # the authorization failed, and says why
            except Exception as error:  # noqa: BLE001 - the client hears why
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"Internal error: the server at {self.url} cannot be reached: {error}",
                ) from None
            if not _needs_auth(response):
                return response
            await transport._challenged(response, attempts)  # raises when it cannot help
            attempts += 1


def _answer(body: bytes, content_type: str, id: str) -> dict[str, Any] | None:
    """The response with ``id`` in a JSON body or an event stream."""
    candidates: list[bytes] = []
    if content_type.startswith("text/event-stream"):
        for line in body.splitlines():
            if line.startswith(b"data:"):
                candidates.append(line[5:].strip())
    else:
        candidates.append(body)
    for data in candidates:
        try:
            message = msgspec.json.decode(data)
        except msgspec.DecodeError:
            continue
        if isinstance(message, dict) and message.get("id") == id and "method" not in message:
            return message
    return None
