"""What the head of a request to the Streamable HTTP server says: its headers, read by name
from a table built once per request (the hot path reads that table's raw bytes itself, without a
call or a decode per header), the media types ``Accept`` and ``Content-Type`` list, and the
hosts ``Host`` and ``Origin`` name (checked against the allowed hosts)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

_WIRE_NAMES: dict[str, bytes] = {}  # a header name as looked up -> as ASGI has it


class _Headers(Mapping[str, str]):
    """A request's headers as Starlette's ``Headers`` answers them (any case, the first value of
    a repeated name), from a dict of the raw ones built once: ``Headers`` scans the list on every
    lookup, and a POST makes about ten (a missing name, raising inside, costs the most).
    ``raw``: that dict, by the raw (lower case) name (``ASGIRequest.raw_headers``), which the
    POST's hot path reads its headers from without a call each (``allowed_host``,
    ``MEDIA_TYPES``)."""

    __slots__ = ("raw",)

    def __init__(self, raw: Iterable[tuple[bytes, bytes]] | dict[bytes, bytes]) -> None:
        self.raw = raw if isinstance(raw, dict) else raw_headers(raw)

    def get(self, key: str, default: Any = None) -> Any:
        name = _WIRE_NAMES.get(key)
        if name is None:
            name = key.lower().encode("latin-1")
            if len(_WIRE_NAMES) < 256:  # the names this module looks up, and a few more
                _WIRE_NAMES[key] = name
        value = self.raw.get(name)
        return default if value is None else value.decode("latin-1")

    def __getitem__(self, key: str) -> str:
        value = self.raw.get(key.lower().encode("latin-1"))
        if value is None:
            raise KeyError(key)
        return value.decode("latin-1")

    def __iter__(self) -> Iterator[str]:
        return (key.decode("latin-1") for key in self.raw)

    def __len__(self) -> int:
        return len(self.raw)


def raw_headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    """A request's raw headers by name: ASGI names are lower case; the first one wins."""
    if type(raw) is list:
        found: dict[bytes, bytes] = dict(raw)
        if len(found) < len(raw):
            found = dict(reversed(raw))
        return found
    return dict(reversed(list(raw)))


class _Built:
    """The request's ``_Headers``, built from its ``raw_headers`` on the first read and then an
    attribute of the instance (this descriptor defines no ``__set__``, so the instance's own is
    read from then on: no call per lookup); a POST's hot path reads ``raw_headers`` only."""

    def __get__(self, request: ASGIRequest | None, owner: Any = None) -> Any:
        if request is None:
            return self
        headers = request.__dict__["headers"] = _Headers(request.raw_headers)
        return headers


class ASGIRequest(Request):
    """Starlette's ``Request`` with its headers read from a dict of the raw ones built with it
    (``raw_headers``), and as a ``_Headers`` over that dict (``headers``) built when first read,
    then a plain attribute, not a property called on each lookup."""

    headers: _Headers = _Built()  # type: ignore[assignment]

    @classmethod
    def of(cls, request: Request) -> ASGIRequest:
        """The same request as this class holds it (one Starlette's routing built)."""
        if isinstance(request, ASGIRequest):
            return request
        return cls(request.scope, request.receive, request._send)

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Request.__init__ (and HTTPConnection's) written out: a call of each is a third of a
        # request object's cost; tests/test_http_head.py holds it to Starlette's.
        assert scope["type"] == "http"
        self.scope = scope
        self._receive = receive
        self._send = send
        self._stream_consumed = False
        self._is_disconnected = False
        self._form = None
        # (raw_headers written out: a call less)
        raw = scope["headers"]
        if type(raw) is list:
            found: dict[bytes, bytes] = dict(raw)
            self.raw_headers = found if len(found) == len(raw) else dict(reversed(raw))
        else:
            self.raw_headers = raw_headers(raw)


LOCAL_HOSTS = ("localhost", "127.0.0.1", "[::1]")  # the allowed hosts by default
ACCEPTED = frozenset({"application/json", "text/event-stream"})  # what Accept must list
JSON_ONLY = frozenset({"application/json"})


@functools.lru_cache(maxsize=64)  # a client sends the same Accept and Content-Type every time
def media_types(header: str) -> frozenset[str]:
    """The media types a header lists (``Accept``, or ``Content-Type`` with its one), lower case
    and without their parameters."""
    return frozenset(part.split(";", 1)[0].strip().lower() for part in header.split(","))


@functools.lru_cache(maxsize=64)  # a client sends the same Host on every request
def authority_host(authority: str) -> str | None:
    """The host of ``host[:port]`` (a Host header, or an origin's authority) in lower case, IPv6
    literals in their brackets; None when it is anything else, such as text after the ``]`` of
    a literal, a port that is not a number, or user information."""
    if authority.startswith("["):
        end = authority.find("]") + 1
        if end == 0:
            return None
        name, rest = authority[:end], authority[end:]
    else:
        name, colon, port = authority.partition(":")
        rest = colon + port
    if rest and not (
        rest[0] == ":" and 1 < len(rest) <= 6 and rest[1:].isascii() and rest[1:].isdigit()
    ):
        return None
    if not name or any(c in name for c in "@/\\?# "):
        return None
    return name.lower()


@functools.lru_cache(maxsize=64)
def origin_host(origin: str) -> str | None:
    """The host of an ``Origin`` header (``scheme://host[:port]``, nothing more); None for
    ``null`` or anything that is not such an origin."""
    scheme, sep, authority = origin.partition("://")
    if not sep or not scheme:
        return None
    return authority_host(authority)


def host_allowed(headers: Mapping[str, str], allowed: frozenset[str]) -> bool:
    """``Host`` and ``Origin`` (when present) name hosts of ``allowed`` (lower case): DNS
    rebinding protection, the same for both HTTP transports."""
    host = headers.get("host")
    if host is not None and authority_host(host) not in allowed:
        return False
    origin = headers.get("origin")
    return origin is None or origin_host(origin) in allowed


K = TypeVar("K")
V = TypeVar("V")


class _Memo(dict[K, V], Generic[K, V]):
    """``memo[key]``: ``make(key)``, kept for the next time (at most ``MEMO_MAX`` keys, then
    forgotten all at once). A lookup is the dict's own, without a call: a client sends the same
    ``Host``, ``Accept`` and ``Content-Type`` on every request, read here as the raw bytes."""

    __slots__ = ("_make",)

    def __init__(self, make: Callable[[K], V]) -> None:
        super().__init__()
        self._make = make

    def __missing__(self, key: K) -> V:
        value = self._make(key)
        if len(self) >= MEMO_MAX:
            self.clear()
        self[key] = value
        return value


MEMO_MAX = 64
# The media types a raw Accept or Content-Type lists (``media_types``); the host a raw Host or
# Origin names (``authority_host``, ``origin_host``).
MEDIA_TYPES: _Memo[bytes, frozenset[str]] = _Memo(lambda raw: media_types(raw.decode("latin-1")))
AUTHORITY_HOST: _Memo[bytes, str | None] = _Memo(lambda raw: authority_host(raw.decode("latin-1")))
ORIGIN_HOST: _Memo[bytes, str | None] = _Memo(lambda raw: origin_host(raw.decode("latin-1")))


def allowed_host(raw: Mapping[bytes, bytes], allowed: frozenset[str]) -> bool:
    """``host_allowed`` of a request's raw headers (``_Headers.raw``)."""
    host = raw.get(b"host")
    if host is not None and AUTHORITY_HOST[host] not in allowed:
        return False
    origin = raw.get(b"origin")
    return origin is None or ORIGIN_HOST[origin] in allowed
