"""The generated package of each pinned revision, by revision string: ``bindings`` and the error
for a revision that is not pinned. Its own module, not the package's ``__init__``, so that the
runtime's rooms import it without importing the package that re-exports them all."""

from __future__ import annotations

import importlib
from types import ModuleType

from ._revisions import PACKAGES, REVISIONS

__all__ = ["UnknownRevisionError", "bindings"]

_PACKAGE = __name__.rpartition(".")[0]  # "mcpbind"


class UnknownRevisionError(ValueError):
    """A revision string that is not one of ``REVISIONS``."""

    def __init__(self, revision: object) -> None:
        self.revision = revision
        super().__init__(
            f"unknown MCP revision {revision!r}; known revisions: {', '.join(REVISIONS)}"
        )


def bindings(revision: str) -> ModuleType:
    """The generated package of ``revision`` (``bindings("2025-11-25") is mcpbind.v2025_11_25``)."""
    try:
        return _LOADED[revision]
    except (KeyError, TypeError):
        pass
    try:
        package = PACKAGES[revision]
    except (KeyError, TypeError):
        raise UnknownRevisionError(revision) from None
    # The import system's own lock makes the import safe from any thread; the cache holds one
    # entry per pinned revision, so it is bounded by PACKAGES.
    module = _LOADED[revision] = importlib.import_module(f"{_PACKAGE}.{package}")
    return module


# Revision -> its imported package: transports look a revision up on every request, and
# import_module costs several hundred nanoseconds even for a loaded module.
_LOADED: dict[str, ModuleType] = {}
