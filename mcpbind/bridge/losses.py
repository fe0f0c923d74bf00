"""Carrying a value into a revision that cannot hold all of it, by the overlay's ``[[loss]]``
rules (``FACTS.losses`` of the target revision), and saying what was lost and where.

Projection (``mcpbind.project``) strips fields the target lacks without a word; a bridge must
say so. ``Carrier(source, target).carry(obj)`` walks only the parts of ``obj`` whose types can
lose something on the way (worked out once per class from the two revisions' generated types),
applies the ``replace`` rules, and lists every loss with its JSON path; ``convey`` then projects.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import msgspec.inspect as mi
from msgspec import UNSET

from .._support import Loss, OpenObject, Untagged, convert, member_classes
from ..packages import bindings
from ..projection import ProjectionError, project, project_lossy, revision_of

__all__ = ["Carrier", "Lost", "carrier"]

# What happens to a loss no [[loss]] entry names: projection's lossy mode leaves it out.
_DEFAULT = Loss(
    rule="drop", reason="no [[loss]] entry names it: left out, as projection's lossy mode does"
)


class Lost(msgspec.Struct, frozen=True, gc=False):
    """One value that did not reach the target revision as it was, at ``path``."""

    at: Any  # where: a JSON path, or a (parent, key) pair of the walk (``path`` renders it)
    type: str  # schema name of the object holding it ("" when projection dropped it)
    field: str  # its wire key, or "" for the object itself
    rule: str  # "drop" or "replace"
    reason: str

    @property
    def path(self) -> str:
        """The JSON path inside the carried object (rendered when asked: a list of 100 tools
        may lose the same field 100 times, and the log shows three of the paths)."""
        return _render(self.at)

    def describe(self) -> str:
        what = f"{self.type}.{self.field}" if self.field else self.type or "value"
        done = "replaced" if self.rule == "replace" else "dropped"
        return f"{self.path}: {what} {done} ({self.reason})"


class _CarryPlan(msgspec.Struct, gc=False):
    name: str
    member: Loss | None  # the target has no such type and a rule replaces it
    lacking: tuple[tuple[str, str, Loss], ...]  # (attribute, wire key, rule) the target lacks
    descend: tuple[tuple[str, str], ...]  # (attribute, wire key) whose values can lose something
    # With nothing to descend into nor replace: the attributes of ``lacking``, all unset in the
    # common value, which then loses nothing (checked without the walk); else None.
    flat: tuple[str, ...] | None = None


def _key_path(at: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{at}[{key}]"
    return f"{at}.{key}" if key.isidentifier() else f"{at}[{msgspec.json.encode(key).decode()}]"


def _render(at: Any) -> str:
    """The JSON path of ``at``: a root path, or a (parent, key) pair. The walk passes pairs and
    renders one only when it records a loss (most walks record none)."""
    if type(at) is str:
        return at
    parent, key = at
    return _key_path(_render(parent), key)


_REACH: dict[type, frozenset[type]] = {}  # class -> Struct classes its fields can hold
_REACH_LOCK = threading.Lock()


def _types_in(t: Any, out: set[type], todo: list[type]) -> None:
    """Collect the Struct classes a ``msgspec.inspect`` type can hold (not descending into
    Structs: they are queued in ``todo``)."""
    if isinstance(t, mi.StructType):
        if t.cls not in out:
            out.add(t.cls)
            todo.append(t.cls)
    elif isinstance(t, mi.CustomType):
        if issubclass(t.cls, Untagged):
            for member in member_classes(t.cls):
                if issubclass(member, msgspec.Struct) and member not in out:
                    out.add(member)
                    todo.append(member)
        # an open object keeps every key: nothing in it is lost
    elif isinstance(t, mi.UnionType):
        for u in t.types:
            _types_in(u, out, todo)
    elif isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
        _types_in(t.item_type, out, todo)
    elif isinstance(t, mi.DictType):
        _types_in(t.value_type, out, todo)
    elif isinstance(t, mi.TupleType):
        for u in t.item_types:
            _types_in(u, out, todo)
    elif isinstance(t, mi.Metadata):
        _types_in(t.type, out, todo)


def _field_types(cls: type) -> list[tuple[str, str, Any]]:
    info: Any = mi.type_info(cls)
    return [(f.name, f.encode_name, f.type) for f in info.fields]


def _reach(cls: type) -> frozenset[type]:
    """Every Struct class reachable from the fields of ``cls`` (itself included)."""
    found = _REACH.get(cls)
    if found is None:
        out: set[type] = {cls}
        todo = [cls]
        while todo:
            for _, _, t in _field_types(todo.pop()):
                _types_in(t, out, todo)
        with _REACH_LOCK:
            found = _REACH.setdefault(cls, frozenset(out))
    return found


class Carrier:
    """Values of revision ``source`` into revision ``target``, with their losses."""

    def __init__(self, source: str, target: str) -> None:
        self.source = source
        self.target = target
        src, tgt = bindings(source), bindings(target)
        self._defs = src.DEFINITIONS
        self._names: dict[Any, str] = {}
        for name, cls in src.DEFINITIONS.items():
            if isinstance(cls, type):
                self._names.setdefault(cls, name)
        self._target_defs = tgt.DEFINITIONS
        self._rules: Any = tgt.FACTS.losses
        self._target_kinds = tgt.FACTS.result_kinds
        kinds = src.FACTS.result_kinds
        # A result discriminator at the value meaning "the method's own result" says nothing a
        # revision without it does not already mean.
        self._implied = {kinds.key: kinds.own} if kinds is not None else {}
        self._plans: dict[type, _CarryPlan | None] = {}
        self._here: dict[type, bool] = {}
        self._lock = threading.Lock()

    # -- plans, once per class --------------------------------------------------------------

    def _rule(self, name: str, key: str) -> Loss:
        rules = self._rules
        return rules.get((name, key)) or rules.get((name, "*")) or rules.get(("*", key)) or _DEFAULT

    def _lacking(self, cls: type) -> tuple[str, Loss | None, tuple[tuple[str, str, Loss], ...]]:
        name = self._names.get(cls, "")
        if not name:
            return name, None, ()
        target = self._target_defs.get(name)
        if target is None:
            rule = self._rule(name, "")
            return name, (rule if rule.rule == "replace" else None), ()
        if not (isinstance(target, type) and issubclass(target, msgspec.Struct)):
            return name, None, ()  # a bare map keeps the object's presence (docs/bridge.md)
        keys = {f.encode_name for f in msgspec.structs.fields(target)}
        lacking = tuple(
            (f.name, f.encode_name, rule)
            for f in msgspec.structs.fields(cls)
            if f.encode_name not in keys
            and (rule := self._rule(name, f.encode_name)).rule != "moved"  # projection moves it
        )
        return name, None, lacking

    def _loses_here(self, cls: type) -> bool:
        found = self._here.get(cls)
        if found is None:
            _, member, lacking = self._lacking(cls)
            found = self._here[cls] = member is not None or bool(lacking)
        return found

    def plan(self, cls: type) -> _CarryPlan | None:
        if cls in self._plans:
            return self._plans[cls]
        with self._lock:
            name, member, lacking = self._lacking(cls)
            descend = []
            if member is None:
                for attr, wire, t in _field_types(cls):
                    held: set[type] = set()
                    todo: list[type] = []
                    _types_in(t, held, todo)
                    reach: set[type] = set()
                    for c in held:
                        reach |= _reach(c)
                    if any(self._loses_here(c) for c in reach):
                        descend.append((attr, wire))
            flat = tuple(a for a, _, _ in lacking) if member is None and not descend else None
            plan = (
                _CarryPlan(name, member, lacking, tuple(descend), flat)
                if member is not None or lacking or descend
                else None
            )
            self._plans[cls] = plan
        return plan

    # -- carrying ---------------------------------------------------------------------------

    def carry(self, obj: Any, at: str = "$") -> tuple[Any, list[Lost]]:
        """``obj`` with the ``replace`` rules applied (still of the source revision), and every
        loss carrying it to the target will cause, with its JSON path."""
        lost: list[Lost] = []
        return self._walk(obj, at, lost), lost

    def convey(self, obj: Any) -> tuple[Any, list[Lost]]:
        """``obj`` projected to the target revision after ``carry``; what projection itself
        still had to leave out is listed too (rule "drop")."""
        t = type(obj)
        plan = self._plans[t] if t in self._plans else self.plan(t)
        lost: list[Lost] = []
        if plan is not None:  # else nothing in it can be lost (known by its class)
            flat = plan.flat
            if flat is None:
                obj = self._walk(obj, "$", lost)
            else:  # only fields the target lacks: lost only where set
                for attr in flat:
                    if getattr(obj, attr) is not UNSET:
                        obj = self._walk(obj, "$", lost)
                        break
        try:
            return project(obj, self.target), lost
        except ProjectionError as exc:
            filled = self._filled(obj, exc)
            if filled is not None:
                return filled, lost
            value, dropped = project_lossy(obj, self.target)
            lost += [Lost(path, "", "", "drop", _DEFAULT.reason) for path in dropped]
            return value, lost

    def _filled(self, obj: Any, exc: ProjectionError) -> Any:
        """``obj`` in the target with the ``fill`` values of the fields the target requires and
        its revision lacks (2026-07-28's cache hints), or None when no rule fills the field
        projection failed at."""
        name = self._names.get(type(obj), "")
        target = self._target_defs.get(name)
        if not (isinstance(target, type) and issubclass(target, msgspec.Struct)):
            return None
        data = msgspec.to_builtins(obj)
        fills = {}
        for f in msgspec.structs.fields(target):
            rule = self._rule(name, f.encode_name)
            if f.required and f.encode_name not in data and rule.rule == "fill":
                fills[f.encode_name] = rule.template["value"]
        if not fills or exc.path.lstrip("$.") not in fills:
            return None
        data.update(fills)
        kinds = self._target_kinds
        if kinds is not None and kinds.key in {
            f.encode_name for f in msgspec.structs.fields(target)
        }:
            data.setdefault(kinds.key, kinds.own)  # what an absent discriminator means
        try:
            return convert(data, target)
        except msgspec.ValidationError:
            return None

    def _walk(self, v: Any, at: Any, lost: list[Lost]) -> Any:
        t = type(v)
        if t is list:
            return self._items(v, enumerate(v), at, lost)
        if t is dict:
            return self._items(v, v.items(), at, lost)
        if not isinstance(v, msgspec.Struct) or isinstance(v, OpenObject):
            return v
        plan = self._plans[t] if t in self._plans else self.plan(t)
        if plan is None:
            return v
        if plan.member is not None:
            return self._replace(v, plan, at, lost)
        for attr, wire, rule in plan.lacking:
            value = getattr(v, attr)
            if value is not UNSET and self._implied.get(wire, UNSET) != value:
                lost.append(Lost((at, wire), plan.name, wire, rule.rule, rule.reason))
        changes = {}
        for attr, wire in plan.descend:
            value = getattr(v, attr)
            if value is UNSET or value is None:
                continue
            new = self._walk(value, (at, wire), lost)
            if new is not value:
                changes[attr] = new
        return msgspec.structs.replace(v, **changes) if changes else v

    def _items(self, v: Any, items: Iterable[tuple[Any, Any]], at: Any, lost: list[Lost]) -> Any:
        out = None
        for k, x in items:
            if isinstance(x, (msgspec.Struct, list)):
                y = self._walk(x, (at, k), lost)
                if y is not x:
                    if out is None:
                        out = list(v) if type(v) is list else dict(v)
                    out[k] = y
        return v if out is None else out

    def _replace(self, v: Any, plan: _CarryPlan, at: Any, lost: list[Lost]) -> Any:
        rule = plan.member
        assert rule is not None and rule.into is not None
        values = _Values(msgspec.to_builtins(v), self.target)
        data = _fill(rule.template, values)
        into = self._defs.get(rule.into)
        try:
            new = convert(data, into)
        except msgspec.ValidationError:
            return v  # the rule's template does not fit here: projection drops the value
        lost.append(Lost(at, plan.name, "", "replace", rule.reason))
        return new


class _Values(dict[str, Any]):
    """Template values: the object's wire keys, ``target``; a missing key reads as ""."""

    def __init__(self, data: Any, target: str) -> None:
        super().__init__(data if isinstance(data, dict) else {})
        self["target"] = target

    def __missing__(self, key: str) -> str:
        return ""


def _fill(template: Any, values: _Values) -> Any:
    if isinstance(template, str):
        return template.format_map(values)
    if isinstance(template, dict):
        return {k: _fill(x, values) for k, x in template.items()}
    if isinstance(template, (list, tuple)):
        return [_fill(x, values) for x in template]
    return template


_CARRIERS: dict[tuple[str, str], Carrier] = {}  # one per ordered pair of revisions at most
_CARRIERS_LOCK = threading.Lock()


def carrier(source: str, target: str) -> Carrier:
    """The shared carrier of an ordered pair of revisions."""
    found = _CARRIERS.get((source, target))
    if found is None:
        with _CARRIERS_LOCK:
            found = _CARRIERS.setdefault((source, target), Carrier(source, target))
    return found


def convey(obj: Any, target: str) -> tuple[Any, list[Lost]]:
    """``obj`` (a generated value of any revision) into ``target``, with what was lost."""
    route = _ROUTES.get((type(obj), target))
    if route is None:
        route = _route(obj, target)
    found: tuple[Any, list[Lost]] = route(obj)
    return found


def conveyor(obj: Any, target: str) -> Callable[[Any], tuple[Any, list[Lost]]]:
    """What ``convey(value, target)`` does for every value of ``obj``'s class, as one callable
    (for a caller that keeps it: the same class comes again and again)."""
    route = _ROUTES.get((type(obj), target))
    if route is None:
        route = _route(obj, target)
    found: Callable[[Any], tuple[Any, list[Lost]]] = route
    return found


def _same(obj: Any) -> tuple[Any, list[Lost]]:
    return obj, []


def _route(obj: Any, target: str) -> Any:
    """How values of ``obj``'s class go into ``target`` (worked out once per class and target):
    as they are (the same revision); straight to projection when its class can lose nothing,
    or only fields the target lacks and the value has none of them set; else through the
    carrier's walk."""
    cls = type(obj)
    source = _REVISION.get(cls)
    if source is None:
        source = _REVISION.setdefault(cls, revision_of(obj))
    if source == target:
        route = _same
    else:
        found = _CARRIERS.get((source, target)) or carrier(source, target)
        plan = found.plan(cls)
        flat = () if plan is None else plan.flat
        route = found.convey if flat is None else _quick(found, flat, target)
    return _ROUTES.setdefault((cls, target), route)


def _quick(found: Carrier, flat: tuple[str, ...], target: str) -> Any:
    slow = found.convey

    def quick(obj: Any) -> tuple[Any, list[Lost]]:
        for attr in flat:
            if getattr(obj, attr) is not UNSET:
                return slow(obj)
        try:
            return project(obj, target), []
        except ProjectionError:  # the carrier knows what to do (and says it)
            return slow(obj)

    return quick


_REVISION: dict[type, str] = {}  # generated class -> its revision (bounded by the classes)
_ROUTES: dict[tuple[type, str], Any] = {}  # (class, target) -> how it goes (bounded likewise)
