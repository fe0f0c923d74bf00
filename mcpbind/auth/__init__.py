"""MCP authorization (OAuth 2.1), both sides, in the ``mcpbind[http]`` extra.

Client: ``OAuthClient(grant)`` passed as ``StreamableHTTPClient(..., auth=...)`` discovers the
authorization server from the server's 401 (RFC 9728, RFC 8414), registers or uses a known
client, obtains a token with ``grant`` (``AuthorizationCode`` with PKCE, or the extensions'
``ClientCredentials``, ``JWTBearer``, ``EnterpriseManaged``), steps up on 403
``insufficient_scope`` and refreshes. Server: ``ResourceServer`` checks bearer tokens before
any session work and serves the protected resource metadata. docs/auth.md has both in a page.
"""

from .challenge import Challenge, parse_challenges
from .client import OAuthClient
from .dpop import DPoPKey
from .errors import AuthorizationError
from .grants import AuthorizationCode, ClientCredentials, EnterpriseManaged, JWTBearer, UserAgent
from .registration import Registration
from .store import ClientInfo, MemoryTokenStore, Token, TokenStore

__all__ = [
    "AuthorizationCode",
    "AuthorizationError",
    "Challenge",
    "ClientCredentials",
    "ClientInfo",
    "DPoPKey",
    "EnterpriseManaged",
    "JWTBearer",
    "MemoryTokenStore",
    "OAuthClient",
    "Registration",
    "Token",
    "TokenStore",
    "UserAgent",
    "parse_challenges",
]
