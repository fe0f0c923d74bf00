"""Streamable HTTP for clients: a ``ClientSession`` driven over HTTP (``http_wire``: the pool of
``http_pool`` by default, or the ``httpx.AsyncClient`` given as ``http``), server-sent events read
by ``sse_events``.

``StreamableHTTPClient(url, session)`` POSTs each message the session queues and feeds every
message of the answer (a JSON body or an event stream) back to the session. It carries the
``Mcp-Session-Id`` the server assigned, the ``MCP-Protocol-Version`` header (the version the
message's ``_meta`` names, else the negotiated one), and the ``Mcp-Method`` / ``Mcp-Name`` headers.
An event stream that ends before it delivered the answers it owes is resumed with a GET carrying
``Last-Event-ID``, after the ``retry`` delay the server last set. Once a session with an id is
open (right after the initialized notification, before any other request) the client opens the
standalone GET stream for what the server sends outside any request. Requests from the server,
on any stream, are answered by ``on_request(event)``, an async function returning the result.

A 401 (or a 403 with a challenge) goes to ``auth`` (an ``mcpbind.auth.OAuthClient``), which
obtains or steps up a token, and the request is sent again, at most ``auth.max_attempts``
times (``http_wire.send``); without ``auth``, or when it cannot help, the call ends with one
``AuthorizationError``. What fails on the way is an ``http_wire.HttpError``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ..auth.client import OAuthClient
from ..errors import INTERNAL_ERROR, INVALID_PARAMS, ProtocolError
from ..events import (
    ANSWERS,
    ErrorReceived,
    Event,
    InputRequired,
    MessageRejected,
    Negotiated,
    NegotiationFailed,
    RequestReceived,
    ResultReceived,
    TaskCreated,
)
from ..packages import bindings
from ..session import ClientSession
from ._answer import MAX_ROUNDS, answer_request, answer_rounds
from .header_check import encode_header_value as encode_header_value
from .header_check import params_name
from .http_pool import wire_for
from .http_wire import HttpError, HttpWire, Reply, closing, send
from .sse_events import read_stream

if TYPE_CHECKING:
    import httpx

__all__ = ["StreamableHTTPClient"]

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
METHOD_HEADER = "Mcp-Method"
NAME_HEADER = "Mcp-Name"
PARAM_PREFIX = "Mcp-Param-"
ACCEPT = "application/json, text/event-stream"
# A header name is an HTTP token (RFC 9110): these characters only.
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
# The argument types a header may mirror: a number could not round-trip exactly through text.
_PRIMITIVE = frozenset(("string", "integer", "boolean"))


class _SentMessage(msgspec.Struct, gc=False):
    """What the headers of a message this client sends come from: its id, method and params."""

    id: Any = None
    method: Any = None
    params: Any = None


_peek = msgspec.json.Decoder(_SentMessage)


class StreamableHTTPClient:
    """One MCP connection over Streamable HTTP, for the given ``ClientSession``.

    ``events`` holds the last ``max_events`` events the session reported (1,000), in order: a
    long-lived connection keeps a window, not its whole history. ``max_resumptions`` bounds
    how often one POST's event stream is resumed; ``default_retry_ms`` is the delay before a
    resumption when the server set none. ``listen`` (on by default) opens the session's standalone
    GET stream once negotiated, for what the server sends outside any request (answers arriving
    there settle the POST that awaits them); ``connect`` returns once the server has answered that
    GET, so the stream exists before any request whose handler may talk on it, and a later GET
    (a resumption, with ``Last-Event-ID``) is never mistaken for it. ``auth`` (an
    ``OAuthClient``) authorizes the requests of a protected server. ``max_rounds`` bounds the
    input rounds of one multi-round-trip request (16): a server asking for input once more fails
    the call with ``ProtocolError`` -32603 rather than keep it going. ``http``: what the
    requests go through, an ``httpx.AsyncClient`` (its proxies, TLS settings, transports) or an
    ``http_wire.HttpWire``; by default an ``http_pool.HttpPool`` of its own (connect and read
    timeouts of 30 s; an event stream has no read timeout).
    """

    def __init__(
        self,
        url: str,
        session: ClientSession,
        *,
        http: httpx.AsyncClient | HttpWire | None = None,
        headers: dict[str, str] | None = None,
        on_request: Callable[[RequestReceived], Awaitable[Any]] | None = None,
        max_resumptions: int = 5,
        default_retry_ms: int = 1000,
        listen: bool = True,
        auth: OAuthClient | None = None,
        max_events: int = 1000,
        max_rounds: int = MAX_ROUNDS,
    ) -> None:
        if max_events < 1:
            raise ValueError(f"max_events must be at least 1, not {max_events}")
        if max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0, not {max_rounds}")
        self.url = url
        self.session = session
        # The wire keys of the params' _meta in the session's revisions (one, as a rule), bound
        # here: every POST's headers read the protocol version in it.
        self._meta_keys = tuple(
            dict.fromkeys(bindings(r).FACTS.meta_key for r in session.revisions)
        )
        # What the requests go through: a pool of its own unless ``http`` says otherwise.
        self.wire, self._own_wire = wire_for(http, url)
        self.headers = dict(headers or {})
        self.on_request = on_request
        self.max_resumptions = max_resumptions
        self.max_rounds = max_rounds
        self.retry_ms = default_retry_ms
        self.session_id: str | None = None
        self.listen = listen
        self.auth = auth
        self._listener: asyncio.Task[None] | None = None
        self.events: deque[Event] = deque(maxlen=max_events)
        self._reported = 0  # events reported so far, including those the window let go
        self._results: dict[Any, Event] = {}
        self._arrived = asyncio.Event()  # set whenever an answer arrives, on any stream
        self.designated: dict[str, dict[str, str]] = {}  # tool -> argument -> header name
        self.invalid_tools: dict[str, str] = {}  # tool -> why its x-mcp-header is invalid

    async def __aenter__(self) -> StreamableHTTPClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """End the MCP session (DELETE, when the server assigned one) and the HTTP client."""
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self.session_id is not None:
            # A failed DELETE leaves the server to expire the session: nothing to do about it.
            with contextlib.suppress(HttpError, ProtocolError):
                headers = await self._authorized(self._headers(None), "DELETE")
                reply = await self.wire.exchange(self.wire.head("DELETE", self.url, headers))
                async with closing(reply):
                    await reply.read()
            self.session_id = None
        if self._own_wire:
            await self.wire.aclose()

    # -- the conversation ----------------------------------------------------------------------

    async def connect(self) -> Negotiated:
        """Open the session (discover or initialize, with the session's fall-backs) and return
        the ``Negotiated`` event; ``ProtocolError`` when no revision could be agreed."""
        self.session.connect()
        while True:
            events = await self.flush()
            for event in events:
                if isinstance(event, Negotiated):
                    await self.flush()  # the initialized notification, where there is one
                    if self.listen and self.session_id is not None:
                        await self._open_listener()
                    return event
                if isinstance(event, NegotiationFailed):
                    raise event.error
            if self.session.state not in ("negotiating", "ready"):
                raise ProtocolError(
                    INTERNAL_ERROR, f"negotiation stopped in {self.session.state!r}"
                )
            if not events:
                # Nothing came back that the session could read, and it has nothing more to
                # send: asking again would only repeat the same exchange.
                raise ProtocolError(
                    INTERNAL_ERROR, f"the server at {self.url} answered the handshake with nothing"
                )

    async def call(self, method: str, params: Any = None, *, progress: bool = False) -> Any:
        """Send a request and return its result; an error response raises ``ProtocolError``.

        A result asking for input (a multi-round-trip request) is answered: each input request
        goes to ``on_request`` and the request is retried with the responses and the server's
        request state, until a final result arrives; a server asking once more after
        ``max_rounds`` rounds ends the call with ``ProtocolError`` -32603."""
        name = params.get("name") if isinstance(params, dict) and "arguments" in params else None
        if name in self.invalid_tools:
            raise ProtocolError(
                INVALID_PARAMS,
                f"not calling tool {name!r}: its input schema's x-mcp-header is invalid "
                f"({self.invalid_tools[name]})",
            )
        rid = self.session.request(method, params, progress=progress)
        await self.flush()  # (``_sent``'s work, without its coroutine a call)
        event = self._results.pop(rid, None)
        if isinstance(event, InputRequired):  # (its rounds: ``answer_rounds`` ends them)
            event = await answer_rounds(
                self.session, event, self.on_request, self._sent, method, self.max_rounds
            )
        if event is None:
            raise ProtocolError(INTERNAL_ERROR, f"the server sent no response to {method!r}")
        if isinstance(event, ErrorReceived):
            raise ProtocolError(event.code, event.message, event.data, event.id)
        if isinstance(event, MessageRejected):
            raise event.error
        assert isinstance(event, ResultReceived | TaskCreated)
        return event.result

    async def _sent(self, rid: Any) -> Event | None:
        """The answer to request ``rid``, the session just queued, once sent (None: there was
        none)."""
        await self.flush()
        return self._results.pop(rid, None)

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        self.session.notify(method, params)
        await self.flush()

    async def flush(self) -> list[Event]:
        """POST everything the session queued; return the events the answers produced."""
        start = self._reported
        while out := self.session.data_to_send():
            for message in out:
                await self._post(message)
        new = min(self._reported - start, len(self.events))
        if not new:
            return []
        # The newest ``new`` from the right end: the window may hold a thousand older ones.
        events = self.events
        return [events[-i] for i in range(new, 0, -1)]

    # -- HTTP ------------------------------------------------------------------------------------

    def _headers(self, message: bytes | None, peek: _SentMessage | None = None) -> dict[str, str]:
        """The headers of a request carrying ``message`` (None: a GET or DELETE); ``peek``:
        ``message`` read by ``peek_message`` already."""
        headers = {"Accept": ACCEPT, **self.headers}
        if self.session_id is not None:
            headers[SESSION_HEADER] = self.session_id
        version = None
        if message is not None:
            headers["Content-Type"] = "application/json"
            if peek is None:
                peek = peek_message(message)
            if isinstance(peek.method, str):
                headers[METHOD_HEADER] = peek.method
            params = peek.params if isinstance(peek.params, dict) else {}
            name = params_name(params)
            if name is not None:
                headers[NAME_HEADER] = name
            meta = self._request_meta(params)
            version = meta_version(meta, self.session) if meta is not None else None
            headers.update(self._param_headers(params))
        if version is None and self.session.revision is not None:
            version = bindings(self.session.revision).FACTS.versions[0]
        if version is not None:
            headers[VERSION_HEADER] = version
        return headers

    def _request_meta(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The ``_meta`` object of request ``params`` (plain JSON), under the key of the
        session's revisions; None when there is none."""
        for key in self._meta_keys:
            meta = params.get(key)
            if isinstance(meta, dict):
                return meta
        return None

    def _param_headers(self, params: dict[str, Any]) -> dict[str, str]:
        """The ``Mcp-Param-*`` headers mirroring the arguments a tool's input schema designates
        with ``x-mcp-header``; a null or absent argument sends no header."""
        name = params.get("name")
        designated = self.designated.get(name) if isinstance(name, str) else None
        arguments = params.get("arguments")
        if not designated or "arguments" not in params or not isinstance(arguments, dict):
            return {}
        out = {}
        for argument, header in designated.items():
            value = arguments.get(argument)
            if value is not None:
                out[f"{PARAM_PREFIX}{header}"] = encode_header_value(value)
        return out

    def _learn(self, result: Any) -> None:
        """Remember the ``x-mcp-header`` designations of every tool a result lists, and which
        tools carry invalid ones (they are not called)."""
        if isinstance(result, msgspec.Struct) and not _lists_tools(type(result)):
            return  # (a result of a class without a ``tools`` member: most, on every call)
        data = msgspec.to_builtins(result)
        tools = data.get("tools") if isinstance(data, dict) else None
        if not isinstance(tools, list):
            return
        for tool in tools:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            designated, problem = designations(tool.get("inputSchema"))
            self.designated[tool["name"]] = designated
            if problem is None:
                self.invalid_tools.pop(tool["name"], None)
            else:
                self.invalid_tools[tool["name"]] = problem

    async def _authorized(self, headers: dict[str, str], method: str) -> dict[str, str]:
        """The headers with the auth client's credentials for one request added."""
        if self.auth is not None:
            headers.update(await self.auth.headers(method, self.url))
        return headers

    async def _post(self, message: bytes) -> None:
        peek = peek_message(message)  # (read once, for the ids owed and the headers)
        owed = owed_ids(message, peek)
        headers = self._headers(message, peek)
        head = None
        if self.auth is None:
            # The same few heads again and again: kept encoded by the wire, by all they hold.
            key = ("POST", self.url, *headers.items())
            head = self.wire.kept(key) or self.wire.head("POST", self.url, headers, key)
        reply = await send(
            self.wire, "POST", self.url, message, headers=headers, head=head, auth=self.auth
        )
        try:  # (``closing``'s work, without an async context manager's generator a POST)
            last = await self._answer_post(reply, owed)
        finally:
            await reply.aclose()
        if last is not _DONE:
            await self._resume_post(last, owed)

    async def _get(self, last: str | None) -> Reply:
        """A GET of the session's event stream (``last``: resumed after that event)."""
        headers = await self._authorized(self._headers(None), "GET")
        headers["Accept"] = "text/event-stream"
        if last is not None:
            headers["Last-Event-ID"] = last
        return await self.wire.exchange(self.wire.head("GET", self.url, headers), stream=True)

    async def _answer_post(self, reply: Reply, owed: set[Any]) -> Any:
        """Read one POST's answer; the last event id of its stream (to resume from), or
        ``_DONE`` when nothing remains to resume."""
        sid = reply.headers.get(_SESSION_KEY)
        if sid is not None:
            self.session_id = sid
        kind = reply.headers.get("content-type", "")
        status = reply.status
        if status == 202 or not owed and status < 300:
            await reply.read()
            return _DONE
        if kind.startswith("text/event-stream"):
            return await self._read_stream(reply, owed)
        body = await reply.read()
        if kind.startswith("application/json") and body:
            if status >= 400 and len(owed) == 1:
                body = error_with_id(body, next(iter(owed)))
            await self._receive(body, owed)
        elif owed:
            raise ProtocolError(
                INTERNAL_ERROR, f"HTTP {status} without a JSON-RPC answer: {body[:200]!r}"
            )
        return _DONE

    async def _resume_post(self, last: str | None, owed: set[Any]) -> None:
        """Resume a POST's stream that ended before it delivered what it owes."""
        resumptions = 0
        while last is not None and resumptions < self.max_resumptions:
            owed.difference_update(self._results)  # answered on another stream meanwhile
            if not owed:
                break
            resumptions += 1
            await asyncio.sleep(self.retry_ms / 1000)
            resumed = asyncio.ensure_future(self._resume(last, owed))
            while not resumed.done():
                self._arrived.clear()
                arrival = asyncio.ensure_future(self._arrived.wait())
                await asyncio.wait({resumed, arrival}, return_when=asyncio.FIRST_COMPLETED)
                arrival.cancel()
                owed.difference_update(self._results)
                if not owed:
                    resumed.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await resumed
                    return
            last = resumed.result()

    async def _resume(self, last: str, owed: set[Any]) -> str | None:
        """Resume a POST's stream from the event ``last`` with a GET; the last event id seen, or
        None when the server offers no stream (or nothing remains owed)."""
        async with closing(await self._get(last)) as reply:
            if reply.status != 200:
                await reply.read()
                return None
            return await self._read_stream(reply, owed) or last

    async def _open_listener(self) -> None:
        """Start reading the standalone GET stream and return once the server has answered the
        GET (with a stream or a refusal) or the attempt failed."""
        answered = asyncio.Event()
        self._listener = asyncio.ensure_future(self._listen(answered))
        waiter = asyncio.ensure_future(answered.wait())
        await asyncio.wait({self._listener, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()

    async def _listen(self, answered: asyncio.Event) -> None:
        """Read the session's GET stream (what the server sends outside any request), resuming
        it like a POST stream (after ``retry``, with ``Last-Event-ID``), until the connection
        closes or the server offers none; ``answered`` is set once the first GET is answered."""
        last: str | None = None
        try:
            for _ in range(self.max_resumptions + 1):
                try:
                    async with closing(await self._get(last)) as reply:
                        answered.set()
                        if reply.status != 200:
                            await reply.read()
                            return  # 405: no stream to offer (401/403: none for us)
                        last = await self._read_stream(reply, {object()}) or last
                except (HttpError, ProtocolError):
                    answered.set()  # resumed below, like a POST stream
                await asyncio.sleep(self.retry_ms / 1000)
        finally:
            answered.set()

    async def _read_stream(self, reply: Reply, owed: set[Any]) -> str | None:
        """Feed a stream's messages to the session until it ends or owes nothing more; the id of
        its last event (to resume from), or None when nothing remains owed."""
        return await read_stream(reply, owed, self._receive, self._retry)

    def _retry(self, ms: int) -> None:
        self.retry_ms = ms

    def _report(self, event: Event) -> None:
        """Keep ``event`` in the window of ``events`` (what ``flush`` returns counts these)."""
        self.events.append(event)
        self._reported += 1

    async def _receive(self, data: bytes, owed: set[Any]) -> None:
        for event in self.session.receive(data):
            self._report(event)
            if isinstance(event, ResultReceived):
                self._learn(event.result)
            if isinstance(event, ANSWERS):
                owed.discard(event.id)
                self._results[event.id] = event
                self._arrived.set()
            elif isinstance(event, MessageRejected) and event.error.id in owed:
                # A response that could not be read still answers its request: with why.
                owed.discard(event.error.id)
                self._results[event.error.id] = event
                self._arrived.set()
            elif isinstance(event, Negotiated | NegotiationFailed):
                owed.clear()
            elif isinstance(event, RequestReceived):
                await self._answer(event)

    async def _answer(self, event: RequestReceived) -> None:
        """Answer a request from the server at once (its stream waits for the answer)."""
        await answer_request(self.session, event, self.on_request)
        for message in self.session.data_to_send():
            await self._post(message)


# What _answer_post returns when a POST's answer is complete.
_DONE: Any = object()
_SESSION_KEY = SESSION_HEADER.lower()  # (a reply's header names are lower-case)


_LISTS_TOOLS: dict[type, bool] = {}  # result class -> whether a member of it is ``tools``


def _lists_tools(kind: type[msgspec.Struct]) -> bool:
    """Whether a result of class ``kind`` may list tools: a member it writes as ``tools``."""
    found = _LISTS_TOOLS.get(kind)
    if found is None:
        found = any(f.encode_name == "tools" for f in msgspec.structs.fields(kind))
        _LISTS_TOOLS[kind] = found
    return found


def designations(schema: Any) -> tuple[dict[str, str], str | None]:
    """The argument -> header designations of an input schema, and what is wrong with them."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}, None
    out: dict[str, str] = {}
    seen: set[str] = set()
    for argument, prop in properties.items():
        if not isinstance(prop, dict) or "x-mcp-header" not in prop:
            continue
        header = prop["x-mcp-header"]
        if not isinstance(header, str) or not header:
            return {}, f"argument {argument!r}: x-mcp-header must be a non-empty string"
        if not set(header) <= _TOKEN:
            return {}, f"argument {argument!r}: x-mcp-header {header!r} is not an HTTP token"
        if prop.get("type") not in _PRIMITIVE:
            return {}, f"argument {argument!r}: x-mcp-header needs a primitive type"
        if header.lower() in seen:
            return {}, f"argument {argument!r}: x-mcp-header {header!r} is used twice"
        seen.add(header.lower())
        out[argument] = header
    return out, None


def peek_message(message: bytes) -> _SentMessage:
    """The id, method and params of a message (all None where it has none, or is unreadable)."""
    try:
        return _peek.decode(message)
    except (msgspec.DecodeError, ValueError):
        return _SentMessage()


def error_with_id(body: bytes, id_: Any) -> bytes:
    """An HTTP error's JSON-RPC error without an id (``null``, as a server that refused the
    request before reading it writes), as the answer to the one request its POST carried: the
    request failed, and its sender (a session probing with discover, which then falls back to
    initialize) must hear so. Anything else is returned as it is."""
    if len(body) > _ERROR_BODY_MAX:
        return body
    try:
        answer = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body
    if type(answer) is dict and "error" in answer and answer.get("id") is None:
        return msgspec.json.encode({**answer, "id": id_})
    return body


_ERROR_BODY_MAX = 64 << 10  # an HTTP error's body read for an id-less JSON-RPC error


def owed_ids(message: bytes, peek: _SentMessage | None = None) -> set[Any]:
    """The ids of the requests a message carries (their answers are owed on its response);
    ``peek``: ``message`` read by ``peek_message`` already."""
    if peek is None:
        peek = peek_message(message)
    return {peek.id} if peek.method is not None and peek.id is not None else set()


def meta_version(meta: dict[str, Any], session: ClientSession) -> str | None:
    """The protocol version a request's ``_meta`` names, by the keys of the session's revisions."""
    for revision in session.revisions:
        envelope = bindings(revision).FACTS.request_meta
        if envelope is not None and isinstance(meta.get(envelope.version_key), str):
            version: str = meta[envelope.version_key]
            return version
    return None
