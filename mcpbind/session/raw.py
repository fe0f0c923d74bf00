"""The raw JSON of chosen results, as the peer sent them: for a host that must judge what was
sent, keys the revision does not define included (a surface lock hashes every key), while it
works with the decoded classes. Kept by the decoded result's identity until its caller takes
it, at most ``MAX_RAW`` at once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ..errors import INTERNAL_ERROR, ProtocolError
from ..events import Event, ResultReceived

__all__ = ["MAX_RAW", "RawResults", "cut"]

MAX_RAW = 64  # raw results kept at once (the oldest, whose callers gave up on them, go first)
_RAW = msgspec.json.Decoder()


class RawResults:
    """The raw results of ``methods``: ``keep(data, events)`` after a session received ``data``
    and reported ``events``; ``take(result)`` gives the raw JSON a decoded result came from."""

    def __init__(self, methods: Iterable[str] = (), limit: int = MAX_RAW) -> None:
        self.methods = frozenset(methods)
        self.limit = limit
        self._kept: dict[int, tuple[Any, Any]] = {}  # id(result) -> (result, raw)

    def keep(self, data: bytes | str, events: list[Event]) -> None:
        """Keep the raw result of each ``ResultReceived`` of ``events`` for one of ``methods``
        (``data``: the message, or batch, they were read from)."""
        if not self.methods:
            return
        wanted = {
            e.id: e.result for e in events if type(e) is ResultReceived and e.method in self.methods
        }
        if not wanted:
            return
        body = _RAW.decode(data)
        for message in body if isinstance(body, list) else [body]:
            if isinstance(message, dict) and message.get("id") in wanted:
                result = wanted[message["id"]]
                self._kept[id(result)] = (result, message.get("result"))
        while len(self._kept) > self.limit:
            del self._kept[next(iter(self._kept))]

    def take(self, result: Any) -> Any:
        """The raw JSON ``result`` was decoded from, taken (None when it was not kept)."""
        kept = self._kept.pop(id(result), None)
        return kept[1] if kept is not None and kept[0] is result else None


def cut(result: Any, items_key: str, page: list[Any], kept: list[Any]) -> Any:
    """``result`` (a decoded list result) with only the items whose raw definitions are in
    ``kept`` (the same objects as in ``page``, the raw page it was decoded from, in order)."""
    field = next(
        (f.name for f in msgspec.structs.fields(type(result)) if f.encode_name == items_key), None
    )
    items = getattr(result, field, None) if field is not None else None
    if field is None or not isinstance(items, list) or len(items) != len(page):
        raise ProtocolError(
            INTERNAL_ERROR, f"the list result's {items_key!r} could not be cut to the lock"
        )
    keep = {id(definition) for definition in kept}
    chosen = [item for item, definition in zip(items, page, strict=True) if id(definition) in keep]
    return msgspec.structs.replace(result, **{field: chosen})
