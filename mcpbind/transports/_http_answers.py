"""The answers of the Streamable HTTP server besides a session's own: a JSON body made directly,
nothing for a client that left, an event stream that cleans up however it ends, and an HTTP
error that is also a JSON-RPC error."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import msgspec
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ..errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
)
from ._http_calls import read_client
from .http_limits import RETRY_AFTER, busy


class JSONAnswer(Response):
    """A JSON body already encoded, its head made directly (``Response`` works the same two
    headers out of its arguments on every answer): ``headers`` first, then content-length and
    content-type, as ``Response`` orders them."""

    media_type = "application/json"

    def __init__(self, body: bytes, status_code: int, headers: dict[str, str]) -> None:
        self.status_code = status_code
        self.body = body
        self.background = None
        length = _LENGTHS.get(len(body)) or _length(len(body))
        if not headers:  # (most answers: the list built whole, without a comprehension's call)
            self.raw_headers = [length, (b"content-type", b"application/json")]
            return
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        raw.append(length)
        raw.append((b"content-type", b"application/json"))
        self.raw_headers = raw


# The content-length header of each body length answered lately, made once (a bytes format a
# response costs more than the lookup); at most 256 lengths, then forgotten all at once.
_LENGTHS: dict[int, tuple[bytes, bytes]] = {}


def _length(size: int) -> tuple[bytes, bytes]:
    if len(_LENGTHS) >= 256:
        _LENGTHS.clear()
    header = _LENGTHS[size] = (b"content-length", b"%d" % size)
    return header


class Gone(Response):
    """The response to a client that left: nothing is sent, there is no one to send it to."""

    def __init__(self) -> None:
        super().__init__(status_code=499)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None


class EventStream(StreamingResponse):
    """An event stream whose generator is closed however the response ends (the client leaving
    included), so that its clean-up runs at once rather than when it is collected; ``on_close``
    runs then too (even when the response never started)."""

    def __init__(
        self, content: Any, *, on_close: Callable[[], None] | None = None, **options: Any
    ) -> None:
        super().__init__(content, **options)
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            events = self.body_iterator
            try:
                if isinstance(events, AsyncGenerator):
                    await events.aclose()
            finally:
                if self.on_close is not None:
                    self.on_close()


NO_CACHE = {"cache-control": "no-cache"}


async def as_events(messages: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Server-sent events of messages made elsewhere (the tasks layer's streams)."""
    async for message in messages:
        yield b"event: message\ndata: " + message + b"\n\n"


def plain_error(
    status: int,
    message: str,
    code: int = INVALID_REQUEST,
    headers: dict[str, str] | None = None,
) -> Response:
    """An HTTP error that is also a JSON-RPC error without id, so either kind of client reads it."""
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}},
        status_code=status,
        headers=headers,
    )


# HTTP status of a JSON-RPC error answered on a stateless POST (the envelope revisions' transport
# rule); a session-bound POST answers every JSON-RPC error with 200.
STATUS = {PARSE_ERROR: 400, INVALID_REQUEST: 400, METHOD_NOT_FOUND: 404, INVALID_PARAMS: 400}


def answer_status(data: bytes, stateful: bool) -> int:
    """The HTTP status of a POST answered by ``data`` alone: 503 when it is a busy server's error
    (``http_limits.busy``), in a session or not; else 200 in a session, where every JSON-RPC
    error travels in a 200, and a stateless POST's error its own status."""
    if data.find(b'"error"') < 0:  # cheaper than reading it: most answers are results
        return 200
    try:
        error = read_client.decode(data).error
    except (msgspec.DecodeError, ValueError, RecursionError):
        return 200
    code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, int):
        return 200
    return error_status(code, error.get("message"), stateful)


def error_status(code: int, message: Any, stateful: bool) -> int:
    if code == INTERNAL_ERROR and busy(message):
        return 503
    if stateful:
        return 200
    return STATUS.get(code, 500 if code == INTERNAL_ERROR else 400)


def json_answer(answer: bytes, stateful: bool, headers: dict[str, str]) -> Response:
    """A POST answered by one JSON-RPC response; a busy server's error with ``Retry-After``."""
    status = answer_status(answer, stateful)
    if status == 503:
        headers = {**headers, "retry-after": RETRY_AFTER}
    return JSONAnswer(answer, status, headers)


def too_deep(stateful: bool) -> Response:
    """The answer to a body nesting deeper than msgspec reads."""
    return plain_error(
        200 if stateful else 400,
        "Parse error: the body nests deeper than the server reads",
        PARSE_ERROR,
    )
