"""A server's own surface: lock it, review its changes, enforce the lock (docs/surface.md).

``lock`` reads every tool, prompt, resource and resource template of a server and returns (and
writes) a ``Lock``; ``check`` compares a lock with the live server; ``diff`` compares two
surfaces; ``Guard`` enforces a lock on one connection, sans-IO. Needs the ``surface`` extra
(``rfc8785``, ``jsonschema``); the names load on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .api import check, diff, lock, read_target
    from .compare import Change, Report
    from .guard import Drift, Filtered, Guard, Unverified
    from .lockfile import Item, Lock, LockError

__all__ = [
    "Change",
    "Drift",
    "Filtered",
    "Guard",
    "Item",
    "Lock",
    "LockError",
    "Report",
    "Unverified",
    "check",
    "diff",
    "lock",
    "read_target",
]

_LAZY = {
    "check": "api",
    "diff": "api",
    "lock": "api",
    "read_target": "api",
    "Change": "compare",
    "Report": "compare",
    "Drift": "guard",
    "Filtered": "guard",
    "Guard": "guard",
    "Unverified": "guard",
    "Item": "lockfile",
    "Lock": "lockfile",
    "LockError": "lockfile",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
