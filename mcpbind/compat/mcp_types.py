"""Convert between mcpbind's generated types and the official ``mcp_types`` pydantic models.

``to_mcp_types(obj)`` gives the official model of the same schema name: by default the
schema-exact wire model that ``mcp_types.methods`` validates ``obj``'s revision with (the SDK
models 2025-11-25 and 2026-07-28 exactly and checks the three older revisions against the
2025-11-25 shapes), or with ``public=True`` the version-free model SDK handlers receive and
return (``mcp_types.CallToolResult``). ``from_mcp_types(model, revision)`` takes either kind
back into ``revision``'s generated type of the same name.

Both go through the wire JSON form and compare the result's wire JSON with the input's, so a
conversion is exact or raises ``CompatError`` naming the type, the revision and the JSON path
of the first value that could not be carried. See docs/compat.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import ModuleType
from typing import Any, Literal, cast, get_args, get_origin

import msgspec

import mcpbind
from mcpbind.projection import render_path, revision_of_class

try:
    import mcp_types as _mcp_types
    from mcp_types import methods as _methods
    from pydantic import BaseModel, TypeAdapter, ValidationError
    from pydantic_core import PydanticUndefined
except ImportError:
    raise ImportError(
        "mcpbind.compat.mcp_types needs the official MCP models: "
        'pip install "mcp-types==2.3.0" (or the `mcp` SDK, which depends on it)'
    ) from None

__all__ = ["REVISIONS", "CompatError", "from_mcp_types", "to_mcp_types"]


class CompatError(ValueError):
    """A value that cannot be carried exactly between mcpbind and ``mcp_types``.

    ``type`` is the schema name, ``revision`` the mcpbind revision, ``path`` the JSON path of
    the first offending value inside the converted object (``$`` for the object itself).
    """

    def __init__(self, type: str, revision: str, path: str, reason: str) -> None:
        self.type = type
        self.revision = revision
        self.path = path
        self.reason = reason
        super().__init__(f"cannot carry {type} ({revision}) at {path}: {reason}")


@cache
def _wire_modules() -> dict[str, ModuleType]:
    """Each revision both sides have -> the ``mcp_types`` package holding its wire models.

    Read off the SDK's own request and notification tables, so a revision is paired with the
    models the SDK validates it with; one that maps to several packages is left out.
    """
    packages: dict[str, set[str]] = {}
    for table in (
        _methods.CLIENT_REQUESTS,
        _methods.CLIENT_NOTIFICATIONS,
        _methods.SERVER_REQUESTS,
        _methods.SERVER_NOTIFICATIONS,
    ):
        for (_method, revision), model in table.items():
            packages.setdefault(revision, set()).add(model.__module__)
    modules: dict[str, ModuleType] = {}
    for revision in mcpbind.REVISIONS:
        names = packages.get(revision, set())
        if len(names) == 1:
            (name,) = names
            modules[revision] = __import__(name, fromlist=["_"])
    return modules


REVISIONS: tuple[str, ...] = tuple(_wire_modules())
"""The revisions both mcpbind and ``mcp_types`` model, oldest first."""


@cache
def _classes(revision: str) -> Mapping[str, type]:
    """Schema name -> generated class of ``revision`` (objects and untagged-union markers)."""
    module = mcpbind.bindings(revision)
    return {
        name: value for name in module.__all__ if isinstance(value := getattr(module, name), type)
    }


@cache
def _names(revision: str) -> Mapping[type, str]:
    """Generated class of ``revision`` -> its schema name."""
    return {cls: name for name, cls in _classes(revision).items()}


def _check_revision(name: str, revision: str) -> None:
    if revision not in REVISIONS:
        if revision not in mcpbind.REVISIONS:
            raise mcpbind.UnknownRevisionError(revision)
        raise CompatError(
            name,
            revision,
            "$",
            f"mcp_types has no models for this revision (it models {', '.join(REVISIONS)})",
        )


def _model_class(name: str, revision: str, public: bool) -> type[BaseModel]:
    module = _mcp_types if public else _wire_modules()[revision]
    model = getattr(module, name, None)
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    raise CompatError(name, revision, "$", f"{module.__name__} has no model named {name}")


def to_mcp_types(obj: Any, *, public: bool = False) -> BaseModel:
    """The official ``mcp_types`` model holding exactly ``obj`` (a generated Struct).

    ``public=False``: the wire model of ``obj``'s revision; ``public=True``: the version-free
    ``mcp_types.<Name>`` model. Raises ``CompatError`` when no model of that name exists or the
    model cannot hold the value exactly, and ``TypeError`` when ``obj`` is not a generated type.
    """
    cls = type(obj)
    revision = revision_of_class(cls)
    name = _names(revision).get(cls, cls.__name__)
    _check_revision(name, revision)
    model_class = _model_class(name, revision, public)
    wire = msgspec.to_builtins(obj)
    try:
        model = model_class.model_validate(wire, by_alias=True, by_name=False)
    except ValidationError as exc:
        path, reason = _pydantic_failure(exc, wire)
        raise CompatError(
            name, revision, path, f"{model_class.__qualname__} rejects it: {reason}"
        ) from None
    back = model.model_dump(by_alias=True, exclude_unset=True, mode="json")
    holder = f"{model_class.__module__}.{model_class.__qualname__}"
    _require_same(wire, back, name, revision, holder)
    return model


def from_mcp_types(model: BaseModel, revision: str) -> Any:
    """``revision``'s generated type of the same name as ``model``'s class, holding exactly its value.

    ``model`` is an ``mcp_types`` wire or public model. Raises ``CompatError`` when the revision
    has no type of that name or cannot hold the value exactly (a key the revision lacks, a value
    its schema rejects), and ``mcpbind.UnknownRevisionError`` for an unknown revision.
    """
    if not isinstance(model, BaseModel):
        raise TypeError(f"from_mcp_types takes a pydantic model, not {type(model).__name__}")
    name = type(model).__name__
    _check_revision(name, revision)
    target = _classes(revision).get(name)
    if target is None:
        raise CompatError(name, revision, "$", "the revision has no type of this name")
    # pydantic's own warnings about values its types do not expect are left out: the conversion
    # below judges every value and names the path of the first it rejects.
    wire = model.model_dump(by_alias=True, exclude_unset=True, mode="json", warnings=False)
    # A model built in code leaves its defaulted fields unset (`TextContent.type`), so the dump
    # omits keys the schema may require. When it does not convert, the model's constants are
    # written out, and failing that every default other than None (2026-07-28's resultType).
    for constants_only in (None, True, False):
        if constants_only is not None:
            _fill_defaults(model, wire, constants_only)
        try:
            obj: Any = mcpbind.convert(wire, target)
            break
        except msgspec.ValidationError as exc:
            failure = str(exc)
    else:
        reason, _, at = failure.partition(" - at `")
        raise CompatError(name, revision, at.rstrip("`") or "$", reason)
    _require_same(wire, msgspec.to_builtins(obj), name, revision, f"mcpbind {revision} {name}")
    return obj


@cache
def _defaults(cls: type[BaseModel], constants_only: bool) -> tuple[tuple[str, str, Any], ...]:
    """(field, wire key, JSON value) of each field of ``cls`` with a default other than ``None``,
    or with ``constants_only`` of each typed as the one literal it defaults to (``type: "text"``).

    ``None`` defaults stand for an absent key and are never written out.
    """
    defaults = []
    for name, field in cls.model_fields.items():
        default = field.default
        if default is None or default is PydanticUndefined:
            continue
        args = get_args(field.annotation)
        if constants_only and not (get_origin(field.annotation) is Literal and args == (default,)):
            continue
        key = field.serialization_alias or field.alias or name
        defaults.append((name, key, TypeAdapter(Any).dump_python(default, mode="json")))
    return tuple(defaults)


def _fill_defaults(model: BaseModel, wire: Any, constants_only: bool) -> None:
    """Write the unset defaults of ``model`` and of the models it holds into its dump ``wire``."""
    if not isinstance(wire, dict):
        return
    fields_set = model.model_fields_set
    for name, key, value in _defaults(type(model), constants_only):
        if name not in fields_set:
            wire[key] = value
    fields = type(model).model_fields
    for name in fields_set:
        field = fields.get(name)
        if field is not None:
            key = field.serialization_alias or field.alias or name
            _fill_within(getattr(model, name), wire.get(key), constants_only)


def _fill_within(value: Any, wire: Any, constants_only: bool) -> None:
    # Only models and sequences of them can hold unset defaults; plain JSON payloads are skipped.
    if isinstance(value, BaseModel):
        _fill_defaults(value, wire, constants_only)
    elif isinstance(value, list | tuple) and isinstance(wire, list):
        for item, item_wire in zip(value, wire, strict=False):
            if isinstance(item, BaseModel | list | tuple):
                _fill_within(item, item_wire, constants_only)


def _pydantic_failure(exc: ValidationError, wire: Any) -> tuple[str, str]:
    """The JSON path and message of the most specific error pydantic reports.

    pydantic's locations name union members between keys (``content.0.TextContent.text``);
    following the location through the input keeps the keys and drops the member names.
    """
    best: tuple[tuple[int, bool], str, str] | None = None
    for error in exc.errors():
        node: Any = wire
        at: list[str | int] = []
        loc = error["loc"]
        for index, part in enumerate(loc):
            if (isinstance(node, dict) and part in node) or (
                isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            ):
                node = cast(Any, node)[part]
                at.append(part)
            elif index == len(loc) - 1 and error["type"] == "missing" and isinstance(part, str):
                at.append(part)
        rank = (len(at), error["type"] != "missing")
        if best is None or rank > best[0]:
            best = (rank, render_path(at), error["msg"])
    if best is None:
        return "$", str(exc)
    return best[1], best[2]


def _require_same(before: Any, after: Any, name: str, revision: str, holder: str) -> None:
    """Raise ``CompatError`` at the first value of ``before`` that ``after`` does not carry."""
    if msgspec.json.encode(before, order="sorted") == msgspec.json.encode(after, order="sorted"):
        return
    difference = _difference(before, after, [])
    if difference is not None:
        at, what = difference
        raise CompatError(name, revision, render_path(at), f"{holder} {what}")


def _difference(a: Any, b: Any, at: list[str | int]) -> tuple[list[str | int], str] | None:
    """The first place where ``b`` differs from ``a`` as JSON (``1`` and ``1.0`` are equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key, value in a.items():
            if key not in b:
                return at + [key], "does not keep this key"
            found = _difference(value, b[key], at + [key])
            if found is not None:
                return found
        for key in b:
            if key not in a:
                return at + [key], "adds this key"
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return at, f"holds {len(b)} items instead of {len(a)}"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _difference(x, y, at + [index])
            if found is not None:
                return found
        return None
    numbers = (int, float)
    if (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
        same = a == b
    else:
        same = type(a) is type(b) and a == b
    return None if same else (at, f"turns {_show(a)} into {_show(b)}")


def _show(value: Any) -> str:
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."
