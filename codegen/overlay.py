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
    inherits: tuple[Inherit, ...] = ()
    lifecycle: dict[str, str] = field(default_factory=dict)  # role -> method, where it exists
    features: dict[str, str] = field(default_factory=dict)  # role -> method, of the features
    tool_argument_errors: str | None = None  # "protocol" or "result"
    versions: tuple[str, ...] = ()  # protocol version strings the revision's messages carry
    result_kinds: tuple[ResultKind, ...] = ()
    task_results: tuple[TaskResult, ...] = ()
    keywords: dict[str, str] = field(default_factory=dict)
    # schema keyword the generator does not implement -> how to treat it ("ignore")
    round_trips: tuple[tuple[str, str], ...] = ()
    # multi-round-trip requests: (the result asking for input, its field of input requests)


@dataclass(frozen=True)
class Inherit:
    """A property of a base definition that the JSON rendering dropped from the definitions
    extending it (the TypeScript ``extends`` is flattened): restored where it is missing."""

    source: str  # JSON pointer to the property's schema
    members: tuple[str, ...]  # unions whose members extend the base
    property: str  # the property's key inside each member's ``params``
    reason: str


@dataclass(frozen=True)
class ResultKind:
    """A value of a result's discriminator field and the definition it selects (None: the
    method's own result)."""

    field: str  # wire key of the discriminator
    value: str | None  # None: the value meaning "the method's own result" when the key is absent
    definition: str | None  # None: the method's own result class
    reason: str


@dataclass(frozen=True)
class TaskResult:
    """Results that depend on the params: a request carrying ``when`` in its params is answered
    by ``result``; ``method`` answers with the result of the request that created the task."""

    when: str  # params key that makes a request task-augmented
    result: str  # the definition that answers it
    task_id: tuple[str, ...]  # path to the task id in that result
    payload_method: str  # the method whose result is the original request's result
    payload_task_id: str  # params key holding the task id of ``payload_method``
    reason: str


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
                CapabilityCondition(
                    when=e["when"], equals=e.get("equals"), side=e["side"], path=e["path"]
                )
                for e in entries("capability")
                if e["method"] == method and "when" in e
            )
            for method in sorted({e["method"] for e in entries("capability") if "when" in e})
        },
        inherits=tuple(
            Inherit(e["source"], tuple(e["members"]), e["property"], e["reason"])
            for e in entries("inherit")
        ),
        lifecycle={role: e["method"] for e in entries("lifecycle") for role in [e["role"]]},
        features={e["role"]: e["method"] for e in entries("feature")},
        tool_argument_errors=_tool_argument_errors(entries("tool_argument_errors"), revision),
        versions=tuple(
            v
            for e in entries("versions")
            if e.get("revision", revision) == revision
            for v in e["carries"]
        ),
        result_kinds=tuple(
            ResultKind(e["field"], e.get("value"), e.get("definition"), e["reason"])
            for e in entries("result_kind")
        ),
        task_results=tuple(
            TaskResult(
                e["when"],
                e["result"],
                tuple(e["task_id"]),
                e["payload_method"],
                e["payload_task_id"],
                e["reason"],
            )
            for e in entries("task_result")
        ),
        keywords={e["keyword"]: _treatment(e) for e in entries("keyword")},
        round_trips=tuple((e["result"], e["input_requests"]) for e in entries("round_trip")),
    )


def _tool_argument_errors(found: list[dict[str, Any]], revision: str) -> str | None:
    """The one ``[[tool_argument_errors]]`` answer of a revision (None when no entry covers it)."""
    if len(found) > 1:
        raise OverlayError(f"{revision}: more than one [[tool_argument_errors]] entry applies")
    if not found:
        return None
    answer = found[0].get("answer")
    if answer not in ("protocol", "result") or not found[0].get("reason"):
        raise OverlayError(
            f'{revision}: [[tool_argument_errors]] answer must be "protocol" or "result", '
            "with a reason"
        )
    return str(answer)


def _treatment(entry: dict[str, Any]) -> str:
    """How a ``[[keyword]]`` entry treats its keyword: only ``ignore`` (the bindings accept
    what the keyword would reject), and only with a reason."""
    if entry.get("treat") != "ignore" or not entry.get("reason"):
        raise OverlayError(
            f"[[keyword]] {entry.get('keyword')!r}: needs treat = \"ignore\" and a reason"
        )
    return "ignore"


def _split(pointer: str) -> list[str]:
    if not pointer.startswith("/"):
        raise OverlayError(f"JSON pointer {pointer!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def apply_patches(
    schema: dict[str, Any], patches: tuple[Patch, ...], revision: str
) -> dict[str, Any]:
    """A copy of ``schema`` with every patch applied; each must find the value it expects."""
    patched = copy.deepcopy(schema)
    for patch in patches:
        *parents, last = _split(patch.pointer)
        node: Any = patched
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.get(part)
            if node is None:
                raise OverlayError(
                    f"{revision}: overlay patch {patch.pointer}: path not found upstream"
                )
        key: Any = int(last) if isinstance(node, list) else last
        current = node[key] if isinstance(node, list) or key in node else "<absent>"
        if current != patch.expect:
            raise OverlayError(
                f"{revision}: overlay patch {patch.pointer} expects upstream value "
                f"{patch.expect!r} but found {current!r}; upstream changed, review the patch"
            )
        node[key] = copy.deepcopy(patch.value)
    return patched


def _resolve(schema: dict[str, Any], node: Any) -> Any:
    """``node`` with its ``$ref`` chain followed (local refs only)."""
    while isinstance(node, dict) and "$ref" in node:
        node = _at(schema, node["$ref"].lstrip("#"))
    return node


def _at(schema: dict[str, Any], pointer: str) -> Any:
    node: Any = schema
    for part in _split(pointer):
        node = node[int(part)] if isinstance(node, list) else node.get(part)
        if node is None:
            raise OverlayError(f"JSON pointer {pointer!r} not found")
    return node


def apply_inherits(
    schema: dict[str, Any], inherits: tuple[Inherit, ...], revision: str
) -> dict[str, Any]:
    """``schema`` (changed in place) with each inherited property restored where it is missing."""
    defs = schema.get("$defs") or schema.get("definitions") or {}
    for inherit in inherits:
        try:
            source = _at(schema, inherit.source)
        except OverlayError as exc:
            raise OverlayError(f"{revision}: overlay inherit: {exc}") from None
        for union in inherit.members:
            if union not in defs:
                raise OverlayError(
                    f"{revision}: overlay inherit names {union!r}, which the schema lacks"
                )
            for member in defs[union].get("anyOf", []):
                params = _resolve(
                    schema, _resolve(schema, member).get("properties", {}).get("params")
                )
                _inherit_into(schema, params, inherit.property, source)
    return schema


def _inherit_into(schema: dict[str, Any], params: Any, key: str, source: Any) -> None:
    """Give the object schema ``params`` (each member, for a union) the property ``key``."""
    if not isinstance(params, dict):
        return
    members = params.get("anyOf") or params.get("oneOf")
    if members is not None:
        for member in members:
            _inherit_into(schema, _resolve(schema, member), key, source)
        return
    properties = params.setdefault("properties", {})
    if key not in properties:
        properties[key] = copy.deepcopy(source)


def apply(schema: dict[str, Any], ov: Overlay, revision: str) -> dict[str, Any]:
    """A copy of ``schema`` with the overlay's defect fixes and inherited properties applied."""
    return apply_inherits(apply_patches(schema, ov.patches, revision), ov.inherits, revision)


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
            e["type"],
            tuple(e["path"]),
            e["since"],
            e["until"],
            tuple(e["moved_to"]),
            e["moved_since"],
            e["reason"],
        )
        for loc in (m.path, m.moved_to):
            if not 1 <= len(loc) <= 2:
                raise OverlayError(
                    f"migration of {m.type}: a location is a field or a field and a map key"
                )
        out.append(m)
    return out


def defaults() -> list[Default]:
    """The ``[[default]]`` entries: values projection fills in for a required field."""
    return [
        Default(e.get("type"), e["field"], e["value"], e.get("since"), e.get("until"), e["reason"])
        for e in _raw().get("default", [])
    ]
