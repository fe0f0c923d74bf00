"""``OAuthClient``: what an HTTP transport asks when it talks to a protected MCP server.

The transport asks ``headers(method, url)`` before each request and hands every 401, and every
403 carrying a challenge, to ``handle(response, url)``, then sends the request again; it gives
up after ``max_attempts`` such rounds for one request. ``handle`` either makes the next attempt
worth sending (a DPoP nonce remembered, a token obtained or stepped up) or raises
``AuthorizationError`` saying why not: never a silent loop.
"""

from __future__ import annotations

import asyncio

import httpx

from .challenge import Challenge, parse_challenges
from .discovery import (
    authorization_server_metadata,
    protected_resource_metadata,
)
from .dpop import DPoPKey
from .errors import AuthorizationError
from .grants import FlowContext, Grant
from .store import MemoryTokenStore, Token, TokenStore

__all__ = ["OAuthClient"]

OFFLINE_ACCESS = "offline_access"


class OAuthClient:
    """The client side of MCP authorization for one application.

    ``grant`` obtains tokens (``AuthorizationCode`` for a user, or an extension grant);
    ``store`` keeps tokens and registrations (in memory by default); ``dpop`` turns on DPoP
    proofs (``True`` for a new ES256 key, or a ``DPoPKey``) wherever the authorization server
    advertises them. Scopes come from the challenge, else from the resource's
    ``scopes_supported``, else none are asked for; ``offline_access`` is added when the
    authorization server lists it and the grant can refresh. A 403 ``insufficient_scope`` asks
    again for the union of the scopes held and those challenged. ``max_attempts`` (default 3)
    bounds the authorization rounds of one request; ``timeout`` (default 30 s) the HTTP
    requests of a flow.
    """

    def __init__(
        self,
        grant: Grant,
        *,
        store: TokenStore | None = None,
        dpop: bool | DPoPKey = False,
        offline_access: bool = True,
        max_attempts: int = 3,
        http: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.grant = grant
        self.store: TokenStore = store if store is not None else MemoryTokenStore()
        self.dpop = DPoPKey() if dpop is True else (dpop or None)
        self.offline_access = offline_access
        self.max_attempts = max_attempts
        self._http = http
        self._timeout = timeout
        self._lock = asyncio.Lock()

    def _client(self) -> httpx.AsyncClient:
        # Redirects are not followed: metadata lives where the specification says it does.
        return self._http or httpx.AsyncClient(timeout=self._timeout, follow_redirects=False)

    async def headers(self, method: str, url: str) -> dict[str, str]:
        """The ``Authorization`` header (and a fresh ``DPoP`` proof) for one request, or none
        when no token is held yet. A token past its expiry is refreshed first when it can be."""
        token = await self.store.get_token(url)
        if token is None:
            return {}
        if token.expired() and token.refresh_token:
            token = await self._refreshed(url, token) or token
        if token.token_type.lower() == "dpop" and self.dpop is not None:
            return {
                "Authorization": f"DPoP {token.access_token}",
                "DPoP": self.dpop.proof(method, url, token.access_token),
            }
        return {"Authorization": f"Bearer {token.access_token}"}

    async def handle(self, response: httpx.Response, url: str, attempt: int = 0) -> None:
        """React to a 401 or 403 from the MCP server at ``url`` so that sending the request
        again can succeed; ``AuthorizationError`` when it cannot. ``attempt`` counts the rounds
        this request already went through: a 401 after one means the server refused the token
        it was just given, and asking the user again would not change that."""
        challenges = parse_challenges(response.headers.get("WWW-Authenticate"))
        status = response.status_code
        nonce = response.headers.get("DPoP-Nonce")
        if self.dpop is not None and nonce:
            self.dpop.remember_nonce(url, nonce)
            if any(c.params.get("error") == "use_dpop_nonce" for c in challenges):
                return  # RFC 9449 section 9: the same request, with the server's nonce
        challenge = _pick(challenges)
        if status == 401 and attempt > 0:
            raise AuthorizationError(
                f"HTTP 401 from {url} for the token just obtained: "
                + (response.headers.get("WWW-Authenticate") or "no challenge"),
                status,
            )
        if status == 403 and (
            challenge is None or challenge.params.get("error") != "insufficient_scope"
        ):
            raise AuthorizationError(
                f"HTTP 403 from {url}: "
                + (response.headers.get("WWW-Authenticate") or "forbidden, without a challenge"),
                status,
            )
        async with self._lock:
            await self._authorize(url, challenge, step_up=status == 403, status=status)

    async def _authorize(
        self, url: str, challenge: Challenge | None, *, step_up: bool, status: int
    ) -> None:
        http = self._client()
        try:
            hint = challenge.params.get("resource_metadata") if challenge else None
            try:
                resource = await protected_resource_metadata(http, url, hint)
            except AuthorizationError as error:
                raise AuthorizationError(
                    f"HTTP {status} from {url} without a usable challenge "
                    f"({challenge.scheme if challenge else 'no WWW-Authenticate'}): "
                    f"{error.message.removeprefix('authorization failed: ')}",
                    status,
                ) from None
            issuer = resource.authorization_servers[0]
            metadata = await authorization_server_metadata(http, issuer)
            held = await self.store.get_token(url)
            scopes = (challenge.scopes if challenge else []) or list(
                resource.scopes_supported or []
            )
            if step_up and held is not None:
                # SEP-2350: ask for what was held as well as what was challenged.
                scopes = list(dict.fromkeys([*held.scopes, *scopes]))
            if (
                self.offline_access
                and self.grant.refreshes
                and metadata.supports("scopes_supported", OFFLINE_ACCESS)
                and OFFLINE_ACCESS not in scopes
            ):
                scopes.append(OFFLINE_ACCESS)
            ctx = FlowContext(http, metadata, resource.resource, scopes, self.store, self.dpop)
            token: Token | None = None
            if not step_up and held is not None and held.issuer == issuer and held.refresh_token:
                token = await self.grant.refresh(ctx, held)
            if token is None:
                token = await self.grant.obtain(ctx)
            await self.store.set_token(url, token)
        finally:
            if self._http is None:
                await http.aclose()

    async def _refreshed(self, url: str, token: Token) -> Token | None:
        """The token refreshed at its issuer, stored; None when that did not work."""
        if token.issuer is None:
            return None
        http = self._client()
        try:
            async with self._lock:
                metadata = await authorization_server_metadata(http, token.issuer)
                resource = await protected_resource_metadata(http, url, None)
                ctx = FlowContext(
                    http, metadata, resource.resource, token.scopes, self.store, self.dpop
                )
                fresh = await self.grant.refresh(ctx, token)
                if fresh is not None:
                    await self.store.set_token(url, fresh)
                return fresh
        except AuthorizationError:
            return None
        finally:
            if self._http is None:
                await http.aclose()


def _pick(challenges: list[Challenge]) -> Challenge | None:
    """The challenge to follow: a Bearer or DPoP one, the one with most to say first."""
    usable = [c for c in challenges if c.scheme.lower() in ("bearer", "dpop")]
    usable.sort(key=lambda c: ("resource_metadata" not in c.params, "scope" not in c.params))
    return usable[0] if usable else None
