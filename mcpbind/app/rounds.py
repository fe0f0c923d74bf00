"""The request state of multi-round-trip requests: the answers of earlier rounds, carried by the
client between rounds and signed, so that a client can neither forge nor alter them, nor replay
them on another request.

The state is ``base64url(payload) "." base64url(HMAC-SHA256(key, payload))`` where the payload is
the JSON ``[binding, answers]``: ``binding`` is a digest of what the request asked (method,
target, arguments), ``answers`` the input responses of every round so far, by ask key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from typing import Any

import msgspec

from .._support import convert
from ..errors import INVALID_PARAMS, ProtocolError

__all__ = ["KEY_BYTES", "RequestState"]

KEY_BYTES = 32  # the shortest key taken, and the length of a random one


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class RequestState:
    """Signs and checks request states with a key of this process (``key``: 32 random bytes by
    default; give the same key to every worker behind one load balancer)."""

    def __init__(self, key: bytes | None = None) -> None:
        if key is not None and len(key) < KEY_BYTES:  # HMAC-SHA256 wants a key as long as it
            raise ValueError(f"a request state key needs at least {KEY_BYTES} bytes")
        self._key = key if key is not None else secrets.token_bytes(KEY_BYTES)

    @staticmethod
    def binding(method: str, target: Any, arguments: Any) -> str:
        """What a state is valid for: the request's method, target and arguments."""
        data = msgspec.json.encode([method, target, msgspec.to_builtins(arguments)], order="sorted")
        return _b64(hashlib.sha256(data).digest())

    def sign(self, binding: str, answers: dict[str, Any]) -> str:
        payload = msgspec.json.encode([binding, msgspec.to_builtins(answers)])
        mac = hmac.new(self._key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def open(self, binding: str, token: Any, kind: Any) -> dict[str, Any]:
        """The answers a state carries, converted to ``kind`` (the type of the input responses);
        -32602 when the state was not issued by this server for this request."""
        bad = ProtocolError(
            INVALID_PARAMS, "Invalid params: requestState was not issued for this request"
        )
        if not isinstance(token, str) or token.count(".") != 1:
            raise bad
        head, mac = token.split(".")
        try:
            payload, given = _unb64(head), _unb64(mac)
        except (ValueError, TypeError):
            raise bad from None
        if not hmac.compare_digest(hmac.new(self._key, payload, hashlib.sha256).digest(), given):
            raise bad
        signed, answers = msgspec.json.decode(payload)
        if signed != binding:
            raise bad
        try:
            found: dict[str, Any] = convert(answers, kind)
        except msgspec.ValidationError:
            raise bad from None
        return found
