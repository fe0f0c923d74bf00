"""Serving an ASGI application under uvicorn, with the connection-level bounds it lacks by default.

uvicorn's HTTP/1.1 protocols keep a connection that never finishes its request head for as long
as the peer likes: they have no header timeout. Nor do they cap connections: their
``limit_concurrency`` counts them, but only answers 503 to a connection that has sent a whole
request head, so connections trickling their heads hold every slot and turn everyone else away.
``uvicorn_config`` fixes both with a protocol of its own: uvicorn's httptools protocol (``http=
"httptools"``, the default: its parser is C, about four times cheaper a request than h11's
Python) or its h11 protocol (``http="h11"``), subclassed, with the same bounds:

- ``max_connections`` (1000): connections held at once. A new one past the cap makes room by
  closing the connection that has waited longest for a request head (an idle keep-alive
  connection, or one still trickling its head); when every connection is busy with a request, the
  new one is answered 503 with a JSON-RPC error and closed.
- ``header_timeout`` (10 s): how long a connection may wait for a complete request head, from
  its opening or from the end of its previous response; past it, the connection is closed (with a
  408 and a JSON-RPC error when part of a head had arrived).
- ``write_timeout`` (30 s): how long a connection may keep the server's writes waiting (its
  client not reading what it was sent, so that uvicorn stops writing to it); past it, the
  connection is aborted. Without it, a client that stops reading an event stream holds its
  connection, and the handlers writing to it, for ever.
- ``keep_alive_timeout`` (5 s): uvicorn's own idle timeout between requests.
- ``max_head_size`` (16 KiB): the largest request head (request line and headers); past it
  the connection is answered 400 (with a JSON-RPC error under httptools, which has no bound of
  its own: the bytes received while a head is incomplete are counted) and closed.

The request body and what follows are the application's to bound (``StreamableHTTPServer`` does).
The event loop is uvicorn's choice (``loop="auto"``): uvloop when it is installed (the ``http``
extra installs it where it exists, not on Windows), else asyncio's.

``serve(factory, host, port, workers=N)`` runs N worker processes accepting on one listening
socket (the kernel spreads connections among them), each serving the application its own call of
``factory`` builds, with the bounds above per process. Workers share nothing but what the
application keeps outside the process: a ``StreamableHTTPServer`` needs a shared store (Redis)
for a session to be served by whichever worker a request reaches.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.connection
import signal
import socket
from collections.abc import Callable
from typing import Any, ClassVar

import h11
import msgspec
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..errors import INTERNAL_ERROR, INVALID_REQUEST
from .http_limits import RETRY_AFTER

__all__ = ["serve", "uvicorn_config"]

_log = logging.getLogger(__name__)

MAX_CONNECTIONS = 1000
HEADER_TIMEOUT = 10.0
WRITE_TIMEOUT = 30.0
KEEP_ALIVE_TIMEOUT = 5
MAX_HEAD_SIZE = 16 * 1024
HTTP = "httptools"


def uvicorn_config(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    max_connections: int = MAX_CONNECTIONS,
    header_timeout: float = HEADER_TIMEOUT,
    write_timeout: float = WRITE_TIMEOUT,
    keep_alive_timeout: int = KEEP_ALIVE_TIMEOUT,
    max_head_size: int = MAX_HEAD_SIZE,
    http: str = HTTP,
    **options: Any,
) -> uvicorn.Config:
    """A ``uvicorn.Config`` serving ``app`` on ``host:port`` with the bounds above, over
    uvicorn's ``http`` protocol ("httptools" or "h11"); ``options`` are passed on to
    ``uvicorn.Config`` (``log_level``, ``ssl_certfile``, ...)."""
    bases = _PROTOCOLS.get(http)
    if bases is None:
        raise ValueError(f"http must be one of {sorted(_PROTOCOLS)}, not {http!r}")
    # A class per server: the connections it counts are this server's alone.
    protocol = type(
        bases.__name__,
        (bases,),
        {
            "max_connections": max_connections,
            "header_timeout": header_timeout,
            "write_timeout": write_timeout,
            "max_head_size": max_head_size,
            "held": set(),
            "waiting": {},
            "sweeper": None,
        },
    )
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol,
        timeout_keep_alive=keep_alive_timeout,
        h11_max_incomplete_event_size=max_head_size,
        **options,
    )


def serve(
    app: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    workers: int = 1,
    on_started: Callable[[str, int], Any] | None = None,
    **limits: Any,
) -> None:
    """Serve ``app`` on ``host:port`` until interrupted, with the bounds of ``uvicorn_config``
    (which takes ``limits`` and any other ``uvicorn.Config`` option). ``on_started(host, port)``
    is called once the socket listens, with the address it is bound to (the port the system
    chose for ``port=0``).

    The process's soft limit on open files is raised, as far as its hard limit allows, to hold
    ``max_connections`` plus a full accept ``backlog``: a connection past the cap still takes a
    file descriptor until it is closed, and an accept that fails for want of one (EMFILE) makes
    asyncio stop accepting for a second, which would turn everyone away.

    With ``workers`` above 1, ``app`` is a factory instead: a picklable callable without
    arguments (a module-level function, or a ``functools.partial`` of one) that each worker
    process calls to build its own application. This process binds the socket, starts the
    workers (``multiprocessing``'s spawn method) and stops them all on SIGINT or SIGTERM, or
    when one of them exits.
    """
    if workers > 1:
        _serve_workers(app, host, port, workers, limits, on_started)
        return
    config = uvicorn_config(app, host, port, **limits)
    _make_room(limits.get("max_connections", MAX_CONNECTIONS) + config.backlog + _OWN_FILES)
    _Server(config, on_started).run()


class _Server(uvicorn.Server):
    """uvicorn's server, telling ``on_started`` the address it listens on."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[str, int], Any] | None):
        super().__init__(config)
        self.on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            listening = self.servers[0].sockets
            self.on_started(*_address(listening[0] if listening else None, self.config))


def _address(sock: socket.socket | None, config: uvicorn.Config) -> tuple[str, int]:
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return config.host, config.port
    host, port = sock.getsockname()[:2]
    return str(host), int(port)


def _serve_workers(
    factory: Callable[[], Any],
    host: str,
    port: int,
    workers: int,
    limits: dict[str, Any],
    on_started: Callable[[str, int], Any] | None = None,
) -> None:
    """Run ``workers`` processes serving ``factory()`` on one socket bound here."""
    config = uvicorn_config(None, host, port, **limits)
    sock = config.bind_socket()
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(target=_worker, args=(factory, host, port, limits, sock), daemon=True)
        for _ in range(workers)
    ]
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for process in processes:
            process.start()
        if on_started is not None:  # the socket listens: connections wait for a worker
            on_started(*_address(sock, config))
        while not stopping and all(p.is_alive() for p in processes):
            multiprocessing.connection.wait([p.sentinel for p in processes], timeout=0.5)
    finally:
        for process in processes:
            if process.is_alive():
                process.terminate()
        for process in processes:
            process.join(timeout=10)
            if process.is_alive():
                process.kill()
        sock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _worker(
    factory: Callable[[], Any], host: str, port: int, limits: dict[str, Any], sock: socket.socket
) -> None:
    """One worker process: its own application on the socket its parent bound."""
    config = uvicorn_config(factory(), host, port, **limits)
    _make_room(limits.get("max_connections", MAX_CONNECTIONS) + config.backlog + _OWN_FILES)
    uvicorn.Server(config).run(sockets=[sock])


_OWN_FILES = 64  # headroom for the process's other files: its modules, logs, outgoing connections


def _make_room(needed: int) -> None:
    """Raise the soft limit on open files to ``needed`` (or to the hard limit, with a warning)."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        _log.warning(
            "the open-file limit (%d) is below max_connections plus the accept backlog (%d): "
            "a flood of connections may exhaust it",
            target,
            needed,
        )


def _raw_response(status: str, code: int, message: str) -> bytes:
    """An HTTP/1.1 response written by hand, outside h11's request cycle (there is no request to
    answer yet), that closes the connection and carries a JSON-RPC error without id (a 503 with
    ``Retry-After``, as every busy answer)."""
    body = msgspec.json.encode(
        {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    )
    retry = f"retry-after: {RETRY_AFTER}\r\n" if status.startswith("503") else ""
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{retry}"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode() + body


def _no_delay(transport: asyncio.BaseTransport) -> None:
    """Send each write at once (TCP_NODELAY) on a TCP connection. asyncio does so only when the
    listening socket says its protocol is TCP, and a socket bound by hand (``serve(workers=N)``
    binds it with ``config.bind_socket()``, protocol 0) does not: small answers then wait for the
    client's delayed ACK, about 40 ms each, capping a connection at ~25 requests per second."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Bounded(asyncio.Protocol):
    """The bounds of a uvicorn protocol (mixed in before it): a connection cap, a deadline for
    each request head, and one for a client that stops reading."""

    max_connections: ClassVar[int]
    header_timeout: ClassVar[float]
    write_timeout: ClassVar[float]
    max_head_size: ClassVar[int]
    held: ClassVar[set[_Bounded]]  # the connections counted against the cap
    # Those waiting for a request head, with the loop time they started at, longest waiting first
    # (a dict keeps that order): one timer for them all, set for the first deadline, rather than
    # a timer made and cancelled for each request.
    waiting: ClassVar[dict[_Bounded, float]]
    sweeper: ClassVar[asyncio.TimerHandle | None]
    # What the uvicorn protocol it is mixed into provides.
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    cycle: Any

    _deadline = False  # waiting for a request head (in ``waiting``)
    _stalled: asyncio.TimerHandle | None = None  # set while writing is paused
    _partial = False  # part of a request head has arrived

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        _no_delay(transport)
        super().connection_made(transport)
        cls = type(self)
        if len(cls.held) >= cls.max_connections:
            longest = next(iter(cls.waiting), None)
            if longest is None:  # every connection is answering a request: refuse this one
                self.transport.write(
                    _raw_response(
                        "503 Service Unavailable",
                        INTERNAL_ERROR,
                        f"Service Unavailable: the server holds max_connections "
                        f"({cls.max_connections}) connections, all busy",
                    )
                )
                self.transport.close()
                return
            longest._drop()
        cls.held.add(self)
        self._await_head()

    def data_received(self, data: bytes) -> None:
        if self._deadline:
            self._partial = True
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]  # the uvicorn protocol's
        self._settle()

    def connection_lost(self, exc: Exception | None) -> None:
        self._forget()
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None
        super().connection_lost(exc)

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(self.write_timeout, self._write_late)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def _write_late(self) -> None:
        # abort, not close: close would wait for the write buffer to drain, which it will not.
        self._stalled = None
        self._forget()
        self.transport.abort()

    def _settle(self) -> None:
        """After anything that may start or end a request: a connection answering a request has
        no head deadline; one that waits for the next head has one."""
        if self.transport.is_closing() or self not in type(self).held:
            return
        if self.cycle is not None and not self.cycle.response_complete:
            self._stop_waiting()
        elif not self._deadline:
            self._await_head()

    def _await_head(self) -> None:
        cls = type(self)
        cls.waiting.pop(self, None)  # to the end: the order is the order of their starts
        cls.waiting[self] = self.loop.time()
        self._partial = False
        self._deadline = True
        if cls.sweeper is None:
            cls.sweeper = self.loop.call_later(self.header_timeout, cls._sweep, self.loop)

    def _stop_waiting(self) -> None:
        type(self).waiting.pop(self, None)
        self._deadline = False

    @classmethod
    def _sweep(cls, loop: asyncio.AbstractEventLoop) -> None:
        """The header deadline of the connections waiting longest has come: close those past it,
        and set the timer for the next one's."""
        cls.sweeper = None
        now = loop.time()
        for connection, since in list(cls.waiting.items()):
            if since + cls.header_timeout > now:
                cls.sweeper = loop.call_later(since + cls.header_timeout - now, cls._sweep, loop)
                return
            connection._head_late()

    def _head_started(self) -> bool:
        """Whether part of a request head has arrived (and no more)."""
        return self._partial

    def _head_late(self) -> None:
        if self._head_started():
            self.transport.write(
                _raw_response(
                    "408 Request Timeout",
                    INVALID_REQUEST,
                    f"Request Timeout: no complete request head within {self.header_timeout:g} s",
                )
            )
        self._drop()

    def _drop(self) -> None:
        """Close this connection, which no longer counts against the cap."""
        self._forget()
        self.transport.close()

    def _forget(self) -> None:
        type(self).held.discard(self)
        self._stop_waiting()


class _BoundedH11Protocol(_Bounded, H11Protocol):
    """uvicorn's h11 protocol with the bounds (h11 bounds the head itself)."""

    def _head_started(self) -> bool:
        return self._partial and self.conn.their_state is h11.IDLE


class _BoundedHttpToolsProtocol(_Bounded, HttpToolsProtocol):
    """uvicorn's httptools protocol with the bounds, and one on the request head, which
    httptools buffers without limit."""

    _in_head = False  # between the start of a request and the end of its head
    _head_bytes = 0

    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_head and not self.transport.is_closing():
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_size:
                self.transport.write(
                    _raw_response(
                        "400 Bad Request",
                        INVALID_REQUEST,
                        f"Bad Request: the request head is over max_head_size "
                        f"({self.max_head_size} bytes)",
                    )
                )
                self._drop()


_PROTOCOLS: dict[str, type[_Bounded]] = {
    "httptools": _BoundedHttpToolsProtocol,
    "h11": _BoundedH11Protocol,
}
