"""Calling a user's function: asynchronous ones awaited, synchronous ones in a worker thread (the
event loop stays free for other requests), the request's context passed where it asks for one."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from .context import Context
from .signature import Parameters

__all__ = ["Handler", "describe"]


def describe(func: Callable[..., Any]) -> str | None:
    """A function's description: its docstring, cleaned."""
    doc = inspect.getdoc(func)
    return doc or None


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
