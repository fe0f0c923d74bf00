"""Tasks across the HTTP gateway, from a client of the core revision's tasks (2025-11-25) in front
of a server of the tasks extension (the revision it extends); the reverse of
``tasks_extension_to_core.py``: the gateway's ports of the translation
``bridge/tasks_core_to_extension.py`` holds. What it asks of the gateway is ``TasksGateway``.

``UpstreamTasks.between(gateway, negotiated)`` is the translator when the server behind the
gateway speaks the extension's revision and offers it, else None. The gateway asks it first
about each request of a client of the core revision (``forward``). Its requests to the server
declare the extension, as the link's own requests do not (``task_facts.undeclared_tasks``):
behind ``--upstream URL`` (Streamable HTTP) they are stateless requests of the extension's
revision of its own, authorized as the link's (``_Post``); behind ``-- CMD`` they go on the link's session to its child process (``_ChildPort``). The client is asked on the
stream of the request it waits on; the wait between two polls is asyncio's. Each link's tasks
are a table of their own (``Table``), which goes with the link. A task-augmented
call the client cancels runs on to the server's answer (counted in flight on its link until
then), and the task it creates is cancelled (``bridge/tasks_core_to_extension.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import time
import weakref
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from ...errors import CONNECTION_CLOSED, INTERNAL_ERROR, ProtocolError
from ...events import ErrorReceived, MessageRejected, ResultReceived, TaskCreated
from ...session._common import speech
from ...session.tasks import with_extension
from ...transports.header_check import METHOD_HEADER, NAME_HEADER, params_name
from ...transports.http_client import VERSION_HEADER
from ...transports.http_wire import closing, send
from ...transports.sse_events import EventParser
from ..limits import NOT_MINE, too_many
from ..tasks_core_to_extension import MAX_TASKS, CoreTasks, Table
from .link import Link
from .upstream import HttpUpstream

if TYPE_CHECKING:
    from ...events import Negotiated
    from ...transports.http_server import Call

__all__ = ["MAX_TASKS", "NOT_MINE", "TasksGateway", "UpstreamTasks"]

_IDS = itertools.count(1)


class TasksGateway(Protocol):
    """What the translator asks of the ``Gateway``."""

    @property
    def upstream(self) -> str | None:
        """The server's URL (None: a child process per link)."""
        ...

    @property
    def max_in_flight(self) -> int: ...

    def spawn(self, work: Any) -> None:
        """Run the coroutine ``work`` in the background until the gateway closes."""
        ...

    def say(self, lines: list[str]) -> None:
        """Log ``lines``."""
        ...


class UpstreamTasks:
    """The translator of one gateway (module docstring)."""

    def __init__(self, gateway: TasksGateway, tasks: CoreTasks) -> None:
        self.gateway = gateway
        self.url = gateway.upstream
        self.tasks = tasks
        self.facts = tasks.facts
        sp = speech(tasks.facts.revision)
        meta = sp.facts.request_meta
        assert meta is not None  # the extension rides on the per-request envelope
        self.meta = meta
        self.version = sp.version
        # Where each request's _meta goes.
        self.meta_key = sp.send(tasks.facts.eligible).meta_key
        # Per link: the tasks made through it (weakly: they go with the link).
        self.kept: weakref.WeakKeyDictionary[Link, Table] = weakref.WeakKeyDictionary()

    @classmethod
    def between(cls, gateway: TasksGateway, negotiated: Negotiated) -> UpstreamTasks | None:
        """The translator when the server offers the extension of its revision (and the
        extension replaces the tasks of a core revision), else None."""
        tasks = CoreTasks.offered(negotiated)
        return None if tasks is None else cls(gateway, tasks)

    async def forward(self, link: Link, call: Call) -> Any:
        """The answer to ``call`` when it is a core task request (``NOT_MINE`` otherwise)."""
        if not self.tasks.mine(call.method, call.revision, call.params):
            return NOT_MINE
        await link.open()
        if link.surface is not None:
            await link.check_surface(call)  # (the surface lock holds for task calls too)
        limit = self.gateway.max_in_flight
        if len(link.pending) + link.counted >= limit:
            raise too_many(call.id, limit, "the client", "the server")
        link.used = time.monotonic()
        link.counted += 1  # in flight: the link is neither ended idle nor evicted meanwhile
        table = self.kept.setdefault(link, {})
        port = _Post(self, link, call) if self.url is not None else _ChildPort(self, link, call)
        try:
            return await self.tasks.answer(table, port, call.method, call.params)
        finally:
            link.counted -= 1
            link.say()  # (the losses of the input requests carried to the client)

    # -- the server ----------------------------------------------------------------------------

    async def send(self, link: Link, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A stateless request of the extension's revision to the server, declaring the
        extension; its result (an error raises ``ProtocolError``)."""
        meta = self.meta
        envelope = {
            meta.version_key: self.version,
            meta.capabilities_key: with_extension(link.back.capabilities, self.facts),
        }
        if link.back.info is not None:
            envelope[meta.info_key] = link.back.info
        key = self.meta_key
        assert key is not None  # every request of the extension's revision has _meta
        params = {**params, key: {**(params.get(key) or {}), **envelope}}
        id = f"mcpbind-task-{next(_IDS)}"
        body = _REQUEST.encode(_TaskRequest(id=id, method=method, params=params))
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            VERSION_HEADER: self.version,
            METHOD_HEADER: method,
        }
        name = params_name(params)
        if name is not None:
            headers[NAME_HEADER] = name
        status, answer = await self._authorized_post(link, body, headers, id)
        if answer is None:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server at {self.url} answered {method!r} with no response "
                f"(HTTP {status})",
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
        self, link: Link, body: bytes, headers: dict[str, str], id: str
    ) -> tuple[int, dict[str, Any] | None]:
        """POST ``body`` authorized as the link's own requests are (the gateway's credentials,
        ``--upstream-client-id``; never the client's; ``http_wire.send``) on the link's wire;
        the status and the response with ``id`` in its JSON body or event stream (None when
        there is none)."""
        transport = link.transport
        assert isinstance(transport, HttpUpstream) and self.url is not None
        try:
            reply = await send(
                transport.wire, "POST", self.url, body, headers=headers, auth=transport.auth
            )
            async with closing(reply):
                content = await reply.read()
        except ProtocolError:
            raise  # the authorization failed, and says why
        except Exception as error:  # noqa: BLE001 - the client hears why
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the server at {self.url} cannot be reached: {error}",
            ) from None
        return reply.status, _answer(content, reply.headers.get("content-type", ""), id)


def _answer(body: bytes, content_type: str, id: str) -> dict[str, Any] | None:
    """The response with ``id`` in a JSON body or an event stream."""
    candidates = [body]
    if content_type.startswith("text/event-stream"):
        parser = EventParser()
        candidates = [event.data for event in parser.feed(body) + parser.feed(b"\n\n")]
    for data in candidates:
        try:
            message = msgspec.json.decode(data)
        except msgspec.DecodeError:
            continue
        if isinstance(message, dict) and message.get("id") == id and "method" not in message:
            return message
    return None


class _TaskRequest(msgspec.Struct, gc=False):
    """A request of the gateway's own to the server (JSON-RPC's envelope)."""

    id: str
    method: str
    params: dict[str, Any]
    jsonrpc: str = "2.0"


_REQUEST = msgspec.json.Encoder()


class _Post:
    """The gateway's port of the translation (``Port``) for one request ``call`` of
    the client of ``link``, behind ``--upstream URL``: the requests are POSTs of its own."""

    __slots__ = ("upstream", "link", "call")

    def __init__(self, upstream: UpstreamTasks, link: Link, call: Call) -> None:
        self.upstream, self.link, self.call = upstream, link, call

    @property
    def crossing(self) -> Link:
        return self.link

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await self.upstream.send(self.link, method, params)

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        return await self.call.request(method, params)

    async def wait(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    @property
    def gone(self) -> ProtocolError | None:
        why = self.link.why
        if why is None:
            return None
        return ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}", {"reason": why})

    def later(self, work: Coroutine[Any, Any, None]) -> None:
        link = self.link
        link.counted += 1  # (as ``forward`` counts the request)

        async def counted() -> None:
            try:
                await work
            finally:
                link.counted -= 1

        self.upstream.gateway.spawn(counted())

    def note(self, line: str) -> None:
        self.upstream.gateway.say([line])


class _ChildPort(_Post):
    """The port behind ``-- CMD``: the requests go on the link's session to its child process
    (one at a time per request of the client, which ``forward`` counted in the link's
    ``max_in_flight``)."""

    __slots__ = ()

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        link, call = self.link, self.call
        if link.why is not None:
            raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {link.why}")
        tasks = self.upstream.tasks
        rid = link.back.request(method, tasks.declared(method, params, link.back.capabilities))
        event = await link.answer_to(rid, call)
        if isinstance(event, BaseException):
            raise event
        if isinstance(event, ResultReceived | TaskCreated):
            return msgspec.to_builtins(event.result)  # type: ignore[no-any-return]
        if isinstance(event, ErrorReceived):
            raise ProtocolError(event.code, event.message, event.data)
        why = event.error.message if isinstance(event, MessageRejected) else "input required"
        raise ProtocolError(
            INTERNAL_ERROR, f"Internal error: the server's answer to {method!r}: {why}"
        )
