"""Bounded reads of the JSON documents an authorization flow fetches or posts for."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from .errors import AuthorizationError

__all__ = ["MAX_DOCUMENT", "get_json", "post_form", "read_json"]

# No metadata document, registration or token response needs more; a longer body is refused.
MAX_DOCUMENT = 256 * 1024


async def read_json(response: httpx.Response, limit: int = MAX_DOCUMENT) -> Any:
    """The JSON body of a streamed response, or None when it is not JSON or exceeds ``limit``
    bytes (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    try:
        return msgspec.json.decode(b"".join(chunks))
    except msgspec.DecodeError:
        return None


async def get_json(http: httpx.AsyncClient, url: str, **kwargs: Any) -> tuple[int, Any]:
    """GET a URL; its status and JSON body (None when there is none, or a transport error
    happened, which reads as status 0)."""
    try:
        async with http.stream("GET", url, **kwargs) as response:
            return response.status_code, await read_json(response)
    except httpx.HTTPError:
        return 0, None


async def post_form(
    http: httpx.AsyncClient, url: str, body: str, headers: dict[str, str]
) -> tuple[httpx.Response, Any]:
    """POST an ``application/x-www-form-urlencoded`` body; the response (status, headers) and
    its JSON body (None when none). A transport error is an ``AuthorizationError``."""
    headers = {
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
        **headers,
    }
    try:
        async with http.stream("POST", url, content=body.encode(), headers=headers) as response:
            return response, await read_json(response)
    except httpx.HTTPError as error:
        raise AuthorizationError(f"POST {url}: {error}") from error
