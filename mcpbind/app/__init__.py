"""Writing an MCP server as decorated functions: ``App``, served to clients of every revision.

See docs/app.md. The modules, one job each: ``app`` (registering and serving), ``serve`` (from a
request to its result), ``tools``, ``resources``, ``prompts`` (what is registered), ``signature``
(type hints as JSON Schema, arguments checked with msgspec), ``handler`` (calling and describing
functions), ``content`` (return values as results, in each request's revision), ``context`` (what
a handler may do), ``rounds`` (the request state of multi-round-trip requests), ``subscriptions``
(who hears of changes), ``limits``, ``revision`` (the facts read), ``reply`` (answering one
request, either side), ``connection``, ``stdio`` and ``http`` (transports).
"""

from __future__ import annotations

from .app import App
from .context import LEVELS, Context, Elicited
from .limits import Limits
from .serve import RESOURCE_NOT_FOUND
from .tools import ToolError

__all__ = ["LEVELS", "RESOURCE_NOT_FOUND", "App", "Context", "Elicited", "Limits", "ToolError"]
