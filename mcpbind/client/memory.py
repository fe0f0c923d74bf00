"""An App in the same process: each message still travels as bytes through both sessions (what
tests check is what a transport would carry), delivered on the next turn of the event loop."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from .links import PipeLink

if TYPE_CHECKING:
    from ..app import App
    from ..app.connection import Connection

__all__ = ["MemoryLink"]


class MemoryLink(PipeLink):
    def __init__(self, app: App, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = app
        self._running: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._connection: Connection | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._running = self.app.running()
        await self._running.__aenter__()
        # Delivered on the next turn, as a transport would: no side answers inside the other's
        # call.
        self._connection = self.app.connect(lambda data: loop.call_soon(self._deliver, data))

    def _deliver(self, data: bytes) -> None:
        if self._ended is None:
            self.feed(data)

    def write(self, data: bytes) -> None:
        connection = self._connection
        assert connection is not None
        asyncio.get_running_loop().call_soon(self._to_app, connection, data)

    @staticmethod
    def _to_app(connection: Connection, data: bytes) -> None:
        if not connection.closed:
            connection.receive(data)

    async def stop(self) -> None:
        if self._connection is not None:
            await self._connection.close()
        if self._running is not None:
            running, self._running = self._running, None
            await running.__aexit__(None, None, None)
