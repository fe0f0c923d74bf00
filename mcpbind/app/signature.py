"""A handler's signature as MCP sees it: the JSON Schema of its arguments, their conversion from a
request, and the schema and structured form of what it returns. msgspec does the work: the
parameters become one ``TypedDict`` whose ``msgspec.json.schema`` is the input schema and into
which ``msgspec.convert`` checks each request's arguments (Structs, TypedDicts, dataclasses and
``Annotated[..., msgspec.Meta(...)]`` constraints included)."""

from __future__ import annotations

import contextlib
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, NotRequired, Required, TypedDict

import msgspec

from .._support import join_path
from ..projection import revision_of_class

__all__ = ["SUPPORTED", "ArgumentError", "Output", "Parameters", "check_type", "schema_of"]

_MISSING: Any = inspect.Parameter.empty
# Parameter types whose values a JSON decoder already gives as exactly that class: arguments of
# these types alone are checked without msgspec (bool is not an int here: ``type(v) is int``).
_EXACT = (str, int, bool)


# The functional form of TypedDict, called with names known only at run time.
_TYPED_DICT: Any = TypedDict


class ArgumentError(ValueError):
    """Arguments that do not fit a handler's parameters; the message names the JSON path."""


# What msgspec checks and describes, as a registration error lists it.
SUPPORTED = (
    "str, int, float, bool, None, bytes, datetime, date, time, timedelta, UUID, Decimal, "
    "Literal, Enum, list/tuple/set/frozenset/dict of these, X | Y, msgspec.Struct, TypedDict, "
    "dataclass, NamedTuple, Any, constraints as Annotated[int, msgspec.Meta(ge=0)]"
)
# The libraries whose models and constraints msgspec does not read: an annotation using them
# would be described and checked without them (a constraint silently ignored).
_PYDANTIC = frozenset({"pydantic", "pydantic_core", "annotated_types"})


def check_type(annotation: Any, what: str, where: str) -> None:
    """Refuse, with a ``TypeError`` naming ``what`` and ``where`` (``parameter 'x'``), an
    annotation msgspec cannot check: a type it does not know, or pydantic's models and
    constraints, which it would ignore."""
    _refuse_pydantic(annotation, what, where)
    try:
        msgspec.json.schema(annotation)
    except TypeError as exc:
        reason = str(exc).strip().splitlines()[-1]
        raise TypeError(
            f"{what}: {where} has type {_type_name(annotation)}, which msgspec cannot check "
            f"({reason}); supported: {SUPPORTED}"
        ) from None


def _refuse_pydantic(annotation: Any, what: str, where: str) -> None:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        for m in metadata:
            if _from_pydantic(type(m)):
                raise TypeError(
                    f"{what}: {where} is annotated with {m!r}, a pydantic constraint that "
                    "msgspec does not read (a value breaking it would be accepted); mcpbind "
                    "checks values with msgspec: write it as msgspec.Meta, "
                    "Annotated[int, msgspec.Meta(ge=0)]"
                )
        _refuse_pydantic(base, what, where)
        return
    if isinstance(annotation, type) and (
        any(_from_pydantic(c) for c in annotation.__mro__)
        or getattr(annotation, "__pydantic_fields__", None) is not None
    ):
        raise TypeError(
            f"{what}: {where} is a pydantic model ({annotation.__qualname__}); mcpbind describes "
            f"and checks values with msgspec, not pydantic: declare {annotation.__qualname__} as a "
            "msgspec.Struct (constraints as Annotated[int, msgspec.Meta(ge=0)]), a TypedDict "
            "or a dataclass"
        )
    for arg in typing.get_args(annotation):
        if not isinstance(arg, (str, int, bytes, bool)) and arg is not None:  # Literal values
            _refuse_pydantic(arg, what, where)


def _from_pydantic(cls: type) -> bool:
    return cls.__module__.partition(".")[0] in _PYDANTIC


def _type_name(annotation: Any) -> str:
    if isinstance(annotation, type) and typing.get_args(annotation) == ():
        return annotation.__qualname__
    return repr(annotation)


def schema_of(tp: Any, name: str) -> dict[str, Any]:
    """The JSON Schema of ``tp`` as one object: its own definition at the top, the definitions
    it refers to under ``$defs`` (``#/$defs/Name``), without the title msgspec gives a class."""
    (top,), components = msgspec.json.schema_components([tp], ref_template="#/$defs/{name}")
    ref = top.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        key = ref[len("#/$defs/") :]
        top = dict(components.pop(key))
        if any(_refers(c, ref) for c in components.values()):  # a recursive type keeps its name
            components[key] = dict(top)
            top = {"$ref": ref}
        elif top.get("title") == key:
            del top["title"]
    elif not top and tp is not Any:
        raise TypeError(f"{name}: {tp!r} has no JSON Schema")
    if components:
        top["$defs"] = components
    return top


def _refers(schema: Any, ref: str) -> bool:
    if isinstance(schema, dict):
        return schema.get("$ref") == ref or any(_refers(v, ref) for v in schema.values())
    if isinstance(schema, list):
        return any(_refers(v, ref) for v in schema)
    return False


class _Param(typing.NamedTuple):
    name: str
    annotation: Any
    required: bool
    default: Any
    exact: type | None  # the class every valid value has, when the annotation is that simple


class Parameters:
    """The parameters of ``func`` as the arguments of an MCP request.

    ``context`` is the name of the parameter annotated with ``context_type`` (it gets the
    request's context, not an argument), ``schema`` the JSON Schema of the arguments object,
    ``names`` the argument names in order and ``required`` those without a default.
    ``strict=False`` lets strings stand for numbers and booleans (prompt arguments and URI
    template variables are strings on the wire).
    """

    def __init__(
        self, func: Callable[..., Any], what: str, context_type: type, *, strict: bool = True
    ) -> None:
        self.what = what
        self.strict = strict
        hints = typing.get_type_hints(func, include_extras=True)
        self.context: str | None = None
        params: list[_Param] = []
        for p in inspect.signature(func).parameters.values():
            annotation = hints.get(p.name, Any)
            if annotation is context_type:
                self.context = p.name
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise TypeError(
                    f"{what}: parameter {p.name!r} must be an ordinary or keyword-only parameter "
                    "(MCP passes arguments by name)"
                )
            where = f"parameter {p.name!r} of {getattr(func, '__qualname__', func)}"
            if _from_pydantic(type(p.default)):
                raise TypeError(
                    f"{what}: {where} has a pydantic Field as its default ({p.default!r}), which "
                    "msgspec does not read (its constraints would be ignored); write the "
                    "constraint as Annotated[int, msgspec.Meta(ge=0)] and the default as a plain "
                    "value"
                )
            check_type(annotation, what, where)
            required = p.default is _MISSING
            exact = annotation if annotation in _EXACT else None
            params.append(_Param(p.name, annotation, required, p.default, exact))
        self.params = tuple(params)
        self.names = tuple(p.name for p in params)
        self.required = tuple(p.name for p in params if p.required)
        fields = {p.name: (Required if p.required else NotRequired)[p.annotation] for p in params}
        # One TypedDict stands for all the arguments: msgspec checks them in one call and writes
        # their schema with every nested definition once.
        self._typed: Any = _TYPED_DICT(f"{what} arguments", fields)
        self.schema = self._schema()
        self._simple = all(p.exact is not None for p in params)
        self._checks = tuple((p.name, p.exact, p.required) for p in params)
        self._known = frozenset(self.names)

    def _schema(self) -> dict[str, Any]:
        schema = schema_of(self._typed, self.what)
        schema.pop("title", None)
        properties = schema.setdefault("properties", {})
        for p in self.params:
            if not p.required and p.default is not None:
                # A default JSON cannot show is left out of the schema, not refused.
                with contextlib.suppress(TypeError, msgspec.EncodeError):
                    properties[p.name] = {**properties[p.name], "default": _json(p.default)}
        return schema

    def convert(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """The keyword arguments for the handler: ``arguments`` checked and converted, defaults
        left to Python. ``ArgumentError`` names the first offending value's JSON path."""
        args = {} if arguments is None else arguments
        if type(args) is not dict:
            args = msgspec.to_builtins(args)
            if type(args) is not dict:
                raise ArgumentError(f"Expected `object`, got `{type(args).__name__}` - at `$`")
        if self._simple:  # the common case of strings, integers and booleans: no msgspec
            for name, exact, required in self._checks:
                v = args.get(name, _MISSING)
                # a value of another class, or none where one is required (_MISSING is a class)
                if type(v) is not exact and (v is not _MISSING or required):
                    break
            else:
                if args.keys() <= self._known:
                    return args
                return {k: v for k, v in args.items() if k in self._known}  # unknown: ignored
        try:
            converted = msgspec.convert(args, self._typed, strict=self.strict)
        except msgspec.ValidationError as exc:
            # JSON Schema counts 3.0 an integer, and so do the tool's schema and the client
            # that read it; msgspec does not: tried once more with such numbers as ints.
            whole = _integral(args)
            if whole is args:
                raise ArgumentError(join_path(str(exc))) from None
            try:
                converted = msgspec.convert(whole, self._typed, strict=self.strict)
            except msgspec.ValidationError as again:  # what is wrong with them as integers
                raise ArgumentError(join_path(str(again))) from None
        return dict(converted)


def _integral(value: Any) -> Any:
    """``value`` with every float of no fractional part an int (``value`` itself when it holds
    none)."""
    if type(value) is float:
        return int(value) if value.is_integer() else value
    if type(value) is dict:
        out = {k: _integral(v) for k, v in value.items()}
        return value if all(out[k] is v for k, v in value.items()) else out
    if type(value) is list:
        items = [_integral(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


def _json(value: Any) -> Any:
    return msgspec.json.decode(msgspec.json.encode(value))


class Output:
    """What a tool's return annotation says about its results.

    ``schema`` is the tool's output schema (None: the tool returns unstructured content);
    ``wrapped`` is true when the annotation is not an object, so its values travel as
    ``{"result": value}`` (structured content is always an object).
    """

    def __init__(self, annotation: Any, what: str) -> None:
        self.annotation = annotation
        self.schema: dict[str, Any] | None = None
        self.wrapped = False
        self._exact: type | None = None
        if annotation in (_MISSING, Any, None, type(None), str, object) or _is_generated(
            annotation
        ):
            return
        check_type(annotation, what, "its return annotation")
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if annotation in (list, tuple) or (
            origin in (list, tuple) and args and args[0] in (Any, object)
        ):
            return  # a list of anything: content blocks or JSON, told apart by the value
        schema = schema_of(annotation, f"{what} result")
        if schema.get("type") == "object" and "$ref" not in schema:
            self.schema = schema
        else:
            defs = schema.pop("$defs", None)
            self.schema = {
                "type": "object",
                "properties": {"result": schema},
                "required": ["result"],
            }
            if defs:
                self.schema["$defs"] = defs
            self.wrapped = True
        self._exact = annotation if isinstance(annotation, type) else None

    def structured(self, value: Any) -> Any:
        """``value`` as the tool's structured content (checked against the annotation unless it
        is already an instance of the exact class); ``ArgumentError`` when it does not fit."""
        data = msgspec.to_builtins(value)
        if self._exact is None or type(value) is not self._exact:
            try:
                msgspec.convert(data, self.annotation)
            except msgspec.ValidationError as exc:
                raise ArgumentError(join_path(str(exc))) from None
        return {"result": data} if self.wrapped else data


def _is_generated(annotation: Any) -> bool:
    """Whether ``annotation`` is generated content: a class of a generated revision package (a
    content block, a result), a list of them, or a union of them."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType):
        return bool(args) and all(_is_generated(a) for a in args)
    if not isinstance(annotation, type):
        return False
    try:
        revision_of_class(annotation)
    except TypeError:
        return False
    return True
