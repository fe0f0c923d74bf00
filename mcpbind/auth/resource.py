"""The resource server's side of MCP authorization: every request's bearer token is checked
before any session work, and the protected resource metadata (RFC 9728) says where tokens come
from.

``ResourceServer(resource, authorization_server)`` verifies tokens either as JWTs signed with
the authorization server's keys (its ``jwks_uri``, read from its RFC 8414 metadata; the key
set is cached and fetched again when a token names an unknown ``kid``, at most once per
``jwks_refresh_interval`` whether the fetch succeeds or fails; concurrent requests share the
fetch in flight, and a token whose key is cached never waits on one) or, given ``introspection_client``, by asking the server's RFC 7662
introspection endpoint. The token must be issued by ``authorization_server`` (``iss``), for
this resource (``aud``), unexpired, and carry the required scopes. ``check(headers)`` returns
the ``AuthInfo`` of a good token, or the ready ``Response``: 401 with a ``WWW-Authenticate``
challenge naming ``resource_metadata`` and the scopes (``invalid_token`` when a token was
sent), 403 ``insufficient_scope``, 503 when the authorization server cannot be reached.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
import msgspec
from authlib.oauth2.auth import ClientAuth  # type: ignore[import-untyped]
from joserfc import jwt
from joserfc.errors import ExpiredTokenError, InvalidKeyIdError, JoseError
from joserfc.jwk import KeySet
from joserfc.jwt import JWTClaimsRegistry
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .challenge import render_challenge
from .discovery import PRM_WELL_KNOWN, AuthServerMetadata, authorization_server_metadata
from .errors import AuthorizationError
from .fetch import get_json, post_form

__all__ = ["AuthInfo", "ResourceServer", "principal"]

#: The signing algorithms accepted by default (asymmetric only: a resource server holds no
#: secret it shares with the authorization server).
ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)


@dataclass(frozen=True)
class AuthInfo:
    """A verified token: who it is for (``subject``), which client holds it, its scopes,
    when it expires, every claim (or introspection field) it carried, and the authorization
    server that issued it (``issuer``)."""

    token: str
    subject: str | None
    client_id: str | None
    scopes: tuple[str, ...]
    expires_at: int | None
    claims: Mapping[str, Any] = field(default_factory=dict)
    issuer: str | None = None


def principal(auth: AuthInfo | None) -> str | None:
    """Who a request comes from, the one key sessions, their streams and event logs, tasks and
    the gateway's links are bound to (docs/auth.md): the token's issuer and subject; its issuer
    and client id when it has no subject; its issuer and the token's digest when it names
    neither (that token alone). None without authorization (every request is one principal)."""
    if auth is None:
        return None
    if auth.subject is not None:
        who = ["sub", auth.subject]
    elif auth.client_id is not None:
        who = ["client", auth.client_id]
    else:
        who = ["token", hashlib.sha256(auth.token.encode()).hexdigest()]
    return msgspec.json.encode([auth.issuer, *who]).decode()


class _Invalid(Exception):
    """A token that does not pass: why (sent back as ``error_description``)."""


class ResourceServer:
    """Bearer-token checks for one protected resource (the MCP endpoint's URL).

    ``required_scopes`` must all be granted (else 403 ``insufficient_scope``);
    ``scopes_supported`` is published in the metadata (default: the required scopes).
    ``audience`` is what ``aud`` must contain (default: ``resource``). ``leeway`` (default 0 s)
    tolerates clock skew on ``exp``/``nbf``. ``max_keys`` (default 100) bounds the key set
    taken from the authorization server; ``jwks_refresh_interval`` (default 30 s) how often an
    unknown ``kid`` (or, while there is no key set, any token) may cause it to be fetched again,
    successfully or not; ``metadata_max_age`` (default 3600 s) how long the authorization
    server's metadata is kept; ``timeout`` (default 10 s) each fetch, whole.
    """

    def __init__(
        self,
        resource: str,
        authorization_server: str,
        *,
        required_scopes: Sequence[str] = (),
        scopes_supported: Sequence[str] | None = None,
        audience: str | None = None,
        introspection_client: tuple[str, str] | None = None,
        algorithms: Sequence[str] = ALGORITHMS,
        leeway: int = 0,
        max_keys: int = 100,
        jwks_refresh_interval: float = 30.0,
        metadata_max_age: float = 3600.0,
        timeout: float = 10.0,
        resource_name: str | None = None,
    ) -> None:
        self.resource = resource
        self.issuer = authorization_server
        self.required_scopes = tuple(required_scopes)
        self.scopes_supported = (
            list(scopes_supported) if scopes_supported is not None else list(required_scopes)
        )
        self.audience = audience or resource
        self.introspection_client = introspection_client
        self.algorithms = list(algorithms)
        self.leeway = leeway
        self.max_keys = max_keys
        self.jwks_refresh_interval = jwks_refresh_interval
        self.metadata_max_age = metadata_max_age
        self.timeout = timeout
        self.resource_name = resource_name
        parts = urlsplit(resource)
        #: Where the metadata document is served: the path-based well-known URL (RFC 9728).
        self.metadata_path = PRM_WELL_KNOWN + parts.path.rstrip("/")
        self.metadata_url = urlunsplit((parts.scheme, parts.netloc, self.metadata_path, "", ""))
        self._metadata: AuthServerMetadata | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None
        self._tried_at = -float("inf")  # time.monotonic() of the last fetch, done or failed
        self._failed: AuthorizationError | None = None  # why the last fetch failed
        self._fetch: asyncio.Task[KeySet] | None = None  # the fetch in flight, shared

    # -- the metadata document ---------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The protected resource metadata document."""
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        }
        if self.scopes_supported:
            document["scopes_supported"] = self.scopes_supported
        if self.resource_name:
            document["resource_name"] = self.resource_name
        return document

    async def _metadata_endpoint(self, request: Request) -> Response:
        return JSONResponse(self.metadata(), headers={"Cache-Control": "max-age=3600"})

    @property
    def metadata_route(self) -> Route:
        """A starlette route serving the metadata document at ``metadata_path``."""
        return Route(self.metadata_path, self._metadata_endpoint, methods=["GET"])

    # -- the check -------------------------------------------------------------------------

    def _challenge(self, status: int, error: str | None, description: str | None) -> Response:
        params: dict[str, str] = {}
        if error:
            params["error"] = error
        if description:
            params["error_description"] = description.replace('"', "'")
        if self.required_scopes:
            params["scope"] = " ".join(self.required_scopes)
        params["resource_metadata"] = self.metadata_url
        body = {"error": error or "unauthorized", "error_description": description or ""}
        return JSONResponse(
            body,
            status_code=status,
            headers={"WWW-Authenticate": render_challenge("Bearer", params)},
        )

    async def check(self, headers: Mapping[str, str]) -> AuthInfo | Response:
        """The ``AuthInfo`` of the request's bearer token, or the response refusing it."""
        header = headers.get("authorization") or headers.get("Authorization")
        if not header:
            return self._challenge(401, None, None)
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return self._challenge(401, "invalid_request", "expected a Bearer token")
        try:
            info = await (
                self._introspect(token) if self.introspection_client else self._jwt(token)
            )
        except _Invalid as why:
            return self._challenge(401, "invalid_token", str(why))
        except AuthorizationError as error:
            return JSONResponse(
                {"error": "temporarily_unavailable", "error_description": error.message},
                status_code=503,
                headers={"Retry-After": self._retry_after()},
            )
        missing = [s for s in self.required_scopes if s not in info.scopes]
        if missing:
            return self._challenge(
                403, "insufficient_scope", f"the token lacks {' '.join(missing)}"
            )
        return info

    def _retry_after(self) -> str:
        """The seconds until the authorization server is asked again (the refresh interval
        since the last try; at least 1): a 503's ``Retry-After``."""
        wait = self.jwks_refresh_interval - (time.monotonic() - self._tried_at)
        return str(max(1, math.ceil(min(wait, self.jwks_refresh_interval))))

    # -- the authorization server --------------------------------------------------------------

    async def _server(self, http: httpx.AsyncClient) -> AuthServerMetadata:
        if self._metadata is None or time.monotonic() - self._metadata_at > self.metadata_max_age:
            self._metadata = await authorization_server_metadata(http, self.issuer)
            self._metadata_at = time.monotonic()
        return self._metadata

    async def _key_set(self, stale: bool) -> KeySet:
        """The authorization server's keys. The cached set is returned at once (never waiting
        on a fetch) unless ``stale`` (a token named a kid the set lacks) or there is none yet;
        then the set is fetched again, at most once per refresh interval whether that fetch
        succeeds or fails (within it, the cached set, or the last failure), and every request
        that needs it meanwhile awaits the one fetch in flight."""
        keys = self._keys
        if keys is not None and not stale:
            return keys
        fetch = self._fetch
        if fetch is None or fetch.get_loop() is not asyncio.get_running_loop():
            if time.monotonic() - self._tried_at < self.jwks_refresh_interval:
                if keys is not None:
                    return keys  # fetched lately: an unknown kid stays unknown
                if self._failed is not None:
                    raise _again(self._failed)
            self._tried_at = time.monotonic()
            fetch = self._fetch = asyncio.ensure_future(self._fetch_keys())
            fetch.add_done_callback(self._fetched)
        try:  # shielded: a request that goes away does not cancel the fetch the others await
            return await asyncio.shield(fetch)
        except AuthorizationError as error:
            raise _again(error) from None

    def _fetched(self, fetch: asyncio.Task[KeySet]) -> None:
        if self._fetch is fetch:
            self._fetch = None
        if not fetch.cancelled() and fetch.exception() is None:
            self._keys = fetch.result()

    async def _fetch_keys(self) -> KeySet:
        """The key set at the authorization server's ``jwks_uri``, the whole fetch (metadata
        and key set) within ``timeout``; ``AuthorizationError`` (kept for the refresh
        interval) when it cannot be had."""
        try:
            async with asyncio.timeout(self.timeout):
                async with httpx.AsyncClient(timeout=self.timeout) as http:
                    jwks_uri = (await self._server(http)).endpoint("jwks_uri")
                    status, document = await get_json(http, jwks_uri)
                keys = document.get("keys") if isinstance(document, dict) else None
                if status != 200 or not isinstance(keys, list):
                    raise AuthorizationError(f"no key set at {jwks_uri} (HTTP {status})")
                if len(keys) > self.max_keys:
                    raise AuthorizationError(
                        f"the key set at {jwks_uri} holds {len(keys)} keys, more than "
                        f"{self.max_keys}"
                    )
                try:
                    found = KeySet.import_key_set({"keys": keys})
                except (JoseError, ValueError, TypeError) as error:
                    raise AuthorizationError(
                        f"the key set at {jwks_uri} cannot be read: {error}"
                    ) from None
        except TimeoutError:
            self._failed = AuthorizationError(
                f"the authorization server's key set did not come within {self.timeout:g} s"
            )
            raise self._failed from None
        except AuthorizationError as error:
            self._failed = error
            raise
        self._failed = None
        return found

    async def _jwt(self, token: str) -> AuthInfo:
        keys = await self._key_set(stale=False)
        try:
            try:
                decoded = jwt.decode(token, keys, algorithms=self.algorithms)
            except InvalidKeyIdError:
                decoded = jwt.decode(
                    token, await self._key_set(stale=True), algorithms=self.algorithms
                )
            claims = decoded.claims
            JWTClaimsRegistry(
                leeway=self.leeway,
                iss={"essential": True, "value": self.issuer},
                aud={"essential": True, "value": self.audience},
                exp={"essential": True},
            ).validate(claims)
        except InvalidKeyIdError:
            raise _Invalid(
                "the token is signed with a key the authorization server does not list"
            ) from None
        except ExpiredTokenError:
            raise _Invalid("the token has expired") from None
        except JoseError as error:
            detail = f"{error.error}: {error.description}" if error.description else error.error
            raise _Invalid(f"the token does not verify ({detail})") from None
        except ValueError:
            raise _Invalid("the token is not a JWT") from None
        return _info(token, claims, self.issuer)

    async def _introspect(self, token: str) -> AuthInfo:
        assert self.introspection_client is not None
        client_id, secret = self.introspection_client
        async with httpx.AsyncClient(timeout=self.timeout) as http:
            endpoint = (await self._server(http)).endpoint("introspection_endpoint")
            headers: dict[str, str] = {}
            _, _, body = ClientAuth(client_id, secret, "client_secret_basic").prepare(
                "POST", endpoint, headers, urlencode({"token": token})
            )
            response, answer = await post_form(http, endpoint, str(body), headers)
        if response.status_code != 200 or not isinstance(answer, dict):
            raise AuthorizationError(
                f"introspection at {endpoint} failed (HTTP {response.status_code})"
            )
        if answer.get("active") is not True:
            raise _Invalid("the token is not active")
        if "iss" in answer and answer["iss"] != self.issuer:
            raise _Invalid("the token was issued by another authorization server")
        audience = answer.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.audience not in audiences:
            raise _Invalid("the token is not for this resource")
        exp = answer.get("exp")
        if isinstance(exp, int) and exp + self.leeway < time.time():
            raise _Invalid("the token has expired")
        return _info(token, answer, self.issuer)


def _again(error: AuthorizationError) -> AuthorizationError:
    """A new exception saying what ``error`` says: one kept and raised to many requests would
    gather every raise's traceback."""
    fresh = AuthorizationError("", error.status)
    fresh.message = error.message
    fresh.args = (error.message,)
    return fresh


def _info(token: str, claims: Mapping[str, Any], issuer: str) -> AuthInfo:
    scope = claims.get("scope")
    scopes = scope.split() if isinstance(scope, str) else claims.get("scp") or []
    client = claims.get("client_id") or claims.get("azp")
    exp = claims.get("exp")
    subject = claims.get("sub")
    return AuthInfo(
        token=token,
        subject=subject if isinstance(subject, str) else None,
        client_id=client if isinstance(client, str) else None,
        scopes=tuple(s for s in scopes if isinstance(s, str)),
        expires_at=exp if isinstance(exp, int) else None,
        claims=dict(claims),
        issuer=issuer,
    )
