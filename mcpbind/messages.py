"""The JSON-RPC envelopes the codec hands out and takes back, the same for every revision."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar, Union

import msgspec
from msgspec import UNSET, UnsetType

__all__ = ["ErrorObject", "ErrorResponse", "Request", "RequestId", "Response"]

T = TypeVar("T")
RequestId = Union[str, int]  # noqa: UP007


class Request(msgspec.Struct, Generic[T], kw_only=True, gc=False):
    """A request of a revision whose generated request classes carry no ``id``
    (``FACTS.enveloped`` is false): the JSON-RPC ``id`` beside the generated ``message``."""

    id: RequestId
    message: T

    @property
    def method(self) -> str:
        return self.message.method  # type: ignore[attr-defined,no-any-return]

    @property
    def params(self) -> Any:
        return getattr(self.message, "params", UNSET)


class Response(msgspec.Struct, Generic[T], kw_only=True, gc=False):
    """A successful response; ``result`` is the precise result class of the request it answers
    when the codec knows that request's method, else the revision's generic ``Result``."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    result: T


class ErrorObject(msgspec.Struct, kw_only=True, gc=False):
    code: int
    message: str
    data: Any | UnsetType = UNSET  # absent and null differ on the wire


class ErrorResponse(msgspec.Struct, kw_only=True, gc=False):
    """An error response. ``id`` is ``None`` when the peer could not read the request's id, and
    ``UNSET`` when the response leaves it out (where ``FACTS.error_id_optional``)."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId | None | UnsetType = UNSET
    error: ErrorObject
