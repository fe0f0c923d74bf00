"""The context of one request: what a handler may know and do while it answers it.

The same handler code runs in every revision: where the revision asks the client for input by
multi-round-trip results (``FACTS.round_trip``), ``sample``, ``elicit`` and ``roots`` end this run
of the handler with an input-required result and the handler runs again, from the start, when the
client retries with the answers (each ask then returns its answer); in older revisions they are
requests to the client, awaited in the middle of the handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Generator, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, overload

import msgspec

from ..capabilities import missing_capabilities, supports
from ..errors import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from .revision import Rev

if TYPE_CHECKING:
    # generated/: `make check` does not see it (pyproject: its names are Any there)
    import mcpbind.any_revision as any_revision

    from ..session import ServerSession

__all__ = ["LEVELS", "Context", "Elicited", "Exchange", "InputNeeded", "Sent"]

T = TypeVar("T")

# The log levels in rising severity (RFC 5424, as the spec's LoggingLevel).
LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class Exchange(Protocol):
    """One request being answered, as a transport carries it (``http_server.Call`` is one)."""

    id: Any
    method: str
    params: Any
    message: Any
    revision: str
    auth: Any  # the verified token (``AuthInfo``) of a protected server's request, else None

    @property
    def session(self) -> ServerSession: ...

    def notify(self, method: str, params: Any = None) -> None: ...

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None: ...

    async def request(self, method: str, params: Any = None) -> Any: ...

    def close_stream(self) -> bool: ...


class Sent:
    """What ``ctx.log`` and ``ctx.progress`` return: the notification is on its way already, so
    ``await ctx.log(...)`` returns at once and a plain ``ctx.log(...)`` loses nothing. Every call
    of the context that talks to the client is awaitable, the same way in every handler."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that returns at once

    def __repr__(self) -> str:
        return "<sent>"


_SENT = Sent()


class Elicited(Generic[T]):
    """The user's answer to ``ctx.elicit(message, Schema)`` asked with a type: ``action``
    (``"accept"``, ``"decline"`` or ``"cancel"``), ``content`` the answer as a ``Schema`` when
    accepted (else None), ``result`` the generated ``ElicitResult`` of the request's revision."""

    __slots__ = ("action", "content", "result")

    def __init__(self, result: Any, content: T | None) -> None:
        self.result = result
        self.action: str = result.action
        self.content = content

    @property
    def accepted(self) -> bool:
        """Whether the user accepted (``content`` is then the answer)."""
        return self.action == "accept"

    def __repr__(self) -> str:
        return f"Elicited(action={self.action!r}, content={self.content!r})"


class InputNeeded(BaseException):
    """Raised by asks that have no answer yet, in a revision with multi-round-trip results: the
    handler's run ends and the client is asked (``requests``: ask key -> input request). A
    BaseException, so that a handler's ``except Exception`` does not swallow it (as with
    cancellation)."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(", ".join(requests))
        self.requests = requests


class Context:
    """What a handler may know and do about the request it answers.

    ``revision`` is the revision the request came in; ``request_id`` its id; ``client`` the
    client's capabilities as plain JSON (``{}`` when it declared none); ``lifespan`` what the
    App's lifespan yielded; ``auth`` the verified bearer token (``mcpbind.auth.resource.AuthInfo``:
    subject, client id, scopes) when the server checks tokens (``app.asgi(auth=...)``), else
    None. ``progress`` and ``log`` send notifications about this request;
    ``sample``, ``elicit`` and ``roots`` ask the client (``gather`` several at once): every call
    that talks to the client is awaitable (``log`` and ``progress`` are sent at once, so awaiting
    them is optional). ``require`` refuses a client without a capability; ``close_stream`` ends
    the HTTP response early (the client polls for the rest); ``cancelled`` says whether the
    client cancelled the request: these are plain calls (a type checker refuses ``await`` on
    them). A synchronous handler (run in a worker thread) may call all of them; it waits for an
    ask with ``wait(ctx.elicit(...))``.
    """

    def __init__(
        self,
        exchange: Exchange,
        rev: Rev,
        *,
        client: Mapping[str, Any],
        log_level: str | None,
        logs: bool,
        lifespan: Any,
        answers: Mapping[str, Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self._exchange = exchange
        self._rev = rev
        self._loop = loop
        self._thread = threading.get_ident()
        self._answers = answers
        self._asked = 0
        self._keys: set[str] = set()  # the ask keys used by this run of the handler
        self._cancelled = False
        self._log_level = log_level
        self._logs = logs
        self.revision = rev.revision
        self.request_id = exchange.id
        self.client: Mapping[str, Any] = client
        self.lifespan = lifespan
        self.auth: Any = exchange.auth

    # -- state ------------------------------------------------------------------------------------

    @property
    def cancelled(self) -> bool:
        """Whether the client cancelled this request (a synchronous handler polls this; an
        asynchronous one is cancelled where it awaits)."""
        return self._cancelled

    def _cancel(self) -> None:
        self._cancelled = True

    # -- notifications ----------------------------------------------------------------------------

    def _in_loop(self, call: Any, *args: Any) -> None:
        """Run ``call`` on the event loop's thread (the session belongs to it)."""
        if threading.get_ident() == self._thread:
            call(*args)
        else:
            self._loop.call_soon_threadsafe(call, *args)

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> Awaitable[None]:
        """Report progress on this request (sent at once: awaiting what it returns is
        optional). Nothing is sent when the client asked for no progress; ``message`` is left
        out in a revision whose progress has none."""
        if message is not None and not self._rev.progress_message:
            message = None
        self._in_loop(self._progress, progress, total, message)
        return _SENT

    def _progress(self, progress: float, total: float | None, message: str | None) -> None:
        # No progress token, or the request is answered already: nobody listens.
        with contextlib.suppress(ProtocolError):
            self._exchange.progress(progress, total, message)

    def log(self, level: str, data: Any, logger: str | None = None) -> Awaitable[None]:
        """Send a log message about this request at ``level`` (one of ``LEVELS``), when the
        client asked for that level: by ``logging/setLevel`` in revisions that have it (all
        levels until it does), by the request's own ``_meta`` in those that carry one (none
        unless it does). Sent at once: awaiting what it returns is optional."""
        if level not in LEVELS:
            raise ValueError(f"unknown log level {level!r}; the levels are {', '.join(LEVELS)}")
        wanted = self._log_level
        if not self._logs or (wanted is not None and LEVELS.index(level) < LEVELS.index(wanted)):
            return _SENT
        method = self._rev.features.get("log")
        if method is None:
            return _SENT
        params: dict[str, Any] = {"level": level, "data": msgspec.to_builtins(data)}
        if logger is not None:
            params["logger"] = logger
        self._in_loop(self._notify, method, params)
        return _SENT

    def debug(self, data: Any) -> Awaitable[None]:
        return self.log("debug", data)

    def info(self, data: Any) -> Awaitable[None]:
        return self.log("info", data)

    def warning(self, data: Any) -> Awaitable[None]:
        return self.log("warning", data)

    def error(self, data: Any) -> Awaitable[None]:
        return self.log("error", data)

    def _notify(self, method: str, params: Any) -> None:
        # The client's revision or capabilities do not take it.
        with contextlib.suppress(ProtocolError):
            self._exchange.notify(method, params)

    # -- the response stream ----------------------------------------------------------------------

    def close_stream(self) -> bool:
        """End the HTTP response carrying this request now, without ending the request: the
        client reconnects after the server's retry delay and receives what was sent meanwhile,
        the result included (SSE polling, in revisions with priming events and a stateful
        session; see docs/http.md). False, and nothing done, on other transports and
        revisions."""
        if threading.get_ident() == self._thread:
            return self._exchange.close_stream()

        async def close() -> bool:
            return self._exchange.close_stream()

        return asyncio.run_coroutine_threadsafe(close(), self._loop).result()

    # -- asking the client ------------------------------------------------------------------------

    async def sample(
        self,
        messages: Any,
        *,
        max_tokens: int,
        system_prompt: str | None = None,
        key: str | None = None,
        **params: Any,
    ) -> Any:
        """Ask the client's model: ``messages`` is a string (one user message) or a list of
        sampling messages (plain JSON or generated); further ``params`` are wire keys of the
        request (``temperature``, ``modelPreferences``, ...). Returns the generated
        ``CreateMessageResult`` of the request's revision. ``key`` names the ask in an
        input-required result (see ``gather``)."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        data = {"messages": msgspec.to_builtins(messages), "maxTokens": max_tokens, **params}
        if system_prompt is not None:
            data["systemPrompt"] = system_prompt
        return await self._ask("sample", data, key)

    @overload
    async def elicit(
        self, message: str, schema: type[T], *, key: str | None = None
    ) -> Elicited[T]: ...

    @overload
    async def elicit(
        self, message: str, schema: Mapping[str, Any], *, key: str | None = None
    ) -> any_revision.ElicitResult: ...

    async def elicit(self, message: str, schema: Any, *, key: str | None = None) -> Any:
        """Ask the user, through the client, to fill a form. ``schema`` is a type whose msgspec
        schema is an object of flat properties (a Struct, a TypedDict): the answer is an
        ``Elicited[schema]``, whose ``content`` is a ``schema`` when accepted (an answer that
        does not fit raises ``msgspec.ValidationError`` naming its JSON path). Or ``schema`` is
        a JSON Schema object: the answer is the generated ``ElicitResult`` of the request's
        revision (``action``, and the ``content`` when accepted). ``key`` names the ask in an
        input-required result."""
        if isinstance(schema, Mapping):
            params = {"message": message, "requestedSchema": dict(schema)}
            return await self._ask("elicit", params, key)
        from .signature import schema_of

        params = {"message": message, "requestedSchema": schema_of(schema, "elicitation")}
        result = await self._ask("elicit", params, key)
        return Elicited(result, _answer(result, schema) if result.action == "accept" else None)

    async def roots(self, *, key: str | None = None) -> Any:
        """The client's roots: the generated ``ListRootsResult`` of the request's revision.
        ``key`` names the ask in an input-required result."""
        return await self._ask("list_roots", {}, key)

    async def gather(self, *asks: Awaitable[Any]) -> list[Any]:
        """The answers of several asks (``ctx.elicit(...)``, ``ctx.sample(...)``,
        ``ctx.roots()``), in order. In revisions with multi-round-trip results, every ask not
        answered yet goes into one input-required result, so the client answers them all in
        one round; in older revisions the requests are sent at once and awaited together."""
        if self._rev.trip is None:
            return list(await asyncio.gather(*asks))
        answers: list[Any] = []
        needed: dict[str, dict[str, Any]] = {}
        for ask in asks:
            try:
                answers.append(await ask)
            except InputNeeded as need:
                needed.update(need.requests)
        if needed:
            raise InputNeeded(needed)
        return answers

    def wait(self, ask: Awaitable[T]) -> T:
        """The result of ``ask`` (``ctx.elicit(...)``, ...) for a synchronous handler: it runs on
        the event loop while the worker thread waits."""
        if threading.get_ident() == self._thread:
            raise RuntimeError("Context.wait is for synchronous handlers: await the ask instead")

        async def run() -> T:
            return await ask

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    async def _ask(self, role: str, params: dict[str, Any], key: str | None) -> Any:
        rev = self._rev
        trip = rev.trip
        if trip is not None and role in trip.requests:
            if key is None:
                key = f"{role}-{self._asked}"
            if key in self._keys:  # its answer would be taken for another question's
                raise ValueError(f"ask key {key!r} used twice in one request")
            self._keys.add(key)
            self._asked += 1
            answer = self._answers.get(key)
            if answer is not None:
                return answer
            self._require(trip.capabilities.get(role))
            raise InputNeeded({key: {"method": trip.requests[role], "params": params}})
        method = rev.features.get(role)
        if method is None:
            raise ProtocolError(
                METHOD_NOT_FOUND, f"MCP {rev.revision} has no way to ask the client for {role!r}"
            )
        return await self._exchange.request(method, params)

    def require(self, capability: str) -> None:
        """Refuse the request unless the client declared ``capability`` (a dotted path into
        its capabilities: ``"sampling"``, ``"elicitation.form"``, ...): in revisions that
        carry the client's capabilities on each request, the missing-capability error (with
        ``requiredCapabilities``); in older ones, -32602 naming the capability."""
        if supports(dict(self.client), capability):
            return
        meta = self._rev.meta
        if meta is None:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params: this request needs the client capability {capability!r}",
            )
        self._require(capability)

    def _require(self, path: str | None) -> None:
        """The missing-capability error when the client did not declare ``path``."""
        meta = self._rev.meta
        if path is None or meta is None or supports(dict(self.client), path):
            return
        required: dict[str, Any] = {}
        node = required
        for part in path.split("."):
            node = node.setdefault(part, {})
        raise ProtocolError(
            meta.missing_capability_code,
            f"Missing required client capability: {path}",
            {"requiredCapabilities": missing_capabilities(required, dict(self.client))},
        )


def _answer(result: Any, schema: Any) -> Any:
    """The accepted content of an ``ElicitResult`` as a ``schema``."""
    content = result.content
    try:
        return msgspec.convert({} if content is msgspec.UNSET else content, schema)
    except msgspec.ValidationError as exc:
        name = getattr(schema, "__qualname__", repr(schema))
        message = str(exc)
        if " - at `$" in message:
            message = message.replace(" - at `$", " - at `$.content", 1)
        raise msgspec.ValidationError(f"the answer is not a {name}: {message}") from None
