"""The request headers a stateless Streamable HTTP POST must agree with its body on (SEP-2243).

A client of a per-request-envelope revision mirrors parts of its request into headers so that
proxies and load balancers can route without reading the body: ``Mcp-Method`` (the method),
``Mcp-Name`` (the request's target: its ``name``, ``uri`` or ``taskId`` param) and one
``Mcp-Param-<Header>`` per tool argument the tool's input schema designates with
``x-mcp-header``. A server must refuse a request whose headers disagree with its body, since
whatever routed it by the headers may have routed it wrongly. Header names are matched without
regard to case (HTTP), values exactly, after the optional whitespace around a field value is
dropped (RFC 9110 section 5.5); a value of the form ``=?base64?...?=`` is the Base64 of the UTF-8
text (strict: padding and alphabet), anything else is the text itself. A client writes its
headers with ``params_name`` and ``encode_header_value``, the inverses of what is read here.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

import msgspec

METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
PARAM_PREFIX = "mcp-param-"
# What names a request's target in its params, for Mcp-Name (the first present, as a string;
# taskId: the tasks extension's requests). ``Target`` below decodes these keys, in this order.
NAME_KEYS = ("name", "uri", "taskId")
_WORD_START, _WORD_END = "=?base64?", "?="
# The optional whitespace around a field value (RFC 9110): space and horizontal tab.
OWS = " \t"


M = TypeVar("M")


class Target(msgspec.Struct, Generic[M], gc=False):
    """The params of a request as far as its headers mirror them: the keys that may name its
    target (``NAME_KEYS``, in that order), its ``_meta`` with each value unread (only the
    protocol version is read: ``version``), and its tool arguments unread (read only for a tool
    that designates some); every value as sent, whatever its type. ``M``, the type of its
    ``_meta``: ``dict[str, msgspec.Raw]``, or a Struct reading the version only (``decoder``)."""

    name: Any = None
    uri: Any = None
    task_id: Any = msgspec.field(default=None, name="taskId")
    meta: M | None = msgspec.field(default=None, name="_meta")
    arguments: msgspec.Raw = msgspec.Raw()  # empty when absent


class Mirrored(msgspec.Struct, Generic[M], gc=False):
    """What a request's headers mirror of its body (``decode``)."""

    id: Any = None
    method: Any = None
    params: Target[M] | None = None


_MIRRORED = msgspec.json.Decoder(Mirrored[dict[str, msgspec.Raw]])


def decode(body: bytes) -> Mirrored[dict[str, msgspec.Raw]]:
    """The ``Mirrored`` parts of a request's body; ``msgspec.DecodeError`` (or ``ValueError``,
    ``RecursionError``) when it is not an object with such parts, its params and their
    ``_meta`` objects (or null): such a body has nothing to mirror."""
    return _MIRRORED.decode(body)


def decoder(meta: Any) -> msgspec.json.Decoder[Mirrored[Any]]:
    """A decoder of the ``Mirrored`` parts whose ``_meta`` is read as ``meta``, a Struct with
    one field, ``version`` (the generated ``RequestMeta.peek``'s): what ``decode`` reads and
    ``version`` then finds, when the version has one key, without a ``Raw`` per ``_meta`` value
    nor a decode of the version's (the same failures: a ``_meta`` that is not an object or
    null)."""
    return msgspec.json.Decoder(Mirrored[meta])


def version(meta: dict[str, msgspec.Raw], keys: tuple[str, ...]) -> Any:
    """The protocol version a ``_meta`` names: the value of the first of ``keys`` present (None
    when none is)."""
    for key in keys:
        raw = meta.get(key)
        if raw is not None:
            return msgspec.json.decode(raw)
    return None


def target_name(params: Target[Any] | None) -> str | None:
    """The request's target as ``Mcp-Name`` names it: the first of ``NAME_KEYS`` present as a
    string."""
    if params is None:
        return None
    for value in (params.name, params.uri, params.task_id):
        if type(value) is str:
            return value
    return None


def params_name(params: Mapping[str, Any]) -> str | None:
    """The ``Mcp-Name`` a request with ``params`` (plain JSON) carries: the value of the first of
    ``NAME_KEYS`` present as a string, else None (``target_name`` for decoded params)."""
    for key in NAME_KEYS:
        value = params.get(key)
        if isinstance(value, str):
            return value
    return None


def arguments(params: Target[Any] | None) -> Any:
    """The tool arguments of the request (plain JSON), or None."""
    raw = params.arguments if params is not None else None
    return msgspec.json.decode(raw) if raw else None


def decode_header_value(raw: str) -> str | None:
    """The text a header value carries, or None when its Base64 form is malformed."""
    value = raw.strip(OWS)
    if not (value.startswith(_WORD_START) and value.endswith(_WORD_END)):
        return value
    if len(value) < len(_WORD_START) + len(_WORD_END):
        return value  # "=?base64?=" overlaps its own markers: plain text
    encoded = value[len(_WORD_START) : -len(_WORD_END)]
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def standard_mismatch(
    got_method: str | None,
    got_name: str | None,
    method: Any,
    name: str | None,
    *,
    named: bool = True,
) -> str | None:
    """What is wrong with the ``Mcp-Method`` and (when ``named``) ``Mcp-Name`` headers of a
    request, whose values are ``got_method`` and ``got_name`` (None: absent), when its body has
    ``method`` and names ``name`` (``target_name``), or None. (The caller reads the headers, so
    that what else reads them need not read them again.)"""
    if type(method) is not str:
        return None  # an answer to the server's request: no method to mirror
    if got_method is None:
        return f"the Mcp-Method header is missing (the body's method is {method!r})"
    if got_method.strip(OWS) != method:
        return f"Mcp-Method is {got_method!r} but the body's method is {method!r}"
    if name is None or not named:
        return None
    if got_name is None:
        return f"the Mcp-Name header is missing (the body names {name!r})"
    if got_name.strip(OWS) != name:
        return f"Mcp-Name is {got_name!r} but the body names {name!r}"
    return None


def param_mismatch(
    headers: Mapping[str, str], designated: Mapping[str, str], arguments: Any
) -> str | None:
    """What is wrong with the ``Mcp-Param-*`` headers mirroring a tool's designated arguments
    (argument -> header name), or None. An argument that is null or absent has no header."""
    args = arguments if isinstance(arguments, dict) else {}
    for argument, suffix in designated.items():
        value = args.get(argument)
        raw = headers.get(PARAM_PREFIX + suffix.lower())
        name = f"Mcp-Param-{suffix}"
        if value is None:
            if raw is not None:
                return f"{name} is present but the argument {argument!r} is not"
            continue
        if raw is None:
            return f"the {name} header is missing (the argument {argument!r} is in the body)"
        text = decode_header_value(raw)
        if text is None:
            return f"{name} is not valid Base64 of UTF-8 text: {raw!r}"
        expected = value if isinstance(value, str) else encode_header_value(value)
        if text != expected:
            return f"{name} says {text!r} but the argument {argument!r} is {expected!r}"
    return None


def encode_header_value(value: Any) -> str:
    """An argument as an ``Mcp-Param-*`` header value: plain visible ASCII as is, anything a
    header cannot carry verbatim (other characters, surrounding whitespace, the encoded-word
    marker itself) as ``=?base64?...?=`` of its UTF-8 bytes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return json_number(value)
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    plain = (
        all(0x20 <= ord(c) <= 0x7E for c in text)
        and text == text.strip()
        and not text.startswith("=?")
    )
    if plain:
        return text
    return _WORD_START + base64.b64encode(text.encode()).decode() + _WORD_END


def json_number(value: int | float) -> str:
    """A number as JSON writes it (3.0 stays 3.0, 42 stays 42)."""
    return msgspec.json.encode(value).decode()
