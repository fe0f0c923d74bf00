"""Enforcing a lock on one connection, sans-IO: pages of lists in, pages without what the lock
does not approve out; requests using an item checked before they are sent on; results checked
against the locked output schema.

A ``Guard`` does no I/O and keeps no clock: its host (the gateway, a client) feeds it each raw
list result (``filter_result``), asks it about each request (``check_request``) and each result
(``check_result``), and tells it when the server says a list changed (``changed``). An item is
*approved* when the lock holds it under its kind and name with the digest of the definition the
server sends now; anything else is *unapproved* (not in the lock: new, or renamed) or *drifted*
(in the lock, with another definition). With ``mode="block"`` such items are left out of lists
and their use refused with a JSON-RPC error naming the item, the lock and the change; with
``mode="warn"`` they pass, and each is logged."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from .compare import Change, item_changes
from .kinds import Kind, speech
from .lockfile import MAX_ITEMS, Item, Lock, item_of
from .validation import Checker

__all__ = ["Drift", "Filtered", "Guard", "Unverified", "unread"]

log = logging.getLogger("mcpbind.surface")

Mode = Literal["block", "warn"]


@dataclass(frozen=True)
class Drift:
    """An item the lock does not approve: ``reason`` is ``"unapproved"`` (the lock has no item of
    its kind and name) or ``"drifted"`` (its definition's digest differs; ``changes`` say how)."""

    reason: str
    kind: str
    name: str
    lock: str
    changes: tuple[Change, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.kind.replace('_', ' ')} {self.name!r}"

    def describe(self) -> str:
        if self.reason == "unapproved":
            return f"{self.label} is not in the lock {self.lock} (new or renamed: unapproved)"
        what = "; ".join(f"{c.kind} at {c.path or 'the item'}" for c in self.changes[:5])
        more = f" and {len(self.changes) - 5} more" if len(self.changes) > 5 else ""
        return f"{self.label} differs from the lock {self.lock}: {what or 'its digest'}{more}"

    def error(self) -> ProtocolError:
        return ProtocolError(
            INVALID_PARAMS,
            f"{self.describe()}; refused",
            {
                "item": {"kind": self.kind, "name": self.name},
                "lock": self.lock,
                "reason": self.reason,
                "changes": [c.to_dict() for c in self.changes],
            },
        )


class Filtered(NamedTuple):
    """A list result as it goes on (items the lock does not approve left out with ``block``),
    and the drifts its page held."""

    result: Any
    drifts: list[Drift]


class Unverified(NamedTuple):
    """The guard has not seen the item a request uses since the start or since the server said
    its list changed: the host reads ``list_method`` (every page, through ``filter_result``)
    and asks again."""

    kind: str
    list_method: str


class Guard:
    """Enforces ``lock`` on one connection speaking ``revision`` (one Guard per connection).

    ``check_arguments`` also checks a tool call's arguments against the locked input schema
    (jsonschema, in the schema's dialect), refusing bad ones with -32602 and their JSON path.
    Each drift is reported as a line to ``report`` (default: a warning of ``mcpbind.surface``).
    """

    def __init__(
        self,
        lock: Lock,
        revision: str,
        mode: Mode = "block",
        *,
        check_arguments: bool = True,
        max_items: int = MAX_ITEMS,
        report: Callable[[str], None] | None = None,
    ) -> None:
        if mode not in ("block", "warn"):
            raise ValueError(f"mode {mode!r}: 'block' or 'warn'")
        self.lock = lock
        self.sp = speech(revision)
        self.mode = mode
        self.check_arguments = check_arguments
        self.max_items = max_items
        self.report = report  # where each drift's line goes (None: the mcpbind.surface logger)
        # kind -> name -> the item as the server sent it last (since the start or the last change)
        self.live: dict[str, dict[str, Item]] = {}
        self.verified: set[str] = set()  # kinds whose every page was seen since then
        self._checkers: dict[tuple[str, str], Checker] = {}
        self._templates: list[tuple[re.Pattern[str], Item]] | None = None

    @property
    def where(self) -> str:
        return self.lock.where

    # -- lists ---------------------------------------------------------------------------------

    def filter_result(self, method: str, result: Any) -> Filtered:
        """One page of a list result (the raw JSON object): the page to pass on and its drifts.
        Anything but a list method's result is passed on as it is."""
        k = self.sp.by_list.get(method)
        if k is None or not isinstance(result, Mapping):
            return Filtered(result, [])
        page = result.get(k.items_key)
        if not isinstance(page, list):
            return Filtered(result, [])
        live = self.live.setdefault(k.kind, {})
        kept: list[Any] = []
        drifts: list[Drift] = []
        for definition in page:
            if not isinstance(definition, Mapping):
                kept.append(definition)  # not an item: the session's checks answer for it
                continue
            item = item_of(k.kind, definition, self.sp)
            if item.name not in live and len(live) >= self.max_items:
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"the server lists more than {self.max_items} items of kind {k.kind}",
                )
            live[item.name] = item
            drift = self._drift(item)
            if drift is None:
                kept.append(definition)
                continue
            drifts.append(drift)
            self._report(drift, "left out of the list" if self.mode == "block" else "listed")
            if self.mode == "warn":
                kept.append(definition)
        if result.get(k.cursor_key) is None:
            self.verified.add(k.kind)
        if len(kept) == len(page):
            return Filtered(result, drifts)
        return Filtered({**result, k.items_key: kept}, drifts)

    def changed(self, method: str) -> tuple[str, ...]:
        """A notification from the server: when it says a list changed, what was seen of that
        list is forgotten (its items are checked again on the next listing, and a use before it
        is ``Unverified``); returns the list methods to read again (none for any other)."""
        kinds = self.sp.by_changed.get(method, ())
        for k in kinds:
            self.live.pop(k.kind, None)
            self.verified.discard(k.kind)
        return tuple(k.list_method for k in kinds)

    # -- requests ------------------------------------------------------------------------------

    def check_request(self, method: str, params: Any) -> Unverified | None:
        """Before a request is sent on: None when it may go, ``Unverified`` when the host must
        list first; raises ``ProtocolError`` (-32602) when it uses an item the lock does not
        approve (``block``), or a tool with arguments its locked input schema refuses."""
        kinds = self.sp.by_use.get(method)
        if kinds is None or not isinstance(params, Mapping):
            return None
        k = kinds[0]
        target = params.get(k.use_key or "")
        if not isinstance(target, str):
            return None  # the session refuses a request without the name
        locked = self._locked(kinds, target)
        if locked is None:
            self._refuse(Drift("unapproved", k.kind, target, self.where))
            return None
        kind = locked.kind
        seen = self.live.get(kind, {}).get(locked.name)
        if seen is None:
            if kind not in self.verified:
                return Unverified(kind, self.sp.kinds[kind].list_method)
            # listed whole without it: the server no longer offers it, and will say so
        else:
            drifted = self._drift(seen)
            if drifted is not None:
                self._refuse(drifted)
                return None
        if kind == "tool" and self.check_arguments:
            self._check_arguments(locked, params)
        return None

    def _locked(self, kinds: tuple[Kind, ...], target: str) -> Item | None:
        for k in kinds:
            if k.kind == "resource_template":
                found = self._template(target)
            else:
                found = self.lock.get(k.kind, target)
            if found is not None:
                return found
        return None

    def _template(self, uri: str) -> Item | None:
        """The locked resource template whose URI template ``uri`` matches (RFC 6570, read
        leniently: each expression matches any run of characters it may expand to)."""
        if self._templates is None:
            self._templates = [
                (_template_pattern(item.name), item)
                for item in self.lock.items.get("resource_template", {}).values()
            ]
        for pattern, item in self._templates:
            if pattern.fullmatch(uri):
                return item
        return None

    def _check_arguments(self, tool: Item, params: Mapping[str, Any]) -> None:
        key = self.sp.tool_keys.get("input_schema", "")
        schema = tool.definition.get(key)
        if not isinstance(schema, Mapping | bool):
            return
        arguments = params.get(self.sp.call_keys.get("arguments", ""), {})
        where = f"$.params.{self.sp.call_keys.get('arguments', '')}"
        error = self._checker(tool, key, schema).error(arguments, where)
        if error is not None:
            raise ProtocolError(
                INVALID_PARAMS,
                f"{tool.label}: arguments refused by its locked input schema: {error}",
                {"item": {"kind": tool.kind, "name": tool.name}, "lock": self.where},
            )

    def _checker(self, tool: Item, key: str, schema: Mapping[str, Any] | bool) -> Checker:
        found = self._checkers.get((tool.name, key))
        if found is None:
            found = Checker(schema, tool.dialects.get(key, self.sp.dialect))
            self._checkers[(tool.name, key)] = found  # bounded by the lock's tools
        return found

    # -- results -------------------------------------------------------------------------------

    def check_result(self, method: str, params: Any, result: Any) -> None:
        """After a tool call's result (raw JSON) arrives: raises ``ProtocolError`` (-32603) when
        the tool's locked output schema refuses its structured content (a result with
        ``isError`` is not checked), or when a tool with an output schema gave none."""
        kinds = self.sp.by_use.get(method)
        if not kinds or kinds[0].kind != "tool" or not isinstance(params, Mapping):
            return
        if not isinstance(result, Mapping) or result.get(
            self.sp.call_result_keys.get("is_error", "")
        ):
            return
        tool = self.lock.get("tool", str(params.get(kinds[0].use_key or "")))
        key = self.sp.tool_keys.get("output_schema")
        if tool is None or key is None or not isinstance(tool.definition.get(key), Mapping):
            return
        structured_key = self.sp.call_result_keys.get("structured_content", "")
        where = f"$.result.{structured_key}"
        if structured_key not in result:
            error: str | None = f"{where}: missing, and the tool declares an output schema"
        else:
            error = self._checker(tool, key, tool.definition[key]).error(
                result[structured_key], where
            )
        if error is not None:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"{tool.label}: result refused by its locked output schema: {error}",
                {"item": {"kind": "tool", "name": tool.name}, "lock": self.where},
            )

    # -- drift ---------------------------------------------------------------------------------

    def _drift(self, item: Item) -> Drift | None:
        locked = self.lock.get(item.kind, item.name)
        if locked is None:
            return Drift("unapproved", item.kind, item.name, self.where)
        if locked.sha256 == item.sha256 and locked.dialects == item.dialects:
            return None
        return Drift("drifted", item.kind, item.name, self.where, tuple(item_changes(locked, item)))

    def _refuse(self, drift: Drift) -> None:
        """Raise the drift's error (``block``), or log it (``warn``)."""
        if self.mode == "block":
            self._report(drift, "refused")
            raise drift.error()
        self._report(drift, "used")

    def _report(self, drift: Drift, what: str) -> None:
        changes = "; ".join(f"{c.kind} {c.path}" for c in drift.changes) or drift.reason
        line = f"{drift.describe()} ({what}, {self.mode}, revision {self.sp.revision}): {changes}"
        if self.report is not None:
            self.report(line)
        else:
            log.warning("%s", line)


def unread(list_method: str, pages: int) -> ProtocolError:
    """The error refusing a use whose item's list could not be read whole (``Unverified``
    still, after ``pages`` pages): the use cannot be held to the lock."""
    return ProtocolError(
        INTERNAL_ERROR,
        f"the server's {list_method} did not end within {pages} pages: a use of one of its "
        "items cannot be checked against the lock, and is refused",
        {"limit": "max_pages", "max": pages},
    )


_EXPRESSION = re.compile(r"\{([+#./;?&]?)[^}]*\}")


def _template_pattern(template: str) -> re.Pattern[str]:
    out = []
    at = 0
    for m in _EXPRESSION.finditer(template):
        out.append(re.escape(template[at : m.start()]))
        op = m.group(1)
        if op in ("+", "#"):
            out.append(".*")
        elif op in ("?", "&"):
            out.append(r"(?:[?&][^#]*)?")
        else:
            out.append(r"[^/?#]*" if op in ("", ".", ";") else r"(?:/[^?#]*)?")
        at = m.end()
    out.append(re.escape(template[at:]))
    return re.compile("".join(out))
