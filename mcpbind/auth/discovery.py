"""Where a protected MCP server's authorization server is, and what it says about itself.

Protected resource metadata (RFC 9728) is read from the ``resource_metadata`` URL of the
challenge, else from the path-based well-known URL of the server, else from the root one; its
``resource`` must name the server (same origin, a path the server's path lies under). The
authorization server's metadata (RFC 8414) is read from the well-known URLs the MCP
specification lists, OpenID Connect discovery as the fall-back, and is used only when its
``issuer`` is, character for character, the issuer it was looked up for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from .errors import AuthorizationError
from .fetch import get_json

__all__ = [
    "AuthServerMetadata",
    "ResourceMetadata",
    "authorization_server_metadata",
    "metadata_urls",
    "protected_resource_metadata",
    "resource_matches",
]

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"
_ACCEPT = {"Accept": "application/json"}


@dataclass
class ResourceMetadata:
    """The protected resource metadata document that was used, and where it came from."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str] | None
    url: str
    document: dict[str, Any]


@dataclass
class AuthServerMetadata:
    """An authorization server's metadata, its issuer checked."""

    issuer: str
    document: dict[str, Any]

    def get(self, name: str, default: Any = None) -> Any:
        """One metadata field."""
        return self.document.get(name, default)

    def endpoint(self, name: str) -> str:
        """An endpoint the flow needs (``token_endpoint``...), or the error saying it is
        missing."""
        value = self.document.get(name)
        if not isinstance(value, str) or not value:
            raise AuthorizationError(f"the authorization server {self.issuer} has no {name}")
        return value

    def supports(self, field: str, value: str) -> bool:
        """Whether a ``*_supported`` list names the value."""
        listed = self.document.get(field)
        return isinstance(listed, list) and value in listed


def _split(url: str) -> tuple[str, str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.netloc.lower(), parts.path


def resource_matches(resource: str, server_url: str) -> bool:
    """Whether a metadata ``resource`` names the server at ``server_url``: the same scheme,
    host and port, and a path the server's path equals or lies under (segment-wise)."""
    scheme, netloc, path = _split(resource)
    server_scheme, server_netloc, server_path = _split(server_url)
    if not scheme or (scheme, netloc) != (server_scheme, server_netloc):
        return False
    base = path.rstrip("/")
    return server_path.rstrip("/") == base or server_path.startswith(base + "/")


def prm_urls(server_url: str, hinted: str | None) -> list[str]:
    """Where to look for the server's protected resource metadata, in order."""
    scheme, netloc, path = _split(server_url)
    urls = [hinted] if hinted else []
    if path.strip("/"):
        urls.append(urlunsplit((scheme, netloc, PRM_WELL_KNOWN + path.rstrip("/"), "", "")))
    urls.append(urlunsplit((scheme, netloc, PRM_WELL_KNOWN, "", "")))
    return list(dict.fromkeys(urls))


async def protected_resource_metadata(
    http: httpx.AsyncClient, server_url: str, hinted: str | None
) -> ResourceMetadata:
    """The server's protected resource metadata, its ``resource`` checked against the server;
    ``AuthorizationError`` when none can be found or it names another resource."""
    for url in prm_urls(server_url, hinted):
        status, document = await get_json(http, url, headers=_ACCEPT)
        if status != 200 or not isinstance(document, dict):
            continue
        resource = document.get("resource")
        servers = document.get("authorization_servers")
        if not isinstance(resource, str) or not isinstance(servers, list) or not servers:
            raise AuthorizationError(
                f"the protected resource metadata at {url} names no resource or no "
                "authorization server"
            )
        if not resource_matches(resource, server_url):
            raise AuthorizationError(
                f"the protected resource metadata at {url} is for {resource!r}, not for "
                f"{server_url!r}"
            )
        scopes = document.get("scopes_supported")
        return ResourceMetadata(
            resource=resource,
            authorization_servers=[s for s in servers if isinstance(s, str)],
            scopes_supported=(
                [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else None
            ),
            url=url,
            document=document,
        )
    raise AuthorizationError(
        f"no protected resource metadata for {server_url} (looked at "
        f"{', '.join(prm_urls(server_url, hinted))})"
    )


def metadata_urls(issuer: str) -> list[str]:
    """The well-known URLs of an issuer's metadata, in the order the MCP specification gives:
    OAuth then OpenID Connect with the path inserted, then OpenID Connect appended."""
    scheme, netloc, path = _split(issuer)
    path = path.rstrip("/")

    def at(p: str) -> str:
        return urlunsplit((scheme, netloc, p, "", ""))

    if not path:
        return [
            at("/.well-known/oauth-authorization-server"),
            at("/.well-known/openid-configuration"),
        ]
    return [
        at("/.well-known/oauth-authorization-server" + path),
        at("/.well-known/openid-configuration" + path),
        at(path + "/.well-known/openid-configuration"),
    ]


async def authorization_server_metadata(http: httpx.AsyncClient, issuer: str) -> AuthServerMetadata:
    """The metadata of the authorization server ``issuer``; ``AuthorizationError`` when none is
    found or its ``issuer`` differs (compared exactly: no normalization)."""
    for url in metadata_urls(issuer):
        status, document = await get_json(http, url, headers=_ACCEPT)
        if status != 200 or not isinstance(document, dict):
            continue
        if document.get("issuer") != issuer:
            raise AuthorizationError(
                f"the metadata at {url} names issuer {document.get('issuer')!r}, not {issuer!r}"
            )
        return AuthServerMetadata(issuer, document)
    raise AuthorizationError(
        f"no authorization server metadata for {issuer} (looked at {', '.join(metadata_urls(issuer))})"
    )
