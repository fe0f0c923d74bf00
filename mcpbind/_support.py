"""What the generated revision packages build on: open objects, untagged unions, the decode hook.

msgspec decodes Structs, tagged unions and unions of different JSON kinds natively. Two
shapes of these schemas it cannot: unions whose members nothing but their keys tell apart
(``TextResourceContents | BlobResourceContents``, ``ServerResult``), and objects that must
keep keys they do not declare (``_meta``, ``Result``, a tool's ``inputSchema``). For those the
generated code uses the two classes below as field types, and ``dec_hook`` decodes them.
"""

from __future__ import annotations

import types as types_module
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, ClassVar, Literal, NamedTuple, TypeVar, Union, get_origin

import msgspec

T = TypeVar("T")


class MethodSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One JSON-RPC method of a revision, as the generated ``METHODS`` tables list it."""

    method: str
    kind: str  # "request" or "notification"
    sender: str  # "client", "server" or "both"
    message: Any  # the request or notification type
    params: Any  # the type of its params, or None
    params_required: bool
    result: Any  # the result type of a request; None for a notification
    capability: str | None  # dotted capability path that must have been advertised
    capability_side: str | None  # whose: "client", "server" or "receiver" (the side receiving it)
    # Capabilities needed only when the params say so: (dotted params path, required value or
    # None for "present", whose capabilities, dotted capability path).
    conditions: tuple[tuple[str, Any, str, str], ...] = ()


class Member(NamedTuple):
    """One member of an untagged union and what must hold for it to be a candidate."""

    type: Any
    kind: str | None  # "object", "array", "string", ...; None accepts any kind
    required: frozenset[str] = frozenset()
    known: frozenset[str] = frozenset()
    consts: tuple[tuple[str, tuple[Any, ...]], ...] = ()


class _UntaggedType(type):
    """Makes ``isinstance(x, Marker)`` true for instances of the union's members.

    msgspec checks that ``dec_hook`` returned an instance of the field's type; the members
    do not inherit from the marker, so the check has to come from here.
    """

    def __instancecheck__(cls, obj: Any) -> bool:
        classes = cls.__dict__.get("_classes")
        if classes is None:
            classes = tuple(_runtime_classes(m.type for m in cls.members))  # type: ignore[attr-defined]
            cls._classes = classes
        return isinstance(obj, classes)


def _runtime_classes(types: Any) -> list[type]:
    out: list[type] = []
    for t in types:
        args = getattr(t, "__args__", None)
        if isinstance(t, types_module.UnionType) or get_origin(t) is Union:
            out += _runtime_classes(args)
        elif isinstance(t, _UntaggedType):
            out += _runtime_classes(m.type for m in t.members)  # type: ignore[attr-defined]
        elif isinstance(t, type):
            out.append(t)
        elif get_origin(t) is Literal:
            out += [type(a) for a in args or ()]
        else:
            out.append(get_origin(t) or object)
    return out


class Untagged(metaclass=_UntaggedType):
    """Marker for an untagged union: a field of this type is decoded by ``dec_hook``.

    The generated code declares one subclass per such union (the type checker sees the real
    union instead) and registers its members, most specific first.
    """

    __slots__ = ()
    members: ClassVar[tuple[Member, ...]] = ()

    def __new__(cls) -> Untagged:
        raise TypeError(f"{cls.__name__} is an untagged union: build one of its members instead")


def register(marker: type[Untagged], members: tuple[Member, ...]) -> None:
    """Attach its members, most specific first, to an untagged union's marker (once, at import)."""
    marker.members = members


class OpenObject(dict[str, Any]):
    """A JSON object that keeps every key: declared ones typed, any other as it came.

    Generated subclasses add a read-only property per declared key (``meta.protocol_version``
    reads ``"io.modelcontextprotocol/protocolVersion"``). It is a ``dict``, so msgspec encodes
    it as is and nothing a peer sent is lost on the way through.
    """

    __slots__ = ()
    _attributes: ClassVar[Mapping[str, str]] = {}  # attribute name -> wire key
    _fields_type: ClassVar[Any] = None  # a Struct of the declared keys, for validation
    _extra_type: ClassVar[Any] = None  # dict type of the other keys, None when any value goes

    def __init__(self, _extra: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        super().__init__(_extra or {})
        for attribute, value in fields.items():
            try:
                wire = self._attributes[attribute]
            except KeyError:
                raise TypeError(
                    f"{type(self).__name__}() got an unexpected keyword argument {attribute!r}"
                ) from None
            if value is not msgspec.UNSET:
                self[wire] = value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({dict.__repr__(self)})"

    @classmethod
    def _decode(cls: type[T], obj: Any, hook: Callable[[type, Any], Any]) -> T:
        if type(obj) is not dict:
            raise ValueError(f"Expected `object`, got `{_kind(obj)}`")
        klass: Any = cls
        typed = _convert(obj, klass._fields_type)
        self: Any = dict.__new__(klass)
        dict.update(self, obj)
        for attribute, wire in _typed_attributes(klass):
            value = getattr(typed, attribute)
            if value is not msgspec.UNSET:
                dict.__setitem__(self, wire, value)
        if klass._extra_type is not None:
            declared = klass._attributes.values()
            extra = {k: v for k, v in obj.items() if k not in declared}
            dict.update(self, _convert(extra, klass._extra_type))
        return self  # type: ignore[no-any-return]


def _typed_attributes(cls: type[OpenObject]) -> tuple[tuple[str, str], ...]:
    """The declared keys whose decoded value is not the JSON value itself (a Struct, an open
    object, a union member): only those replace what the peer sent."""
    plan = cls.__dict__.get("_typed")
    if plan is None:
        import msgspec.inspect as mi

        fields = {f.name: f.type for f in mi.type_info(cls._fields_type).fields}  # type: ignore[attr-defined]
        plan = tuple(
            (attribute, wire) for attribute, wire in cls._attributes.items() if not _plain(fields[attribute])
        )
        type.__setattr__(cls, "_typed", plan)
    return plan


def _plain(t: Any) -> bool:
    """Whether values of this msgspec type decode to exactly the JSON value (no objects made)."""
    import msgspec.inspect as mi

    if isinstance(t, (mi.StrType, mi.IntType, mi.BoolType, mi.NoneType, mi.AnyType, mi.LiteralType)):
        return True
    if isinstance(t, mi.UnionType):
        return all(_plain(u) for u in t.types)
    if isinstance(t, (mi.ListType, mi.DictType)):
        items = [t.item_type] if isinstance(t, mi.ListType) else [t.key_type, t.value_type]
        return all(_plain(u) for u in items)
    if isinstance(t, mi.Metadata):
        return _plain(t.type)
    return False  # Structs, custom types (open objects, untagged unions), floats (1 -> 1.0), ...


def _kind(obj: Any) -> str:
    if obj is None:
        return "null"
    return {dict: "object", list: "array", str: "str", bool: "bool", int: "int", float: "float"}.get(
        type(obj), type(obj).__name__
    )


_JSON_KIND = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def _candidates(members: tuple[Member, ...], obj: Any) -> list[Member]:
    kind = "null" if obj is None else _JSON_KIND.get(type(obj))
    fits = []
    for m in members:
        if m.kind is not None and m.kind != kind and not (m.kind == "number" and kind == "integer"):
            continue
        if kind == "object":
            if not m.required <= obj.keys():
                continue
            if any(obj.get(k, _MISSING) not in values for k, values in m.consts):
                continue
        fits.append(m)
    if kind == "object" and len(fits) > 1:
        keys = obj.keys()
        fits.sort(key=lambda m: (-len(m.known & keys), -len(m.required)))
    return fits


_MISSING = object()


def _closest(members: tuple[Member, ...], obj: Any) -> Member | None:
    """The member an undecodable value was most likely meant to be (for the error message)."""
    kind = "null" if obj is None else _JSON_KIND.get(type(obj))
    same = [m for m in members if m.kind in (kind, None)]
    if not same:
        return None
    if kind != "object":
        return same[0]
    keys = obj.keys()
    return max(same, key=lambda m: (len(m.known & keys) - len(m.required - keys), -len(m.required)))


def dec_hook(tp: Any, obj: Any) -> Any:
    """The msgspec ``dec_hook`` that decodes the generated untagged unions and open objects."""
    if isinstance(tp, type):
        if issubclass(tp, Untagged):
            return _decode_untagged(tp, obj)
        if issubclass(tp, OpenObject):
            return tp._decode(obj, dec_hook)
    raise NotImplementedError(f"mcpbind cannot decode {tp!r}")


def _needs_hook(tp: Any) -> bool:
    """Whether converting into ``tp`` reaches an untagged union or open object (msgspec's
    ``convert`` is several times slower with a ``dec_hook`` than without)."""
    import msgspec.inspect as mi

    stack: list[Any] = [mi.type_info(tp)]
    seen: set[int] = set()
    while stack:
        t = stack.pop()
        if isinstance(t, mi.CustomType):
            return True
        if id(t) in seen:
            continue
        seen.add(id(t))
        if isinstance(t, (mi.StructType, mi.DataclassType, mi.TypedDictType, mi.NamedTupleType)):
            stack += [f.type for f in t.fields]
        elif isinstance(t, mi.UnionType):
            stack += t.types
        elif isinstance(t, (mi.ListType, mi.SetType, mi.FrozenSetType, mi.VarTupleType)):
            stack.append(t.item_type)
        elif isinstance(t, mi.TupleType):
            stack += t.item_types
        elif isinstance(t, mi.DictType):
            stack += [t.key_type, t.value_type]
        elif isinstance(t, mi.Metadata):
            stack.append(t.type)
    return False


_HOOKED: dict[Any, bool] = {}


def _convert(obj: Any, tp: Any) -> Any:
    needs = _HOOKED.get(tp)
    if needs is None:
        needs = _HOOKED[tp] = _needs_hook(tp)
    return msgspec.convert(obj, tp, dec_hook=dec_hook) if needs else msgspec.convert(obj, tp)


def _dispatch(tp: type[Untagged]) -> tuple[tuple[str, Member], ...] | None:
    """For a union of objects each of which requires a key no other member declares
    (``text`` / ``blob``): that key and its member; None when the members are not so kind."""
    table = tp.__dict__.get("_dispatch", _MISSING)
    if table is not _MISSING:
        return table  # type: ignore[no-any-return]
    found: list[tuple[str, Member]] | None = []
    if any(m.kind != "object" for m in tp.members):
        found = None
    else:
        for m in tp.members:
            others = frozenset().union(*(o.known | o.required for o in tp.members if o is not m))
            own = sorted(m.required - others)
            if not own:
                found = None
                break
            found.append((own[0], m))  # type: ignore[union-attr]
    table = tuple(found) if found is not None else None
    type.__setattr__(tp, "_dispatch", table)
    return table


def _decode_untagged(tp: type[Untagged], obj: Any) -> Any:
    if type(obj) is dict and (table := _dispatch(tp)) is not None:
        for key, member in table:
            if key in obj:
                try:
                    return _convert(obj, member.type)
                except msgspec.ValidationError:
                    break  # the general path below reports the error and tries the others
    first_error: msgspec.ValidationError | None = None
    for member in _candidates(tp.members, obj):
        try:
            return _convert(obj, member.type)
        except msgspec.ValidationError as exc:
            first_error = first_error or exc
    if first_error is not None:
        raise ValueError(str(first_error))
    closest = _closest(tp.members, obj)
    if closest is None:
        expected = " | ".join(sorted({m.kind or "any" for m in tp.members}))
        raise ValueError(f"Expected `{expected}`, got `{_kind(obj)}`")
    try:
        msgspec.convert(obj, closest.type, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    # Keys and kind fit but a constant does not.
    for key, values in closest.consts:
        if obj.get(key, _MISSING) not in values:
            raise ValueError(f"Invalid value {obj.get(key)!r} - at `$.{key}`")
    raise ValueError(f"Value matches no member of `{tp.__name__}`")


_AT_PATTERN = r" - at `(\$[^`]*)`"


def join_path(message: str) -> str:
    """Fold the nested locations msgspec reports for values decoded inside ``dec_hook``.

    ``Expected `str`, got `int` - at `$.blob` - at `$.contents[1]``` becomes
    ``Expected `str`, got `int` - at `$.contents[1].blob```.
    """
    if message.count(" - at `") < 2:
        return message
    import re  # only errors need it; keep it off the import path

    parts = re.findall(_AT_PATTERN, message)
    head = re.split(_AT_PATTERN, message, maxsplit=1)[0]
    path = "$"
    for part in reversed(parts):
        path += part[1:]
    return f"{head} - at `{path}`"


@cache
def decoder(tp: Any) -> msgspec.json.Decoder[Any]:
    """A cached JSON decoder for ``tp`` that handles every generated type."""
    return msgspec.json.Decoder(tp, dec_hook=dec_hook)


def decode(data: bytes | str, tp: type[T]) -> T:
    """Decode JSON into ``tp`` (any generated type); errors name the full JSON path."""
    try:
        return decoder(tp).decode(data)  # type: ignore[arg-type, no-any-return]
    except msgspec.ValidationError as exc:
        raise msgspec.ValidationError(join_path(str(exc))) from None


def convert(obj: Any, tp: type[T]) -> T:
    """Convert builtin objects (from ``json.loads``) into ``tp`` (any generated type)."""
    try:
        return msgspec.convert(obj, tp, dec_hook=dec_hook)
    except msgspec.ValidationError as exc:
        raise msgspec.ValidationError(join_path(str(exc))) from None
