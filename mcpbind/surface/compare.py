"""The review of a server's surface changes: two surfaces (two locks, or a lock and the live
server) compared item by item, each change with its kind and whether it breaks a caller.

Every difference between two definitions is reported: what the review reads (descriptions,
parameters, output schemas, annotations) gets its own kind; any other key, one the revision
does not define included, is ``field_added``, ``field_removed`` or ``field_changed`` with its
path. So two items whose digests differ always have at least one change."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .kinds import KINDS, speech
from .lockfile import Item, Lock
from .schemas import ANNOTATIONS, Relation, relation, without_annotations

__all__ = ["Change", "Report", "compare", "item_changes"]

# Tool annotations whose flip makes a call riskier, and the value each has when absent (the
# hints' defaults, as every revision's ToolAnnotations describes them).
_RISKY_WHEN = {
    "readOnlyHint": (False, False),  # (value that is riskier, default)
    "destructiveHint": (True, True),
    "idempotentHint": (False, False),
    "openWorldHint": (True, True),
}


@dataclass(frozen=True)
class Change:
    """One change of one item: ``kind`` (docs/surface.md lists them), the item's kind and name,
    the JSON path inside its definition, readable ``before`` and ``after``, whether it breaks a
    caller written against the old surface, and a ``note`` (a description's text diff)."""

    kind: str
    item_kind: str | None
    item: str | None
    path: str
    before: Any
    after: Any
    breaking: bool
    note: str | None = None

    @property
    def label(self) -> str:
        if self.item_kind is None:
            return "the server"
        return f"{self.item_kind.replace('_', ' ')} {self.item!r}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "item": None if self.item_kind is None else {"kind": self.item_kind, "name": self.item},
            "path": self.path,
            "before": self.before,
            "after": self.after,
            "breaking": self.breaking,
            "note": self.note,
        }


@dataclass
class Report:
    """The changes from ``old`` to ``new``."""

    old: Lock
    new: Lock
    changes: list[Change] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        """Whether the new surface differs from the old in anything a lock approves (its items
        and the server's instructions; the server's name and version alone do not count)."""
        return any(c.kind not in _NOT_DRIFT for c in self.changes)

    def of(self, kind: str, name: str) -> list[Change]:
        return [c for c in self.changes if c.item_kind == kind and c.item == name]


_NOT_DRIFT = frozenset({"server_info_changed"})


def compare(old: Lock, new: Lock) -> Report:
    """Every change from surface ``old`` to surface ``new``."""
    report = Report(old, new)
    out = report.changes
    if old.revision != new.revision:
        out.append(
            Change("revision_changed", None, None, "revision", old.revision, new.revision, False)
        )
    if dict(old.server) != dict(new.server):
        out.append(
            Change(
                "server_info_changed",
                None,
                None,
                "server",
                dict(old.server),
                dict(new.server),
                False,
            )
        )
    if old.instructions != new.instructions:
        out.append(
            Change(
                "instructions_changed",
                None,
                None,
                "instructions",
                old.instructions,
                new.instructions,
                False,
                _text_diff(old.instructions, new.instructions),
            )
        )
    for kind in KINDS:
        a, b = old.items.get(kind, {}), new.items.get(kind, {})
        removed = [a[n] for n in sorted(set(a) - set(b))]
        added = [b[n] for n in sorted(set(b) - set(a))]
        renamed = _renames(removed, added, new.revision)
        for before, after in renamed:
            out.append(
                Change(
                    "item_renamed",
                    kind,
                    after.name,
                    "",
                    before.name,
                    after.name,
                    True,
                    "the same definition under a new name: unapproved, and the old name is gone",
                )
            )
        gone = {r.name for r, _ in renamed}
        new_names = {n.name for _, n in renamed}
        for item in removed:
            if item.name not in gone:
                out.append(Change("item_removed", kind, item.name, "", item.name, None, True))
        for item in added:
            if item.name not in new_names:
                out.append(
                    Change("item_added", kind, item.name, "", None, item.name, False, "unapproved")
                )
        for name in sorted(set(a) & set(b)):
            if a[name].sha256 != b[name].sha256 or a[name].dialects != b[name].dialects:
                out.extend(item_changes(a[name], b[name]))
    return report


def _renames(removed: list[Item], added: list[Item], revision: str) -> list[tuple[Item, Item]]:
    """(removed, added) pairs whose definitions are the same apart from the name."""
    if not removed or not added:
        return []
    pairs = []
    taken: set[str] = set()
    for r in removed:
        id_key = speech(revision).kinds[r.kind].id_key if r.kind in speech(revision).kinds else ""
        shape = {k: v for k, v in r.definition.items() if k != id_key}
        for a in added:
            if (
                a.name not in taken
                and {k: v for k, v in a.definition.items() if k != id_key} == shape
            ):
                pairs.append((r, a))
                taken.add(a.name)
                break
    return pairs


# -- one item -------------------------------------------------------------------------------------


def item_changes(old: Item, new: Item) -> list[Change]:
    c = _ItemDiff(old, new)
    c.run()
    return c.changes


class _ItemDiff:
    def __init__(self, old: Item, new: Item) -> None:
        self.old, self.new = old, new
        self.changes: list[Change] = []

    def add(
        self, kind: str, path: str, before: Any, after: Any, breaking: bool, note: str | None = None
    ) -> None:
        self.changes.append(
            Change(kind, self.old.kind, self.old.name, path, before, after, breaking, note)
        )

    def run(self) -> None:
        a, b = self.old.definition, self.new.definition
        read: set[str] = set()
        for key in ("description", "title"):
            read.add(key)
            if a.get(key) != b.get(key):
                note = _text_diff(a.get(key), b.get(key)) if key == "description" else None
                self.add(f"{key}_changed", key, a.get(key), b.get(key), False, note)
        if self.old.kind == "tool":
            read |= {"inputSchema", "outputSchema", "annotations"}
            self.dialects()
            self.input(a.get("inputSchema"), b.get("inputSchema"))
            self.output(a.get("outputSchema"), b.get("outputSchema"))
            self.annotations(a.get("annotations"), b.get("annotations"))
        elif self.old.kind == "prompt":
            read.add("arguments")
            self.arguments(a.get("arguments"), b.get("arguments"))
        for key in sorted((set(a) | set(b)) - read):
            self.fields(key, a.get(key, _ABSENT), b.get(key, _ABSENT))

    def dialects(self) -> None:
        a, b = self.old.dialects, self.new.dialects
        for key in sorted(set(a) & set(b)):
            if a[key] != b[key]:
                self.add("dialect_changed", f"{key}.$schema", a[key], b[key], True)

    # -- parameters ------------------------------------------------------------------------------

    def input(self, a: Any, b: Any) -> None:
        if not isinstance(a, dict) or not isinstance(b, dict):
            if a != b:
                self.add("input_schema_changed", "inputSchema", a, b, True)
            return
        pa, pb = a.get("properties") or {}, b.get("properties") or {}
        ra, rb = set(a.get("required") or ()), set(b.get("required") or ())
        self.parameters("inputSchema.properties", pa, pb, ra, rb, a, b)
        rest_a = {k: v for k, v in a.items() if k not in ("properties", "required")}
        rest_b = {k: v for k, v in b.items() if k not in ("properties", "required")}
        r = relation(rest_a, rest_b)
        if r is not Relation.SAME:
            self.add(
                f"input_schema_{r.value}", "inputSchema", rest_a, rest_b, r is not Relation.WIDENED
            )
        else:
            self.annotation_text("inputSchema", rest_a, rest_b, "input_schema_described")

    def parameters(
        self,
        path: str,
        pa: Mapping[str, Any],
        pb: Mapping[str, Any],
        ra: set[str],
        rb: set[str],
        a: Mapping[str, Any],
        b: Mapping[str, Any],
    ) -> None:
        closed_b = b.get("additionalProperties", True) is False
        for name in sorted(set(pa) | set(pb)):
            where = f"{path}.{name}"
            if name not in pa:
                required = name in rb
                self.add(
                    "parameter_added",
                    where,
                    None,
                    _render(pb[name], required),
                    required,
                    "required: a call without it is refused" if required else None,
                )
                continue
            if name not in pb:
                self.add(
                    "parameter_removed",
                    where,
                    _render(pa[name], name in ra),
                    None,
                    True,
                    (
                        "a call still passing it is refused"
                        if closed_b
                        else "a call still passing it is no longer understood"
                    ),
                )
                continue
            if (name in ra) != (name in rb):
                if name in rb:
                    self.add("parameter_required", where, "optional", "required", True)
                else:
                    self.add("parameter_optional", where, "required", "optional", False)
            r = relation(pa[name], pb[name])
            if r is not Relation.SAME:
                self.add(
                    f"parameter_{r.value}",
                    where,
                    _render(pa[name]),
                    _render(pb[name]),
                    r is not Relation.WIDENED,
                )
            else:
                self.annotation_text(where, pa[name], pb[name], "parameter_described")

    def annotation_text(self, path: str, a: Any, b: Any, kind: str) -> None:
        """The annotations (description, title, ...) of a schema, when only they changed."""
        if not isinstance(a, dict) or not isinstance(b, dict):
            return
        for key in sorted((set(a) | set(b)) & ANNOTATIONS - {"$schema"}):
            if a.get(key) != b.get(key):
                note = _text_diff(a.get(key), b.get(key)) if key == "description" else None
                self.add(kind, f"{path}.{key}", a.get(key), b.get(key), False, note)
        # a nested schema's annotations (a property of a parameter, ...): every other difference
        if without_annotations(a) != without_annotations(b):
            for where, before, after in _paths(
                without_annotations(a), without_annotations(b), path
            ):
                self.add(kind, where, _plain(before), _plain(after), False)

    # -- output ----------------------------------------------------------------------------------

    def output(self, a: Any, b: Any) -> None:
        if a is None and b is None:
            return
        if a is None:
            self.add("output_schema_added", "outputSchema", None, _render(b), False)
            return
        if b is None:
            self.add(
                "output_schema_removed",
                "outputSchema",
                _render(a),
                None,
                True,
                "results no longer promise structured content",
            )
            return
        r = relation(a, b)
        if r is Relation.SAME:
            self.annotation_text("outputSchema", a, b, "output_schema_described")
            return
        # For a caller reading results, fewer possible results break nothing; more do.
        self.add(
            f"output_schema_{r.value}",
            "outputSchema",
            _render(a),
            _render(b),
            r is not Relation.NARROWED,
        )

    # -- annotations -----------------------------------------------------------------------------

    def annotations(self, a: Any, b: Any) -> None:
        a = a if isinstance(a, dict) else {}
        b = b if isinstance(b, dict) else {}
        for key in sorted(set(a) | set(b)):
            if a.get(key) == b.get(key):
                continue
            risky, default = _RISKY_WHEN.get(key, (None, None))
            before, after = a.get(key, default), b.get(key, default)
            breaking = risky is not None and after == risky and before != risky
            self.add(
                "annotation_changed",
                f"annotations.{key}",
                a.get(key),
                b.get(key),
                breaking,
                "the tool now says it is riskier" if breaking else None,
            )

    # -- prompts ---------------------------------------------------------------------------------

    def arguments(self, a: Any, b: Any) -> None:
        by_a = _by_name(a)
        by_b = _by_name(b)
        if by_a is None or by_b is None:
            if a != b:
                self.add("field_changed", "arguments", a, b, True)
            return
        for name in sorted(set(by_a) | set(by_b)):
            where = f"arguments.{name}"
            x, y = by_a.get(name), by_b.get(name)
            if x is None and y is not None:
                required = bool(y.get("required"))
                self.add(
                    "parameter_added", where, None, "required" if required else "optional", required
                )
            elif y is None and x is not None:
                self.add(
                    "parameter_removed",
                    where,
                    "required" if x.get("required") else "optional",
                    None,
                    True,
                )
            elif x is not None and y is not None:
                if bool(x.get("required")) != bool(y.get("required")):
                    if y.get("required"):
                        self.add("parameter_required", where, "optional", "required", True)
                    else:
                        self.add("parameter_optional", where, "required", "optional", False)
                for key in sorted((set(x) | set(y)) - {"name", "required"}):
                    if x.get(key) != y.get(key):
                        note = _text_diff(x.get(key), y.get(key)) if key == "description" else None
                        self.add(
                            "parameter_described",
                            f"{where}.{key}",
                            x.get(key),
                            y.get(key),
                            False,
                            note,
                        )

    # -- anything else ---------------------------------------------------------------------------

    def fields(self, key: str, a: Any, b: Any) -> None:
        for path, before, after in _paths(a, b, key):
            if before is _ABSENT:
                self.add("field_added", path, None, after, False)
            elif after is _ABSENT:
                self.add("field_removed", path, before, None, False)
            else:
                self.add("field_changed", path, before, after, False)


_ABSENT: Any = type("_Absent", (), {"__repr__": lambda self: "<absent>"})()


def _plain(value: Any) -> Any:
    return None if value is _ABSENT else value


def _paths(a: Any, b: Any, path: str) -> Iterator[tuple[str, Any, Any]]:
    """The leaves where two JSON values differ (objects compared key by key)."""
    if a == b and type(a) is type(b):
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            yield from _paths(a.get(key, _ABSENT), b.get(key, _ABSENT), f"{path}.{key}")
        return
    yield path, a, b


def _by_name(arguments: Any) -> dict[str, dict[str, Any]] | None:
    if arguments is None:
        return {}
    if not isinstance(arguments, list) or not all(
        isinstance(x, dict) and isinstance(x.get("name"), str) for x in arguments
    ):
        return None
    return {x["name"]: x for x in arguments}


def _render(schema: Any, required: bool | None = None) -> str:
    """A schema in one line (annotations left out), with ``(required)`` when told."""
    text = json.dumps(without_annotations(schema), sort_keys=True, ensure_ascii=False)
    if len(text) > 200:
        text = text[:197] + "..."
    if required is not None:
        text += " (required)" if required else " (optional)"
    return text


def _text_diff(a: Any, b: Any) -> str | None:
    """A unified diff of two texts, word-wrapped lines kept as they are."""
    if not isinstance(a, str) and not isinstance(b, str):
        return None
    lines = difflib.unified_diff(
        (a or "").splitlines(), (b or "").splitlines(), "before", "after", lineterm="", n=1
    )
    return "\n".join(list(lines)[2:]) or None
