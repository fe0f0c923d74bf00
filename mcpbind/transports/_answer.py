"""Answering a request of the peer with what an application callback makes of it: the one rule
every client transport follows, so that each request gets exactly one answer whatever the
callback does; and the input rounds of a multi-round-trip request: the responses to each
result's input requests, asked of the same callback, and the bound on how many rounds one request
may take."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import INTERNAL_ERROR, METHOD_NOT_FOUND, ProtocolError
from ..events import Event, InputRequired, RequestReceived
from ..session import ClientSession

__all__ = ["MAX_ROUNDS", "answer_request", "answer_rounds", "input_responses"]

# The input rounds one request may take (the default of every client's ``max_rounds``): a server
# that keeps asking for input, hostile or broken, must not keep a call going for ever.
MAX_ROUNDS = 16


async def answer_request(
    session: ClientSession,
    event: RequestReceived,
    on_request: Callable[[RequestReceived], Awaitable[Any]] | None,
) -> None:
    """Queue in ``session`` the answer to ``event``: ``on_request``'s result, its
    ``ProtocolError`` as the error response, -32601 when there is no callback, and -32603 when
    the callback fails otherwise or returns what the revision cannot carry (the peer still gets
    an answer, rather than waiting for one that was never sent)."""
    if on_request is None:
        session.respond_error(
            event.id, METHOD_NOT_FOUND, f"Method not found: this client handles no {event.method!r}"
        )
        return
    try:
        result = await on_request(event)
    except ProtocolError as error:
        session.respond_error(event.id, error.code, error.message, error.data)
    except Exception as error:  # noqa: BLE001 - a callback's bug is the peer's error, not ours
        session.respond_error(event.id, INTERNAL_ERROR, f"Internal error: {error}")
    else:
        try:
            session.respond(event.id, result)
        except ProtocolError as error:
            session.respond_error(event.id, INTERNAL_ERROR, error.message)


async def input_responses(
    session: ClientSession,
    event: InputRequired,
    on_request: Callable[[RequestReceived], Awaitable[Any]] | None,
) -> dict[str, Any]:
    """The responses to the input requests of ``event`` (a multi-round-trip result), by name:
    ``on_request``'s result for each, in order; what it raises is raised, and without a callback
    an input request raises ``ProtocolError`` -32601."""
    responses: dict[str, Any] = {}
    for name, asked in event.asked(session.revision or "").items():
        if on_request is None:
            raise ProtocolError(
                METHOD_NOT_FOUND, f"Method not found: this client handles no {asked.method!r}"
            )
        responses[name] = await on_request(asked)
    return responses


async def answer_rounds(
    session: ClientSession,
    event: Event | None,
    on_request: Callable[[RequestReceived], Awaitable[Any]] | None,
    retry: Callable[[Any], Awaitable[Event | None]],
    method: str,
    max_rounds: int,
) -> Event | None:
    """The answer that ends the request ``event`` answered, once its input rounds are over: as
    long as it is a result asking for input, the responses (``input_responses``) go back with the
    request retried (``retry(request_id)`` sends it and returns its answer). A server asking for
    input once more after ``max_rounds`` rounds ends the call with ``ProtocolError`` -32603 (the
    last result ended the server's request: nothing is left to cancel)."""
    rounds = 0
    while isinstance(event, InputRequired):
        if rounds == max_rounds:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"the server asked for input once more after {max_rounds} rounds for {method!r} "
                "(max_rounds): the request is given up",
                {"limit": "max_rounds", "max": max_rounds},
            )
        rounds += 1
        responses = await input_responses(session, event, on_request)
        event = await retry(session.answer(event, responses))
    return event
