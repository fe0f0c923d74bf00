"""A small OAuth 2.1 authorization server for the resource-server tests, built on authlib
(Flask integration): RFC 8414 metadata, a JWKS, the client credentials grant issuing RFC 9068
JWT access tokens whose ``aud`` is the ``resource`` asked for (RFC 8707), and RFC 7662
introspection. Run as ``python authserver.py PORT KEYFILE``: the issuer is
``http://127.0.0.1:PORT``, tokens are signed with the EC key in KEYFILE (made when missing), so
two servers on one key issue tokens that verify alike but name different issuers.

Clients (all ``client_secret_basic`` or ``client_secret_post``):

- ``app`` / ``app-secret``: tokens for an hour, any of the scopes ``mcp:read mcp:write``;
- ``other`` / ``other-secret``: the same for another subject (a second user);
- ``anon-1``, ``anon-2`` (secrets ``anon-1-secret``, ...): tokens for an hour without ``sub``,
  naming only their ``client_id``;
- ``stale`` / ``stale-secret``: tokens that expired a minute before they were issued (an old
  token, without waiting for one to age);
- ``rs`` / ``rs-secret``: the resource server's own client, allowed to introspect.

The JWKS can be made to misbehave, for the tests of key refresh: ``POST /jwks/mode`` with the
JSON ``{"fail": true}`` answers it with 500, ``{"delay": SECONDS}`` answers it that late,
``{"drip": SECONDS}`` sends its body a byte at a time, one every SECONDS, ``{}`` as usual;
``GET /jwks/count`` is how many times it was asked for.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from authlib.integrations.flask_oauth2 import AuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc7662 import IntrospectionEndpoint
from authlib.oauth2.rfc9068 import JWTBearerTokenGenerator
from flask import Flask, Response, jsonify, request
from joserfc.jwk import ECKey, KeySet

SCOPES = ["mcp:read", "mcp:write"]
LIFETIMES = {"app": 3600, "other": 3600, "anon-1": 3600, "anon-2": 3600, "stale": -60, "rs": 3600}
NO_SUBJECT = {"anon-1", "anon-2"}


class Client(ClientMixin):
    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self.client_secret = f"{client_id}-secret"

    def get_client_id(self) -> str:
        return self.client_id

    def get_default_redirect_uri(self) -> None:
        return None

    def get_allowed_scope(self, scope: str) -> str:
        return " ".join(s for s in (scope or "").split() if s in SCOPES)

    def check_redirect_uri(self, redirect_uri: str) -> bool:
        return False

    def check_client_secret(self, client_secret: str) -> bool:
        return client_secret == self.client_secret

    def check_endpoint_auth_method(self, method: str, endpoint: str) -> bool:
        return method in ("client_secret_basic", "client_secret_post")

    def check_response_type(self, response_type: str) -> bool:
        return False

    def check_grant_type(self, grant_type: str) -> bool:
        return grant_type == "client_credentials"


class Issued:
    """An issued token, as introspection needs it."""

    def __init__(self, claims: dict[str, Any]) -> None:
        self.claims = claims

    def is_expired(self) -> bool:
        return bool(self.claims["exp"] < time.time())

    def is_revoked(self) -> bool:
        return False


def main(port: int, keyfile: Path) -> None:
    issuer = f"http://127.0.0.1:{port}"
    if not keyfile.exists():
        keyfile.write_text(ECKey.generate_key("P-256").as_pem(private=True).decode())
    key = ECKey.import_key(keyfile.read_text(), {"kid": "test-key", "use": "sig", "alg": "ES256"})
    keys = KeySet([key])
    clients = {name: Client(name) for name in LIFETIMES}
    issued: dict[str, Issued] = {}

    class Tokens(JWTBearerTokenGenerator):  # type: ignore[misc]
        def get_jwks(self) -> dict[str, Any]:
            return keys.as_dict(private=True)

        def get_audiences(self, client: Client, user: Any, scope: str) -> str:
            return request.form.get("resource") or client.client_id

        def access_token_generator(
            self, client: Client, grant_type: str, user: Any, scope: str
        ) -> str:
            token = super().access_token_generator(client, grant_type, user, scope)
            if client.client_id not in NO_SUBJECT:
                return str(token)
            from joserfc import jwt

            decoded = jwt.decode(token, keys)
            claims = {k: v for k, v in decoded.claims.items() if k != "sub"}
            return jwt.encode(decoded.header, claims, keys)

    class Introspection(IntrospectionEndpoint):  # type: ignore[misc]
        CLIENT_AUTH_METHODS = ["client_secret_basic"]

        def query_token(self, token: str, hint: str | None) -> Issued | None:
            return issued.get(token)

        def check_permission(self, token: Issued, client: Client, req: Any) -> bool:
            return client.client_id == "rs"

        def introspect_token(self, token: Issued) -> dict[str, Any]:
            return {"active": True, "token_type": "Bearer", **token.claims}

    class ClientCredentials(grants.ClientCredentialsGrant):  # type: ignore[misc]
        TOKEN_ENDPOINT_AUTH_METHODS = ["client_secret_basic", "client_secret_post"]

    app = Flask(__name__)

    def save_token(token: dict[str, Any], req: Any) -> None:
        from joserfc import jwt

        issued[token["access_token"]] = Issued(jwt.decode(token["access_token"], keys).claims)

    server = AuthorizationServer(app, query_client=clients.get, save_token=save_token)
    server.register_grant(ClientCredentials)
    server.register_token_generator(
        "default",
        Tokens(issuer, alg="ES256", expires_generator=lambda c, g: LIFETIMES[c.client_id]),
    )
    server.register_endpoint(Introspection)

    @app.get("/.well-known/oauth-authorization-server")
    def metadata() -> Any:
        return jsonify(
            issuer=issuer,
            token_endpoint=f"{issuer}/token",
            jwks_uri=f"{issuer}/jwks",
            introspection_endpoint=f"{issuer}/introspect",
            grant_types_supported=["client_credentials"],
            token_endpoint_auth_methods_supported=["client_secret_basic", "client_secret_post"],
            scopes_supported=SCOPES,
            response_types_supported=["token"],
        )

    jwks_mode: dict[str, Any] = {}
    jwks_count = [0]
    counting = threading.Lock()

    @app.get("/jwks")
    def jwks() -> Any:
        with counting:
            jwks_count[0] += 1
        mode = dict(jwks_mode)
        time.sleep(float(mode.get("delay", 0)))
        if mode.get("fail"):
            return jsonify(error="the key set is down"), 500
        if mode.get("drip"):
            body = json.dumps(keys.as_dict(private=False)).encode()

            def dripping() -> Iterator[bytes]:
                for byte in body:
                    yield bytes([byte])
                    time.sleep(float(mode["drip"]))

            return Response(dripping(), mimetype="application/json")
        return jsonify(keys.as_dict(private=False))

    @app.post("/jwks/mode")
    def set_jwks_mode() -> Any:
        jwks_mode.clear()
        jwks_mode.update(request.get_json())
        return jsonify(jwks_mode)

    @app.get("/jwks/count")
    def count_jwks() -> Any:
        with counting:
            return jsonify(count=jwks_count[0])

    @app.post("/token")
    def token() -> Any:
        return server.create_token_response()

    @app.post("/introspect")
    def introspect() -> Any:
        return server.create_endpoint_response(Introspection.ENDPOINT_NAME)

    app.run(host="127.0.0.1", port=port, threaded=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
