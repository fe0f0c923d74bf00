"""An App on Streamable HTTP: ``StreamableHTTPServer`` (mcpbind.transports.http_server) answering
with the App, inside an ASGI application that runs the App's lifespan (ASGI lifespan events)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import msgspec

from ..events import Event, Negotiated

if TYPE_CHECKING:
    from ..session import ServerSession
    from ..transports.http_server import StreamableHTTPServer
    from .serve import Server

__all__ = ["ASGIApp"]


class _Sessions:
    """The stateful sessions of an HTTP server, as the App reaches connections outside any
    request (on each session's GET stream)."""

    def __init__(self, http: StreamableHTTPServer) -> None:
        self.http = http

    def connections(self) -> Iterable[tuple[ServerSession, Callable[[str, Any], Any]]]:
        for sid, live in list(self.http.sessions.items()):
            yield live.session, functools.partial(self.http.notify, sid)


class ASGIApp:
    """The ASGI application of an App: Streamable HTTP on ``http.path``, and lifespan events."""

    def __init__(
        self,
        server: Server,
        config: dict[str, Any],
        running: Callable[[], AbstractAsyncContextManager[Any]],
        options: dict[str, Any],
    ) -> None:
        """``server``, ``config`` and ``running``: the App's dispatcher, what its sessions
        declare (revisions, capabilities, info, instructions) and its lifespan."""
        from ..transports.http_server import StreamableHTTPServer

        self.running = running
        observe: Callable[[ServerSession, Event], None] | None = options.pop("on_event", None)

        def on_event(session: ServerSession, event: Event) -> None:
            if type(event) is Negotiated:
                caps = event.capabilities
                server.clients[session] = msgspec.to_builtins(caps) if caps else {}
            if observe is not None:
                observe(session, event)

        self.http = StreamableHTTPServer(
            server.serve,  # (the handler itself: a coroutine less than one awaiting it)
            revisions=config["revisions"],
            capabilities=config["capabilities"],
            info=config["info"],
            instructions=config["instructions"],
            on_event=on_event,
            **options,
        )
        self._sessions = _Sessions(self.http)
        server.subscriptions.peers.add(self._sessions)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        await self.http(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        await receive()  # lifespan.startup
        running = self.running()
        try:
            await running.__aenter__()
        except Exception as error:  # the lifespan failed to start: the server must not serve
            await send({"type": "lifespan.startup.failed", "message": repr(error)})
            return
        await send({"type": "lifespan.startup.complete"})
        await receive()  # lifespan.shutdown
        try:
            await running.__aexit__(None, None, None)
        except Exception as error:
            await send({"type": "lifespan.shutdown.failed", "message": repr(error)})
            return
        await send({"type": "lifespan.shutdown.complete"})
