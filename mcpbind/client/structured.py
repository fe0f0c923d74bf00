"""A tool's structured content decoded into the type its caller names: ``Client.call_tool(name,
arguments, result_type=T)``."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from ..errors import ToolError

__all__ = ["structured"]

T = TypeVar("T")

# Types whose values are JSON objects: a tool returning one sends it as its structured content
# itself; any other value travels wrapped, as ``{"result": value}``.
_OBJECTS = (
    msgspec.inspect.StructType,
    msgspec.inspect.TypedDictType,
    msgspec.inspect.DataclassType,
    msgspec.inspect.DictType,
    msgspec.inspect.AnyType,
)


def structured(result: Any, result_type: Any, tool: str) -> Any:
    """``result`` (a generated ``CallToolResult``) as a ``result_type``: its structured content,
    or, in revisions without structured content, the JSON of its one text block; unwrapped from
    ``{"result": value}`` when ``result_type`` is not an object type. A tool error raises
    ``ToolError`` with its text; content that does not fit raises ``msgspec.ValidationError``
    naming the tool, the type and the JSON path."""
    if getattr(result, "is_error", UNSET) is True:
        raise ToolError(_text(result) or f"tool {tool!r} failed")
    name = getattr(result_type, "__qualname__", repr(result_type))
    content = getattr(result, "structured_content", UNSET)
    where = "$.structuredContent"
    if content is UNSET or content is None:
        text = _text(result)
        if text is None:
            raise msgspec.ValidationError(
                f"tool {tool!r} gave no structured content to decode as {name}"
            )
        try:
            content = msgspec.json.decode(text)
        except msgspec.DecodeError:
            raise msgspec.ValidationError(
                f"tool {tool!r} gave no structured content, and its text is no JSON to decode "
                f"as {name}"
            ) from None
        where = "$.content[0].text"
    if (
        isinstance(content, dict)
        and content.keys() == {"result"}
        and not isinstance(msgspec.inspect.type_info(result_type), _OBJECTS)
    ):
        content, where = content["result"], where + ".result"
    try:
        return msgspec.convert(content, result_type)
    except msgspec.ValidationError as exc:
        message = str(exc)
        if " - at `$" in message:
            message = message.replace(" - at `$", f" - at `{where}", 1)
        else:
            message += f" - at `{where}`"
        raise msgspec.ValidationError(
            f"tool {tool!r}: the result is not {name}: {message}"
        ) from None


def _text(result: Any) -> str | None:
    """The text of a result that is one text block (None otherwise)."""
    content = getattr(result, "content", None)
    if not isinstance(content, list) or len(content) != 1:
        return None
    text = getattr(content[0], "text", None)
    return text if isinstance(text, str) else None
