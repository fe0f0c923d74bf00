"""Answering requests: from a request of any revision to the result in that revision.

``Server.serve(exchange)`` finds what the request asks for by the revision's ``FACTS.features``
(method -> role), runs the registered function and gives its result in the request's revision
(``content.Results``: built once in the newest revision, projected with the ``[[loss]]`` rules).
It raises ``ProtocolError`` for what is answered with a JSON-RPC error; transports respond.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from .._support import OpenObject, convert
from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    ProtocolError,
    ResourceNotFound,
)
from .content import Results
from .context import Context, Exchange, InputNeeded
from .handler import Handler
from .limits import Limits
from .prompts import MAX_COMPLETIONS, Completion, Prompt
from .resources import Resource, Template
from .revision import Rev, fields, rev
from .rounds import RequestState
from .signature import ArgumentError
from .subscriptions import Subscriptions
from .tools import Tool, ToolError

__all__ = ["RESOURCE_NOT_FOUND", "Server"]

log = logging.getLogger("mcpbind.app")


class Server:
    """The registered tools, resources, prompts and completions, and the answering of requests
    for them in every revision."""

    def __init__(
        self,
        *,
        limits: Limits,
        cache_scope: str = "private",
        ttl_ms: int = 0,
        state_key: bytes | None = None,
    ) -> None:
        self.limits = limits
        self.results = Results(cache_scope, ttl_ms)
        self.tools: dict[str, Tool] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: list[Template] = []
        self.prompts: dict[str, Prompt] = {}
        self.completions: dict[tuple[str, str, str], Completion] = {}
        self.lifespan: Any = None
        self._state = RequestState(state_key)
        self._pages: dict[tuple[str, str, str], Any] = {}  # (role, cursor, revision) -> result
        self._in_flight = 0
        # Per connection (a ServerSession): the client's capabilities, its log level, the URIs it
        # subscribed to. Weak: a connection's state goes with its session.
        self.clients: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
        self._levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self.subscriptions = Subscriptions(limits)
        self._roles: dict[str, Callable[[Exchange, Rev], Any]] = {
            "list_tools": self._list_tools,
            "call_tool": self._call_tool,
            "list_resources": self._list_resources,
            "list_resource_templates": self._list_templates,
            "read_resource": self._read_resource,
            "subscribe": self.subscriptions.subscribe,
            "unsubscribe": self.subscriptions.unsubscribe,
            "list_prompts": self._list_prompts,
            "get_prompt": self._get_prompt,
            "complete": self._complete,
            "set_log_level": self._set_log_level,
            "listen": self._listen,
        }
        # revision -> (its record, method -> what answers it): one per revision at most
        self._answers: dict[str, tuple[Rev, dict[str, Callable[[Exchange, Rev], Any]]]] = {}

    # -- what the server offers -------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """The server capabilities (plain JSON; each session keeps what its revision has)."""
        caps: dict[str, Any] = {"logging": {}}
        if self.tools:
            caps["tools"] = {"listChanged": True}
        if self.resources or self.templates:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.prompts:
            caps["prompts"] = {"listChanged": True}
        if self.completions:
            caps["completions"] = {}
        return caps

    def sign_with(self, key: bytes) -> None:
        """Sign and check request states with ``key`` from now on."""
        self._state = RequestState(key)

    def changed(self) -> None:
        """Something was registered: the cached list pages are stale."""
        self._pages.clear()

    # -- answering --------------------------------------------------------------------------------

    async def serve(self, exchange: Exchange) -> Any:
        """The result of ``exchange``'s request in its revision; ``ProtocolError`` for an
        error response."""
        found = self._answers.get(exchange.revision)
        if found is None:
            found = self._answering(exchange.revision)
        r, answers = found
        answer = answers.get(exchange.method)
        if answer is None:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {exchange.method!r}")
        if self._in_flight >= self.limits.in_flight:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: {self._in_flight} requests are being answered (the limit)",
            )
        self._in_flight += 1
        try:
            return await answer(exchange, r)
        finally:
            self._in_flight -= 1

    def _answering(self, revision: str) -> tuple[Rev, dict[str, Callable[[Exchange, Rev], Any]]]:
        r = rev(revision)
        answers = {m: self._roles[role] for m, role in r.roles.items() if role in self._roles}
        return self._answers.setdefault(revision, (r, answers))

    # -- lists --------------------------------------------------------------------------------------

    def _page(self, role: str, exchange: Exchange, r: Rev, items: Callable[[], list[Any]]) -> Any:
        params = exchange.params
        cursor = "" if params is UNSET or params is None else params.cursor
        cursor = "" if cursor is UNSET else cursor
        key = (role, cursor, r.revision)
        found = self._pages.get(key)
        if found is not None:
            return found
        everything = items()
        start = 0
        if cursor:
            try:
                start = int(cursor)
            except ValueError:
                start = -1
            if not 0 < start < len(everything) or str(start) != cursor:
                raise ProtocolError(INVALID_PARAMS, f"Invalid params: unknown cursor {cursor!r}")
        size = self.limits.page_size
        page = everything[start : start + size]
        more = start + size < len(everything)
        build = {
            "list_tools": (self.results.list_tools, "tools"),
            "list_resources": (self.results.list_resources, "resources"),
            "list_resource_templates": (self.results.list_templates, "resource_templates"),
            "list_prompts": (self.results.list_prompts, "prompts"),
        }[role]
        extra = {"next_cursor": str(start + size)} if more else {}
        result = self.results.to(build[0](**{build[1]: page}, **extra), r, "the result of", role)
        self._pages[key] = result
        return result

    async def _list_tools(self, exchange: Exchange, r: Rev) -> Any:
        return self._page(
            "list_tools", exchange, r, lambda: [t.definition for t in self.tools.values()]
        )

    async def _list_resources(self, exchange: Exchange, r: Rev) -> Any:
        return self._page(
            "list_resources", exchange, r, lambda: [x.definition for x in self.resources.values()]
        )

    async def _list_templates(self, exchange: Exchange, r: Rev) -> Any:
        return self._page(
            "list_resource_templates", exchange, r, lambda: [t.definition for t in self.templates]
        )

    async def _list_prompts(self, exchange: Exchange, r: Rev) -> Any:
        return self._page(
            "list_prompts", exchange, r, lambda: [p.definition for p in self.prompts.values()]
        )

    # -- tools ------------------------------------------------------------------------------------

    async def _call_tool(self, exchange: Exchange, r: Rev) -> Any:
        params = exchange.params
        name = params.name
        tool = self.tools.get(name)
        if tool is None:
            raise ProtocolError(INVALID_PARAMS, f"Unknown tool: {name!r}")
        handler = tool.handler
        arguments = params.arguments
        if arguments is UNSET:
            arguments = None
        try:
            kwargs = handler.parameters.convert(arguments)
        except ArgumentError as exc:
            message = f"Invalid arguments for tool {name!r}: {exc}"
            if r.argument_errors == "result":
                return self.results.text_result(message, r, "the error of tool", name, error=True)
            raise ProtocolError(INVALID_PARAMS, message) from None
        results = self.results
        ctx = None
        if handler.wants_context:
            ctx, binding = self._context(exchange, r, name, arguments)
        try:
            if ctx is None and handler.is_async:  # one coroutine less on the common path
                value = await handler.func(**kwargs)
            else:
                value = await handler(kwargs, ctx)
        except InputNeeded as need:
            assert ctx is not None  # only a context asks
            return self._input_required(need, ctx, r, binding)
        except (ProtocolError, asyncio.CancelledError):
            raise
        except ToolError as exc:
            return results.text_result(str(exc), r, "the error of tool", name, error=True)
        except Exception as exc:  # a tool's failure is the model's to read, not a crash
            log.exception("tool %r failed", name)
            failed = f"{type(exc).__name__}: {exc}"
            return results.text_result(failed, r, "the error of tool", name, error=True)
        if type(value) is str and tool.text:  # the commonest result: one text block
            return results.text_result(value, r, "the result of tool", name)
        try:
            return tool.result(value, results, r)
        except ArgumentError as exc:
            raise ProtocolError(
                INTERNAL_ERROR, f"Internal error: tool {name!r} returned {exc} (its output schema)"
            ) from None

    # -- resources --------------------------------------------------------------------------------

    async def _read_resource(self, exchange: Exchange, r: Rev) -> Any:
        uri = exchange.params.uri
        found: Resource | None = self.resources.get(uri)
        variables: dict[str, str] = {}
        if found is None:
            for template in self.templates:
                match = template.match(uri)
                if match is not None:
                    found, variables = template, match
                    break
        if found is None:
            raise ResourceNotFound(uri)
        value = await self._run(found.handler, variables, exchange, r, uri, None, repr(uri))
        if isinstance(value, _Asked):
            return value.result
        result = _built(self.results.contents, f"resource {uri!r}", uri, found.mime_type, value)
        return self.results.to(result, r, "the contents of", uri)

    # -- prompts and completions ------------------------------------------------------------------

    async def _get_prompt(self, exchange: Exchange, r: Rev) -> Any:
        params = exchange.params
        name = params.name
        prompt = self.prompts.get(name)
        if prompt is None:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: unknown prompt {name!r}")
        arguments = None if params.arguments is UNSET else params.arguments
        what = f"arguments of prompt {name!r}"
        value = await self._run(prompt.handler, arguments, exchange, r, name, arguments, what)
        if isinstance(value, _Asked):
            return value.result
        result = _built(self.results.prompt, f"prompt {name!r}", value, prompt.description)
        return self.results.to(result, r, "prompt", name)

    async def _complete(self, exchange: Exchange, r: Rev) -> Any:
        params = exchange.params
        ref = params.ref
        names = fields(type(ref))
        key = (
            ("resource", ref.uri, params.argument.name)
            if "uri" in names
            else (
                "prompt",
                ref.name,
                params.argument.name,
            )
        )
        completion = self.completions.get(key)
        values: list[str] = []
        if completion is not None:
            context = params.context if "context" in fields(type(params)) else UNSET
            chosen = {} if context is UNSET or context.arguments is UNSET else context.arguments
            values = await completion(params.argument.value, dict(chosen))
        results = self.results
        result = results.complete(
            completion=results.completion(
                values=values[:MAX_COMPLETIONS],
                total=len(values),
                has_more=len(values) > MAX_COMPLETIONS,
            )
        )
        return results.to(result, r, "the completion of", params.argument.name)

    # -- subscriptions and logging ------------------------------------------------------------------------------------

    async def _listen(self, exchange: Exchange, r: Rev) -> Any:
        offers = {
            "tools_changed": bool(self.tools),
            "prompts_changed": bool(self.prompts),
            "resources_changed": bool(self.resources or self.templates),
        }
        return await self.subscriptions.listen(exchange, r, offers)

    async def _set_log_level(self, exchange: Exchange, r: Rev) -> Any:
        self._levels[exchange.session] = exchange.params.level
        return {}

    # -- running handlers that may ask the client ---------------------------------------------------

    async def _run(
        self,
        handler: Handler,
        arguments: Any,
        exchange: Exchange,
        r: Rev,
        target: Any,
        bound: Any,
        what: str,
    ) -> Any:
        """Run a resource's or prompt's function with ``arguments`` (-32602 naming ``what`` when
        they do not convert); an ``_Asked`` when it needs input first. ``target`` and ``bound``
        are what a request state of this request is bound to."""
        try:
            kwargs = handler.parameters.convert(arguments)
        except ArgumentError as exc:
            raise ProtocolError(INVALID_PARAMS, f"Invalid params: {what}: {exc}") from None
        if not handler.wants_context:
            return await handler(kwargs, None)
        ctx, binding = self._context(exchange, r, target, bound)
        try:
            return await handler(kwargs, ctx)
        except InputNeeded as need:
            return _Asked(self._input_required(need, ctx, r, binding))

    def _context(
        self, exchange: Exchange, r: Rev, target: Any, arguments: Any
    ) -> tuple[Context, str]:
        """The context of a request, with the answers its earlier rounds carry; and what its
        request state binds to."""
        params = exchange.params
        binding = self._state.binding(exchange.method, target, arguments)
        answers: dict[str, Any] = {}
        responses, state, kind = (
            r.round_trip_fields(type(params))
            if params is not UNSET
            else (
                None,
                None,
                None,
            )
        )
        if responses is not None and state is not None:
            token = getattr(params, state)
            if token is not UNSET:
                answers.update(self._state.open(binding, token, kind))
            given = getattr(params, responses)
            if given is not UNSET:
                answers.update(given)
        client, level, logs = self._client(exchange, r)
        ctx = Context(
            exchange,
            r,
            client=client,
            log_level=level,
            logs=logs,
            lifespan=self.lifespan,
            answers=answers,
            loop=asyncio.get_running_loop(),
        )
        return ctx, binding

    def _client(self, exchange: Exchange, r: Rev) -> tuple[Mapping[str, Any], str | None, bool]:
        """The client's capabilities, the log level it asked for, and whether it gets log
        messages at all: by the request's ``_meta`` where that carries them, else by what the
        connection agreed and set."""
        params = exchange.params
        meta = params.meta if params is not UNSET else UNSET
        envelope = r.meta
        if envelope is not None and isinstance(meta, OpenObject):
            caps = msgspec.to_builtins(meta.get(envelope.capabilities_key) or {})
            level_key = type(meta)._attributes.get("log_level")
            level = meta.get(level_key) if level_key is not None else None
            return caps, level, level is not None or level_key is None
        session = exchange.session
        return self.clients.get(session, {}), self._levels.get(session), True

    def _input_required(self, need: InputNeeded, ctx: Context, r: Rev, binding: str) -> Any:
        """The input-required result asking for ``need``, with the answers so far signed."""
        trip = r.trip
        assert trip is not None and r.kind_key is not None  # InputNeeded comes only with one
        answers = dict(ctx._answers)
        if len(answers) >= self.limits.input_rounds:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the request asked for input {len(answers) + 1} times (the "
                f"limit is {self.limits.input_rounds})",
            )
        data = {
            r.kind_key: r.input_required,
            trip.input_requests: need.requests,
            trip.request_state: self._state.sign(binding, answers),
        }
        try:
            return convert(data, trip.result)
        except msgspec.ValidationError as exc:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Internal error: the input requests {', '.join(need.requests)} are invalid: {exc}",
            ) from None


def _built(build: Callable[..., Any], what: str, *args: Any) -> Any:
    """``build(*args)``: a result from what a handler returned; -32603 naming ``what`` when the
    value cannot be one."""
    try:
        return build(*args)
    except (msgspec.ValidationError, TypeError, ValueError) as exc:
        raise ProtocolError(INTERNAL_ERROR, f"Internal error: {what}: {exc}") from None


class _Asked(msgspec.Struct):
    """A handler's run ended asking the client for input: ``result`` asks for it."""

    result: Any
