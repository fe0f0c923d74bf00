"""The one error the authorization code raises when a flow cannot go on."""

from __future__ import annotations

from ..errors import INTERNAL_ERROR, ProtocolError

__all__ = ["AuthorizationError"]


class AuthorizationError(ProtocolError):
    """Authorization failed, and why: a 401/403 without a usable challenge, metadata that cannot
    be trusted, an authorization or token endpoint that refused, or the retry limit reached.

    It is a ``ProtocolError`` (code -32603, no request id) so a transport's callers catch one
    family of errors; ``status`` is the HTTP status that started the flow, when there was one.
    """

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(INTERNAL_ERROR, f"authorization failed: {message}")
        self.status = status
