"""A registered function: how it is called (asynchronous ones awaited, synchronous ones in a worker
thread, so the event loop stays free for other requests; the request's context passed where it
asks for one) and how it is described (its definition in the newest revision)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from .._support import convert
from .context import Context
from .signature import Parameters

__all__ = ["Handler", "definition", "describe"]


def describe(func: Callable[..., Any]) -> str | None:
    """A function's description: its docstring, cleaned."""
    doc = inspect.getdoc(func)
    return doc or None


def definition(cls: Any, data: Mapping[str, Any], what: str) -> Any:
    """The generated definition ``cls`` (a ``Tool``, ``Prompt``, ``Resource``, ...) from its wire
    keys, those given as None left out; ``ValueError`` naming ``what`` when MCP cannot describe
    it (a title that is not a string, ...)."""
    given = {k: msgspec.to_builtins(v) for k, v in data.items() if v is not None}
    try:
        return convert(given, cls)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{what} cannot be described in MCP: {exc}") from None


class Handler:
    """``func`` with its parameters as MCP arguments (see ``Parameters``)."""

    def __init__(self, func: Callable[..., Any], what: str, *, strict: bool = True) -> None:
        if not callable(func):
            raise TypeError(f"{what}: {func!r} is not callable")
        self.func = func
        self.what = what
        self.is_async = inspect.iscoroutinefunction(func)
        self.parameters = Parameters(func, what, Context, strict=strict)
        self.wants_context = self.parameters.context is not None

    async def __call__(self, kwargs: dict[str, Any], ctx: Context | None) -> Any:
        name = self.parameters.context
        if name is not None:
            kwargs = {**kwargs, name: ctx}
        if self.is_async:
            return await self.func(**kwargs)
        try:
            return await asyncio.to_thread(self.func, **kwargs)
        except asyncio.CancelledError:
            # The thread cannot be stopped: the function sees ``ctx.cancelled`` and may return.
            if ctx is not None:
                ctx._cancel()
            raise
