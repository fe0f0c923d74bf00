"""Prompts and completions: a prompt is a function of string arguments returning messages; a
completion suggests values for one argument of a prompt or one variable of a resource template."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .handler import Handler, definition, describe
from .revision import latest

__all__ = ["Completion", "Prompt"]

# The most values one completion result carries (the spec's bound).
MAX_COMPLETIONS = 100


class Prompt:
    """One registered prompt; its arguments are the function's parameters."""

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name or func.__name__
        what = f"prompt {self.name!r}"
        self.handler = Handler(func, what, strict=False)
        self.description = description or describe(func)
        properties = self.handler.parameters.schema.get("properties", {})
        arguments = []
        for p in self.handler.parameters.params:
            argument: dict[str, Any] = {"name": p.name, "required": p.required}
            text = properties.get(p.name, {}).get("description")
            if text is not None:
                argument["description"] = text
            arguments.append(argument)
        data = {
            "name": self.name,
            "title": title,
            "description": self.description,
            "arguments": arguments,
            latest().facts.meta_key: meta,  # built in the newest revision, as below
        }
        self.definition = definition(latest().module.Prompt, data, what)


class Completion:
    """Suggestions for one argument: ``func(value, arguments)`` (``arguments``: the values of
    the other arguments the client already chose) returns the matching values."""

    def __init__(self, func: Callable[..., Any], what: str) -> None:
        if not callable(func):
            raise TypeError(f"{what}: {func!r} is not callable")
        self.func = func
        self.is_async = inspect.iscoroutinefunction(func)
        self.what = what

    async def __call__(self, value: str, arguments: dict[str, str]) -> list[str]:
        if self.is_async:
            found = await self.func(value, arguments)
        else:
            import asyncio

            found = await asyncio.to_thread(self.func, value, arguments)
        return [str(v) for v in found]
