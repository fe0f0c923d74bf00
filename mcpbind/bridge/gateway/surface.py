"""A gateway link enforcing a surface lock (``mcpbind bridge --listen ... --surface LOCK``): the
sans-IO ``Guard`` of ``mcpbind.surface`` fed with what crosses one link to the server.

The guard judges what the server sent, in the server's revision and as raw JSON (a lock hashes
every key of a definition), so a guarded link's server-side session keeps the raw result of each
list and use request (``GuardedBack``, ``mcpbind.session.raw``). Before a client's request using
an item goes down, its params in the server's revision are checked (``check``); when the guard
has not seen the item's list since the link opened or since the server said that list changed,
the link reads the list first (every page, through the guard) and checks again. Each answer is
judged as it arrives (``answer``): a list page cut to what the guard kept, a tool's result
checked against its locked output schema. Every notification from the server goes through
``changed``; where the server's revision sends list changes only on a subscription stream, the
link opens one of its own (``listen``)."""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ...errors import ProtocolError
from ...events import Event, ResultReceived
from ...packages import bindings
from ...session.raw import RawResults, cut
from ...surface.guard import Guard, Unverified
from ...surface.lockfile import Lock
from ..crossing import Back

__all__ = ["GuardedBack", "LinkSurface", "SurfaceLock"]

Mode = Literal["block", "warn"]
# Uses in flight whose params a link keeps to check their results with (past it, the oldest go:
# their requests were given up without an answer, or their results are not checked).
MAX_USES = 1024


@dataclass(frozen=True)
class SurfaceLock:
    """What a gateway enforces: the lock, and what is done with what it does not approve."""

    lock: Lock
    mode: Mode = "block"


class GuardedBack(Back):
    """The server-side session of a guarded link: keeps the raw results the guard judges."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.raw = RawResults()  # the methods are set once the server's revision is known

    def receive(self, data: bytes | str) -> list[Event]:
        events = super().receive(data)
        if self.raw.methods:
            self.raw.keep(data, events)
        return events


class LinkSurface:
    """``enforced`` on one link whose server speaks ``revision``; ``back`` is the link's
    server-side session, ``report`` where each drift's line goes."""

    def __init__(
        self,
        enforced: SurfaceLock,
        revision: str,
        back: GuardedBack,
        report: Callable[[str], None],
    ) -> None:
        self.guard = Guard(enforced.lock, revision, enforced.mode, report=report)
        sp = self.guard.sp
        self.raw = back.raw
        self.raw.methods = frozenset({*sp.by_list, *sp.by_use})
        self._uses: dict[Any, Any] = {}  # request id -> its params (plain JSON), until answered
        self.listening: Any = None  # the id of the link's own subscription stream, if any

    def check(self, method: str, params: Any) -> Unverified | None:
        """Before a request goes down (``params`` in the server's revision): None when it may
        go, ``Unverified`` when its list must be read first; ``ProtocolError`` -32602 naming
        the item, the lock and the change when the lock refuses it."""
        if method not in self.guard.sp.by_use:
            return None
        return self.guard.check_request(method, _plain(params))

    def sent(self, rid: Any, method: str, params: Any) -> None:
        """Request ``rid`` went down: a use's params are kept to check its result with."""
        if method in self.guard.sp.by_use:
            self._uses[rid] = _plain(params)
            if len(self._uses) > MAX_USES:  # the oldest: a request given up, never answered
                del self._uses[next(iter(self._uses))]

    def answer(self, event: Any) -> Any:
        """The event answering a request, as the link passes it on: a list page cut to the
        items the guard kept; for a tool result its locked output schema refuses, the
        ``ProtocolError`` to answer with (returned, not raised)."""
        params = self._uses.pop(getattr(event, "id", None), None)
        if type(event) is not ResultReceived:
            return event
        raw = self.raw.take(event.result)
        if raw is None:
            return event  # not a result the guard judges
        guard = self.guard
        k = guard.sp.by_list.get(event.method)
        try:
            if k is None:
                guard.check_result(event.method, params, raw)
                return event
            filtered = guard.filter_result(event.method, raw)
        except ProtocolError as error:
            return error
        if filtered.result is raw:
            return event
        kept = cut(event.result, k.items_key, raw[k.items_key], filtered.result[k.items_key])
        return ResultReceived(id=event.id, method=event.method, result=kept)

    def changed(self, method: str) -> None:
        """A notification from the server: a list it says changed is read again before use."""
        self.guard.changed(method)

    def listing(self, unverified: Unverified) -> tuple[str, str]:
        """How to read the list ``unverified`` asks for: its method and its cursor's params
        key."""
        k = self.guard.sp.kinds[unverified.kind]
        return k.list_method, k.cursor_param

    def verified(self, unverified: Unverified) -> bool:
        """Whether the list ``unverified`` asked for has been read whole since."""
        return unverified.kind in self.guard.verified

    def listen(self) -> tuple[str, dict[str, Any]] | None:
        """The subscription the link opens for list changes where the server's revision sends
        them only on such a stream: its method and params (None elsewhere)."""
        module = bindings(self.guard.sp.revision)
        method = module.FACTS.lifecycle.get("listen")
        if method is None:
            return None
        params = {f.name: f for f in msgspec.structs.fields(module.METHODS[method].params)}
        wanted = params.get("notifications")
        if wanted is None:
            return None
        changes = [
            f.encode_name
            for f in msgspec.structs.fields(_struct_in(wanted.type))
            if f.name.endswith("_list_changed")
        ]
        return method, {wanted.encode_name: dict.fromkeys(changes, True)}


def _plain(params: Any) -> Any:
    return None if params is None or params is msgspec.UNSET else msgspec.to_builtins(params)


def _struct_in(tp: Any) -> type[msgspec.Struct]:
    for arg in typing.get_args(tp) or (tp,):
        if isinstance(arg, type) and issubclass(arg, msgspec.Struct):
            return arg
    raise LookupError(f"no Struct in {tp!r}")
