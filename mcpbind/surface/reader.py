"""Reading a live server's surface: every page of its tools, prompts, resources and resource
templates, as the server sent them.

The definitions are read from the raw messages, not from the decoded classes: a generated class
keeps only the keys its revision defines, and a lock must cover every key the server sent (an
unknown key is as good a place to hide instructions as a description). The server is reached by
the links ``mcpbind.Client`` uses (Streamable HTTP or HTTP+SSE, a subprocess, an App in this
process); only the session is one that keeps each list result's raw JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from .._revisions import LATEST, REVISIONS
from ..capabilities import supports
from ..client.links import Link, ObservedSession
from ..errors import INTERNAL_ERROR, METHOD_NOT_FOUND, ProtocolError
from ..events import Event, RequestReceived
from ..transports._answer import MAX_ROUNDS
from .kinds import Kind, Speech, speech
from .lockfile import MAX_ITEMS, Item, Lock, LockError, item_of

if TYPE_CHECKING:
    from ..app import App

__all__ = ["MAX_ITEMS", "MAX_PAGES", "RawConnection", "pages", "read"]

MAX_PAGES = 1000  # pages one listing reads
_RELEASED = REVISIONS[: REVISIONS.index(LATEST) + 1]


def _ignore(event: Event) -> None:
    pass


async def _refuse(event: RequestReceived) -> Any:
    raise ProtocolError(METHOD_NOT_FOUND, f"mcpbind surface lock answers no {event.method!r}")


def _link(
    target: str | Sequence[str] | App,
    session: ObservedSession,
    timeout: float | None,
    **options: Any,
) -> Link:
    if isinstance(target, str):
        if not target.startswith(("http://", "https://")):
            raise ValueError(f"target {target!r}: a URL starts with http:// or https://")
        from ..client.http import HttpLink

        return HttpLink(target, session, _refuse, timeout, **options)
    if isinstance(target, Sequence):
        if not target or not all(isinstance(a, str) for a in target):
            raise ValueError(f"target {target!r}: a command is a non-empty list of strings")
        from ..client.stdio import StdioLink

        return StdioLink(
            target, session, _refuse, timeout=timeout, max_rounds=MAX_ROUNDS, **options
        )
    from ..client.memory import MemoryLink

    return MemoryLink(target, session, _refuse, timeout=timeout, max_rounds=MAX_ROUNDS, **options)


class RawConnection:
    """A connection to a server that gives each result as the server sent it (its raw JSON),
    for reading and guarding surfaces: ``async with RawConnection(target) as c:
    page = await c.request(c.speech.kinds["tool"].list_method)``. ``revisions`` are offered
    (default: every released one, the newest preferred); ``options`` go to the transport."""

    def __init__(
        self,
        target: str | Sequence[str] | App,
        *,
        revisions: Sequence[str] | None = None,
        timeout: float | None = 60.0,
        **options: Any,
    ) -> None:
        chosen = tuple(revisions) if revisions is not None else _RELEASED
        self.session = ObservedSession(
            revisions=chosen,
            capabilities={},
            info={"name": "mcpbind-surface", "version": "1"},
            observe=_ignore,
        )
        self.link = _link(target, self.session, timeout, **options)
        self.negotiated: Any = None

    async def __aenter__(self) -> RawConnection:
        try:
            self.negotiated = await self.link.open()
        except BaseException:
            await self.link.close()
            raise
        self.session.keep_raw({*self.speech.by_list, *self.speech.by_use})
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.link.close()

    @property
    def speech(self) -> Speech:
        return speech(self.negotiated.revision)

    async def request(self, method: str, params: Any = None) -> Any:
        """The result of a request as the server sent it (raw JSON); an error response raises
        ``ProtocolError``; None for a method whose raw results are not kept (those listing
        and using items are)."""
        return self.session.raw_of(await self.link.call(method, params))


async def read(
    target: str | Sequence[str] | App,
    *,
    revisions: Sequence[str] | None = None,
    timeout: float | None = 60.0,
    max_pages: int = MAX_PAGES,
    max_items: int = MAX_ITEMS,
    **options: Any,
) -> Lock:
    """The live surface of the server at ``target`` (a URL, a command as a list, or an App),
    in the newest of ``revisions`` (default: every released one) it speaks. ``options`` go to
    the transport as ``mcpbind.Client``'s do. Raises ``ProtocolError`` for what the server got
    wrong, ``LockError`` for a surface that cannot be locked (an item without a name, two items
    of one name, more than ``max_items`` of a kind)."""
    async with RawConnection(target, revisions=revisions, timeout=timeout, **options) as c:
        negotiated = c.negotiated
        sp = c.speech
        items: dict[str, dict[str, Item]] = {}
        for kind, k in sp.kinds.items():
            items[kind] = {}
            if k.capability is None or supports(negotiated.capabilities, k.capability):
                items[kind] = await _collect(kind, _pages(c, k), sp, max_pages, max_items)
        instructions = getattr(negotiated.result, "instructions", None)
        return Lock(
            revision=negotiated.revision,
            server=msgspec.to_builtins(negotiated.info) if negotiated.info is not None else {},
            items=items,
            instructions=instructions if isinstance(instructions, str) else None,
        )


async def pages(connection: RawConnection, k: Kind) -> AsyncIterator[dict[str, Any]]:
    """Every page of ``k``'s list, each the raw list result."""
    cursor: Any = None
    while True:
        raw = await connection.request(
            k.list_method, {k.cursor_param: cursor} if cursor is not None else None
        )
        if not isinstance(raw, dict) or not isinstance(raw.get(k.items_key), list):
            raise ProtocolError(
                INTERNAL_ERROR, f"the server's {k.list_method} result holds no {k.items_key!r} list"
            )
        yield raw
        cursor = raw.get(k.cursor_key)
        if cursor is None:
            return


async def _pages(connection: RawConnection, k: Kind) -> AsyncIterator[list[Any]]:
    async for raw in pages(connection, k):
        yield raw[k.items_key]


async def _collect(
    kind: str, pages: Any, sp: Speech, max_pages: int, max_items: int
) -> dict[str, Item]:
    found: dict[str, Item] = {}
    count = 0
    async for page in pages:
        count += 1
        if count > max_pages:
            raise LockError(
                f"the server's {kind.replace('_', ' ')} list goes on past {max_pages} pages"
            )
        for definition in page:
            if not isinstance(definition, dict):
                raise LockError(f"a {kind.replace('_', ' ')} that is not an object: {definition!r}")
            item = item_of(kind, definition, sp)
            if item.name in found:
                raise LockError(
                    f"the server lists two of {item.label}: a lock needs one of each name"
                )
            found[item.name] = item
            if len(found) > max_items:
                raise LockError(f"the server lists more than {max_items} of kind {kind}")
    return dict(sorted(found.items()))
