"""What every part of ``bridge/`` shares: its bounds, the markers its parts pass each other and
the error past a bound. The bottom layer: it imports nothing of the bridge's own."""

from __future__ import annotations

from typing import Any

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError

__all__ = [
    "INPUT_TIMEOUT",
    "LOSSY",
    "MAX_IN_FLIGHT_PER_SIDE",
    "MAX_PAGES",
    "MAX_TASKS",
    "NOT_MINE",
    "NOT_SENT",
    "STATE_PREFIX",
    "too_many",
]

# What --strict answers a message with when it cannot cross without a loss.
LOSSY = INVALID_PARAMS
# Seconds a server's own request, asked of a round-trip client through an input-required result,
# waits for that client's retry (both fronts; --input-timeout).
INPUT_TIMEOUT = 300.0
STATE_PREFIX = "mcpbind-gateway:"  # the request states a bridge issues (others pass through)

# Requests from one side of the stdio bridge that may await the other side's answer at once
# (per side; the HTTP transports' own bound is ``http_limits.MAX_IN_FLIGHT``).
MAX_IN_FLIGHT_PER_SIDE = 1024
# Tasks the bridge keeps at once, translated either way: per client connection of a 2025-11-25
# client (tasks_core_to_extension), per bridge for an extension client's calls
# (tasks_extension_to_core).
MAX_TASKS = 1000


class _NotSent:
    """The notification is not forwarded (``Crossing._notification``)."""


NOT_SENT: Any = _NotSent()


def too_many(id: Any, limit: int, sender: str, other: str) -> ProtocolError:
    """The error for a request from ``sender`` past ``limit`` requests awaiting ``other``."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"Server busy: {limit} requests from {sender} already await an answer from {other} "
        "(the bridge's max_in_flight)",
        {"max_in_flight": limit},
        id,
    )


class _NotMine:
    """The request is not the task translation's: the gateway's link forwards it as usual."""


NOT_MINE: Any = _NotMine()

# The pages of one list a gateway link reads for its surface guard (a use of an item not seen yet).
MAX_PAGES = 1000
