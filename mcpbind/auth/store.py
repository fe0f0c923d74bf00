"""What an OAuth client keeps between requests: tokens per resource, registrations per
authorization server. ``TokenStore`` is the interface; ``MemoryTokenStore`` the default."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["ClientInfo", "MemoryTokenStore", "Token", "TokenStore"]


@dataclass
class Token:
    """An access token as the token endpoint issued it. ``issuer`` is the authorization server
    that issued it, ``scopes`` what was asked for (or granted, when the answer said so)."""

    access_token: str
    token_type: str = "Bearer"
    expires_at: float | None = None
    refresh_token: str | None = None
    scopes: list[str] = field(default_factory=list)
    issuer: str | None = None

    @classmethod
    def from_response(cls, body: dict[str, Any], issuer: str, asked: list[str]) -> Token:
        """A token from a token endpoint's JSON answer."""
        expires_in = body.get("expires_in")
        granted = body.get("scope")
        return cls(
            access_token=str(body["access_token"]),
            token_type=str(body.get("token_type") or "Bearer"),
            expires_at=(
                time.time() + float(expires_in) if isinstance(expires_in, int | float) else None
            ),
            refresh_token=(
                body.get("refresh_token") if isinstance(body.get("refresh_token"), str) else None
            ),
            scopes=granted.split() if isinstance(granted, str) else list(asked),
            issuer=issuer,
        )

    def expired(self, margin: float = 30.0) -> bool:
        """Whether the token has expired, or will within ``margin`` seconds."""
        return self.expires_at is not None and time.time() + margin >= self.expires_at


@dataclass
class ClientInfo:
    """A client's registration at one authorization server: its id, its secret (None for a
    public client) and the token endpoint authentication method it registered with."""

    client_id: str
    client_secret: str | None = None
    auth_method: str | None = None
    issuer: str | None = None


@runtime_checkable
class TokenStore(Protocol):
    """Where tokens (keyed by the resource they are for) and registrations (keyed by the
    authorization server's issuer) live. Implementations may persist them; each method may be
    called from any task."""

    async def get_token(self, resource: str) -> Token | None: ...

    async def set_token(self, resource: str, token: Token | None) -> None: ...

    async def get_client(self, issuer: str) -> ClientInfo | None: ...

    async def set_client(self, issuer: str, client: ClientInfo | None) -> None: ...


class MemoryTokenStore:
    """A ``TokenStore`` in memory, for one process. It keeps at most ``max_entries`` tokens
    and as many registrations (default 1,000 each); past that the least recently used goes."""

    def __init__(self, max_entries: int = 1000) -> None:
        self.max_entries = max_entries
        self._tokens: OrderedDict[str, Token] = OrderedDict()
        self._clients: OrderedDict[str, ClientInfo] = OrderedDict()
        self._lock = threading.Lock()

    def _get(self, table: OrderedDict[str, Any], key: str) -> Any:
        with self._lock:
            value = table.get(key)
            if value is not None:
                table.move_to_end(key)
            return value

    def _set(self, table: OrderedDict[str, Any], key: str, value: Any) -> None:
        with self._lock:
            if value is None:
                table.pop(key, None)
                return
            table[key] = value
            table.move_to_end(key)
            while len(table) > self.max_entries:
                table.popitem(last=False)

    async def get_token(self, resource: str) -> Token | None:
        token: Token | None = self._get(self._tokens, resource)
        return token

    async def set_token(self, resource: str, token: Token | None) -> None:
        self._set(self._tokens, resource, token)

    async def get_client(self, issuer: str) -> ClientInfo | None:
        client: ClientInfo | None = self._get(self._clients, issuer)
        return client

    async def set_client(self, issuer: str, client: ClientInfo | None) -> None:
        self._set(self._clients, issuer, client)
