"""``mcpbind bridge``: one MCP client and one MCP server of different revisions, each speaking
its own, every message projected between them (docs/bridge.md).

``Bridge`` is the sans-IO core (``core.py``); ``run`` (``stdio.py``) is the process around it.
"""

from __future__ import annotations

from ..errors import CONNECTION_CLOSED
from .core import LOSSY, MAX_IN_FLIGHT_PER_SIDE, Bridge
from .losses import Carrier, Lost, carrier, convey

__all__ = [
    "CONNECTION_CLOSED",
    "LOSSY",
    "MAX_IN_FLIGHT_PER_SIDE",
    "Bridge",
    "Carrier",
    "Lost",
    "carrier",
    "convey",
]
