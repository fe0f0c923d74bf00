"""Which client id to present to an authorization server: a pre-registered one, a client ID
metadata document URL, or one registered on the spot (RFC 7591), in that order."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from .discovery import AuthServerMetadata
from .errors import AuthorizationError
from .fetch import read_json
from .store import ClientInfo, TokenStore

__all__ = ["Registration", "client_for"]


@dataclass
class Registration:
    """What the application knows about its own client.

    ``client_id``/``client_secret``: a pre-registered client, used at ``issuer`` only (at any
    server when ``issuer`` is None). ``metadata_url``: the HTTPS URL of the client's ID
    metadata document, used as its client id where the server advertises
    ``client_id_metadata_document_supported``. Otherwise the client registers dynamically with
    ``client_name``, ``redirect_uri`` and ``grant_types`` (``refresh_token`` included, so the
    server may issue refresh tokens); the registration is kept in the token store per issuer
    and never presented to another server."""

    client_id: str | None = None
    client_secret: str | None = None
    issuer: str | None = None
    metadata_url: str | None = None
    client_name: str = "mcpbind"
    redirect_uri: str = "http://127.0.0.1:33418/callback"
    grant_types: list[str] = field(default_factory=lambda: ["authorization_code", "refresh_token"])
    application_type: str = "native"


def _register_method(metadata: AuthServerMetadata) -> str:
    """The authentication method to ask for: none (a public client) where supported."""
    listed = metadata.get("token_endpoint_auth_methods_supported")
    supported = listed if isinstance(listed, list) and listed else ["client_secret_basic"]
    for method in ("none", "client_secret_basic", "client_secret_post"):
        if method in supported:
            return method
    return "client_secret_basic"


async def client_for(
    http: httpx.AsyncClient,
    metadata: AuthServerMetadata,
    registration: Registration,
    store: TokenStore,
) -> ClientInfo:
    """The client's identity at this authorization server; ``AuthorizationError`` when it has
    none and cannot register."""
    issuer = metadata.issuer
    if registration.client_id and registration.issuer in (None, issuer):
        return ClientInfo(registration.client_id, registration.client_secret, None, issuer)
    stored = await store.get_client(issuer)
    if stored is not None:
        return stored
    if registration.metadata_url and metadata.get("client_id_metadata_document_supported") is True:
        return ClientInfo(registration.metadata_url, None, "none", issuer)
    endpoint = metadata.get("registration_endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise AuthorizationError(
            f"no client id for {issuer}: it offers no dynamic registration, and no "
            "pre-registered client or client ID metadata document applies"
        )
    method = _register_method(metadata)
    request = {
        "client_name": registration.client_name,
        "redirect_uris": [registration.redirect_uri],
        "grant_types": registration.grant_types,
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
        "application_type": registration.application_type,
    }
    try:
        async with http.stream("POST", endpoint, json=request) as response:
            answer = await read_json(response)
            status = response.status_code
    except httpx.HTTPError as error:
        raise AuthorizationError(f"registration at {endpoint}: {error}") from error
    if status not in (200, 201) or not isinstance(answer, dict):
        raise AuthorizationError(f"registration at {endpoint} failed (HTTP {status}): {answer!r}")
    client_id = answer.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise AuthorizationError(f"registration at {endpoint} returned no client_id")
    secret = answer.get("client_secret")
    registered = answer.get("token_endpoint_auth_method")
    client = ClientInfo(
        client_id,
        secret if isinstance(secret, str) else None,
        registered if isinstance(registered, str) else method,
        issuer,
    )
    await store.set_client(issuer, client)
    return client
