"""Sans-IO MCP sessions: one object per connection, bytes in, typed events (``mcpbind.events``)
and bytes out, in the manner of h11. See docs/sessions.md."""

from __future__ import annotations

from .client import ClientSession
from .server import ServerSession

__all__ = ["ClientSession", "ServerSession"]
