"""The gateway's ASGI application (``Gateway``): its two HTTP fronts, the table of its links (one
per client session, one per client identity of the session-less revisions), the server's face
learnt once, the tasks translations, the held input rounds and their relay between processes."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from ..._revisions import RELEASED
from ...auth.client import OAuthClient
from ...auth.resource import principal
from ...errors import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    ProtocolError,
)
from ...events import (
    Event,
    NotificationReceived,
)
from ...packages import bindings
from ...session import ServerSession
from ...session._common import checked, speech
from ...transports.http_limits import MAX_IN_FLIGHT
from ...transports.http_pool import HttpPool
from ...transports.http_server import SESSION_IDLE_TIMEOUT, Call, StreamableHTTPServer
from ...transports.http_wire import HttpWire, HttpxWire
from ...transports.sse_server import SSEServer
from ...transports.stdio import MAX_LINE
from ..crossing import Crossing
from ..limits import INPUT_TIMEOUT, NOT_MINE
from .relay import HOLDER_CHECK, HOLDER_SILENCE, MAX_RELAYED, RELAY_TIMEOUT, Relay, RelayedCall
from .tasks_core_to_extension import UpstreamTasks
from .tasks_extension_to_core import GatewayTasks
from .upstream import HttpUpstream, SseUpstream, StdioUpstream, Upstream, upstream_kind

if TYPE_CHECKING:
    from .surface import SurfaceLock

if TYPE_CHECKING:
    import httpx

from .front import Face, GatewayFront
from .link import DROPPED_WITHIN, MAX_DROPPED, Link
from .pending import Pending

__all__ = [
    "CLIENT_INFO",
    "DROPPED_WITHIN",
    "MAX_DROPPED",
    "MAX_SHARED",
    "OPEN_TIMEOUT",
    "Gateway",
    "sse_revisions",
]


MAX_SHARED = 16  # links for clients without a session (one per client identity)
OPEN_TIMEOUT = 30.0  # seconds the server's handshake may take
CLIENT_INFO = {"name": "mcpbind-gateway", "version": "1"}  # the probe's own info


def sse_revisions(clients: Iterable[str], *, sse: bool = True, auth: bool = False) -> list[str]:
    """The client revisions the HTTP+SSE front serves (at ``/sse``): those with the initialize
    handshake, unless clients present tokens (``auth``: HTTP+SSE has no authorization) or
    ``sse`` is off (processes sharing a port)."""
    if auth or not sse:
        return []
    return [r for r in clients if bindings(r).FACTS.handshake == "initialize"]


def _check_bounds(*, holder_silence: float, **bounds: float) -> None:
    """Each of ``bounds`` positive, ``holder_silence`` more than ``HOLDER_CHECK`` (the holder of
    an input round says it works every ``HOLDER_CHECK`` seconds): else ``ValueError``."""
    for name, value in bounds.items():
        if value <= 0:
            raise ValueError(f"{name} must be positive, not {value!r}")
    if holder_silence <= HOLDER_CHECK:
        raise ValueError(
            f"holder_silence must be more than {HOLDER_CHECK:g} s, not {holder_silence!r}"
        )


def _stderr(line: str) -> None:
    sys.stderr.write(f"mcpbind bridge: {line}\n")
    sys.stderr.flush()


class Gateway:
    """The ASGI application of ``mcpbind bridge --listen``: Streamable HTTP at ``path`` and
    HTTP+SSE at ``/sse`` and ``/messages``, in front of the server ``command`` (a child per
    client session) or the MCP server at ``upstream`` (a URL).

    Bounds (docs/bridge.md, "Limits"): ``max_sessions`` client sessions per front (each with a
    link of its own; past it the HTTP servers refuse or evict as they do), ``max_shared`` links
    of clients without a session, ``max_in_flight`` requests of one link awaiting the server,
    ``input_timeout`` seconds a server's request waits for a round-trip client's retry,
    ``open_timeout`` seconds for the server's handshake, ``max_line`` bytes of a child's line,
    ``max_dropped`` messages of a server that no client can take within ``DROPPED_WITHIN``
    seconds (past it the link ends);
    with a shared store, ``max_relayed`` retries carried to the process holding their input
    round and awaiting its answer, each for ``relay_timeout`` seconds at most, and for
    ``holder_silence`` seconds without a word from that process (more than its checks'
    ``HOLDER_CHECK``, 1 s; relay.py).
    ``store`` (a Redis URL) is the Streamable HTTP front's store (docs/http.md); ``auth`` (a
    ``ResourceServer``) makes its clients present tokens, and turns HTTP+SSE off, as does
    ``sse=False`` (HTTP+SSE sessions live in one process). The client's
    credentials never go to the server: each link is a connection of the gateway's own.
    ``upstream_auth`` (an ``OAuthClient``) gets the gateway's own tokens for a protected
    ``upstream``. ``surface`` (a ``SurfaceLock``) is enforced on every link (surface.py,
    docs/surface.md).
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        upstream: str | None = None,
        client_revisions: Iterable[str] | str = RELEASED,
        server_revisions: Iterable[str] | str = RELEASED,
        strict: bool = False,
        path: str = "/mcp",
        allowed_hosts: Iterable[str] | None = None,
        max_sessions: int | None = None,
        max_shared: int = MAX_SHARED,
        max_in_flight: int = MAX_IN_FLIGHT,
        session_idle_timeout: float | None = None,
        input_timeout: float = INPUT_TIMEOUT,
        open_timeout: float = OPEN_TIMEOUT,
        max_line: int = MAX_LINE,
        max_dropped: int = MAX_DROPPED,
        max_relayed: int = MAX_RELAYED,
        relay_timeout: float = RELAY_TIMEOUT,
        holder_silence: float = HOLDER_SILENCE,
        store: Any = None,
        auth: Any = None,
        upstream_auth: OAuthClient | None = None,
        sse: bool = True,
        http: httpx.AsyncClient | None = None,
        log: Callable[[str], None] | None = None,
        surface: SurfaceLock | None = None,
    ) -> None:
        if (command is None) == (upstream is None):
            raise ValueError("a gateway needs a command or an upstream URL, and only one")
        _check_bounds(
            max_shared=max_shared,
            max_in_flight=max_in_flight,
            input_timeout=input_timeout,
            open_timeout=open_timeout,
            max_dropped=max_dropped,
            max_relayed=max_relayed,
            relay_timeout=relay_timeout,
            holder_silence=holder_silence,
        )
        self.command = list(command) if command is not None else None
        self.upstream = upstream
        self.upstream_auth = upstream_auth
        self.server_revisions = (
            (server_revisions,) if isinstance(server_revisions, str) else tuple(server_revisions)
        )
        self.strict = strict
        self.surface = surface
        self.max_shared = max_shared
        self.max_in_flight = max_in_flight
        self.input_timeout = input_timeout
        self.open_timeout = open_timeout
        self.max_line = max_line
        self.max_dropped = max_dropped
        self._log = log or _stderr
        self._http = http
        self._wire: HttpWire | None = None  # the HTTP server's wire, once probed
        self._kind: Any = None  # the upstream transport class, once probed
        self._probed: asyncio.Future[None] | None = None
        self.face = Face(Crossing(self.server_revisions, strict=strict))
        self.tasks: UpstreamTasks | GatewayTasks | None = None  # once learnt (tasks_*.py)
        self.sessions: dict[tuple[int, str], Link] = {}  # (front, session id) -> its link
        self.shared: dict[str, Link] = {}  # client identity -> link, least recently used first
        self._holds: dict[str, tuple[Link, Pending]] = {}
        self.max_relayed, self.relay_timeout = max_relayed, relay_timeout
        self.holder_silence = holder_silence
        self.relay: Relay | None = None  # with a shared store, once the server is learnt
        self._background: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._fronts(
            client_revisions,
            path=path,
            store=store,
            auth=auth,
            sse=sse,
            allowed_hosts=allowed_hosts,
            max_sessions=max_sessions,
            session_idle_timeout=session_idle_timeout,
        )

    def _fronts(
        self,
        client_revisions: Iterable[str] | str,
        *,
        path: str,
        store: Any,
        auth: Any,
        sse: bool,
        allowed_hosts: Iterable[str] | None,
        max_sessions: int | None,
        session_idle_timeout: float | None,
    ) -> None:
        """The Streamable HTTP front (``http``), the HTTP+SSE one (``sse``, or None) and the
        application serving both (``app``)."""
        self.idle_timeout = (
            session_idle_timeout if session_idle_timeout is not None else SESSION_IDLE_TIMEOUT
        )
        clients = (
            (client_revisions,) if isinstance(client_revisions, str) else tuple(client_revisions)
        )
        # An extension client's tasks of a core revision server (tasks_extension_to_core.py),
        # once learnt.
        self._task_front = GatewayTasks.of(clients)
        session_class = functools.partial(GatewayFront, face=self.face)
        limits: dict[str, Any] = {}
        if allowed_hosts is not None:
            limits["allowed_hosts"] = allowed_hosts
        if max_sessions is not None:
            limits["max_sessions"] = max_sessions
        if session_idle_timeout is not None:
            limits["session_idle_timeout"] = session_idle_timeout
        self.http = StreamableHTTPServer(
            self._handle_http,
            revisions=clients,
            path=path,
            store=store,
            session_class=session_class,
            on_event=self._on_event,
            on_close=functools.partial(self._on_close, 0),
            auth=auth,
            tasks=self._task_front,  # type: ignore[arg-type]
            **limits,
        )
        # HTTP+SSE has no authorization (with tokens required it is not served at all), and
        # keeps its sessions in the process (``sse=False`` where processes share a port).
        with_sessions = sse_revisions(clients, sse=sse, auth=auth is not None)
        self.sse = (
            SSEServer(
                self._handle_sse,
                revisions=with_sessions,
                session_class=session_class,
                on_event=self._on_event,
                on_close=functools.partial(self._on_close, 1),
                **limits,
            )
            if with_sessions
            else None
        )
        routes = list(self.http.app.routes) + (self.sse.routes if self.sse is not None else [])
        self.app = Starlette(routes=routes, lifespan=self._lifespan)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and (self._probed is None or not self._probed.done()):
            try:
                await self._probe()
            except Exception as error:  # noqa: BLE001 - said to the client, and tried again
                why = (
                    error.message
                    if isinstance(error, ProtocolError)
                    else f"the server cannot be reached: {error or type(error).__name__}"
                )
                response = JSONResponse(
                    {
                        "jsonrpc": "2.0",
                        "id": None,
                        "error": {"code": INTERNAL_ERROR, "message": f"Bad Gateway: {why}"},
                    },
                    status_code=502,
                )
                await response(scope, receive, send)
                return
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"] == self.http.path
        ):
            # The hot path: the Streamable HTTP server takes its POSTs without Starlette's
            # routing (the routes below would find the same endpoint).
            await self.http(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @contextlib.asynccontextmanager
    async def _lifespan(self, app: Any) -> AsyncIterator[None]:
        yield
        await self.aclose()

    async def aclose(self) -> None:
        """End every link (children exit, HTTP sessions are deleted) and the stores."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        links = list(self.sessions.values()) + list(self.shared.values())
        await asyncio.gather(
            *(link.close("the gateway is shutting down") for link in links),
            return_exceptions=True,
        )
        # Links ending on their own (a session that ended just before) finish ending first.
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.relay is not None:
            await self.relay.close()
            self.relay = None
        await self.http.aclose()
        if self._wire is not None and self._http is None:  # (its own; a given client stays open)
            await self._wire.aclose()

    # -- the server -------------------------------------------------------------------------------

    async def _probe(self) -> None:
        """Learn the server's handshake once (a connection opened and closed again)."""
        if self._probed is None:
            self._probed = asyncio.ensure_future(self._learn())
            self._probed.add_done_callback(self._probe_done)
        await asyncio.shield(self._probed)

    def _probe_done(self, probed: asyncio.Future[None]) -> None:
        if probed.cancelled() or probed.exception() is not None:
            self._probed = None  # the next request tries again

    async def _learn(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.ensure_future(self._sweep())
        if self.relay is None and self.http.store.shared:
            # Other processes share the store: a retry may reach one of them (relay.py).
            relay = Relay(
                self.http.store,
                self._resume_relayed,
                max_relayed=self.max_relayed,
                timeout=self.relay_timeout,
                silence=self.holder_silence,
                log=self._log,
            )
            await relay.start()
            self.relay = relay
        if self.upstream is not None:
            wire = self._wire
            if wire is None:
                given = self._http
                wire = (
                    HttpPool(self.upstream, read_timeout=None)
                    if given is None
                    else HttpxWire(given)
                )
                self._wire = wire
            session = Crossing(self.server_revisions).back
            session.info = dict(CLIENT_INFO)
            try:
                async with asyncio.timeout(self.open_timeout):
                    self._kind, negotiated = await upstream_kind(
                        self.upstream, wire, session, self.upstream_auth
                    )
            except TimeoutError:
                why = self.timed_out()
                raise ProtocolError(CONNECTION_CLOSED, f"Connection closed: {why}") from None
            if (
                self._kind is not SseUpstream
            ):  # a core client's tasks, translated (tasks_core_to_extension.py)
                self.tasks = UpstreamTasks.between(self, negotiated)
                self.face.crossing.tasks_translated = self.tasks is not None
        else:
            probe = Link(self, None, None, CLIENT_INFO)
            try:
                await probe.open()
                negotiated = probe.agreement()
            finally:
                await probe.close("the probe is done")
            # a core client's tasks, translated on the child's session (tasks_core_to_extension.py)
            self.tasks = UpstreamTasks.between(self, negotiated)
            self.face.crossing.tasks_translated = self.tasks is not None
        front = self._task_front
        if self.tasks is None and front is not None and front.between(negotiated):
            self.tasks = front
        self.face.learn(negotiated)
        self.say(self.face.crossing.take_log())

    def timed_out(self) -> str:
        return f"the server did not complete its handshake within {self.open_timeout:g} s"

    def upstream_for(self, link: Link) -> Upstream:
        if self.command is not None:
            return StdioUpstream(self.command, link, self.max_line)
        assert self._wire is not None and self.upstream is not None
        if self._kind is SseUpstream:
            return SseUpstream(self.upstream, link, self._wire)
        return HttpUpstream(self.upstream, link, self._wire, self.upstream_auth)

    # -- the client's requests --------------------------------------------------------------------

    async def _handle_http(self, call: Call) -> Any:
        link = self._link(call, 0, self.http)
        if (
            self.tasks is not None
            and (done := await self.tasks.forward(link, call)) is not NOT_MINE
        ):
            return done
        return await link.forward(call)

    async def _handle_sse(self, call: Call) -> Any:
        return await self._handle(call, 1, self.sse)

    async def _handle(self, call: Call, which: int, front: Any) -> Any:
        link = self._link(call, which, front)
        if (
            self.tasks is not None
            and (done := await self.tasks.forward(link, call)) is not NOT_MINE
        ):
            return done
        return await link.forward(call)

    def _link(self, call: Call, which: int, front: Any) -> Link:
        """The link a request goes down: its session's, else its client identity's."""
        sid = call.session_id
        if sid is not None:
            key = (which, sid)
            link = self.sessions.get(key)
            if link is None:
                session = call.session
                caps = info = None
                if isinstance(session, GatewayFront) and session.client is not None:
                    caps, info, _ = session.client
                link = Link(self, key, caps, info, front=front, sid=sid)
                self.sessions[key] = link
            if isinstance(call.session, GatewayFront):
                call.session.link = link
            return link
        caps, info = Crossing.client_identity(speech(call.revision), call.message)
        identity = hashlib.sha256(
            msgspec.json.encode(
                [principal(call.auth), msgspec.to_builtins(info), msgspec.to_builtins(caps)],
                order="sorted",
            )
        ).hexdigest()
        link = self.shared.pop(identity, None)
        if link is None:
            if len(self.shared) >= self.max_shared and not self._evict_shared():
                raise ProtocolError(
                    INTERNAL_ERROR,
                    f"Server busy: {self.max_shared} client identities without a session have "
                    "requests in flight (the gateway's max_shared)",
                    {"max_shared": self.max_shared},
                )
            link = Link(self, identity, caps, info)
        self.shared[identity] = link  # to the end: used last
        return link

    async def _sweep(self) -> None:
        """End the links idle for ``session_idle_timeout`` (nothing in flight, no request for
        that long): their children exit, their HTTP sessions are deleted. A session that comes
        back later gets a new one."""
        every = min(max(self.idle_timeout / 4, 0.05), 30.0)
        why = f"idle for session_idle_timeout ({self.idle_timeout:g} s)"
        while True:
            await asyncio.sleep(every)
            now = time.monotonic()
            for link in [*self.sessions.values(), *self.shared.values()]:
                if not link.pending and not link.counted and now - link.used >= self.idle_timeout:
                    if link.tasks is not None and link.tasks.mine:
                        continue  # a task still running on it (tasks_extension_to_core.py)
                    self.forget(link)
                    self.spawn(link.close(why))

    def _evict_shared(self) -> bool:
        for identity, link in self.shared.items():
            if not link.pending and not link.counted and not (link.tasks and link.tasks.mine):
                del self.shared[identity]
                self.spawn(link.close("its place went to another client identity (max_shared)"))
                return True
        return False

    def forget(self, link: Link) -> None:
        if isinstance(link.key, tuple):
            if self.sessions.get(link.key) is link:
                del self.sessions[link.key]
        elif link.key is not None and self.shared.get(link.key) is link:
            del self.shared[link.key]
        for state, (held, _) in list(self._holds.items()):
            if held is link:
                del self._holds[state]

    def _on_event(self, session: ServerSession, event: Event) -> None:
        """A client's notification goes down its link (requests come through the handlers)."""
        if type(event) is NotificationReceived and isinstance(session, GatewayFront):
            link = session.link
            if link is not None and link.why is None:
                link.notify_down(event)

    def _on_close(self, which: int, sid: str) -> None:
        """A front forgot a session: its link ends, and what it had in flight is cancelled."""
        link = self.sessions.pop((which, sid), None)
        if link is not None:
            self.spawn(link.close("the client's session ended"))

    # -- input rounds with round-trip clients -----------------------------------------------------

    def hold(self, pending: Pending, link: Link) -> str:
        """Keep ``pending`` for the client's retry; its request state."""
        state = Crossing.new_state()
        if self.relay is not None:
            state = self.relay.state(state)  # names this process, for a retry arriving elsewhere
        self._holds[state] = (link, pending)
        if pending.timer is not None:
            pending.timer.cancel()
        pending.timer = asyncio.get_running_loop().call_later(
            self.input_timeout, self._expire_hold, state
        )
        return state

    def _expire_hold(self, state: str) -> None:
        found = self._holds.pop(state, None)
        if found is None:
            return
        link, pending = found
        pending.timer = None
        link.cancel_pending(
            pending,
            f"the client did not retry within input_timeout ({self.input_timeout:g} s) with the "
            "input the server asked for",
        )
        link.flush()
        link.say()

    async def _resume_relayed(self, call: RelayedCall, state: str, identity: str) -> Any:
        """The answer to ``call``, a retry of the round ``state`` held here that arrived at
        another process from the client of ``identity`` (``Relay``)."""
        spec = speech(call.revision).methods.get(call.method)
        if spec is None:
            raise ProtocolError(METHOD_NOT_FOUND, f"Method not found: {call.method!r}")
        params = checked(call.params, spec.params, call.revision, "$.params")
        _, answers = Crossing.round_trip_retry(params, call.revision)
        found = self._holds.get(state)
        link = found[0] if found is not None and repr(found[0].key) == identity else None
        pending = self.resume_held(state, call, link)
        assert link is not None
        return await link.resume(pending, answers)

    def resume_held(self, state: str, call: Call | RelayedCall, link: Link | None) -> Pending:
        """The held request a retry's ``state`` names, now serving ``call``."""
        found = self._holds.pop(state, None) if link is not None else None
        if found is None or found[0] is not link or found[1].method != call.method:
            raise ProtocolError(
                INVALID_PARAMS,
                "Invalid params: requestState names no input round this gateway holds for this "
                f"client and method (it expired after input_timeout, {self.input_timeout:g} s, "
                "its server connection ended, or a gateway process not sharing this one's Redis "
                "issued it)",
            )
        pending = found[1]
        if pending.timer is not None:
            pending.timer.cancel()
            pending.timer = None
        pending.call = call
        pending.revision = call.revision
        return pending

    # -- plumbing ---------------------------------------------------------------------------------

    def spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def say(self, lines: list[str]) -> None:
        for line in lines:
            self._log(line)
