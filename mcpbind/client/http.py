"""A server at a URL, over HTTP (mcpbind[http]): Streamable HTTP, or HTTP+SSE (the HTTP transport
of 2024-11-05) for a server that refuses the opening POST the way such servers do
(``mcpbind.transports.sse_client.connect_http``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from ..errors import ProtocolError
from ..events import Negotiated
from ..transports.deadline import Deadline
from .links import ObservedSession, Serve

if TYPE_CHECKING:
    from ..transports.http_client import StreamableHTTPClient
    from ..transports.sse_client import SSEClient

__all__ = ["HttpLink"]

# The options both HTTP transports take; any other (``auth``, ``max_resumptions``, ...) is
# Streamable HTTP's alone, and keeps the link on it (no fall-back).
_SHARED = frozenset(("http", "headers", "max_rounds"))


class HttpLink:
    """``options`` go to the transport: ``http`` (an ``httpx.AsyncClient``, or an
    ``http_wire.HttpWire``), ``headers``, and Streamable HTTP's own (``auth``,
    ``max_resumptions``, ...), which rule out the fall-back to HTTP+SSE. Each request waits at
    most ``timeout`` seconds for its answer (None: no bound), a subscription stream as long as
    it is open."""

    def __init__(
        self,
        url: str,
        session: ObservedSession,
        serve: Serve,
        timeout: float | None,
        **options: Any,
    ) -> None:
        from ..transports.http_pool import HttpPool

        self.url = url
        self.session = session
        self.serve = serve
        self.timeout = timeout
        self._own = options.get("http") is None
        if self._own:
            # No read timeout on the connection: a stream may stay quiet for long (a
            # subscription); each request is bounded by ``timeout`` instead.
            options["http"] = HttpPool(url, read_timeout=None)
        self.options = options
        self.http: StreamableHTTPClient | SSEClient | None = None

    async def open(self) -> Negotiated:
        self._loop = asyncio.get_running_loop()  # (each call's deadline is on it)
        from ..transports.http_client import StreamableHTTPClient
        from ..transports.sse_client import connect_http

        if self.options.keys() <= _SHARED:
            opening = connect_http(self.url, self.session, on_request=self.serve, **self.options)
            async with asyncio.timeout(self.timeout):
                self.http = await opening
            assert self.session.negotiated is not None  # connected: the handshake is done
            return self.session.negotiated
        http = StreamableHTTPClient(self.url, self.session, on_request=self.serve, **self.options)
        self.http = http
        async with asyncio.timeout(self.timeout):
            return await http.connect()

    def _open(self) -> StreamableHTTPClient | SSEClient:
        if self.http is None:
            raise ConnectionError("the connection is not open")
        return self.http

    async def call(self, method: str, params: Any = None, *, stream: bool = False) -> Any:
        call = self._open().call(method, params)
        if stream or self.timeout is None:
            return await call
        # (asyncio.timeout's work, not wait_for's: on 3.11 wait_for returns the answer and
        # drops the caller's cancellation when both come at once, and the caller would run on)
        deadline = Deadline(self._loop, self.timeout)
        try:
            result = await call
        except BaseException as error:
            if deadline.over(error):
                raise TimeoutError from error
            raise
        deadline.over(None)
        return result

    async def notify(self, method: str, params: Any = None) -> None:
        await self._open().notify(method, params)

    async def cancel(self, request_id: Any, reason: str) -> None:
        """Tell the server this side no longer waits for ``request_id`` (if it still did)."""
        with contextlib.suppress(ProtocolError):
            self.session.cancel(request_id, reason)
        await self._open().flush()

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()
        if self._own:
            await self.options["http"].aclose()
