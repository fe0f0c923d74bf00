"""The stdio bridge's input rounds with round-trip clients (the reverse of the ones ``Bridge``
translates for older clients): a server's request for a client of a round-trip revision, which
has no such method, asks it through an input-required result of one of its requests in flight,
held (``Hold``) until the client's retry carries the answer back (or ``expire`` ends it).
``RoundTrips`` is the ``Bridge``'s base: its tables are the bridge's, made by ``Bridge``."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ...errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ProtocolError,
)
from ...events import (
    RequestReceived,
)
from ...session._common import speech
from ..crossing import Crossing
from .front import HeldFront
from .requests import Forwarded, Hold

__all__ = ["RoundTrips"]


class RoundTrips(Crossing):
    """The input rounds of one bridge (module docstring)."""

    front: HeldFront  # the session facing the client
    input_timeout: float  # seconds a held round waits for the client's retry
    _down: dict[Any, Forwarded]  # id to the server -> the client's request
    _up: dict[Any, Any]  # the client's request id -> id to the server
    _held: dict[str, Hold]  # request state -> a round-trip client's request
    _held_down: dict[Any, str]  # id to the server -> the state holding it
    _asked: int  # the server's requests held for a round-trip client's retry

    def answer_error(self, id: Any, error: ProtocolError) -> None:
        with contextlib.suppress(ProtocolError):  # the client cancelled it meanwhile
            self.front.respond_error(id, error.code, error.message, error.data)

    def quietly(self, call: Any, *args: Any) -> None:
        """Do ``call``; a refusal (the peer's state moved on) is logged, never raised."""
        try:
            call(*args)
        except ProtocolError as err:
            self.note("refused", f"bridge: {err.message}")

    def _ask_through(self, e: RequestReceived, revision: str) -> None:
        """The server's request ``e`` for a client of a round-trip ``revision``: the newest of
        the client's requests in flight is answered with an input-required result asking it
        (the request itself stays in flight on the server), or, when every one of them already
        waits for a retry, the newest of those asks it too on its retry."""
        ask = (e.id, e.method, e.params)
        for down in reversed(self._down):
            up = self._down[down]
            if speech(up.revision).facts.round_trip is not None:
                del self._down[down]
                self._up.pop(up.id, None)
                hold = Hold(down, up.method, up.revision, {self.input_name(): ask}, 0.0)
                self._asked += 1
                self._ask(up.id, hold)
                return
        if self._held:
            hold = next(reversed(self._held.values()))
            hold.asks[self.input_name()] = ask
            self._asked += 1
            return
        self.quietly(
            self.back.respond_error,
            e.id,
            METHOD_NOT_FOUND,
            f"Method not found: {e.method!r} is not part of MCP {revision}, the revision the "
            "client speaks, and no request of it is in flight to ask through",
            {"method": e.method},
        )

    def _ask(self, id: Any, hold: Hold) -> None:
        """Answer the client's request ``id`` with the input-required result asking what
        ``hold`` holds, and keep it for the retry."""
        state = self.new_state()
        asked = {name: (method, params) for name, (_, method, params) in hold.asks.items()}
        try:
            result = self._round_trip_ask(asked, hold.revision, state)
        except ProtocolError as err:  # the client's revision cannot carry what is asked
            self.answer_error(id, err)
            self._drop(hold, err)
            return
        hold.since = time.monotonic()
        self._held[state] = hold
        self._held_down[hold.down] = state
        self.quietly(self.front.respond, id, result)  # (the client may have cancelled it)

    def _resume(self, e: RequestReceived, state: str, answers: dict[str, Any]) -> None:
        """A round-trip client's retry ``e``: its answers go to the server's requests, and it
        takes up the request the server is still working on."""
        hold = self._held.pop(state, None)
        if hold is None or hold.method != e.method:
            if hold is not None:
                self._held[state] = hold
            self.answer_error(
                e.id,
                ProtocolError(
                    INVALID_PARAMS,
                    "Invalid params: requestState names no input round this bridge holds for "
                    f"this method (it expired after input_timeout, {self.input_timeout:g} s)",
                ),
            )
            return
        del self._held_down[hold.down]
        for name in [n for n in hold.asks if n in answers]:
            sid, method, _ = hold.asks.pop(name)
            self._asked -= 1
            try:
                self.back.respond(sid, self._input_response(method, answers[name]))
            except ProtocolError as err:
                self.quietly(self.back.respond_error, sid, err.code, err.message, err.data)
        if hold.answer is not None:
            result, error = hold.answer
            self._drop(hold, ProtocolError(INTERNAL_ERROR, "the client's request was answered"))
            if error is not None:
                self.answer_error(e.id, error)
            else:
                try:
                    self.front.respond(e.id, self.up_result(result, e.revision, e.method))
                except ProtocolError as err:
                    self.answer_error(e.id, err)
        elif hold.asks:  # asked while the client was answering: asked again
            hold.revision = e.revision
            self._ask(e.id, hold)
        else:
            self._down[hold.down] = Forwarded(e.id, e.method, e.revision)
            self._up[e.id] = hold.down

    def _drop(self, hold: Hold, error: ProtocolError) -> None:
        """The server's requests ``hold`` still asks get ``error``."""
        for sid, _, _ in hold.asks.values():
            self.quietly(self.back.respond_error, sid, error.code, error.message, error.data)
        self._asked -= len(hold.asks)
        hold.asks.clear()

    def expire(self, now: float | None = None) -> None:
        """End the input rounds whose client has not retried within ``input_timeout`` seconds
        (``now``: ``time.monotonic()``): the server's requests get an error, and the client's
        request is cancelled on the server."""
        now = time.monotonic() if now is None else now
        why = (
            f"the client did not retry within input_timeout ({self.input_timeout:g} s) with the "
            "input the server asked for"
        )
        for state, hold in list(self._held.items()):
            if now - hold.since < self.input_timeout:
                continue
            del self._held[state]
            del self._held_down[hold.down]
            self._drop(hold, ProtocolError(INTERNAL_ERROR, f"Request cancelled: {why}"))
            if hold.answer is None:
                self.quietly(self.back.cancel, hold.down, why)
            self.log.append(f"bridge: {hold.method!r} cancelled: {why}")
