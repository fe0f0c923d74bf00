"""The token endpoint: one request of any grant, with the client's authentication and, when
both sides use it, a DPoP proof (retried once with the nonce the server asks for)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from authlib.oauth2.auth import ClientAuth  # type: ignore[import-untyped]
from authlib.oauth2.rfc7523.assertion import (  # type: ignore[import-untyped]
    sign_jwt_bearer_assertion,
)
from authlib.oauth2.rfc7523.client import ASSERTION_TYPE  # type: ignore[import-untyped]
from joserfc.jwk import ECKey, OKPKey, RSAKey

from .discovery import AuthServerMetadata
from .dpop import DPoPKey
from .errors import AuthorizationError
from .fetch import post_form
from .store import ClientInfo, Token

__all__ = ["ClientAuthentication", "TokenEndpoint", "choose_auth_method"]

# Methods whose credential is the client secret, handled by authlib's ClientAuth.
_SECRET_METHODS = ("client_secret_basic", "client_secret_post", "none")


def choose_auth_method(client: ClientInfo, metadata: AuthServerMetadata) -> str:
    """The token endpoint authentication method to use: the registered one when the server
    supports it, else basic or post for a client with a secret, else none."""
    listed = metadata.get("token_endpoint_auth_methods_supported")
    # RFC 8414: when the server lists none, client_secret_basic is the default.
    supported = listed if isinstance(listed, list) and listed else ["client_secret_basic"]
    if client.auth_method and client.auth_method in supported:
        return client.auth_method
    if client.client_secret:
        for method in ("client_secret_basic", "client_secret_post"):
            if method in supported:
                return method
    if "none" in supported:
        return "none"
    return client.auth_method or ("client_secret_basic" if client.client_secret else "none")


@dataclass
class ClientAuthentication:
    """How the client authenticates at a token endpoint: its registration, and for
    ``private_key_jwt`` the key (a PEM or joserfc key) and algorithm that sign the assertion."""

    client: ClientInfo
    method: str
    private_key: Any = None
    alg: str = "ES256"

    def apply(self, issuer: str, headers: dict[str, str], params: dict[str, str]) -> str:
        """Add the credentials to a request; the form body to send."""
        if self.method == "private_key_jwt":
            key = self.private_key
            if not isinstance(key, ECKey | RSAKey | OKPKey):
                key = (RSAKey if self.alg.startswith(("RS", "PS")) else ECKey).import_key(key)
            # The assertion's audience is the issuer (RFC 7523bis): the token endpoint URL
            # alone is refused by servers that follow the update.
            params["client_assertion_type"] = ASSERTION_TYPE
            params["client_assertion"] = sign_jwt_bearer_assertion(
                key,
                issuer=self.client.client_id,
                audience=issuer,
                subject=self.client.client_id,
                alg=self.alg,
                expires_in=300,
            )
            params.setdefault("client_id", self.client.client_id)
            return urlencode(params)
        if self.method not in _SECRET_METHODS:
            raise AuthorizationError(
                f"token endpoint authentication method {self.method!r} is not supported"
            )
        auth = ClientAuth(self.client.client_id, self.client.client_secret, self.method)
        _, _, body = auth.prepare("POST", "", headers, urlencode(params))
        return str(body)


class TokenEndpoint:
    """Requests to one authorization server's token endpoint, on behalf of one resource."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        metadata: AuthServerMetadata,
        dpop: DPoPKey | None = None,
    ) -> None:
        self.http = http
        self.metadata = metadata
        self.url = metadata.endpoint("token_endpoint")
        # DPoP only when the server says it accepts proofs of the key's algorithm.
        self.dpop = (
            dpop
            if dpop and metadata.supports("dpop_signing_alg_values_supported", dpop.alg)
            else None
        )

    async def request(
        self,
        params: dict[str, str],
        auth: ClientAuthentication | None,
        scopes: list[str],
    ) -> Token:
        """Send one grant; the token, or ``AuthorizationError`` with the server's error."""
        for attempt in range(2):
            headers: dict[str, str] = {}
            form = dict(params)
            body = auth.apply(self.metadata.issuer, headers, form) if auth else urlencode(form)
            if self.dpop is not None:
                headers["DPoP"] = self.dpop.proof("POST", self.url)
            response, answer = await post_form(self.http, self.url, body, headers)
            if self.dpop is not None:
                self.dpop.remember_nonce(self.url, response.headers.get("DPoP-Nonce"))
            error = answer.get("error") if isinstance(answer, dict) else None
            if (
                error == "use_dpop_nonce"
                and self.dpop is not None
                and response.headers.get("DPoP-Nonce")
                and attempt == 0
            ):
                continue  # RFC 9449 section 8: once more, with the server's nonce
            if response.status_code != 200 or not isinstance(answer, dict):
                described = answer.get("error_description") if isinstance(answer, dict) else None
                raise AuthorizationError(
                    f"the token endpoint {self.url} refused the {params.get('grant_type')} "
                    f"grant (HTTP {response.status_code}"
                    + (f", {error}" if error else "")
                    + (f": {described}" if described else "")
                    + ")"
                )
            if not isinstance(answer.get("access_token"), str):
                raise AuthorizationError(f"the token endpoint {self.url} sent no access_token")
            token_type = str(answer.get("token_type") or "Bearer")
            if token_type.lower() not in ("bearer", "dpop"):
                raise AuthorizationError(f"unsupported token type {token_type!r}")
            if token_type.lower() == "dpop" and self.dpop is None:
                raise AuthorizationError("the server issued a DPoP token without a DPoP proof")
            return Token.from_response(answer, self.metadata.issuer, scopes)
        raise AuthorizationError(f"the token endpoint {self.url} kept asking for a DPoP nonce")
