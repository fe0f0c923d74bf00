"""What a link keeps of each request it sent down: ``Pending`` for a client's request (or a
retry awaiting one), and ``OwnCall`` standing for the client in a request of the link's own."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ...errors import METHOD_NOT_FOUND, ProtocolError
from ...events import RequestReceived

if TYPE_CHECKING:
    from ...transports.http_server import Call
    from .relay import RelayedCall

__all__ = ["OwnCall", "Pending"]


class Pending:
    """One client request sent down a link: the request it serves now (``call``; None while it
    waits for a round-trip client's retry), how it ends (``answer``), and the server's requests
    waiting for that client's input (``asks``: name -> the request, and where its answer goes).
    """

    __slots__ = ("answer", "asks", "call", "method", "revision", "rid", "timer", "waiter")

    def __init__(self, rid: Any, call: Call) -> None:
        self.rid = rid
        self.call: Call | RelayedCall | None = call
        self.method = call.method
        self.revision = call.revision
        self.answer: Any = None  # the server's answer (an event), or the error it ended with
        self.asks: dict[str, tuple[RequestReceived, asyncio.Future[Any]]] = {}
        self.waiter: asyncio.Future[None] | None = None  # what its handler awaits, if anything
        self.timer: asyncio.TimerHandle | None = None

    def wake(self) -> None:
        """Its handler has something to act on: the answer, or the server asking for input."""
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def wait(self, asks: bool = True) -> None:
        """Until the server answered (``answer``) or, with ``asks``, asked its client for input
        (``asks``): what a handler of the request waits for, the one loop that waits for it."""
        while self.answer is None and not (asks and self.asks):
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None


class OwnCall:
    """A request of the link's own (``Link.ask``), where a pending record holds a client's
    call: nothing of it goes to a client, and no client answers for it."""

    id = None
    params = None

    def __init__(self, method: str, revision: str) -> None:
        self.method, self.revision = method, revision

    def notify(self, method: str, params: Any = None) -> None:
        pass

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        pass

    async def request(self, method: str, params: Any = None) -> Any:
        raise ProtocolError(
            METHOD_NOT_FOUND, f"the gateway's own {self.method!r} has no client to ask {method!r}"
        )
