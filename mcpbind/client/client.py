"""``Client``: an MCP client whose every result is the precise generated class of the revision it
agreed with the server, over Streamable HTTP, a subprocess's stdio, or to an App in process."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import msgspec
from msgspec import UNSET

from .._repeats import Repeats
from .._revisions import LATEST, REVISIONS
from .._support import meta_key
from ..app.revision import Rev, rev
from ..errors import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    ProtocolError,
    ResourceNotFound,
)
from ..events import Event, Negotiated, NotificationReceived, ProgressReceived, RequestReceived
from ..transports._answer import MAX_ROUNDS
from .links import Link, ObservedSession, warn
from .structured import structured
from .tasks import TaskFollower, declared

if TYPE_CHECKING:
    # Each result is of the revision agreed on: typed as the union over the revisions.
    # generated/: `make check` does not see it (pyproject: its names are Any there)
    import mcpbind.any_revision as any_revision

    from ..app import App
    from ..surface.lockfile import Lock
    from .guarded import Enforcer

__all__ = ["Client"]


_RELEASED = REVISIONS[: REVISIONS.index(LATEST) + 1]
MAX_LIST_ITEMS = 100_000  # items one listing gathers over all its pages
MAX_LIST_BYTES = 64 * 1024 * 1024  # ... and their size as JSON, cursors included (64 MiB)
# The progress callback of the request about to be sent from this context (taken by the first).
_PROGRESS: contextvars.ContextVar[list[Callable[..., Any]] | None] = contextvars.ContextVar(
    "mcpbind_client_progress", default=None
)

Handler = Callable[[Any], Any]
T = TypeVar("T")


class _ProgressSession(ObservedSession):
    """The Client's session: a request made while a call awaits progress carries its token."""

    def request(self, method: str, params: Any = None, **options: Any) -> Any:
        pending = _PROGRESS.get()
        if pending:
            self.expect_progress(pending.pop())
        return super().request(method, params, **options)


class Client:
    """An MCP client for ``target``: a URL (Streamable HTTP, or HTTP+SSE for a server that
    refuses it as 2024-11-05 servers do; mcpbind[http]), a command (a list: the server is started
    as a subprocess and spoken to on its stdio), or an ``App`` (in this process). ``async with Client(target) as client`` opens the connection and agrees on a
    revision (the newest of ``revisions`` the server speaks; ``client.revision``).

    ``sampling(params)``, ``elicitation(params)`` and ``roots()`` answer what the server asks
    (each given one declares its capability); they get the generated params of the agreed
    revision and return plain JSON or a generated result (``roots`` may return a list of URIs).
    ``on_notification(event)`` gets every notification (``mcpbind.events.NotificationReceived``).
    ``timeout`` bounds the wait for each answer (seconds; None: no bound); ``max_pages`` the pages
    one listing reads, ``max_list_items`` the items it gathers over all of them and
    ``max_list_bytes`` their size as JSON (a cursor the server gives twice ends it at once);
    ``max_rounds`` the input rounds of one request. ``tasks=True`` declares
    the 2026-07-28 tasks extension (docs/tasks.md): a tool the server runs as a task is followed
    to its end (polled with ``tasks/get``, its questions answered by the handlers above with
    ``tasks/update``, cancelled with the call), all within ``timeout``. ``surface=LOCK`` (a
    lock written by ``mcpbind surface lock``, or its path; mcpbind[surface]) enforces it
    (docs/surface.md): a tool, prompt, resource or template the lock does not approve (new,
    renamed, or changed since) is left out of lists and its use refused with ``ProtocolError``
    -32602 naming the item, the lock and the change (``on_drift="block"``), or only logged
    (``"warn"``); a tool's arguments are checked against its locked input schema before they are
    sent, its result against its locked output schema; the lock's revision is the one offered
    unless ``revisions`` are given. Further ``options`` go to
    the transport (HTTP: ``headers``, ``http``, and Streamable HTTP's own ``auth``, ...; a command:
    ``env``, ``cwd``, ``grace``).
    """

    def __init__(
        self,
        target: str | Sequence[str] | App,
        *,
        revisions: Sequence[str] | None = None,
        info: Mapping[str, Any] | None = None,
        sampling: Handler | None = None,
        elicitation: Handler | None = None,
        roots: Callable[[], Any] | None = None,
        on_notification: Callable[[NotificationReceived], Any] | None = None,
        timeout: float | None = 60.0,
        max_pages: int = 1000,
        max_list_items: int = MAX_LIST_ITEMS,
        max_list_bytes: int = MAX_LIST_BYTES,
        max_rounds: int = MAX_ROUNDS,
        tasks: bool = False,
        surface: Lock | str | os.PathLike[str] | None = None,
        on_drift: Literal["block", "warn"] = "block",
        **options: Any,
    ) -> None:
        self.target = target
        self.lock: Lock | None = None
        if surface is not None:
            from .guarded import load_lock

            self.lock = load_lock(surface)
            if revisions is None:
                revisions = (self.lock.revision,)
        if on_drift not in ("block", "warn"):
            raise ValueError(f"on_drift={on_drift!r}: 'block' or 'warn'")
        self.on_drift: Literal["block", "warn"] = on_drift
        self._enforcer: Enforcer | None = None
        self.revisions = tuple(revisions) if revisions is not None else _RELEASED
        self.info = dict(info) if info is not None else {"name": "mcpbind-client", "version": "1"}
        self._handlers: dict[str, Callable[..., Any]] = {}
        capabilities: dict[str, Any] = {}
        if sampling is not None:
            self._handlers["sample"] = sampling
            capabilities["sampling"] = {}
        if elicitation is not None:
            self._handlers["elicit"] = elicitation
            capabilities["elicitation"] = {}
        if roots is not None:
            self._handlers["list_roots"] = roots
            capabilities["roots"] = {"listChanged": True}
        if tasks:
            declared(self.revisions, capabilities)
        self.tasks = tasks
        self.capabilities = capabilities
        self.on_notification = on_notification
        self.timeout = timeout
        self.max_pages = max_pages
        self.max_list_items, self.max_list_bytes = max_list_items, max_list_bytes
        self.max_rounds = max_rounds
        self.options = options
        self.negotiated: Negotiated | None = None
        self._link: Link | None = None
        self._log_level: str | None = None
        # subscription streams (revisions with subscriptions/listen): what is asked for
        self._uris: set[str] = set()
        self._lists = False
        self._listening: asyncio.Task[None] | None = None
        self._acknowledged: asyncio.Event | None = None
        # tasks being followed (tasks=True): task id -> set when a status notification names it
        self._woken: dict[str, asyncio.Event] = {}
        self._note = Repeats(warn)  # notifications dropped (callbacks still running), logged

    # -- opening and closing ----------------------------------------------------------------------

    def _make_link(self, session: ObservedSession) -> Link:
        target = self.target
        common: dict[str, Any] = {"timeout": self.timeout, "max_rounds": self.max_rounds}
        if isinstance(target, str):
            if not target.startswith(("http://", "https://")):
                raise ValueError(
                    f"Client target {target!r}: a URL starts with http:// or https://; a command "
                    "is a list of arguments"
                )
            from .http import HttpLink

            options = {"max_rounds": self.max_rounds, **self.options}
            return HttpLink(target, session, self._serve, self.timeout, **options)
        from ..app import App

        if isinstance(target, App):
            from .memory import MemoryLink

            return MemoryLink(target, session, self._serve, **common, **self.options)
        if isinstance(target, Sequence) and target and all(isinstance(a, str) for a in target):
            from .stdio import StdioLink

            return StdioLink(target, session, self._serve, **common, **self.options)
        raise TypeError(f"Client target {target!r}: expected a URL, a command (list) or an App")

    async def __aenter__(self) -> Client:
        session = _ProgressSession(
            revisions=self.revisions,
            capabilities=self.capabilities,
            info=self.info,
            observe=self._observe,
            observe_task=self._task_status if self.tasks else None,
        )
        link = self._make_link(session)
        self._link = link
        try:
            self.negotiated = await link.open()
        except BaseException:
            await link.close()
            self._link = None
            raise
        if self.lock is not None:
            from .guarded import Enforcer

            self._enforcer = Enforcer(
                self.lock, self.negotiated.revision, self.on_drift, session, self.max_pages
            )
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection (and stop the server process when the target is a command)."""
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(asyncio.CancelledError, ProtocolError, ConnectionError):
                await self._listening
            self._listening = None
        link, self._link = self._link, None
        if link is not None:
            await link.close()

    # -- what was agreed ----------------------------------------------------------------------------

    @property
    def revision(self) -> str | None:
        """The agreed revision (None before opening)."""
        return self.negotiated.revision if self.negotiated is not None else None

    @property
    def server_capabilities(self) -> any_revision.ServerCapabilities | None:
        """The server's capabilities: the generated ``ServerCapabilities`` of the revision."""
        return self.negotiated.capabilities if self.negotiated is not None else None

    @property
    def server_info(self) -> any_revision.Implementation | None:
        """The server's ``Implementation`` (name, version), when it sent one."""
        return self.negotiated.info if self.negotiated is not None else None

    @property
    def instructions(self) -> str | None:
        """The server's instructions from the handshake result, when it gave any."""
        result = self.negotiated.result if self.negotiated is not None else None
        value = result.instructions if result is not None else None
        return None if value is UNSET else value

    def _rev(self) -> tuple[Link, Rev]:
        if self._link is None or self.negotiated is None:
            raise ProtocolError(
                INTERNAL_ERROR, "the client is not open: use `async with Client(...)`"
            )
        return self._link, rev(self.negotiated.revision)

    def _method(self, r: Rev, role: str) -> str:
        method = r.features.get(role)
        if method is None:
            raise ProtocolError(
                METHOD_NOT_FOUND, f"MCP {r.revision} has no {role.replace('_', ' ')} request"
            )
        return method

    # -- requests -----------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        progress: Callable[[float, float | None, str | None], Any] | None = None,
    ) -> Any:
        """Send any request and return its result, of the precise generated class of the
        agreed revision; an error response raises ``ProtocolError``. ``progress(progress,
        total, message)`` is called with each progress notification about it."""
        link, r = self._rev()
        enforcer = self._enforcer
        if enforcer is not None:
            await enforcer.before(method, params, self.request)
        params = self._with_log_level(r, params)
        token = _PROGRESS.set([progress] if progress is not None else None)
        try:
            result = await link.call(method, params)
        finally:
            _PROGRESS.reset(token)
        return result if enforcer is None else enforcer.after(method, params, result)

    def _with_log_level(self, r: Rev, params: Any) -> Any:
        """``params`` carrying the log level in their ``_meta`` where the revision asks for it
        per request."""
        if (
            self._log_level is None
            or r.meta is None
            or not (params is None or isinstance(params, dict))
        ):
            return params
        key = r.meta.type._attributes.get("log_level")
        if key is None:
            return params
        out = dict(params or {})
        envelope = r.facts.meta_key
        out[envelope] = {**(out.get(envelope) or {}), key: self._log_level}
        return out

    async def _pages(
        self, role: str, items: str, params: dict[str, Any] | None = None
    ) -> list[Any]:
        """Every item of a listing, page after page, within ``max_pages``, ``max_list_items``
        and ``max_list_bytes`` (the items' size as JSON, and the cursors'); a cursor the server
        gave before would list the same pages again, for ever: refused at once."""
        link, r = self._rev()
        method = self._method(r, role)
        found: list[Any] = []
        cursor: Any = UNSET
        given: set[str] = set()  # the cursors the server gave (each at most max_list_bytes)
        size = 0
        for page in range(1, self.max_pages + 1):
            page_params = dict(params or {})
            if cursor is not UNSET:
                page_params["cursor"] = cursor
            result = await self.request(method, page_params or None)
            listed = getattr(result, items)
            cursor = result.next_cursor
            encoded = msgspec.json.encode(listed)
            size += len(encoded) + (len(cursor) if isinstance(cursor, str) else 0)
            if len(found) + len(listed) > self.max_list_items:
                raise _past(method, "max_list_items", self.max_list_items, "items")
            if size > self.max_list_bytes:
                raise _past(method, "max_list_bytes", self.max_list_bytes, "bytes")
            found.extend(listed)
            if cursor is UNSET or cursor is None:
                return found
            key = cursor if isinstance(cursor, str) else repr(cursor)
            if key in given:
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"the server's {method!r} listing gave the cursor {_shown(cursor)} a second "
                    f"time (after page {page}): the listing is given up",
                    {"cursor": cursor, "page": page},
                )
            given.add(key)
        raise _past(method, "max_pages", self.max_pages, "pages")

    async def list_tools(self) -> list[any_revision.Tool]:
        """Every tool of the server (every page), each the generated ``Tool``."""
        return await self._pages("list_tools", "tools")

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Callable[[float, float | None, str | None], Any] | None = None,
    ) -> any_revision.CallToolResult: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Callable[[float, float | None, str | None], Any] | None = None,
        result_type: type[T],
    ) -> T: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress: Callable[[float, float | None, str | None], Any] | None = None,
        result_type: Any = None,
    ) -> Any:
        """Call a tool: the generated ``CallToolResult`` (a tool's failure is a result with
        ``is_error``; an unknown tool raises ``ProtocolError``). With ``tasks=True``, a call the
        server runs as a task returns the task's result once it completes (a failed task raises
        its error). ``result_type=T`` returns the tool's structured content decoded as a ``T``
        instead (``client.structured``: a tool error raises ``ToolError``, content that does not
        fit ``msgspec.ValidationError`` with its JSON path)."""
        result = await self._call_tool(name, arguments, progress)
        if result_type is not None:
            return structured(result, result_type, name)
        return result

    async def _call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        progress: Callable[[float, float | None, str | None], Any] | None,
    ) -> Any:
        _, r = self._rev()
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = msgspec.to_builtins(dict(arguments))
        result = await self.request(self._method(r, "call_tool"), params, progress=progress)
        if self.tasks:
            follower = TaskFollower.of(
                r.revision,
                self.request,
                self._serve,
                self.timeout,
                self.max_rounds,
                self._listen_tasks if "listen" in r.facts.lifecycle else None,
                self._woken,
            )
            if follower is not None and follower.is_task(result):
                return await follower.follow(result)
        return result

    async def _listen_tasks(self, params: dict[str, Any]) -> Any:
        """A subscription stream of task status notifications (``params`` name the tasks)."""
        link, r = self._rev()
        return await link.call(r.facts.lifecycle["listen"], params, stream=True)

    def _task_status(self, status: Any) -> None:
        """A task status notification (its generated params): wakes the follower of its task."""
        event = self._woken.get(status.task_id)
        if event is not None:
            event.set()

    async def list_resources(self) -> list[any_revision.Resource]:
        return await self._pages("list_resources", "resources")

    async def list_resource_templates(self) -> list[any_revision.ResourceTemplate]:
        return await self._pages("list_resource_templates", "resource_templates")

    async def read_resource(self, uri: str) -> any_revision.ReadResourceResult:
        """The generated ``ReadResourceResult`` of ``uri``; ``mcpbind.ResourceNotFound``
        (-32002) when the server has nothing there."""
        _, r = self._rev()
        try:
            return await self.request(self._method(r, "read_resource"), {"uri": uri})
        except ProtocolError as error:
            if error.code != RESOURCE_NOT_FOUND or isinstance(error, ResourceNotFound):
                raise
            raise ResourceNotFound(uri, error.message) from None

    async def list_prompts(self) -> list[any_revision.Prompt]:
        return await self._pages("list_prompts", "prompts")

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> any_revision.GetPromptResult:
        """The generated ``GetPromptResult`` of prompt ``name``."""
        _, r = self._rev()
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = dict(arguments)
        return await self.request(self._method(r, "get_prompt"), params)

    async def complete(
        self,
        *,
        argument: str,
        value: str,
        prompt: str | None = None,
        resource: str | None = None,
        arguments: Mapping[str, str] | None = None,
    ) -> any_revision.CompleteResult:
        """Suggestions for ``argument`` of ``prompt`` (a name) or of ``resource`` (a URI
        template), given its partial ``value`` and the other ``arguments`` already chosen: the
        generated ``CompleteResult``."""
        if (prompt is None) == (resource is None):
            raise TypeError("complete: give exactly one of prompt= and resource=")
        _, r = self._rev()
        ref = (
            {"type": "ref/prompt", "name": prompt}
            if prompt is not None
            else {"type": "ref/resource", "uri": resource}
        )
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if arguments:
            params["context"] = {"arguments": dict(arguments)}
        return await self.request(self._method(r, "complete"), params)

    async def ping(self) -> None:
        """Ping the server (revisions with ping)."""
        link, r = self._rev()
        method = r.facts.lifecycle.get("ping")
        if method is None:
            raise ProtocolError(METHOD_NOT_FOUND, f"MCP {r.revision} has no ping")
        await link.call(method)

    async def set_log_level(self, level: str) -> None:
        """Ask for log messages at ``level`` and above: by ``logging/setLevel`` where the
        revision has it, else in every request's ``_meta`` from now on."""
        link, r = self._rev()
        self._log_level = level
        method = r.features.get("set_log_level")
        if method is not None:
            await link.call(method, {"level": level})

    async def roots_changed(self) -> None:
        """Tell the server the roots changed (revisions with the notification)."""
        link, r = self._rev()
        method = r.features.get("roots_changed")
        if method is not None:
            await link.notify(method)

    # -- subscriptions ------------------------------------------------------------------------------

    async def subscribe(self, uri: str) -> None:
        """Be told (``on_notification``) when the resource ``uri`` changes."""
        await self._subscription("subscribe", uri)

    async def unsubscribe(self, uri: str) -> None:
        """No longer be told when the resource ``uri`` changes."""
        await self._subscription("unsubscribe", uri)

    async def _subscription(self, role: str, uri: str) -> None:
        """``role`` ("subscribe" or "unsubscribe") ``uri``: by its request where the revision
        has one, else on the subscription stream, reopened with the URIs asked for now."""
        _, r = self._rev()
        method = r.features.get(role)
        if method is not None:
            await self.request(method, {"uri": uri})
            return
        if role == "subscribe":
            self._uris.add(uri)
        else:
            self._uris.discard(uri)
        await self._listen(r)

    async def watch_lists(self) -> None:
        """Be told (``on_notification``) when the server's tool, resource or prompt lists
        change: on a subscription stream where the revision has one (older revisions send
        these notifications to every client anyway)."""
        _, r = self._rev()
        if "listen" in r.facts.lifecycle:
            self._lists = True
            await self._listen(r)

    async def _listen(self, r: Rev) -> None:
        """(Re)open the subscription stream with what is asked for now, and wait for the
        server's acknowledgement."""
        link = self._link
        assert link is not None
        old, self._listening = self._listening, None
        if old is not None:
            rid = link.session.last_ids.get(r.facts.lifecycle["listen"])
            old.cancel()
            with contextlib.suppress(asyncio.CancelledError, ProtocolError, ConnectionError):
                await old
            if rid is not None:
                await link.cancel(rid, "subscription changed")
        if not self._uris and not self._lists:
            return
        wanted: dict[str, Any] = {}
        if self._lists:
            wanted |= {"toolsListChanged": True, "resourcesListChanged": True}
            wanted["promptsListChanged"] = True
        if self._uris:
            wanted["resourceSubscriptions"] = sorted(self._uris)
        acknowledged = self._acknowledged = asyncio.Event()
        method = r.facts.lifecycle["listen"]
        self._listening = asyncio.ensure_future(self._stream(link, method, wanted))
        waiter = asyncio.ensure_future(acknowledged.wait())
        await asyncio.wait(
            {self._listening, waiter}, timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
        )
        waiter.cancel()
        if self._listening.done():
            self._listening.result()  # raises what ended it

    async def _stream(self, link: Link, method: str, wanted: dict[str, Any]) -> None:
        """Keep a subscription stream open: reopened when the server ends it."""
        while True:
            await link.call(method, {"notifications": wanted}, stream=True)

    # -- what the server sends ----------------------------------------------------------------------

    def _observe(self, event: Event) -> None:
        if type(event) is ProgressReceived:
            assert isinstance(event, ProgressReceived)
            link = self._link
            callback = link.session.progress_of.get(event.id) if link is not None else None
            if callback is not None:
                _call_soon(self._note, callback, event.progress, event.total, event.message)
            return
        assert isinstance(event, NotificationReceived)
        if self._enforcer is not None:
            self._enforcer.changed(event.method)
        r = rev(event.revision)
        if event.method == r.features.get("acknowledged"):
            link = self._link
            listen = r.facts.lifecycle.get("listen")
            ours = link.session.last_ids.get(listen) if link is not None and listen else None
            sid = _subscription(event.params)
            if sid is not None and sid != ours:
                return  # a stream of task status notifications (tasks=True): not the user's
            if self._acknowledged is not None:
                self._acknowledged.set()
                return
        if self.on_notification is not None:
            _call_soon(self._note, self.on_notification, event)

    async def _serve(self, event: RequestReceived) -> Any:
        """The answer to a request of the server (or an input request of a round trip)."""
        r = rev(self.revision or event.revision)
        role = r.roles.get(event.method)
        if role is None and r.trip is not None:
            role = next((k for k, m in r.trip.requests.items() if m == event.method), None)
        handler = self._handlers.get(role or "")
        if handler is None:
            raise ProtocolError(
                METHOD_NOT_FOUND, f"Method not found: this client handles no {event.method!r}"
            )
        result = handler() if role == "list_roots" else handler(event.params)
        if inspect.isawaitable(result):
            result = await result
        if role == "list_roots" and isinstance(result, (list, tuple)):
            result = {"roots": [{"uri": x} if isinstance(x, str) else x for x in result]}
        return result


def _subscription(params: Any) -> Any:
    """The subscription id an acknowledgement carries in its ``_meta`` (None without one)."""
    key = meta_key(type(params), "subscription_id")
    meta = getattr(params, "meta", None)
    return meta.get(key) if key is not None and isinstance(meta, dict) else None


def _past(method: str, limit: str, most: int, what: str) -> ProtocolError:
    """The error ending a listing that goes on past one of its bounds."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"the server's {method!r} listing goes on past {most:,} {what} ({limit}): the listing "
        "is given up",
        {"limit": limit, "max": most},
    )


def _shown(cursor: Any) -> str:
    """A cursor as an error message shows it (its first 100 characters)."""
    text = repr(cursor)
    return text if len(text) <= 100 else f"{text[:100]}... ({len(text)} characters)"


def _call_soon(note: Repeats, callback: Callable[..., Any], *args: Any) -> None:
    """Call a user's callback; a coroutine it returns runs as a task of its own (at most
    ``MAX_CALLBACK_TASKS`` at once: past it the coroutine is dropped, with a warning ``note``
    says at a bounded rate)."""
    result = callback(*args)
    if not inspect.isawaitable(result):
        return
    if len(_TASKS) >= MAX_CALLBACK_TASKS:
        if inspect.iscoroutine(result):
            result.close()
        note("dropped", f"dropped a notification: {len(_TASKS)} callbacks are still running")
        return
    task = asyncio.ensure_future(result)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


MAX_CALLBACK_TASKS = 1024  # callbacks (notifications, progress) running at once
_TASKS: set[asyncio.Future[Any]] = set()
