"""What the packages ``mcpbind surface generate`` writes call at run time (they hold only
declarations): a tool's arguments checked through its generated type, the call made through
``mcpbind.Client``, its structured result decoded into the generated result type; the part of a
schema a type cannot say checked by ``jsonschema`` (``Checker``), built on first use."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import msgspec

from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from .validation import Checker

__all__ = ["BoundPrompt", "BoundTemplate", "BoundTool", "ToolCallError", "expand", "schemas"]


def schemas(package: str | None) -> dict[str, Any]:
    """The schemas a generated package keeps for its fallback checks (its schemas.json): by
    tool name, ``input`` and ``output``, those whose generated types do not say them whole."""
    import importlib.resources
    import json

    if package is None:
        raise ImportError("a generated surface package's client is imported from its package")
    found: dict[str, Any] = json.loads(
        importlib.resources.files(package).joinpath("schemas.json").read_text(encoding="utf-8")
    )
    return found


class ToolCallError(Exception):
    """A tool answered with a tool error (a result with ``isError``): ``result`` is it, and the
    message its text."""

    def __init__(self, tool: str, result: Any) -> None:
        texts = [getattr(c, "text", None) for c in getattr(result, "content", None) or ()]
        message = " ".join(t for t in texts if isinstance(t, str)) or "(no text)"
        super().__init__(f"tool {tool!r} failed: {message}")
        self.tool = tool
        self.result = result


class _Schema:
    """A schema's type, and its fallback check when the type does not say it whole."""

    def __init__(self, type_: Any, schema: Any, dialect: str) -> None:
        self.type = type_
        self.schema = schema  # None when the type says the whole schema
        self.dialect = dialect
        self._checker: Checker | None = None

    def check(self, value: Any, where: str, code: int, what: str) -> Any:
        """``value`` (plain JSON) as the generated type; ``ProtocolError`` with the JSON path
        of what is wrong."""
        try:
            typed = msgspec.convert(value, self.type)
        except msgspec.ValidationError as exc:
            message = str(exc)
            path = message.rsplit(" - at `$", 1)
            if len(path) == 2:
                message = f"{where}{path[1].rstrip('`')}: {path[0]}"
            else:
                message = f"{where}: {message}"
            raise ProtocolError(code, f"{what}: {message}") from None
        if self.schema is not None:
            if self._checker is None:
                self._checker = Checker(self.schema, self.dialect)
            error = self._checker.error(value, where)
            if error is not None:
                raise ProtocolError(code, f"{what}: {error}")
        return typed


class BoundTool:
    """One tool of a generated package: its name, its arguments' type and its result's type
    (None: the tool declares no output schema), with the schemas their types do not say
    whole."""

    def __init__(
        self,
        name: str,
        arguments: Any,
        result: Any = None,
        *,
        dialect: str,
        input_schema: Any = None,
        output_schema: Any = None,
    ) -> None:
        self.name = name
        self.arguments = _Schema(arguments, input_schema, dialect)
        self.result = _Schema(result, output_schema, dialect) if result is not None else None

    def check_arguments(self, value: Mapping[str, Any]) -> Any:
        """Plain JSON arguments as the generated arguments type (-32602 with the JSON path
        when they do not fit the tool's input schema)."""
        return self.arguments.check(value, "$.arguments", INVALID_PARAMS, f"tool {self.name!r}")

    async def call(self, client: Any, arguments: Any) -> Any:
        """Call the tool through ``client`` (a ``mcpbind.Client``) with ``arguments`` (its
        generated arguments type, checked first); the typed result, or the revision's
        ``CallToolResult`` for a tool without an output schema. A tool error raises
        ``ToolCallError``."""
        plain = msgspec.to_builtins(arguments)
        self.check_arguments(plain)
        result = await client.call_tool(self.name, plain)
        if getattr(result, "is_error", False) is True:
            raise ToolCallError(self.name, result)
        if self.result is None:
            return result
        structured = getattr(result, "structured_content", msgspec.UNSET)
        if structured is msgspec.UNSET or structured is None:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"tool {self.name!r}: the result has no structured content, and the tool "
                "declares an output schema",
            )
        return self.result.check(
            structured, "$.structuredContent", INTERNAL_ERROR, f"tool {self.name!r} result"
        )


class BoundPrompt:
    """One prompt: its name and the wire names of its arguments."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def get(self, client: Any, arguments: Mapping[str, str | None]) -> Any:
        given = {k: v for k, v in arguments.items() if v is not None}
        return await client.get_prompt(self.name, given)


class BoundTemplate:
    """One resource template: its URI template, expanded with the method's arguments."""

    def __init__(self, uri_template: str) -> None:
        self.uri_template = uri_template

    async def read(self, client: Any, values: Mapping[str, str | None]) -> Any:
        return await client.read_resource(expand(self.uri_template, values))


_EXPRESSION = re.compile(r"\{([+#./;?&]?)([^}]*)\}")
# operator -> (first, separator, named, what may stay unescaped)
_OPERATORS = {
    "": ("", ",", False, ""),
    "+": ("", ",", False, ":/?#[]@!$&'()*+,;="),
    "#": ("#", ",", False, ":/?#[]@!$&'()*+,;="),
    ".": (".", ".", False, ""),
    "/": ("/", "/", False, ""),
    ";": (";", ";", True, ""),
    "?": ("?", "&", True, ""),
    "&": ("&", "&", True, ""),
}


def expand(template: str, values: Mapping[str, str | None]) -> str:
    """An RFC 6570 URI template expanded with string values (level 3: no prefixes or lists)."""

    def one(m: re.Match[str]) -> str:
        first, sep, named, safe = _OPERATORS[m.group(1)]
        parts = []
        for name in m.group(2).split(","):
            name = name.split(":")[0].rstrip("*")
            value = values.get(name)
            if value is None:
                continue
            text = quote(value, safe=safe)
            parts.append(f"{name}={text}" if named and (value or m.group(1) != ";") else text)
        return first + sep.join(parts) if parts else ""

    return _EXPRESSION.sub(one, template)


def variables(template: str) -> list[tuple[str, bool]]:
    """The variables of a URI template in order, each with whether a value is needed (query
    expressions' are not)."""
    out: list[tuple[str, bool]] = []
    for m in _EXPRESSION.finditer(template):
        for name in m.group(2).split(","):
            name = name.split(":")[0].rstrip("*")
            if name and name not in [n for n, _ in out]:
                out.append((name, m.group(1) not in ("?", "&")))
    return out
