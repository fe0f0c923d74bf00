"""What the stdio bridge keeps of a request in flight: one that crossed (``Forwarded``), a server's
request for input turned into the older client's own (``Round``), and a round-trip client's
request held for its retry (``Hold``)."""

from __future__ import annotations

from typing import Any

import msgspec

from ...errors import (
    ProtocolError,
)

__all__ = ["Forwarded", "Hold", "Round"]


class Forwarded(msgspec.Struct, gc=False):
    """A request that crossed the bridge: its id on the side it came from, and its revision."""

    id: Any
    method: str
    revision: str


class Round(msgspec.Struct, gc=False):
    """A server's request for input, turned into the older client's own requests."""

    front: Forwarded  # the client's request awaiting the answer
    event: Any  # the InputRequired event
    pending: dict[Any, str]  # id of a request to the client -> its input request name
    responses: dict[str, Any]


class Hold(msgspec.Struct, gc=False):
    """A client's request (of a round-trip revision) still in flight on the server, whose
    server asked for input: the client was answered with an input-required result, and its
    retry takes the request up again."""

    down: Any  # the request's id on the server
    method: str
    revision: str
    asks: dict[str, tuple[Any, str, Any]]  # input name -> the server's request (id, method, params)
    since: float  # when the client was asked (time.monotonic())
    # The server's answer, when it came before the retry: (its result, None) or (None, error).
    answer: tuple[Any, ProtocolError | None] | None = None
