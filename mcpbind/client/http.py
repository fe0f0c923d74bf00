"""A server at a URL, over Streamable HTTP (``StreamableHTTPClient`` of mcpbind.transports,
mcpbind[http])."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from ..errors import ProtocolError
from ..events import Negotiated
from .links import ObservedSession, Serve

__all__ = ["HttpLink"]


class HttpLink:
    """``options`` go to ``StreamableHTTPClient`` (``headers``, ``max_resumptions``, ...). Each
    request waits at most ``timeout`` seconds for its answer (None: no bound), a subscription
    stream as long as it is open."""

    def __init__(
        self,
        url: str,
        session: ObservedSession,
        serve: Serve,
        timeout: float | None,
        **options: Any,
    ) -> None:
        import httpx

        from ..transports.http_client import StreamableHTTPClient

        self.session = session
        self.timeout = timeout
        self._own = options.get("http") is None
        if self._own:
            # No read timeout on the connection: a stream may stay quiet for long (a
            # subscription); each request is bounded by ``timeout`` instead.
            options["http"] = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))
        self.http = StreamableHTTPClient(url, session, on_request=serve, **options)

    async def open(self) -> Negotiated:
        return await asyncio.wait_for(self.http.connect(), self.timeout)

    async def call(self, method: str, params: Any = None, *, stream: bool = False) -> Any:
        if stream:
            return await self.http.call(method, params)
        return await asyncio.wait_for(self.http.call(method, params), self.timeout)

    async def notify(self, method: str, params: Any = None) -> None:
        await self.http.notify(method, params)

    async def cancel(self, request_id: Any, reason: str) -> None:
        """Tell the server this side no longer waits for ``request_id`` (if it still did)."""
        with contextlib.suppress(ProtocolError):
            self.session.cancel(request_id, reason)
        await self.http.flush()

    async def close(self) -> None:
        await self.http.close()
        if self._own:
            await self.http.http.aclose()
