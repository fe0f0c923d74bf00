"""DPoP (RFC 9449): a key pair the client proves possession of, with a fresh proof JWT for
each request, and the nonces servers hand out (``DPoP-Nonce``)."""

from __future__ import annotations

import base64
import hashlib
import threading
import time
import uuid
from collections import OrderedDict
from urllib.parse import urlsplit, urlunsplit

from joserfc import jwt
from joserfc.jwk import ECKey

__all__ = ["DPoPKey"]

# The curve of each algorithm a DPoPKey can be made for.
_CURVES = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


class DPoPKey:
    """One DPoP key pair (an EC key, ``alg`` ES256 by default), made once per client.

    ``proof(method, url, access_token=...)`` signs a new proof (its own ``jti``, ``iat`` now,
    ``htu`` without query or fragment, ``ath`` when a token is presented, the last nonce the
    URL's origin sent). ``remember_nonce`` keeps a server's nonce; at most ``max_nonces``
    origins are remembered (default 100)."""

    def __init__(self, alg: str = "ES256", max_nonces: int = 100) -> None:
        if alg not in _CURVES:
            raise ValueError(f"DPoP algorithm {alg!r} is not one of {sorted(_CURVES)}")
        self.alg = alg
        self._key = ECKey.generate_key(_CURVES[alg])
        self.public_jwk = self._key.as_dict(private=False)
        self.max_nonces = max_nonces
        self._nonces: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def thumbprint(self) -> str:
        """The key's JWK SHA-256 thumbprint (RFC 7638): what a bound token's ``cnf.jkt`` holds."""
        return self._key.thumbprint()

    def remember_nonce(self, url: str, nonce: str | None) -> None:
        """Keep the nonce the server at ``url`` sent, for the proofs that follow."""
        if not nonce:
            return
        with self._lock:
            self._nonces[_origin(url)] = nonce
            self._nonces.move_to_end(_origin(url))
            while len(self._nonces) > self.max_nonces:
                self._nonces.popitem(last=False)

    def nonce(self, url: str) -> str | None:
        """The last nonce the server at ``url`` sent."""
        with self._lock:
            return self._nonces.get(_origin(url))

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A fresh proof for one request."""
        parts = urlsplit(url)
        claims: dict[str, object] = {
            "jti": str(uuid.uuid4()),
            "htm": method.upper(),
            "htu": urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")),
            "iat": int(time.time()),
        }
        if access_token is not None:
            digest = hashlib.sha256(access_token.encode("ascii")).digest()
            claims["ath"] = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        nonce = self.nonce(url)
        if nonce is not None:
            claims["nonce"] = nonce
        header = {"typ": "dpop+jwt", "alg": self.alg, "jwk": self.public_jwk}
        return jwt.encode(header, claims, self._key, algorithms=[self.alg])
