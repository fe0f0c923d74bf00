"""Protocol revision negotiation (the initialize rule), from each revision's generated facts."""

from __future__ import annotations

from collections.abc import Iterable

from ._revisions import RELEASED, REVISIONS
from .errors import UnsupportedRevision

__all__ = ["handshake", "negotiate"]


def handshake(revision: str) -> str:
    """How peers of ``revision`` agree on it: ``"initialize"``, or ``"discover"`` (the revision
    travels in every request's ``_meta``); read from the revision's ``FACTS``."""
    from .packages import bindings

    return bindings(revision).FACTS.handshake  # type: ignore[no-any-return]


def negotiate(
    requested: object,
    supported: Iterable[str] = RELEASED,
    *,
    id: str | int | None = None,
) -> str:
    """The revision to answer ``initialize`` with.

    The requested revision when it is supported; otherwise the newest supported revision that
    has the initialize handshake (a peer asking for an unknown or unsupported version gets the
    server's newest one and decides itself whether to go on). Raises ``UnsupportedRevision``
    (-32602, data ``{"supported": [...], "requested": ...}``) when nothing can be offered: no
    supported revision has the handshake, or the request names a revision without it, which
    cannot be answered with another one.
    """
    offered = list(supported)
    unknown = [r for r in offered if r not in REVISIONS]
    if unknown:
        raise ValueError(
            f"unknown MCP revision(s) {unknown}; known revisions: {', '.join(REVISIONS)}"
        )
    ordered = sorted(set(offered), key=REVISIONS.index)
    if isinstance(requested, str) and requested in ordered:
        return requested
    initialize = [r for r in ordered if handshake(r) == "initialize"]
    if not initialize or (
        isinstance(requested, str)
        and requested in REVISIONS
        and handshake(requested) != "initialize"
    ):
        raise UnsupportedRevision(requested, ordered, id)
    return initialize[-1]
