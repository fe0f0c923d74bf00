"""The HTTP server's request object (mcpbind.transports._http_head): what Starlette's ``Request``
holds, and its headers read as Starlette's ``Headers`` read them."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request

from mcpbind.transports._http_head import ASGIRequest

HEAD = [
    (b"host", b"127.0.0.1:8000"),
    (b"content-type", b"application/json"),
    (b"x-twice", b"first"),
    (b"accept", b"application/json, text/event-stream"),
    (b"x-twice", b"second"),
]


def _scope(headers: Any) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def _send(message: Any) -> None:
    return None


def test_the_request_holds_what_starlettes_does() -> None:
    scope = _scope(list(HEAD))
    ours, theirs = ASGIRequest(scope, _receive, _send), Request(scope, _receive, _send)
    assert {k: v for k, v in vars(ours).items() if k != "raw_headers"} == vars(theirs)
    assert ours.raw_headers == dict(HEAD[:4])  # (the first x-twice wins)
    assert ours.receive is _receive and ours.method == "POST" and ours.scope is scope


def test_headers_read_as_starlettes_whatever_the_iterable() -> None:
    for raw in (list(HEAD), HEAD[:2], tuple(HEAD), []):
        ours, theirs = ASGIRequest(_scope(raw), _receive, _send).headers, Headers(raw=list(raw))
        for name in ("host", "Content-Type", "X-Twice", "accept", "missing"):
            assert ours.get(name) == theirs.get(name), (raw, name)
        assert len(ours) == len(set(theirs.keys()))
