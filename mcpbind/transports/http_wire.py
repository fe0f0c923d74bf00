"""The one HTTP client stack under everything mcpbind sends over HTTP (the Streamable HTTP and
HTTP+SSE clients, the gateway's upstream): the seam they send through, its errors, and the one
authorization retry.

An ``HttpWire`` sends one request (a head it built, a body) and gives its ``Reply``: the status,
the headers (lower-case names), and the body as it comes (``read``, ``chunks``; server-sent
events through ``sse_events.events``). Two implement it:

- ``http_pool.HttpPool``, the default: keep-alive HTTP/1.1 connections to one origin, each read by
  httptools (C) from the event loop's protocol callbacks, request heads encoded by hand and kept;
- ``HttpxWire``, when the caller passes an ``httpx.AsyncClient`` (``http=``): its proxies, TLS
  settings, HTTP/2 and transports (the tests' in-process ones), at httpx's cost.

Both raise ``HttpError`` (and its ``ServerUnreachable`` and ``HttpTimeout``) and nothing else for what
went wrong on the way, the socket's, TLS's, httptools' and httpx's errors mapped where they
enter, so a caller catches one family besides ``ProtocolError``. ``send`` is the one loop that
answers a 401 (or a 403 with a challenge) through an ``mcpbind.auth.OAuthClient`` and sends the
request again, at most ``auth.max_attempts`` times.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..auth.errors import AuthorizationError

if TYPE_CHECKING:
    import httpx

    from ..auth.client import OAuthClient

__all__ = [
    "wrapped",
    "HttpError",
    "HttpTimeout",
    "HttpxWire",
    "MAX_ANSWER",
    "Reply",
    "ServerUnreachable",
    "HttpWire",
    "closing",
    "send",
]


MAX_ANSWER = 16 * 1024 * 1024  # bytes of an answer read whole (as stdio's MAX_LINE, one message)


class HttpError(Exception):
    """An HTTP exchange failed: the connection was lost or refused, no answer came in time, the
    answer is not HTTP/1.1 the wire can read (or exceeds a bound), or a header to send would
    break the request head."""


class ServerUnreachable(HttpError):
    """The server cannot be reached: no connection (refused, no such host, TLS refused, or not
    within the connect timeout)."""


class HttpTimeout(HttpError):
    """The server sent nothing more within the wire's read timeout."""


class Reply(Protocol):
    """The answer to one request, its head read."""

    status: int

    @property
    def headers(self) -> Mapping[str, str]:
        """Its headers, by lower-case name (repeated ones joined by ", ")."""

    @property
    def complete(self) -> bool:
        """Whether the whole body is read already (``take`` gives it, ``release`` frees)."""

    def take(self) -> bytes:
        """The body read so far, no longer kept."""

    async def read(self) -> bytes:
        """The rest of the body."""

    def chunks(self) -> AsyncIterator[bytes]:
        """The rest of the body as it comes."""

    def release(self) -> None:
        """Done with a reply read whole (``complete``): its connection is free again."""

    async def aclose(self) -> None:
        """Done with the reply, read or not: its connection is reused or closed."""


class HttpWire(Protocol):
    """Sends requests; what every HTTP client of mcpbind sends through."""

    def head(
        self, method: str, url: str, headers: Mapping[str, str], key: Hashable | None = None
    ) -> Any:
        """A request's head, ready for ``exchange`` (``HttpError`` when a header would break
        it). With ``key`` (which must stand for exactly these method, url and headers) it may be
        kept for ``kept(key)``."""

    def kept(self, key: Hashable) -> Any | None:
        """The head ``head`` kept under ``key``, if it still is."""

    async def exchange(
        self,
        head: Any,
        body: bytes | None = None,
        held: list[Any] | None = None,
        stream: bool = False,
    ) -> Reply:
        """Send a request; its reply, the head read. ``held`` (a list) holds the exchange while
        it waits for that head, so that ``abort(held)`` can end it. ``stream``: an event stream
        that may stay open and quiet for long (no read timeout; its own bound of streams)."""

    def abort(self, held: list[Any]) -> None:
        """End the exchanges waiting in ``held``: each fails with ``HttpError``."""

    async def aclose(self) -> None:
        """Close every connection."""


def wrapped(http: httpx.AsyncClient | HttpWire) -> HttpWire:
    """``http`` as a wire: an ``httpx.AsyncClient`` through ``HttpxWire``, a wire as it is."""
    import httpx

    if isinstance(http, httpx.AsyncClient):
        return HttpxWire(http)
    return http


@contextlib.asynccontextmanager
async def closing(reply: Reply) -> AsyncIterator[Reply]:
    """``reply`` for the block, closed after it (reused when it was read whole)."""
    try:
        yield reply
    finally:
        await reply.aclose()


def needs_auth(reply: Reply) -> bool:
    """Whether a reply asks for (other) credentials: a 401, or a 403 with a challenge."""
    status = reply.status
    return status == 401 or (status == 403 and "www-authenticate" in reply.headers)


async def send(
    wire: HttpWire,
    method: str,
    url: str,
    body: bytes | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    head: Any = None,
    auth: OAuthClient | None = None,
    held: list[Any] | None = None,
    stream: bool = False,
    unauthorized: Callable[[int, str | None], Exception] | None = None,
) -> Reply:
    """Send one request and return its reply (the head read), authorized: ``auth``'s
    credentials added to ``headers`` for each attempt; a 401, or a 403 with a challenge, goes to
    ``auth`` and the request is sent again, at most ``auth.max_attempts`` times, after which (or
    when ``auth`` cannot help) ``AuthorizationError`` says why. Without ``auth``, ``head`` (made
    by ``wire.head``, maybe kept) may stand for ``headers``, and such an answer raises
    ``unauthorized(status, challenge)`` (an ``AuthorizationError`` saying no ``auth=`` was
    given, by default)."""
    attempts = 0
    while True:
        if auth is not None:
            assert headers is not None
            authorized = {**headers, **await auth.headers(method, url)}
            head = wire.head(method, url, authorized)
        elif head is None:
            assert headers is not None
            head = wire.head(method, url, headers)
        reply = await wire.exchange(head, body, held=held, stream=stream)
        if not needs_auth(reply):
            return reply
        status = reply.status
        challenge = reply.headers.get("www-authenticate")
        challenged = dict(reply.headers)
        await reply.aclose()
        if auth is None:
            if unauthorized is not None:
                raise unauthorized(status, challenge)
            raise AuthorizationError(
                f"HTTP {status} from {url}: the server requires authorization "
                f"({challenge or 'no WWW-Authenticate challenge'}) and no auth= was given",
                status,
            )
        if attempts >= auth.max_attempts:
            raise AuthorizationError(
                f"HTTP {status} from {url} after {attempts} authorization attempts "
                f"({challenge or 'no WWW-Authenticate challenge'})",
                status,
            )
        import httpx  # (what OAuthClient.handle reads a challenge from)

        await auth.handle(httpx.Response(status, headers=challenged), url, attempts)
        attempts += 1


# -- httpx --------------------------------------------------------------------------------------


def _mapped(error: Exception) -> HttpError:
    """httpx's error as this module's (the message kept, its class named)."""
    import httpx

    text = f"{type(error).__name__}: {error}"
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return ServerUnreachable(text)
    if isinstance(error, httpx.TimeoutException):
        return HttpTimeout(text)
    return HttpError(text)


class _HttpxReply:
    """An ``httpx.Response`` (streamed) as a ``Reply``."""

    complete = False  # (httpx reads the body when asked)

    def __init__(self, response: httpx.Response, max_answer: int) -> None:
        self._response = response
        self._max_answer = max_answer
        self.status = response.status_code
        headers: dict[str, str] = {}
        for name, value in response.headers.multi_items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        self.headers = headers

    def take(self) -> bytes:
        return b""

    async def read(self) -> bytes:
        import httpx

        parts: list[bytes] = []
        size, limit = 0, self._max_answer
        try:
            async for chunk in self._response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    await self._response.aclose()
                    raise HttpError(f"the server's answer exceeds {limit} bytes (max_answer)")
                parts.append(chunk)
        except httpx.HTTPError as error:
            raise _mapped(error) from error
        return b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        import httpx

        try:
            async for chunk in self._response.aiter_bytes():
                yield chunk
        except httpx.HTTPError as error:
            raise _mapped(error) from error

    def release(self) -> None:
        pass  # (a response read whole is closed by httpx already)

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxWire:
    """An ``HttpWire`` over the ``httpx.AsyncClient`` a caller passed (its timeouts, except that an
    event stream has no read timeout); an answer read whole of at most ``max_answer`` bytes."""

    def __init__(self, http: httpx.AsyncClient, max_answer: int = MAX_ANSWER) -> None:
        self.http = http
        self.max_answer = max_answer

    def head(
        self, method: str, url: str, headers: Mapping[str, str], key: Hashable | None = None
    ) -> Any:
        return (method, url, dict(headers))

    def kept(self, key: Hashable) -> Any | None:
        return None

    async def exchange(
        self,
        head: Any,
        body: bytes | None = None,
        held: list[Any] | None = None,
        stream: bool = False,
    ) -> Reply:
        import httpx

        method, url, headers = head
        options: dict[str, Any] = {}
        if stream:  # a quiet stream is not a failure: no read timeout on it
            timeout = self.http.timeout
            options["timeout"] = httpx.Timeout(
                timeout.connect, read=None, write=timeout.write, pool=timeout.pool
            )
        request = self.http.build_request(method, url, content=body, headers=headers, **options)
        try:
            if held is None:
                return _HttpxReply(await self.http.send(request, stream=True), self.max_answer)
            return _HttpxReply(await self._held(request, held), self.max_answer)
        except httpx.HTTPError as error:
            raise _mapped(error) from error

    async def _held(self, request: httpx.Request, held: list[Any]) -> httpx.Response:
        """Send ``request`` while a future in ``held`` stands for it (``abort`` ends it)."""
        sending = asyncio.ensure_future(self.http.send(request, stream=True))
        abandoned: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        held.append(abandoned)
        try:
            both: set[asyncio.Future[Any]] = {sending, abandoned}
            await asyncio.wait(both, return_when=asyncio.FIRST_COMPLETED)
            if not sending.done():
                raise HttpError("the exchange was abandoned")
            return sending.result()
        except BaseException:
            sending.cancel()
            raise
        finally:
            if abandoned in held:
                held.remove(abandoned)

    def abort(self, held: list[Any]) -> None:
        for abandoned in list(held):
            if not abandoned.done():
                abandoned.set_result(None)
        held.clear()

    async def aclose(self) -> None:
        await self.http.aclose()
