"""The ways a client obtains an access token once it knows the authorization server: the
authorization code grant with PKCE (the user's), and the extensions' grants without a user:
client credentials (a secret or a signed JWT), workload identity (an RFC 7523 JWT bearer
assertion) and enterprise-managed authorization (an ID token exchanged at the enterprise's
identity provider for an ID-JAG, then presented as a JWT bearer grant)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
from authlib.common.security import generate_token  # type: ignore[import-untyped]
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri  # type: ignore[import-untyped]
from authlib.oauth2.rfc7636 import create_s256_code_challenge  # type: ignore[import-untyped]

from .discovery import AuthServerMetadata
from .dpop import DPoPKey
from .endpoint import ClientAuthentication, TokenEndpoint, choose_auth_method
from .errors import AuthorizationError
from .fetch import post_form
from .registration import Registration, client_for
from .store import ClientInfo, Token, TokenStore

__all__ = [
    "JWT_BEARER",
    "AuthorizationCode",
    "ClientCredentials",
    "EnterpriseManaged",
    "FlowContext",
    "Grant",
    "JWTBearer",
    "UserAgent",
]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"

#: The application's user-agent step: given the authorization URL, it lets the user sign in
#: and returns the full URL the authorization server redirected back to (``redirect_uri`` with
#: ``code``, ``state`` and maybe ``iss``, or an ``error``).
UserAgent = Callable[[str], Awaitable[str]]
#: A credential given as a value or as an async function producing a fresh one.
Credential = str | Callable[[], Awaitable[str]]


@dataclass
class FlowContext:
    """What a grant works with: the HTTP client, the authorization server (metadata checked),
    the resource exactly as its metadata names it, the scopes chosen, the token store and the
    DPoP key (when DPoP is on)."""

    http: httpx.AsyncClient
    metadata: AuthServerMetadata
    resource: str
    scopes: list[str]
    store: TokenStore
    dpop: DPoPKey | None = None

    def endpoint(self) -> TokenEndpoint:
        """The token endpoint of this server."""
        return TokenEndpoint(self.http, self.metadata, self.dpop)

    def scope_params(self) -> dict[str, str]:
        """The ``scope`` parameter, omitted when no scope was chosen."""
        return {"scope": " ".join(self.scopes)} if self.scopes else {}


class Grant(Protocol):
    """A way to obtain a token. ``refreshes`` says whether asking for ``offline_access`` (a
    refresh token) makes sense for it."""

    refreshes: bool

    async def obtain(self, ctx: FlowContext) -> Token: ...

    async def refresh(self, ctx: FlowContext, token: Token) -> Token | None: ...


async def _value(credential: Credential) -> str:
    return credential if isinstance(credential, str) else await credential()


@dataclass
class AuthorizationCode:
    """The authorization code grant with PKCE (S256), the ``resource`` parameter (RFC 8707)
    in both requests, and the ``iss`` of the response checked (RFC 9207): when present it must
    equal the issuer exactly, and it must be present when the server advertises
    ``authorization_response_iss_parameter_supported``. ``user_agent`` is the application's
    step that shows the user the authorization URL and returns the redirect."""

    user_agent: UserAgent
    registration: Registration = field(default_factory=Registration)
    refreshes: bool = True

    async def _client(self, ctx: FlowContext) -> ClientAuthentication:
        client = await client_for(ctx.http, ctx.metadata, self.registration, ctx.store)
        return ClientAuthentication(client, choose_auth_method(client, ctx.metadata))

    async def obtain(self, ctx: FlowContext) -> Token:
        metadata = ctx.metadata
        if not metadata.supports("code_challenge_methods_supported", "S256"):
            raise AuthorizationError(
                f"the authorization server {metadata.issuer} does not advertise PKCE with S256 "
                "(code_challenge_methods_supported), which MCP requires"
            )
        auth = await self._client(ctx)
        verifier = generate_token(64)
        state = generate_token(32)
        url = prepare_grant_uri(
            metadata.endpoint("authorization_endpoint"),
            auth.client.client_id,
            "code",
            self.registration.redirect_uri,
            ctx.scopes or None,
            state,
            code_challenge=create_s256_code_challenge(verifier),
            code_challenge_method="S256",
            resource=ctx.resource,
        )
        answer = dict(parse_qsl(urlsplit(await self.user_agent(url)).query))
        if "error" in answer:
            raise AuthorizationError(
                f"the authorization server refused: {answer['error']}"
                + (f": {answer['error_description']}" if answer.get("error_description") else "")
            )
        if answer.get("state") != state:
            raise AuthorizationError("the authorization response's state does not match")
        if "iss" in answer:
            if answer["iss"] != metadata.issuer:
                raise AuthorizationError(
                    f"the authorization response comes from issuer {answer['iss']!r}, not "
                    f"{metadata.issuer!r}"
                )
        elif metadata.get("authorization_response_iss_parameter_supported") is True:
            raise AuthorizationError(
                "the authorization response has no iss, which its server said it sends"
            )
        code = answer.get("code")
        if not code:
            raise AuthorizationError("the authorization response carries no code")
        params = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.registration.redirect_uri,
            "code_verifier": verifier,
            "resource": ctx.resource,
        }
        return await ctx.endpoint().request(params, auth, ctx.scopes)

    async def refresh(self, ctx: FlowContext, token: Token) -> Token | None:
        """A new token from the refresh token; None when the server refuses it."""
        if not token.refresh_token:
            return None
        params = {
            "grant_type": "refresh_token",
            "refresh_token": token.refresh_token,
            "resource": ctx.resource,
        }
        try:
            fresh = await ctx.endpoint().request(params, await self._client(ctx), token.scopes)
        except AuthorizationError:
            return None
        # A server that does not rotate refresh tokens answers without one: keep the old.
        fresh.refresh_token = fresh.refresh_token or token.refresh_token
        return fresh


@dataclass
class ClientCredentials:
    """The client credentials grant (the OAuth client credentials extension): the client
    authenticates with ``client_secret`` (basic or post, as the server supports) or, given a
    ``private_key`` (PEM or joserfc key), with a JWT it signs (``private_key_jwt``, ``alg``)."""

    client_id: str
    client_secret: str | None = None
    private_key: Any = None
    alg: str = "ES256"
    refreshes: bool = False

    async def obtain(self, ctx: FlowContext) -> Token:
        client = ClientInfo(self.client_id, self.client_secret, None, ctx.metadata.issuer)
        if self.private_key is not None:
            auth = ClientAuthentication(client, "private_key_jwt", self.private_key, self.alg)
        else:
            auth = ClientAuthentication(client, choose_auth_method(client, ctx.metadata))
        params = {"grant_type": "client_credentials", "resource": ctx.resource}
        return await ctx.endpoint().request({**params, **ctx.scope_params()}, auth, ctx.scopes)

    async def refresh(self, ctx: FlowContext, token: Token) -> Token | None:
        return None


@dataclass
class JWTBearer:
    """The JWT bearer grant (RFC 7523) with an assertion the workload already holds (workload
    identity federation): ``assertion`` is the JWT, or an async function returning a fresh one.
    A refusal is reported, never retried with another grant."""

    assertion: Credential
    client_id: str | None = None
    client_secret: str | None = None
    refreshes: bool = False

    async def obtain(self, ctx: FlowContext) -> Token:
        params = {
            "grant_type": JWT_BEARER,
            "assertion": await _value(self.assertion),
            "resource": ctx.resource,
            **ctx.scope_params(),
        }
        auth = None
        if self.client_id is not None:
            client = ClientInfo(self.client_id, self.client_secret, None, ctx.metadata.issuer)
            auth = ClientAuthentication(client, choose_auth_method(client, ctx.metadata))
        return await ctx.endpoint().request(params, auth, ctx.scopes)

    async def refresh(self, ctx: FlowContext, token: Token) -> Token | None:
        return None


@dataclass
class EnterpriseManaged:
    """Enterprise-managed authorization: the user's ``id_token`` from the enterprise identity
    provider is exchanged at ``idp_token_endpoint`` (RFC 8693) for an identity assertion
    authorization grant (ID-JAG) naming this authorization server and resource, which the
    client then presents to the authorization server as a JWT bearer grant, authenticating
    as ``client_id``/``client_secret``."""

    id_token: Credential
    idp_token_endpoint: str
    client_id: str
    client_secret: str | None = None
    idp_client_id: str | None = None
    idp_client_secret: str | None = None
    refreshes: bool = False

    async def obtain(self, ctx: FlowContext) -> Token:
        exchange = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "subject_token": await _value(self.id_token),
            "subject_token_type": ID_TOKEN,
            "audience": ctx.metadata.issuer,
            "resource": ctx.resource,
            **ctx.scope_params(),
        }
        if self.idp_client_id is not None:
            exchange["client_id"] = self.idp_client_id
            if self.idp_client_secret is not None:
                exchange["client_secret"] = self.idp_client_secret
        response, answer = await post_form(
            ctx.http, self.idp_token_endpoint, urlencode(exchange), {}
        )
        if response.status_code != 200 or not isinstance(answer, dict):
            raise AuthorizationError(
                f"the identity provider's token exchange at {self.idp_token_endpoint} failed "
                f"(HTTP {response.status_code}): {answer!r}"
            )
        grant = answer.get("access_token")
        if answer.get("issued_token_type") != ID_JAG or not isinstance(grant, str):
            raise AuthorizationError("the identity provider issued no ID-JAG")
        client = ClientInfo(self.client_id, self.client_secret, None, ctx.metadata.issuer)
        auth = ClientAuthentication(client, choose_auth_method(client, ctx.metadata))
        params = {"grant_type": JWT_BEARER, "assertion": grant, "resource": ctx.resource}
        return await ctx.endpoint().request({**params, **ctx.scope_params()}, auth, ctx.scopes)

    async def refresh(self, ctx: FlowContext, token: Token) -> Token | None:
        return None
