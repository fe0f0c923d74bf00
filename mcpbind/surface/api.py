"""The Python API of ``mcpbind surface``: lock a server, check it against its lock, compare two
surfaces."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .._revisions import LATEST, REVISIONS
from ..errors import UnsupportedRevision
from .compare import Report, compare
from .lockfile import Lock
from .reader import read

if TYPE_CHECKING:
    from ..app import App

__all__ = ["check", "diff", "lock", "read_target"]

Target = str | Sequence[str] | Any  # a URL, a command (a list), or an App

_RELEASED = REVISIONS[: REVISIONS.index(LATEST) + 1]


async def read_target(target: str | Sequence[str] | App, **options: Any) -> Lock:
    """The live surface of the server at ``target`` (``options``: ``revisions``, ``timeout``,
    ``max_pages``, ``max_items``, and the transport's, as ``mcpbind.Client`` takes them)."""
    return await read(target, **options)


async def lock(
    target: str | Sequence[str] | App,
    output: str | os.PathLike[str] | None = None,
    **options: Any,
) -> Lock:
    """Lock the surface of the server at ``target``: read it, and write it to ``output`` when
    given. The only writer of lock files."""
    surface = await read(target, **options)
    if output is not None:
        surface.write(output)
    return surface


async def check(
    locked: Lock | str | os.PathLike[str], target: str | Sequence[str] | App, **options: Any
) -> Report:
    """The changes from the lock to the live server (``report.drifted`` says whether the live
    surface differs). The server is asked for the lock's revision first; if it no longer speaks
    it, for the newest it does (the report then holds ``revision_changed``)."""
    old = locked if isinstance(locked, Lock) else Lock.read(locked)
    wanted = options.pop("revisions", None)
    try:
        live = await read(target, revisions=(old.revision,), **options)
    except UnsupportedRevision:
        live = await read(target, revisions=wanted or _RELEASED, **options)
    return compare(old, live)


def diff(old: Lock, new: Lock) -> Report:
    """The review of the changes from surface ``old`` to surface ``new``."""
    return compare(old, new)
