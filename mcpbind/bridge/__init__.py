"""``mcpbind bridge``: one MCP client and one MCP server of different revisions, each speaking
its own, every message projected between them (docs/bridge.md).

The package in layers, each importing only those below it: what every part shares (``limits``,
the task facts' rewrites ``task_facts``, the losses' ``losses``); the sans-IO ``crossing`` and
the tasks translations both fronts share (``tasks_extension_to_core``,
``tasks_core_to_extension``); on top, the stdio bridge (``stdio``: the sans-IO ``Bridge`` and
the process around it, ``run``) and the HTTP gateway (``gateway``).
"""

from __future__ import annotations

from ..errors import CONNECTION_CLOSED
from .limits import LOSSY, MAX_IN_FLIGHT_PER_SIDE
from .losses import Carrier, Lost, carrier, convey
from .stdio.bridge import Bridge

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
