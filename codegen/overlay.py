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


def _applies(entry: dict[str, Any], revision: str) -> bool:
    order = [p.revision for p in pins()]
    for key in ("since", "until"):
        if key in entry and entry[key] not in order:
            raise OverlayError(f"overlay entry {entry!r}: {key} names unknown revision {entry[key]!r}")
    at = order.index(revision)
    since = order.index(entry["since"]) if "since" in entry else 0
    until = order.index(entry["until"]) if "until" in entry else len(order) - 1
    return since <= at <= until


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
    )


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
