"""The defaults of the HTTP servers' limits (``StreamableHTTPServer``'s and ``SSEServer``'s
options; docs/limits.md says what a client gets past each), the check both make of the values
given, and the error both answer a request with past ``max_in_flight``. ``http_server`` names
the defaults too."""

from __future__ import annotations

from typing import Any

from ..errors import INTERNAL_ERROR, ProtocolError

MAX_BODY_SIZE = 4 * 1024 * 1024
BODY_TIMEOUT = 30.0
MAX_SESSIONS = 1024
SESSION_IDLE_TIMEOUT = 30 * 60.0
SESSION_EVICTABLE_AFTER = 60.0
# Seconds a worker's copy of a session in a shared store serves requests after the store last
# confirmed the session, without asking it again (a request a second per session and worker, not
# one each). Each ask restarts the session's idle time in the store as session_idle_timeout plus
# this, so a session never expires there sooner than session_idle_timeout after its last request;
# a DELETE on another worker reaches this one's copy at once (the store's channel), or at the
# next ask should that message be lost.
SESSION_RECHECK = 1.0
MAX_IN_FLIGHT = 128
MAX_QUEUED = 1000
RETRY_MS = 1000
RESUME_TIMEOUT = 30.0
# The tools whose x-mcp-header designations are kept to check Mcp-Param-* headers against.
MAX_DESIGNATED = 4096
# The Retry-After (seconds) of a 503: a busy server's answer, or a store that failed.
RETRY_AFTER = "1"
# How every "the server is busy, send it again later" error's message starts (past max_in_flight,
# an App's in_flight, the gateway's bounds, ...): such an error answering a POST alone is 503.
BUSY = "Server busy"


def check_limits(positive: dict[str, float], not_negative: dict[str, float]) -> None:
    """Refuse a server's limits that bound nothing: ``ValueError`` naming the first option of
    ``positive`` that is zero, negative (or NaN), or of ``not_negative`` that is below zero."""
    for name, value in positive.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, not {value!r}")
    for name, value in not_negative.items():
        if not value >= 0:
            raise ValueError(f"{name} must be >= 0, not {value!r}")


def busy(message: Any) -> bool:
    """Whether an error's ``message`` says the server is busy (``BUSY``)."""
    return isinstance(message, str) and message.startswith(BUSY)


def too_many_in_flight(request_id: Any, max_in_flight: int) -> ProtocolError:
    """The error answering request ``request_id`` of a session that has ``max_in_flight``
    requests being handled already: -32603, with the limit in ``data``."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"{BUSY}: this session is handling as many requests at once as it may "
        f"(max_in_flight: {max_in_flight}); send it again once one is answered",
        {"limit": "max_in_flight", "max": max_in_flight},
        request_id,
    )
