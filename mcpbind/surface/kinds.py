"""The four kinds of item a server's surface holds (tools, prompts, resources, resource
templates) as one revision speaks them: the methods that list and use each, and the wire keys of
their pages, items and params. Read off the generated facts and classes once per revision; no
method and no wire key is spelled here."""

from __future__ import annotations

import threading
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import msgspec

from ..packages import bindings

__all__ = ["KINDS", "Kind", "Speech", "speech"]

# kind -> (list role, use role, changed role, the attribute naming an item, the attribute of the
# use's params naming it); roles are the facts' vocabulary (FACTS.features)
_ROLES: dict[str, tuple[str, str, str, str, str]] = {
    "tool": ("list_tools", "call_tool", "tools_changed", "name", "name"),
    "prompt": ("list_prompts", "get_prompt", "prompts_changed", "name", "name"),
    "resource": ("list_resources", "read_resource", "resources_changed", "uri", "uri"),
    "resource_template": (
        "list_resource_templates",
        "read_resource",
        "resources_changed",
        "uri_template",
        "uri",
    ),
}
KINDS = tuple(_ROLES)


@dataclass(frozen=True)
class Kind:
    """One kind of item in one revision."""

    kind: str
    list_method: str
    capability: str | None  # the server capability offering it (the list method's gate)
    items_key: str  # the list result's key holding the page's items
    cursor_key: str  # the list result's key of the next page's cursor
    cursor_param: str  # the list request's params key carrying it
    id_key: str  # the item's key naming it (name, uri, uriTemplate)
    use_method: str | None  # the request using one item (tools/call, ...), None where there is none
    use_key: str | None  # the use's params key naming the item
    changed: str | None  # the notification saying the list changed


@dataclass(frozen=True)
class Speech:
    """The surface as revision ``revision`` speaks it."""

    revision: str
    dialect: str  # the JSON Schema dialect of a tool schema declaring none (FACTS.schema_dialect)
    kinds: Mapping[str, Kind]  # by kind, only those the revision has
    by_list: Mapping[str, Kind]  # list method -> kind
    by_use: Mapping[str, tuple[Kind, ...]]  # use method -> kinds it may use (read: two)
    by_changed: Mapping[str, tuple[Kind, ...]]  # list_changed notification -> kinds
    tool_keys: Mapping[str, str]  # attribute -> wire key of a tool definition
    call_keys: Mapping[str, str]  # attribute -> wire key of a tools/call's params
    call_result_keys: Mapping[str, str]  # attribute -> wire key of a tools/call result
    prompt_keys: Mapping[str, str]  # attribute -> wire key of a prompt definition
    argument_keys: Mapping[str, str]  # attribute -> wire key of a prompt's argument


def _keys(cls: Any) -> dict[str, str]:
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return {f.name: f.encode_name for f in msgspec.structs.fields(cls)}
    return {}


def _field_type(cls: Any, attribute: str) -> Any:
    for f in msgspec.structs.fields(cls):
        if f.name == attribute:
            return f.type
    raise LookupError(f"{cls.__name__} has no field {attribute!r}")


def _list_item(cls: Any) -> tuple[str, Any]:
    """The wire key and item class of the one list-of-Structs field of a list result."""
    for f in msgspec.structs.fields(cls):
        for arg in _members(f.type):
            if typing.get_origin(arg) is list:
                (item,) = typing.get_args(arg)
                if isinstance(item, type) and issubclass(item, msgspec.Struct):
                    return f.encode_name, item
    raise LookupError(f"{cls.__name__} holds no list of items")


def _members(tp: Any) -> tuple[Any, ...]:
    args = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, _UnionType) else ()
    return args or (tp,)


_UnionType = type(int | str)


def _build(revision: str) -> Speech:
    module = bindings(revision)
    facts = module.FACTS
    features = facts.features
    kinds: dict[str, Kind] = {}
    classes: dict[str, Any] = {}
    for kind, (list_role, use_role, changed_role, id_attr, use_attr) in _ROLES.items():
        list_method = features.get(list_role)
        if list_method is None:
            continue
        spec = module.METHODS[list_method]
        items_key, item = _list_item(spec.result)
        classes[kind] = item
        use_method = features.get(use_role)
        use_key = None
        if use_method is not None:
            use_key = _keys(module.METHODS[use_method].params)[use_attr]
        kinds[kind] = Kind(
            kind=kind,
            list_method=list_method,
            capability=spec.capability,
            items_key=items_key,
            cursor_key=_keys(spec.result)["next_cursor"],
            cursor_param=_keys(_without_unset(spec.params))["cursor"],
            id_key=_keys(item)[id_attr],
            use_method=use_method,
            use_key=use_key,
            changed=features.get(changed_role),
        )
    by_use: dict[str, tuple[Kind, ...]] = {}
    by_changed: dict[str, tuple[Kind, ...]] = {}
    for k in kinds.values():
        if k.use_method is not None:
            by_use[k.use_method] = (*by_use.get(k.use_method, ()), k)
        if k.changed is not None:
            by_changed[k.changed] = (*by_changed.get(k.changed, ()), k)
    call = facts.wires[kinds["tool"].use_method or ""] if "tool" in kinds else None
    prompt = classes.get("prompt")
    arguments = _list_item_of(prompt, "arguments") if prompt is not None else None
    return Speech(
        revision=revision,
        dialect=facts.schema_dialect,
        kinds=kinds,
        by_list={k.list_method: k for k in kinds.values()},
        by_use=by_use,
        by_changed=by_changed,
        tool_keys=_keys(classes.get("tool")),
        call_keys=_keys(module.METHODS[kinds["tool"].use_method or ""].params) if call else {},
        call_result_keys=_keys(call.result) if call is not None else {},
        prompt_keys=_keys(prompt),
        argument_keys=_keys(arguments),
    )


def _without_unset(tp: Any) -> Any:
    members = [m for m in _members(tp) if m is not msgspec.UnsetType and m is not type(None)]
    return members[0] if len(members) == 1 else tp


def _list_item_of(cls: Any, attribute: str) -> Any:
    for arg in _members(_field_type(cls, attribute)):
        if typing.get_origin(arg) is list:
            return typing.get_args(arg)[0]
    return None


_SPEECH: dict[str, Speech] = {}  # one per pinned revision at most
_LOCK = threading.Lock()


def speech(revision: str) -> Speech:
    """The shared record of ``revision`` (``mcpbind.UnknownRevisionError`` for an unknown one)."""
    found = _SPEECH.get(revision)
    if found is None:
        built = _build(revision)
        with _LOCK:
            found = _SPEECH.setdefault(revision, built)
    return found
