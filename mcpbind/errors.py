"""JSON-RPC and MCP error codes, and the exceptions the runtime raises for bad input."""

from __future__ import annotations

from typing import Any

import msgspec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
# 2026-07-28 and later: errors of the per-request revision and capability checks.
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022
# In JSON-RPC's implementation-defined server error range: the peer a request was for is gone (a
# connection closed, a bridge's server exited, a gateway shutting down); data may say why.
CONNECTION_CLOSED = -32000
# The resource-not-found error of the spec's resources page (every revision).
RESOURCE_NOT_FOUND = -32002

__all__ = [
    "CONNECTION_CLOSED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "MISSING_REQUIRED_CLIENT_CAPABILITY",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "ProtocolError",
    "ResourceNotFound",
    "ToolError",
    "UnsupportedRevision",
]


class ProtocolError(Exception):
    """A message that cannot be accepted, as the JSON-RPC error to answer it with.

    ``code`` is the JSON-RPC error code, ``message`` the human-readable reason (for -32602 it
    names the JSON path of the first offending value and the revision), ``data`` the optional
    error data, and ``id`` the id of the request when it could be read (else ``None``).
    """

    def __init__(
        self, code: int, message: str, data: Any = None, id: str | int | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.id = id

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code}, message={self.message!r}, id={self.id!r})"

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC error response object for this error."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": self.id, "error": error}

    def to_json(self) -> bytes:
        """The JSON-RPC error response for this error, as bytes."""
        return msgspec.json.encode(self.to_dict())


class UnsupportedRevision(ProtocolError):
    """No protocol revision both peers support (the initialize error, -32602).

    ``data`` is ``{"supported": [...], "requested": "..."}``, as the lifecycle section of the
    specification shows it.
    """

    def __init__(
        self,
        requested: Any,
        supported: list[str],
        id: str | int | None = None,
        code: int = INVALID_PARAMS,
    ) -> None:
        self.requested = requested
        self.supported = list(supported)
        super().__init__(
            code,
            "Unsupported protocol version",
            {"supported": self.supported, "requested": requested},
            id,
        )


class ResourceNotFound(ProtocolError):
    """Raise it in a resource or resource template function when nothing is at ``uri``: the
    request is answered with the spec's resource-not-found error (-32002, ``Resource not found:
    uri``, ``data: {"uri": uri}``), as a URI that no resource or template matches is."""

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(RESOURCE_NOT_FOUND, message or f"Resource not found: {uri}", {"uri": uri})
        self.uri = uri


class ToolError(Exception):
    """Raise it in a tool to answer with a tool error (a result with ``isError``) carrying this
    message: what the model reads to correct its call. Any other exception a tool raises is
    answered the same way, with the exception's type and message."""
