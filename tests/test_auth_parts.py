"""The pure parts of mcpbind.auth: challenges, where metadata is looked for, resource matching,
token endpoint authentication choice, DPoP proofs, the token store's bound and the principal a
token names."""

from __future__ import annotations

import asyncio
import base64
import hashlib

from joserfc import jwt
from joserfc.jwk import ECKey

from mcpbind.auth import ClientInfo, DPoPKey, MemoryTokenStore, Token, parse_challenges
from mcpbind.auth.challenge import render_challenge
from mcpbind.auth.discovery import AuthServerMetadata, metadata_urls, prm_urls, resource_matches
from mcpbind.auth.endpoint import choose_auth_method
from mcpbind.auth.resource import AuthInfo, principal


def test_challenges_are_read_with_quoted_values_and_several_schemes() -> None:
    header = (
        'Bearer error="insufficient_scope", scope="a b", '
        'resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", '
        'DPoP algs="ES256", error="use_dpop_nonce"'
    )
    bearer, dpop = parse_challenges(header)
    assert bearer.scheme == "Bearer" and bearer.scopes == ["a", "b"]
    assert bearer.params["resource_metadata"].endswith("/oauth-protected-resource/mcp")
    assert (dpop.scheme, dpop.params) == ("DPoP", {"algs": "ES256", "error": "use_dpop_nonce"})
    assert parse_challenges("Bearer") == parse_challenges("Bearer ")
    assert parse_challenges(None) == [] and parse_challenges("x" * 10_000) == []


def test_a_rendered_challenge_reads_back() -> None:
    params = {"error": "invalid_token", "error_description": 'say "no"', "scope": "a"}
    (challenge,) = parse_challenges(render_challenge("Bearer", params))
    assert challenge.params == params


def test_metadata_is_looked_for_where_the_specification_says() -> None:
    assert prm_urls("http://h:1/api/mcp", None) == [
        "http://h:1/.well-known/oauth-protected-resource/api/mcp",
        "http://h:1/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("http://h/mcp", "http://h/x.json")[0] == "http://h/x.json"
    assert metadata_urls("https://as") == [
        "https://as/.well-known/oauth-authorization-server",
        "https://as/.well-known/openid-configuration",
    ]
    assert metadata_urls("https://as/tenant1") == [
        "https://as/.well-known/oauth-authorization-server/tenant1",
        "https://as/.well-known/openid-configuration/tenant1",
        "https://as/tenant1/.well-known/openid-configuration",
    ]


def test_a_resource_names_a_server_by_origin_and_path_prefix() -> None:
    assert resource_matches("http://h:1/mcp", "http://H:1/mcp")
    assert resource_matches("http://h:1", "http://h:1/mcp")
    assert resource_matches("http://h:1/", "http://h:1/mcp")
    assert not resource_matches("https://evil.example.com/mcp", "http://h:1/mcp")
    assert not resource_matches("http://h:1/mc", "http://h:1/mcp")
    assert not resource_matches("http://h:2/mcp", "http://h:1/mcp")


def test_the_token_endpoint_method_follows_registration_and_server_support() -> None:
    def server(methods: list[str] | None) -> AuthServerMetadata:
        doc = {} if methods is None else {"token_endpoint_auth_methods_supported": methods}
        return AuthServerMetadata("https://as", doc)

    secret = ClientInfo("c", "s")
    assert choose_auth_method(secret, server(["client_secret_post"])) == "client_secret_post"
    assert choose_auth_method(secret, server(None)) == "client_secret_basic"
    assert choose_auth_method(ClientInfo("c"), server(["none", "client_secret_basic"])) == "none"
    registered = ClientInfo("c", "s", "client_secret_post")
    assert choose_auth_method(
        registered, server(["client_secret_basic", "client_secret_post"])
    ) == ("client_secret_post")


def test_a_dpop_proof_carries_what_rfc_9449_asks() -> None:
    key = DPoPKey()
    key.remember_nonce("http://h:1/other", "n-1")
    proof = key.proof("post", "http://h:1/mcp?x=1#f", access_token="tok")
    decoded = jwt.decode(proof, ECKey.import_key(key.public_jwk), algorithms=["ES256"])
    assert decoded.header["typ"] == "dpop+jwt" and "d" not in decoded.header["jwk"]
    claims = decoded.claims
    assert (claims["htm"], claims["htu"], claims["nonce"]) == ("POST", "http://h:1/mcp", "n-1")
    digest = base64.urlsafe_b64encode(hashlib.sha256(b"tok").digest()).rstrip(b"=").decode()
    assert claims["ath"] == digest
    assert (
        jwt.decode(key.proof("POST", "http://h:1/mcp"), ECKey.import_key(key.public_jwk)).claims[
            "jti"
        ]
        != claims["jti"]
    )


def test_the_memory_store_keeps_at_most_its_bound() -> None:
    async def run() -> list[bool]:
        store = MemoryTokenStore(max_entries=2)
        for name in "abc":
            await store.set_token(name, Token(name))
        return [await store.get_token(name) is not None for name in "abc"]

    assert asyncio.run(run()) == [False, True, True]


def test_a_principal_is_the_issuer_with_the_subject_else_the_client_else_the_token() -> None:
    def info(
        subject: str | None, client: str | None, issuer: str = "https://as", token: str = "t"
    ) -> AuthInfo:
        return AuthInfo(token, subject, client, (), None, {}, issuer)

    alice = principal(info("alice", "app"))
    assert alice == principal(info("alice", "other app", token="u"))  # the user, by any client
    assert alice != principal(info("alice", "app", issuer="https://other-as"))
    assert principal(info(None, "app")) != principal(info(None, "other app"))
    # A client id equal to a subject names another principal.
    assert principal(info(None, "alice")) != alice
    # Neither: the token alone.
    assert principal(info(None, None)) == principal(info(None, None))
    assert principal(info(None, None)) != principal(info(None, None, token="u"))
    assert principal(None) is None  # no authorization: every request is one principal
