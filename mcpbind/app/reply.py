"""Answering one request of the peer on a session (either side): the result the work gives, the
error it raises, and never an exception out of a transport's task."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable
from typing import Any

from ..errors import INTERNAL_ERROR, ProtocolError

__all__ = ["reply"]


async def reply(
    session: Any, request_id: Any, work: Awaitable[Any], log: logging.Logger, what: str
) -> None:
    """Respond to the peer's request ``request_id`` on ``session`` (a ``ServerSession`` or
    ``ClientSession``) with what ``work`` gives: its result; the ``ProtocolError`` it raises; for
    any other exception (a handler's bug), -32603, logged on ``log`` as ``what`` failing. A
    result the session refuses to send (it does not fit the method) is answered -32603 too, so
    the peer never waits for a response that was not sent. Cancellation propagates."""
    try:
        result = await work
    except ProtocolError as error:
        _error(session, request_id, error.code, error.message, error.data)
    except Exception as error:  # a handler's bug is the peer's internal error, not a crash
        log.exception("%s failed", what)
        _error(session, request_id, INTERNAL_ERROR, f"Internal error: {error}", None)
    else:
        try:
            session.respond(request_id, result)
        except ProtocolError as error:
            _error(session, request_id, INTERNAL_ERROR, error.message, None)


def _error(session: Any, request_id: Any, code: int, message: str, data: Any) -> None:
    # The peer cancelled the request, or it was answered already: nothing is owed then.
    with contextlib.suppress(ProtocolError):
        session.respond_error(request_id, code, message, data)
