"""mcpbind: exact, fast msgspec bindings for every revision of the Model Context Protocol."""

from __future__ import annotations

import importlib
import os

# The generated packages live in generated/mcpbind/ in a checkout and beside this file in a wheel;
# the generator points MCPBIND_GENERATED_DIR at new output to import it before it replaces any.
_generated = os.environ.get("MCPBIND_GENERATED_DIR") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "generated", "mcpbind"
)
if os.path.isdir(_generated):
    __path__.insert(0, _generated)

from typing import TYPE_CHECKING, Any  # noqa: E402

from ._revisions import LATEST, PACKAGES, RELEASED, REVISIONS  # noqa: E402
from ._support import MethodSpec, OpenObject, convert, dec_hook, decode, decoder  # noqa: E402

# The function shares its module's name: bound now, importing the module later (the sessions
# do) would otherwise rebind `mcpbind.negotiate` to the module. The module is small.
from .negotiate import negotiate  # noqa: E402
from .packages import UnknownRevisionError, bindings  # noqa: E402

if TYPE_CHECKING:
    from .app import App, Context
    from .capabilities import missing_capabilities, supports
    from .client import Client
    from .codec import Codec, ErrorObject, ErrorResponse, Request, Response
    from .errors import ProtocolError, ResourceNotFound, ToolError, UnsupportedRevision
    from .projection import ProjectionError, project, project_lossy
    from .session import ClientSession, ServerSession

# The generated modules reached as attributes: each revision's package, and ``any_revision``
# (every name as the union over the revisions, for type checkers; it imports them all).
_PACKAGE_NAMES = frozenset(PACKAGES.values()) | {"any_revision"}

# The runtime's other parts load on first use, so that importing one revision package costs
# only that package, msgspec and the support module.
_LAZY = {
    "missing_capabilities": "capabilities",
    "supports": "capabilities",
    "Codec": "codec",
    "ErrorObject": "codec",
    "ErrorResponse": "codec",
    "Request": "codec",
    "Response": "codec",
    "ProtocolError": "errors",
    "ResourceNotFound": "errors",
    "ToolError": "errors",
    "UnsupportedRevision": "errors",
    "ProjectionError": "projection",
    "project": "projection",
    "project_lossy": "projection",
    "ClientSession": "session",
    "ServerSession": "session",
    "App": "app",
    "Context": "app",
    "Client": "client",
}


def __getattr__(name: str) -> Any:
    if name in _PACKAGE_NAMES:  # mcpbind.v2025_11_25 without importing it first
        return importlib.import_module(f"{__name__}.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "LATEST",
    "RELEASED",
    "REVISIONS",
    "App",
    "Client",
    "ClientSession",
    "Codec",
    "Context",
    "ErrorObject",
    "ErrorResponse",
    "MethodSpec",
    "OpenObject",
    "ProjectionError",
    "ProtocolError",
    "Request",
    "ResourceNotFound",
    "Response",
    "ServerSession",
    "ToolError",
    "UnsupportedRevision",
    "UnknownRevisionError",
    "bindings",
    "convert",
    "dec_hook",
    "decode",
    "decoder",
    "missing_capabilities",
    "negotiate",
    "project",
    "project_lossy",
    "supports",
]
