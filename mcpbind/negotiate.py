"""Protocol revision negotiation (the initialize rule)."""

from __future__ import annotations

from collections.abc import Iterable

from ._revisions import REVISIONS
from .errors import UnsupportedRevision

__all__ = ["HANDSHAKE_REVISIONS", "negotiate"]

# Revisions that agree on a revision with `initialize`; later ones carry it in every request.
HANDSHAKE_REVISIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
_RELEASED = tuple(r for r in REVISIONS if r != "draft")


def negotiate(
    requested: object,
    supported: Iterable[str] = _RELEASED,
    *,
    id: str | int | None = None,
) -> str:
    """The revision to answer ``initialize`` with.

    The requested revision when it is supported; otherwise the newest supported revision that
    has the initialize handshake (a peer asking for an unknown or unsupported version gets the
    server's newest one and decides itself whether to go on). Raises ``UnsupportedRevision``
    (-32602, data ``{"supported": [...], "requested": ...}``) when nothing can be offered: no
    supported revision has the handshake, or the request names a revision without the handshake
    (2026-07-28 and later), which cannot be answered with another one.
    """
    offered = [r for r in supported]
    unknown = [r for r in offered if r not in REVISIONS]
    if unknown:
        raise ValueError(
            f"unknown MCP revision(s) {unknown}; known revisions: {', '.join(REVISIONS)}"
        )
    ordered = sorted(set(offered), key=REVISIONS.index)
    if isinstance(requested, str) and requested in ordered:
        return requested
    if (
        isinstance(requested, str)
        and requested in REVISIONS
        and requested not in HANDSHAKE_REVISIONS
    ):
        raise UnsupportedRevision(requested, ordered, id)
    handshake = [r for r in ordered if r in HANDSHAKE_REVISIONS]
    if not handshake:
        raise UnsupportedRevision(requested, ordered, id)
    return handshake[-1]
