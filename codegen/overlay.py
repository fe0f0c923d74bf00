"""Stage 3, overlay: read ``schema/overlay.toml`` and apply its entries to one revision."""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from .ir import CapabilityCondition, Patch
from .paths import OVERLAY_FILE
from .pin import pins


class OverlayError(Exception):
    """An overlay entry does not fit the schema it is applied to."""


@dataclass(frozen=True)
class Overlay:
    patches: tuple[Patch, ...]
    open_fields: frozenset[str]
    open_type_suffixes: tuple[str, ...]
    results: dict[str, str]  # method -> result type name
    capabilities: dict[str, tuple[str, str]]  # method -> (side, dotted path)
    conditions: dict[str, tuple[CapabilityCondition, ...]] = field(default_factory=dict)
    # method -> the capabilities it needs only when its params say so
    keywords: dict[str, str] = field(default_factory=dict)
    # schema keyword the generator does not implement -> how to treat it ("ignore")


def in_range(revision: str, since: str | None, until: str | None) -> bool:
    """Whether ``revision`` is in ``since``..``until`` (inclusive; None: open) in pin order."""
    order = [p.revision for p in pins()]
    for bound in (since, until):
        if bound is not None and bound not in order:
            raise OverlayError(f"overlay entry names unknown revision {bound!r}")
    at = order.index(revision)
    lo = order.index(since) if since else 0
    hi = order.index(until) if until else len(order) - 1
    return lo <= at <= hi


def _applies(entry: dict[str, Any], revision: str) -> bool:
    return in_range(revision, entry.get("since"), entry.get("until"))


@cache
def _raw() -> dict[str, Any]:
    return tomllib.loads(OVERLAY_FILE.read_text(encoding="utf-8"))


def overlay(revision: str) -> Overlay:
    """The overlay entries that apply to ``revision``."""
    raw = _raw()

    def entries(kind: str) -> list[dict[str, Any]]:
        return [e for e in raw.get(kind, []) if _applies(e, revision)]

    return Overlay(
        patches=tuple(
            Patch(pointer=e["pointer"], expect=e["expect"], value=e["value"], reason=e["reason"])
            for e in entries("patch")
        ),
        open_fields=frozenset(e["field"] for e in entries("open") if "field" in e),
        open_type_suffixes=tuple(e["type_suffix"] for e in entries("open") if "type_suffix" in e),
        results={e["method"]: e["result"] for e in entries("result")},
        capabilities={
            e["method"]: (e["side"], e["path"]) for e in entries("capability") if "when" not in e
        },
        conditions={
            method: tuple(
                CapabilityCondition(when=e["when"], equals=e.get("equals"), side=e["side"], path=e["path"])
                for e in entries("capability")
                if e["method"] == method and "when" in e
            )
            for method in sorted({e["method"] for e in entries("capability") if "when" in e})
        },
        keywords={e["keyword"]: _treatment(e) for e in entries("keyword")},
    )


def _treatment(entry: dict[str, Any]) -> str:
    """How a ``[[keyword]]`` entry treats its keyword: only ``ignore`` (the bindings accept
    what the keyword would reject), and only with a reason."""
    if entry.get("treat") != "ignore" or not entry.get("reason"):
        raise OverlayError(f"[[keyword]] {entry.get('keyword')!r}: needs treat = \"ignore\" and a reason")
    return "ignore"


def _split(pointer: str) -> list[str]:
    if not pointer.startswith("/"):
        raise OverlayError(f"JSON pointer {pointer!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def apply_patches(schema: dict[str, Any], patches: tuple[Patch, ...], revision: str) -> dict[str, Any]:
    """A copy of ``schema`` with every patch applied; each must find the value it expects."""
    patched = copy.deepcopy(schema)
    for patch in patches:
        *parents, last = _split(patch.pointer)
        node: Any = patched
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.get(part)
            if node is None:
                raise OverlayError(f"{revision}: overlay patch {patch.pointer}: path not found upstream")
        key: Any = int(last) if isinstance(node, list) else last
        current = node[key] if isinstance(node, list) or key in node else "<absent>"
        if current != patch.expect:
            raise OverlayError(
                f"{revision}: overlay patch {patch.pointer} expects upstream value "
                f"{patch.expect!r} but found {current!r}; upstream changed, review the patch"
            )
        node[key] = copy.deepcopy(patch.value)
    return patched


# -- projection entries ---------------------------------------------------------------------


@dataclass(frozen=True)
class Migration:
    type: str
    path: tuple[str, ...]
    since: str
    until: str
    moved_to: tuple[str, ...]
    moved_since: str
    reason: str

    def location(self, revision: str) -> tuple[str, ...] | None:
        if in_range(revision, self.since, self.until):
            return self.path
        if in_range(revision, self.moved_since, None):
            return self.moved_to
        return None


@dataclass(frozen=True)
class Default:
    type: str | None
    field: str
    value: Any
    since: str | None
    until: str | None
    reason: str


def migrations() -> list[Migration]:
    """The ``[[migration]]`` entries: values that live in different places in different revisions."""
    out = []
    for e in _raw().get("migration", []):
        m = Migration(
            e["type"], tuple(e["path"]), e["since"], e["until"], tuple(e["moved_to"]), e["moved_since"], e["reason"]
        )
        for loc in (m.path, m.moved_to):
            if not 1 <= len(loc) <= 2:
                raise OverlayError(f"migration of {m.type}: a location is a field or a field and a map key")
        out.append(m)
    return out


def defaults() -> list[Default]:
    """The ``[[default]]`` entries: values projection fills in for a required field."""
    return [
        Default(e.get("type"), e["field"], e["value"], e.get("since"), e.get("until"), e["reason"])
        for e in _raw().get("default", [])
    ]
