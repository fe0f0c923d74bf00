"""A typed MCP client: ``Client(target)`` over Streamable HTTP, a subprocess's stdio, or to an
``App`` in process; every result the precise generated class of the agreed revision. See
docs/app.md. Modules: ``client`` (the typed API), ``links`` (what every way to the server shares),
``http``, ``stdio`` and ``memory`` (the ways)."""

from __future__ import annotations

from .client import Client

__all__ = ["Client"]
