"""A tool: a function, its definition in the newest revision, and the results it gives."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ..errors import ToolError
from .content import Results, generated, json_text, newest
from .handler import Handler, definition, describe
from .revision import Rev, latest
from .signature import Output

__all__ = ["Tool", "ToolError"]


class Tool:
    """One registered tool."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        meta: Mapping[str, Any] | None = None,
        input_schema: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name or func.__name__
        what = f"tool {self.name!r}"
        self.handler = Handler(func, what)
        returns = typing.get_type_hints(func, include_extras=True).get("return", Any)
        self.output = Output(returns, what)
        self.text = self.output.schema is None  # a string it returns is one text block
        data = {
            "name": self.name,
            "title": title,
            "description": description or describe(func),
            "inputSchema": (
                self.handler.parameters.schema if input_schema is None else dict(input_schema)
            ),
            "outputSchema": self.output.schema,
            "annotations": annotations,
            latest().facts.meta_key: meta,  # built in the newest revision, as below
        }
        self.definition = definition(latest().module.Tool, data, what)

    def result(self, value: Any, results: Results, r: Rev) -> Any:
        """The call result, in revision ``r``, of what the tool returned (built in the newest
        revision and projected); ``ArgumentError`` when a structured value does not fit the
        tool's output schema. (A string of a tool without an output schema, the commonest
        value, is one text block: ``Results.text_result``, which the server calls directly.)"""
        return results.to(self._newest(value, results), r, "the result of tool", self.name)

    def _newest(self, value: Any, results: Results) -> Any:
        output = self.output
        if generated(value):
            value = newest(value)
            if isinstance(value, results.call_tool.cls):
                return value
        if output.schema is not None:
            structured = output.structured(value)
            shown = structured["result"] if output.wrapped else structured
        elif _is_object(value):
            structured = shown = msgspec.to_builtins(value)
        else:
            return results.call_tool(content=results.tool_content(value))
        return results.call_tool(
            content=[results.text(text=json_text(shown))], structured_content=structured
        )


def _is_object(value: Any) -> bool:
    """A value that is a JSON object: a dict, a Struct or a dataclass not of the bindings."""
    if isinstance(value, dict):
        return True
    if isinstance(value, msgspec.Struct) or dataclasses.is_dataclass(value):
        return not generated(value)
    return False
