"""Projection between revisions: ``project(obj, to=R)`` and its lossy variant.

The work is done by generated code, one module per ordered pair of revisions
(``mcpbind._projection.<source>__<target>``): straight-line functions, one per type the two
revisions share, built from the two IRs and the ``[[migration]]`` / ``[[default]]`` entries of
``schema/overlay.toml``. This module finds the right function and carries the context those
functions report failures through. See docs/design.md, "Projection".
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache
from itertools import chain
from types import ModuleType
from typing import Any, TypeVar, get_args, get_origin

import msgspec
from msgspec import UNSET

from ._revisions import PACKAGES, REVISIONS
from ._support import dec_hook, join_path

__all__ = ["Ctx", "ProjectionError", "fits", "project", "project_lossy", "revision_of"]

T = TypeVar("T")

_REVISION_OF_PACKAGE = {package: revision for revision, package in PACKAGES.items()}


class ProjectionError(ValueError):
    """No faithful projection exists: a type, union member or value the target cannot hold,
    or a field the target requires that the source cannot supply.

    ``type`` names the type (schema name), ``path`` the JSON path of the value inside the
    projected object (``$`` for the object itself), ``source`` and ``target`` the revisions.
    """

    def __init__(self, type: str, path: str, source: str, target: str, reason: str) -> None:
        self.type = type
        self.path = path
        self.source = source
        self.target = target
        self.reason = reason
        super().__init__(f"cannot project {type} at {path} from {source} to {target}: {reason}")

    def within(self, key: str | int) -> ProjectionError:
        """The same failure, one level further from the projected object (at ``key``)."""
        return ProjectionError(
            self.type,
            "$" + render_path([key])[1:] + self.path[1:],
            self.source,
            self.target,
            self.reason,
        )


def render_path(at: list[str | int]) -> str:
    out = "$"
    for part in at:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += "." + part
        else:
            out += "[" + msgspec.json.encode(part).decode() + "]"
    return out


class Ctx:
    """What generated projection functions carry: the revisions, and how to report a failure.

    This is the faithful mode: nothing is tracked while values project, and a failure's JSON
    path is built on its way out, each level adding its key (try/except costs nothing when
    nothing fails). ``_LossyCtx`` tracks where it is, so that it can drop the failing value and
    record its path.
    """

    __slots__ = ("at", "dropped", "source", "target")
    lossy = False

    def __init__(self, source: str, target: str) -> None:
        self.source = source
        self.target = target
        self.at: list[str | int] = []
        self.dropped: list[str] = []

    def fail(self, type: str, reason: str, key: str | int | None = None) -> Any:
        at = self.at if key is None else [*self.at, key]
        raise ProjectionError(type, render_path(at), self.source, self.target, reason)

    def member(self, v: Any, site: str) -> Any:
        """``v`` is a union member the target has no counterpart for."""
        name = type(v).__name__.rstrip("_")
        return self.fail(name, f"{name} is not a member of {site} in {self.target}")

    def req(self, v: Any, f: Callable[[Any, Ctx], Any], key: str) -> Any:
        """Project the value of a field the target requires (it cannot be dropped)."""
        try:
            return f(v, self)
        except ProjectionError as exc:
            raise exc.within(key) from None

    # Project the value of an optional field: in this mode it fails as a required one does (the
    # lossy mode drops it instead).
    opt = req

    def items(self, vs: list[Any], f: Callable[[Any, Ctx], Any]) -> list[Any]:
        """Project list items."""
        i = 0
        try:
            out = []
            for i, v in enumerate(vs):  # noqa: B007 - i names the failing item
                out.append(f(v, self))
            return out
        except ProjectionError as exc:
            raise exc.within(i) from None

    def values(self, vs: dict[str, Any], f: Callable[[Any, Ctx], Any]) -> dict[str, Any]:
        """Project map values."""
        k = ""
        try:
            out = {}
            for k, v in vs.items():  # noqa: B007 - k names the failing value
                out[k] = f(v, self)
            return out
        except ProjectionError as exc:
            raise exc.within(k) from None

    def convert(self, v: Any, tp: Any, type: str) -> Any:
        """Validate a JSON value the source leaves open into the target's type ``tp``."""
        return self.check(msgspec.to_builtins(v), tp, type)

    def check(self, v: Any, tp: Any, type: str) -> Any:
        """Validate a plain JSON value the source leaves open into the target's type ``tp``."""
        fits = _plain_check(tp)
        if fits is not None and fits(v):
            return v  # already of that shape: plain JSON is shared, not copied
        try:
            return msgspec.convert(v, tp, dec_hook=dec_hook)
        except msgspec.ValidationError as exc:
            return self.fail(type, f"the value does not fit {self.target}: {join_path(str(exc))}")


class _LossyCtx(Ctx):
    """The lossy mode: tracks where it is, drops what fails at the nearest optional field, list
    item or map value, and records the JSON paths it dropped."""

    __slots__ = ()
    lossy = True

    def req(self, v: Any, f: Callable[[Any, Ctx], Any], key: str) -> Any:
        at = self.at
        at.append(key)
        r = f(v, self)
        at.pop()
        return r

    def _drop(self, n: int) -> None:
        del self.at[n + 1 :]
        self.dropped.append(render_path(self.at))
        del self.at[n:]

    def opt(self, v: Any, f: Callable[[Any, Ctx], Any], key: str) -> Any:
        at = self.at
        n = len(at)
        at.append(key)
        try:
            r = f(v, self)
        except ProjectionError:
            self._drop(n)
            return UNSET
        at.pop()
        return r

    def items(self, vs: list[Any], f: Callable[[Any, Ctx], Any]) -> list[Any]:
        at = self.at
        n = len(at)
        out = []
        for i, v in enumerate(vs):
            at.append(i)
            try:
                out.append(f(v, self))
            except ProjectionError:
                self._drop(n)
                continue
            del at[n:]
        return out

    def values(self, vs: dict[str, Any], f: Callable[[Any, Ctx], Any]) -> dict[str, Any]:
        at = self.at
        n = len(at)
        out = {}
        for k, v in vs.items():
            at.append(k)
            try:
                out[k] = f(v, self)
            except ProjectionError:
                self._drop(n)
                continue
            del at[n:]
        return out


_EXACT = (str, bool, int)  # JSON leaves whose Python type is exactly one class
_STR = frozenset({str})
_DICT = frozenset({dict})


@cache
def _plain_check(tp: Any) -> Callable[[Any], bool] | None:
    """A fast exact test for ``tp`` when it is a plain JSON container (``list[str]``,
    ``dict[str, dict[str, Any]]``, ...); None for anything msgspec must judge. Type sets and
    ``map`` keep the loops in C."""
    if tp is Any:
        return lambda x: True
    if tp in _EXACT:
        return lambda x: type(x) is tp
    origin, args = get_origin(tp), get_args(tp)
    if origin is list and len(args) == 1:
        return _all_of(list, args[0], iter)
    if origin is dict and len(args) == 2 and args[0] is str:
        return _all_of(dict, args[1], dict.values)
    return None


def _never(v: Any) -> bool:
    return False


def fits(tp: Any) -> Callable[[Any], bool]:
    """A test that a plain JSON value already is of type ``tp`` exactly, so that it can be kept
    as it is; it says False wherever msgspec must judge (``Ctx.check`` then does). Generated
    projection modules build one per type when they load, not one per value."""
    return _plain_check(tp) or _never


def _all_of(container: Any, item: Any, items: Callable[[Any], Any]) -> Callable[[Any], bool] | None:
    """A test that ``v`` is a ``container`` whose ``items(v)`` all fit ``item`` (and, for a
    map, whose keys are all str). One function per shape, each a single Python call: this
    runs once per projected value (every tool's `properties` on tools/list)."""
    # A map's keys, tested in C; for a list, `bool` of the unconsumed map is True.
    keys: Callable[[Any], bool] = _STR.issuperset if container is dict else bool
    if item is Any:
        return lambda v: type(v) is container and keys(map(type, v))
    if item in _EXACT:
        exact = frozenset({item}).issuperset
        return lambda v: (
            type(v) is container and keys(map(type, v)) and exact(map(type, items(v)))
        )
    if get_origin(item) is dict and get_args(item) == (str, Any):
        # Objects of anything (a schema's `properties`): every item a dict, every key of every
        # item a str, both tested in C (iterating a dict gives its keys).
        return lambda v: (
            type(v) is container
            and keys(map(type, v))
            and _DICT.issuperset(map(type, items(v)))
            and _STR.issuperset(map(type, chain.from_iterable(items(v))))
        )
    each = _plain_check(item)
    if each is None:
        return None
    return lambda v: type(v) is container and keys(map(type, v)) and all(map(each, items(v)))


def ident(v: Any, c: Ctx) -> Any:
    """A value both revisions type alike."""
    return v


def builtins(v: Any, c: Ctx) -> Any:
    """A typed value into a place the target leaves as plain JSON."""
    if type(v) is dict:
        return v
    return msgspec.to_builtins(v)


def plain(v: Any, c: Ctx) -> dict[str, Any]:
    """An open object holding plain JSON only, into a place the target leaves as a map."""
    return dict(v)


def empty(v: Any, c: Ctx) -> dict[str, Any]:
    """An object into a place the target models as a bare map: its presence stays, the fields
    the target does not define go."""
    return {}


# An empty open object of a given class, without a call of its Python ``__init__`` (generated
# functions fill it with ``update`` and item assignment, as the decoder does).
new: Callable[[type[T]], T] = dict.__new__  # type: ignore[assignment]


def put(m: Any, key: str, v: Any) -> dict[str, Any]:
    """``m`` (a map or UNSET) with ``key`` set to ``v`` (a migration target)."""
    out = {} if m is UNSET else dict(m)
    out[key] = v
    return out


def revision_of(obj: Any) -> str:
    """The revision whose generated package defines the type of ``obj``."""
    return revision_of_class(type(obj))


def revision_of_class(cls: type) -> str:
    """The revision whose generated package defines ``cls``."""
    parts = cls.__module__.split(".")
    if len(parts) >= 2 and parts[0] == "mcpbind" and parts[1] in _REVISION_OF_PACKAGE:
        return _REVISION_OF_PACKAGE[parts[1]]
    raise TypeError(f"{cls.__name__} is not a type of a generated mcpbind revision package")


@cache
def _pair(source: str, target: str) -> ModuleType:
    return importlib.import_module(f"mcpbind._projection.{PACKAGES[source]}__{PACKAGES[target]}")


# (class, target revision) -> (projection function or None for "already there", faithful context)
_ROUTES: dict[tuple[type, str], tuple[Callable[[Any, Ctx], Any] | None, Ctx]] = {}


def _route(cls: type, to: str) -> tuple[Callable[[Any, Ctx], Any] | None, Ctx]:
    if to not in PACKAGES:
        from .packages import UnknownRevisionError

        raise UnknownRevisionError(to)
    source = revision_of_class(cls)
    # The faithful context keeps no state while values project, so one serves every call.
    ctx = Ctx(source, to)
    if source == to:
        return None, ctx
    module = _pair(source, to)
    f = module.PROJECT.get(cls)
    if f is None:
        name = module.NAMES.get(cls, cls.__name__)
        raise ProjectionError(name, "$", source, to, f"{name} does not exist in {to}")
    _ROUTES[cls, to] = (f, ctx)
    return f, ctx


def project(obj: T, to: str) -> Any:
    """``obj`` (an instance of a generated type of any revision) as the same-named type of
    revision ``to``: fields ``to`` lacks stripped, moved fields migrated, required fields filled
    with the values the spec defines. Raises ProjectionError where no faithful projection exists,
    and where ``obj`` is not a valid value of its own type (naming the first invalid value).
    """
    route = _ROUTES.get((type(obj), to))
    f, ctx = route if route is not None else _route(type(obj), to)
    if f is None:
        return obj
    try:
        return f(obj, ctx)
    except ProjectionError as exc:
        # A value no member of a union accepts fails where nothing tracks the path: if the
        # object is malformed, that is the error to report, with the path msgspec finds.
        raise _malformed(obj, ctx, exc) or exc from None
    except _MALFORMED as exc:
        raise _malformed(obj, ctx, exc) or exc from None


def project_lossy(obj: T, to: str) -> tuple[Any, list[str]]:
    """Like ``project``, but drops what ``to`` cannot represent (a union member it lacks, a
    value that does not fit, an object missing a required field) and returns the JSON paths
    dropped. The object itself must exist in ``to`` and be a valid value of its type (else
    ProjectionError)."""
    f, ctx = _route(type(obj), to)
    if f is None:
        return obj, []
    lossy = _LossyCtx(ctx.source, ctx.target)
    try:
        return f(obj, lossy), lossy.dropped
    except (ProjectionError, *_MALFORMED) as exc:
        raise _malformed(obj, ctx, exc) or exc from None


# What generated code raises when an object does not hold what its class declares (a Struct
# built by hand with an int where a list belongs): attribute reads, iteration, indexing.
_MALFORMED = (AttributeError, TypeError, KeyError, IndexError, ValueError)


def _malformed(obj: Any, ctx: Ctx, cause: Exception) -> ProjectionError | None:
    """A ProjectionError naming the first value of ``obj`` that its own type does not accept
    (msgspec finds it), or None when ``obj`` is valid, so the original failure stands."""
    cls = type(obj)
    name = _pair(ctx.source, ctx.target).NAMES.get(cls, cls.__name__)
    try:
        msgspec.convert(msgspec.to_builtins(obj, enc_hook=_not_json), cls, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        message = join_path(str(exc))
        head, _, at = message.partition(" - at `")
        path = at.rstrip("`") or "$"
        reason = f"not a valid {ctx.source} {name}: {head}"
    except _NotJSON as exc:
        path, reason = "$", f"not a valid {ctx.source} {name}: it holds {exc}, which is not JSON"
    else:
        return None
    return ProjectionError(name, path, ctx.source, ctx.target, reason)


class _NotJSON(Exception):
    pass


def _not_json(value: Any) -> Any:
    raise _NotJSON(f"a {type(value).__name__}")


assert REVISIONS  # the table is generated; an empty one means a broken checkout
