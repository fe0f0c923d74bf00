"""A Client enforcing a surface lock (``Client(target, surface=LOCK)``): the sans-IO ``Guard``
of ``mcpbind.surface`` fed with what the client sends and receives, its verdicts applied to the
decoded results the Client returns.

The guard judges the raw JSON the server sent (a lock hashes every key of a definition, those the
revision does not define included), so the session keeps the raw result of each list and use
request (``ObservedSession.keep_raw``); the decoded result is then cut to the items the guard
kept. Before a request using an item goes out, the guard checks the item and the arguments; when
it has not seen the item's list since the start or since the server said that list changed, the
list is read first (every page, through the guard) and the request checked again."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import msgspec

from ..session.raw import cut
from ..surface.guard import Guard, unread
from ..surface.lockfile import Lock
from .links import ObservedSession

__all__ = ["Enforcer", "load_lock"]

Request = Callable[[str, Any], Awaitable[Any]]


def load_lock(surface: Lock | str | os.PathLike[str]) -> Lock:
    """The lock a Client enforces: given, or read from its file (``LockError`` naming it)."""
    return surface if isinstance(surface, Lock) else Lock.read(surface)


class Enforcer:
    """``lock`` enforced on one Client connection speaking ``revision`` (``mode``: ``block``
    refuses and leaves out what the lock does not approve, ``warn`` logs it)."""

    def __init__(
        self,
        lock: Lock,
        revision: str,
        mode: Literal["block", "warn"],
        session: ObservedSession,
        max_pages: int,
    ) -> None:
        self.guard = Guard(lock, revision, mode)
        self.session = session
        self.max_pages = max_pages
        sp = self.guard.sp
        session.keep_raw({*sp.by_list, *sp.by_use})

    async def before(self, method: str, params: Any, request: Request) -> None:
        """Check a request before it is sent (``ProtocolError`` -32602 naming the item, the lock
        and the change, or the argument's JSON path); a use of an item whose list the guard has
        not seen is preceded by reading that list with ``request``."""
        guard = self.guard
        if method not in guard.sp.by_use:
            return
        plain = msgspec.to_builtins(params) if params is not None else None
        unverified = guard.check_request(method, plain)
        if unverified is None:
            return
        k = guard.sp.kinds[unverified.kind]
        cursor: Any = None
        for _ in range(self.max_pages):
            page = await request(k.list_method, {k.cursor_param: cursor} if cursor else None)
            cursor = getattr(page, "next_cursor", None)
            if unverified.kind in guard.verified or not isinstance(cursor, str):
                break
        if guard.check_request(method, plain) is not None:  # (an unlisted item goes on)
            raise unread(unverified.list_method, self.max_pages)

    def after(self, method: str, params: Any, result: Any) -> Any:
        """The decoded ``result`` of ``method`` as the Client returns it: a list page cut to the
        items the guard kept; a tool's result checked against its locked output schema
        (``ProtocolError`` -32603)."""
        guard = self.guard
        raw = self.session.raw_of(result)
        if raw is None:
            return result  # not kept: not a list or use result (a task, say)
        k = guard.sp.by_list.get(method)
        if k is None:
            plain = msgspec.to_builtins(params) if params is not None else None
            guard.check_result(method, plain, raw)
            return result
        filtered = guard.filter_result(method, raw)
        if filtered.result is raw:
            return result
        return cut(result, k.items_key, raw[k.items_key], filtered.result[k.items_key])

    def changed(self, method: str) -> None:
        """A notification from the server: a list it says changed is checked again."""
        self.guard.changed(method)
