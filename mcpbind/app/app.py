"""``App``: an MCP server written as decorated functions, served to clients of every revision."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sys
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .._revisions import LATEST, REVISIONS
from ..session import ServerSession
from .connection import Connection
from .limits import Limits
from .prompts import Completion, Prompt
from .resources import Resource, Template, template_variables
from .serve import Server
from .stdio import MAX_LINE, serve_lines
from .tools import Tool

if TYPE_CHECKING:
    from ..tasks import Tasks

__all__ = ["App"]

F = TypeVar("F", bound=Callable[..., Any])

_RELEASED = REVISIONS[: REVISIONS.index(LATEST) + 1]


def _named_by_keyword(decorator: str, func: Any) -> None:
    """Refuse ``@app.tool("name")``: the decorator's only positional argument is the function."""
    if isinstance(func, str):
        raise TypeError(
            f"@app.{decorator}({func!r}): give the name by keyword, @app.{decorator}(name={func!r})"
        )


def _unique(registered: Mapping[Any, Any], key: Any, what: str, func: Any, replace: bool) -> None:
    """Refuse a second registration of ``key`` unless ``replace``."""
    old = registered.get(key)
    if old is None or replace:
        return
    previous = getattr(getattr(old, "handler", old), "func", None)
    by = f" (by {previous.__qualname__})" if previous is not None else ""
    raise ValueError(
        f"{what} is registered already{by}; {getattr(func, '__qualname__', func)} would replace "
        "it: give it another name, or pass replace=True"
    )


class App:
    """An MCP server: tools, resources, prompts and completions registered with decorators,
    served over stdio (``run()``), Streamable HTTP (``run("http")``, or ``asgi()`` for an ASGI
    server of your own) or in process (``mcpbind.Client(app)``)
    to clients of every revision in ``revisions`` (the released ones by default).

    ``lifespan(app)``, an async context manager, runs while the App serves; what it yields is
    ``ctx.lifespan`` in handlers. ``cache_scope`` and ``ttl_ms`` are the cache hints of results
    that carry them (2026-07-28 and later: ``"private"`` and 0, never served from a cache, by
    default). ``state_key`` (32 bytes or more) signs the request state of multi-round-trip
    requests (random per process by default: give every worker behind one load balancer the
    same key, or ``sign_with`` it). ``limits`` bounds what clients can make the server hold (see
    ``Limits``).
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        instructions: str | None = None,
        revisions: Iterable[str] | None = None,
        lifespan: Callable[[App], contextlib.AbstractAsyncContextManager[Any]] | None = None,
        cache_scope: str = "private",
        ttl_ms: int = 0,
        state_key: bytes | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.name = name
        self.info: dict[str, Any] = {"name": name, "version": version}
        if title is not None:
            self.info["title"] = title
        self.instructions = instructions
        self.revisions = tuple(revisions) if revisions is not None else _RELEASED
        self.cache_scope = cache_scope
        self.ttl_ms = ttl_ms
        self._lifespan = lifespan
        self._server = Server(
            limits=limits or Limits(), cache_scope=cache_scope, ttl_ms=ttl_ms, state_key=state_key
        )
        self._running = 0
        self._stack: contextlib.AsyncExitStack | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- registering ------------------------------------------------------------------------------

    @overload
    def tool(self, func: F, /) -> F: ...

    @overload
    def tool(
        self,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Any:
        """Register a tool: its name is the function's (or ``name``), its description the
        docstring, its input schema the parameters' type hints, its output schema the return
        annotation when that is structured (a Struct, a TypedDict, a dataclass, a dict; any other
        type but ``str`` travels as ``{"result": value}``). ``annotations`` are the tool's
        behaviour hints (``readOnlyHint``, ...). ``input_schema``, a JSON Schema object, is
        listed instead of the one of the type hints (for keywords msgspec does not write:
        ``if``/``then``, ``$anchor``, ...); the arguments are still converted to the
        parameters, which must accept what it allows.

        Mistakes raise here, naming the function: a name already registered (``ValueError``,
        unless ``replace=True``), a parameter type msgspec cannot check, a pydantic model or
        constraint (``TypeError``)."""
        _named_by_keyword("tool", func)

        def register(f: F) -> F:
            tool = Tool(
                f,
                name=name,
                title=title,
                description=description,
                annotations=annotations,
                meta=meta,
                input_schema=input_schema,
            )
            _unique(self._server.tools, tool.name, f"tool {tool.name!r}", f, replace)
            self._server.tools[tool.name] = tool
            self._changed("tools_changed")
            return f

        return register(func) if func is not None else register

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        meta: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]:
        """Register a resource at ``uri``, or, when ``uri`` holds ``{variables}``, a resource
        template whose function takes the variables as arguments. The function returns the
        contents: a string (text), bytes (a blob), any other value (JSON text), or generated
        resource contents / a read result; it raises ``mcpbind.ResourceNotFound(uri)`` when
        nothing is there. A URI or template already registered raises ``ValueError`` unless
        ``replace=True``."""
        if not isinstance(uri, str):
            what = getattr(uri, "__qualname__", None)
            if callable(uri) and what is not None:
                raise TypeError(
                    f'@app.resource needs the resource\'s URI: write @app.resource("scheme://...") '
                    f"above {what} (a URI with {{variables}} registers a template)"
                )
            raise TypeError(f"app.resource: the URI must be a string, not {uri!r}")

        def register(f: F) -> F:
            kind = Template if template_variables(uri) else Resource
            item = kind(
                f,
                uri,
                name=name,
                title=title,
                description=description,
                mime_type=mime_type,
                meta=meta,
            )
            if isinstance(item, Template):
                templates = {t.uri: t for t in self._server.templates}
                _unique(templates, uri, f"resource template {uri!r}", f, replace)
                templates[uri] = item
                self._server.templates[:] = templates.values()
            else:
                _unique(self._server.resources, uri, f"resource {uri!r}", f, replace)
                self._server.resources[uri] = item
            self._changed("resources_changed")
            return f

        return register

    @overload
    def prompt(self, func: F, /) -> F: ...

    @overload
    def prompt(
        self,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        func: F | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
        replace: bool = False,
    ) -> Any:
        """Register a prompt: its arguments are the function's parameters (strings on the wire,
        required unless they have a default); it returns a string (one user message), a list
        of strings and messages, or a generated ``GetPromptResult``. A name already registered
        raises ``ValueError`` unless ``replace=True``."""
        _named_by_keyword("prompt", func)

        def register(f: F) -> F:
            prompt = Prompt(f, name=name, title=title, description=description, meta=meta)
            _unique(self._server.prompts, prompt.name, f"prompt {prompt.name!r}", f, replace)
            self._server.prompts[prompt.name] = prompt
            self._changed("prompts_changed")
            return f

        return register(func) if func is not None else register

    def completion(
        self,
        func: None = None,
        /,
        *,
        argument: str | None = None,
        prompt: str | None = None,
        resource: str | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]:
        """Register the completion of one ``argument`` of ``prompt`` (a prompt name) or of one
        variable of ``resource`` (a URI template): ``func(value, arguments)`` returns the
        suggested values (at most 100 are sent, with the total). One already registered for
        that argument raises ``ValueError`` unless ``replace=True``."""
        if func is not None:
            what = getattr(func, "__qualname__", repr(func))
            raise TypeError(
                f"@app.completion needs what it completes: write "
                f"@app.completion(argument=..., prompt=...) (or resource=...) above {what}"
            )
        if argument is None:
            raise TypeError("completion: give argument= (the argument or variable it completes)")
        if (prompt is None) == (resource is None):
            raise TypeError("completion: give exactly one of prompt= and resource=")

        def register(f: F) -> F:
            key = (
                ("prompt", prompt, argument)
                if prompt is not None
                else (
                    "resource",
                    resource,
                    argument,
                )
            )
            what = f"completion of {argument!r} of {key[0]} {key[1]!r}"
            completions: dict[Any, Completion] = self._server.completions
            _unique(completions, key, what, f, replace)
            completions[key] = Completion(f, what)
            self._server.changed()
            return f

        return register

    def _changed(self, role: str) -> None:
        self._server.changed()
        if self._running:
            self._server.subscriptions.notify(role)

    def sign_with(self, key: bytes) -> None:
        """Sign the request states of multi-round-trip requests with ``key`` from now on, as
        ``App(state_key=key)`` does (for a key known only once the App is defined: a worker
        process given its key by the process that started it). States signed before are
        refused from then on. A key shorter than 32 bytes is refused (``ValueError``)."""
        self._server.sign_with(key)

    # -- telling clients --------------------------------------------------------------------------

    def tools_changed(self) -> int:
        """Tell connected clients the tool list changed; the number reached."""
        return self._server.subscriptions.notify("tools_changed")

    def resources_changed(self) -> int:
        """Tell connected clients the resource list changed; the number reached."""
        return self._server.subscriptions.notify("resources_changed")

    def prompts_changed(self) -> int:
        """Tell connected clients the prompt list changed; the number reached."""
        return self._server.subscriptions.notify("prompts_changed")

    def resource_updated(self, uri: str) -> int:
        """Tell the clients subscribed to ``uri`` that it changed; the number reached."""
        return self._server.subscriptions.notify("resource_updated", {"uri": uri}, uri=uri)

    @property
    def listening(self) -> int:
        """How many subscription streams (``subscriptions/listen``) are open now, over every
        transport."""
        return self._server.subscriptions.listening

    # -- serving ----------------------------------------------------------------------------------

    def _session_config(self) -> dict[str, Any]:
        return {
            "revisions": self.revisions,
            "capabilities": self._server.capabilities(),
            "info": self.info,
            "instructions": self.instructions,
        }

    def session(self, tasks: Tasks | None = None) -> ServerSession:
        """A new ``ServerSession`` configured as this App's connections are (offering the tasks
        extension when given its layer ``tasks``)."""
        config = self._session_config()
        if tasks is not None:
            config["capabilities"] = tasks.advertise(config["capabilities"])
        return ServerSession(**config, cache_scope=self.cache_scope, ttl_ms=self.ttl_ms)

    def connect(self, write: Callable[[bytes], Any], *, tasks: Tasks | None = None) -> Connection:
        """A new connection of this App: give it each message of the client with ``receive``;
        what it sends goes to ``write`` (one message each). ``tasks``: a tasks layer
        (``mcpbind.app.tasks.app_tasks``) serving the extension on this connection, as
        ``asgi(tasks=...)`` does over HTTP; its caller closes it (``Tasks.aclose``)."""
        return Connection(self._server, self.session(tasks), write, tasks)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[App]:
        """Serve within this block: the lifespan is entered by the first of nested blocks and
        left by the last (stdio, an ASGI server and in-process clients all run through it)."""
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:  # a lock belongs to one event loop
            self._lock, self._loop = asyncio.Lock(), loop
        async with self._lock:
            if self._running == 0:
                self._server.subscriptions.open()
                stack = contextlib.AsyncExitStack()
                if self._lifespan is not None:
                    self._server.lifespan = await stack.enter_async_context(self._lifespan(self))
                self._stack = stack
            self._running += 1
        try:
            yield self
        finally:
            async with self._lock:
                self._running -= 1
                if self._running == 0:
                    self._server.subscriptions.close()
                    done, self._stack = self._stack, None
                    self._server.lifespan = None
                    if done is not None:
                        await done.aclose()

    async def serve_stdio(
        self,
        *,
        max_line: int = MAX_LINE,
        stdin: Any = None,
        stdout: Any = None,
        tasks: Tasks | None = None,
    ) -> None:
        """Serve one client on stdin/stdout until its input ends (``tasks``: as in ``run``)."""
        async with self.running():
            try:
                await serve_lines(
                    functools.partial(self.connect, tasks=tasks), stdin, stdout, max_line
                )
            finally:
                if tasks is not None:
                    await tasks.aclose()

    def run(
        self,
        transport: Literal["stdio", "http"] = "stdio",
        *,
        host: str | None = None,
        port: int | None = None,
        max_line: int = MAX_LINE,
        tasks: Tasks | None = None,
        serving: Mapping[str, Any] | None = None,
        on_started: Callable[[str, int], Any] | None = None,
        **options: Any,
    ) -> None:
        """Serve until stopped. ``transport="stdio"`` (the default): one client on this
        process's stdin and stdout (``max_line``: the longest message line, 16 MiB by default).
        ``transport="http"`` (mcpbind[http]): Streamable HTTP on ``host:port`` (127.0.0.1:8000
        by default) at ``/mcp``, served by ``mcpbind.transports.serving.serve`` with its
        connection bounds (``serving``: its options, ``max_connections``, ``header_timeout``,
        ..., and uvicorn's); ``options`` go to ``asgi`` (``path``, ``allowed_hosts``,
        ``max_sessions``, ...). A line on stderr says where it listens; ``on_started(host,
        port)`` is called then too. ``tasks``: a tasks layer (``mcpbind.app.tasks.app_tasks``)
        serving the 2026-07-28 tasks extension; over stdio its running tasks are cancelled when
        the input ends."""
        if transport == "stdio":
            http_only = {"host": host, "port": port, "serving": serving, "on_started": on_started}
            given = [k for k, v in {**http_only, **options}.items() if v is not None]
            if given:
                raise TypeError(f"app.run: {', '.join(given)} go with transport='http'")
            asyncio.run(self.serve_stdio(max_line=max_line, tasks=tasks))
            return
        if transport != "http":
            raise ValueError(f"app.run: transport must be 'stdio' or 'http', not {transport!r}")
        from ..transports.serving import serve

        if tasks is not None:
            options["tasks"] = tasks
        path = options.get("path", "/mcp")
        asgi = self.asgi(**options)

        def started(bound_host: str, bound_port: int) -> None:
            where = f"[{bound_host}]" if ":" in bound_host else bound_host
            first, last = self.revisions[0], self.revisions[-1]
            print(
                f"{self.name}: serving MCP on http://{where}:{bound_port}{path} (Streamable "
                f"HTTP, revisions {first} to {last})",
                file=sys.stderr,
                flush=True,
            )
            if on_started is not None:
                on_started(bound_host, bound_port)

        bounds = {"log_level": "warning", **(serving or {})}
        serve(
            asgi,
            host or "127.0.0.1",
            8000 if port is None else port,
            on_started=started,
            **bounds,
        )

    def asgi(self, **options: Any) -> Any:
        """The ASGI application serving this App over Streamable HTTP (mcpbind[http]); it runs
        the lifespan on the ASGI lifespan events. ``options`` go to ``StreamableHTTPServer``
        (``path``, ``allowed_hosts``, ``max_sessions``, ``on_event``, ...)."""
        from .http import ASGIApp

        return ASGIApp(self._server, self._session_config(), self.running, options)
