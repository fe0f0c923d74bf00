"""The states of a session and the transitions allowed between them, written as data once (in
the manner of h11's ``_state.py``): ``CLIENT`` and ``SERVER`` say which state may follow which,
and ``Session._move`` is the one code that changes a session's state, refusing any other
transition with ``IllegalTransition``. Nothing outside ``mcpbind.session`` sets a state.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from ..errors import INTERNAL_ERROR, ProtocolError

__all__ = ["CLIENT", "SERVER", "IllegalTransition", "SessionState"]


class SessionState(enum.StrEnum):
    """Where a session is. A ``str``: ``state == "ready"`` and logs read as before."""

    IDLE = "idle"  # nothing sent or received yet (both sides)
    NEGOTIATING = "negotiating"  # a client that sent its handshake request
    INITIALIZING = "initializing"  # a server that answered initialize, awaiting initialized
    READY = "ready"  # a revision agreed: requests and notifications go
    FAILED = "failed"  # a client that found no revision both sides speak, or gave up

    def __repr__(self) -> str:
        # As the plain string it replaces: error messages say "in state 'ready'".
        return repr(self.value)


IDLE = SessionState.IDLE
NEGOTIATING = SessionState.NEGOTIATING
INITIALIZING = SessionState.INITIALIZING
READY = SessionState.READY
FAILED = SessionState.FAILED

# A client: connect() queues the handshake (idle -> negotiating); the server's answer opens the
# session or fails it; the bridge gives up a client session it will not open (give_up).
CLIENT: Mapping[SessionState, frozenset[SessionState]] = {
    IDLE: frozenset({NEGOTIATING, FAILED}),
    NEGOTIATING: frozenset({READY, FAILED}),
    READY: frozenset(),
    FAILED: frozenset(),
}

# A server: initialize answered (idle -> initializing), then the client's initialized
# notification; a request of a revision with the per-request ``_meta`` envelope makes it ready
# at once, and each later such request again, in the revision that request names.
SERVER: Mapping[SessionState, frozenset[SessionState]] = {
    IDLE: frozenset({INITIALIZING, READY}),
    INITIALIZING: frozenset({READY}),
    READY: frozenset({READY}),
}


class IllegalTransition(ProtocolError):
    """A session asked to move to a state its table does not allow from where it is: a bug in
    mcpbind, not the peer's mistake (-32603, naming both states)."""

    def __init__(self, session: str, old: SessionState, new: SessionState) -> None:
        super().__init__(
            INTERNAL_ERROR,
            f"Internal error: {session} cannot move from state {old.value!r} to {new.value!r}",
        )
        self.old = old
        self.new = new
