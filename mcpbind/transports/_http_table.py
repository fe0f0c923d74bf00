"""The session table of the Streamable HTTP server (``SessionTable``, the bottom layer of
``StreamableHTTPServer``): its sessions by ``Mcp-Session-Id``, least recently used first, their
expiry and eviction, and with a shared store, the records that rebuild a session on any worker
and the messages workers send each other about a session."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgspec
from starlette.responses import Response

from .._repeats import Repeats
from ..auth.resource import AuthInfo, principal
from ..errors import INTERNAL_ERROR
from ..events import Event, Initialized, RequestReceived
from ..packages import bindings
from ..session import ServerSession
from ._http_answers import plain_error
from ._http_calls import Live, read_client, settle
from ._http_streams import Stop
from .http_limits import RETRY_AFTER, SESSION_RECHECK
from .store import FailureLog, Store, StoreError

__all__ = ["SessionTable", "log", "store_failed"]

log = logging.getLogger("mcpbind.transports.http_server")  # the server's log, all its layers'
store_failed = FailureLog(log)  # a store's failures: a warning every 10 s at most


class _PeekAnswer(msgspec.Struct, gc=False):
    """Enough of a client's message to tell an answer (to a request of some worker) apart."""

    id: Any = None
    method: Any = None
    result: msgspec.Raw = msgspec.Raw()  # empty when absent
    error: msgspec.Raw = msgspec.Raw()


_peek_answer = msgspec.json.Decoder(_PeekAnswer)


class _Record(msgspec.Struct, array_like=True):
    """What rebuilds a session on another worker (a shared store's session record): the client's
    initialize request as it was sent, whether its initialized notification came, and the
    principal that opened it (``auth.resource.principal``; None without ``auth=``)."""

    initialize: bytes
    ready: bool = False
    owner: str | None = None


class _Note(msgspec.Struct, array_like=True):
    """A message between workers about one session: ``kind`` is ``answer`` (a client's response
    to a request some worker sent), ``note`` (a client's notification), ``ended``,
    ``attached`` or ``detached`` (a reader of the stream named by ``data``)."""

    origin: str
    kind: str
    data: bytes = b""


class SessionTable:
    """The sessions a server holds (``sessions``), alone or as copies of a shared store's; the
    attributes below are set by ``StreamableHTTPServer.__init__``."""

    store: Store
    worker: str  # names this worker in the ids it gives requests and in its notes
    sessions: dict[str, Live]
    max_sessions: int
    max_queued: int
    session_idle_timeout: float
    session_evictable_after: float
    session_class: Callable[..., ServerSession]
    on_close: Callable[[str], None] | None
    _shared: bool
    _owns_store: bool
    _config: dict[str, Any]
    _note: Repeats
    _ids: Iterator[str] | None
    _started: asyncio.Future[None] | None
    _background: set[asyncio.Task[Any]]

    def _keep_sessions(self, store: Store, owned: bool) -> None:
        """Start the table empty, its sessions kept with ``store`` (``owned``: closed with the
        app, made from a URL or None)."""
        self.store = store
        self._owns_store = owned
        self._shared = store.shared
        self.worker = secrets.token_hex(8)  # names this worker in the ids it gives requests
        self._note = Repeats(log.warning)  # unreadable messages of other workers, logged
        self._ids = (f"{self.worker}-{n}" for n in itertools.count(1)) if self._shared else None
        self._started = None
        self._background = set()
        # By Mcp-Session-Id, least recently used first (every use moves a session to the end).
        self.sessions = {}

    async def _start(self) -> None:
        """Listen to the other workers sharing the store (once, on the first request, or the
        first ``request`` of the server's own)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_future()
            try:
                await self.store.start(self._on_message)
            except BaseException as error:
                self._started.set_exception(error)
                self._started.exception()  # (retrieved: those awaiting it hear it, or no one)
                self._started = None
                raise
            self._started.set_result(None)
        await self._started

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``work`` in the background, keeping a reference until it is done."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _publish(self, sid: str, kind: str, data: bytes = b"") -> None:
        try:
            await self.store.publish(
                sid, msgspec.msgpack.encode(_Note(origin=self.worker, kind=kind, data=data))
            )
        except Exception as error:  # the store is down: the other workers learn it from it later
            store_failed(f"publishing {kind} of session {sid}", error)

    async def _lookup(self, sid: str, auth: AuthInfo | None) -> Live | Response | None:
        """The session ``sid`` when the principal of the request's token opened it: another
        principal's is None (404) exactly as an id never issued (docs/auth.md)."""
        owner = principal(auth)
        if self._shared:
            return await self._find(sid, owner)
        live = self.sessions.get(sid)
        if live is not None and live.owner != owner:
            return None  # not touched: another principal does not keep it alive
        return self._session(sid)

    def _session(self, sid: str) -> Live | None:
        """The session named ``sid`` (now used), unless it expired or never was."""
        now = time.monotonic()
        self._expire(now)
        live = self.sessions.get(sid)
        if live is not None:
            self._touch(live, now)
        return live

    def _touch(self, live: Live, now: float) -> None:
        live.last_used = now
        if live.sid is not None and live.sid in self.sessions:
            self.sessions[live.sid] = self.sessions.pop(live.sid)  # to the end: used last

    def _expire(self, now: float) -> None:
        """Drop the sessions idle past ``session_idle_timeout``: the table is in order of use,
        so this looks at the least recently used ones only, and stops at the first recent one."""
        for _ in range(len(self.sessions)):
            live = next(iter(self.sessions.values()))
            if now - live.last_used < self.session_idle_timeout:
                return
            if live.in_use:  # in use now, so not idle: its clock starts again
                self._touch(live, now)
                continue
            self._end(live)

    def _evict(self, now: float, copies: bool = False) -> bool:
        """Make room for one session by evicting the least recently used one not in use and idle
        for ``session_evictable_after`` (any not in use, when ``copies`` of a shared store's
        sessions are evicted); False when there is none."""
        for _ in range(len(self.sessions)):
            live = next(iter(self.sessions.values()))
            if live.in_use:
                self._touch(live, now)
                continue
            if not copies and now - live.last_used < self.session_evictable_after:
                return False  # the least recently used one is too recent: so are all the others
            self._end(live)
            return True
        return False

    def _register(self, live: Live) -> str | None:
        """Keep ``live`` as a session of its own: its new id, or None when there is no room."""
        now = time.monotonic()
        self._expire(now)
        if len(self.sessions) >= self.max_sessions and not self._evict(now, self._shared):
            return None
        sid = live.sid = secrets.token_hex(16)
        live.last_used = now
        self.sessions[sid] = live
        return sid

    def _end(self, live: Live) -> None:
        """Forget a session here: expired or evicted (with a shared store, only this worker's
        copy, which any worker rebuilds from the store's record while it lasts)."""
        if live.sid is not None:
            self.sessions.pop(live.sid, None)
            if not self._shared:  # its event logs go with it
                self._spawn(self.store.end_session(live.sid))
        self._close(live)

    async def _find(
        self, sid: str, owner: str | None = None, anyone: bool = False
    ) -> Live | Response | None:
        """The session ``sid`` if the shared store still holds it (its idle time restarted),
        rebuilt from its record when this worker has no copy; None when it ended or expired
        (this worker's copy is dropped then) or another principal than ``owner`` opened it
        (unless ``anyone``), a 503 when there is no room for a copy. A ready copy the store
        confirmed less than ``SESSION_RECHECK`` seconds ago is not asked about."""
        copy = self.sessions.get(sid)
        if copy is not None and not anyone and copy.owner != owner:
            return None  # the copy's owner is the record's: another principal's session
        live = self._session(sid)
        now = time.monotonic()
        if live is not None and live.ready and now - live.checked < SESSION_RECHECK:
            return live
        record = await self.store.load_session(sid, self.session_idle_timeout + SESSION_RECHECK)
        if record is None:
            live = self.sessions.pop(sid, None)
            if live is not None:
                self._close(live)
            return None
        try:
            kept = msgspec.msgpack.decode(record, type=_Record)
        except msgspec.DecodeError:
            log.error("the record of session %s cannot be read: it is ended", sid)
            return None
        if not anyone and kept.owner != owner:
            return None  # another principal's session: as unknown, and no copy made here
        live = self.sessions.get(sid)  # a request may have rebuilt it while this one waited
        if live is None:
            live = self._rebuild(sid, kept)
            if live is None:
                return None
            now = time.monotonic()
            self._expire(now)
            if len(self.sessions) >= self.max_sessions and not self._evict(now, copies=True):
                return plain_error(
                    503,
                    f"Service Unavailable: this worker holds max_sessions ({self.max_sessions}) "
                    "sessions, all in use; try again later",
                    INTERNAL_ERROR,
                    {"retry-after": RETRY_AFTER},
                )
            live.last_used = now
            self.sessions[sid] = live
        elif kept.ready and not live.ready:
            self._initialized(live)
        live.checked = now
        return live

    def _rebuild(self, sid: str, kept: _Record) -> Live | None:
        """A copy of a session opened on another worker: a new ``ServerSession`` that reads the
        client's initialize again (and its initialized notification, when it came)."""
        session = self.session_class(**self._config)
        session.receive(kept.initialize)
        session.data_to_send()
        if session.state != "initializing":
            log.error("session %s cannot be rebuilt from its initialize: it is ended", sid)
            return None
        live = Live(session, stateful=True)
        live.sid = sid
        live.owner = kept.owner
        if kept.ready:
            self._initialized(live)
        return live

    def _initialized(self, live: Live) -> None:
        """Tell a rebuilt session what the client told the worker that has its record: the
        initialized notification (its method from the agreed revision's facts)."""
        revision = live.session.revision
        if revision is not None and live.session.state == "initializing":
            method = bindings(revision).FACTS.lifecycle.get("initialized")
            if method is not None:
                live.session.receive(msgspec.json.encode({"jsonrpc": "2.0", "method": method}))
                live.session.data_to_send()
        live.ready = True

    async def _opened(self, live: Live, initialize: bytes) -> bool:
        """Keep a new session's record in the shared store; False (the session forgotten here
        too) when the store holds ``max_sessions`` already."""
        assert live.sid is not None
        record = msgspec.msgpack.encode(_Record(initialize=initialize, owner=live.owner))
        live.record = record
        try:
            await self._start()  # (a POST without a session did not wait for the listener)
            if await self.store.open_session(
                live.sid, record, self.session_idle_timeout, self.max_sessions
            ):
                return True
        except StoreError:
            self.sessions.pop(live.sid, None)
            raise
        self.sessions.pop(live.sid, None)
        return False

    async def _became_ready(self, live: Live, events: list[Event]) -> None:
        """The client's initialized notification came (``events``, or a POST before whose record
        the store failed to save: the session's state says so): every worker's copy learns it
        from the record."""
        if live.session.state != "ready" or live.sid is None:
            return
        kept = msgspec.msgpack.decode(live.record or b"", type=_Record) if live.record else None
        if kept is None:
            found = await self.store.load_session(live.sid, self.session_idle_timeout)
            kept = msgspec.msgpack.decode(found, type=_Record) if found else None
        if kept is not None:
            kept.ready = True
            record = msgspec.msgpack.encode(kept)
            await self.store.save_session(
                live.sid, record, self.session_idle_timeout + SESSION_RECHECK
            )
            live.record = record
        live.ready = True

    async def _forwarded(self, live: Live, body: bytes) -> bool:
        """With a shared store: a client's answer to a request this worker did not send goes to
        the worker that sent it (True: nothing more to do here); a client's notification is also
        told to the other workers, where the request it cancels may run."""
        try:
            peek = _peek_answer.decode(body)
        except (msgspec.DecodeError, ValueError, RecursionError):
            return False  # a batch, or what cannot be read: this worker's session answers it
        assert live.sid is not None
        if peek.method is None and peek.id is not None:
            if not peek.result and not peek.error:
                return False
            if peek.id in live.waiting:
                return False
            await self._publish(live.sid, "answer", body)
            return True
        if isinstance(peek.method, str) and peek.id is None:
            await self._publish(live.sid, "note", body)
        return False

    def _on_message(self, sid: str, data: bytes) -> None:
        """What another worker said about a session this worker may hold a copy of."""
        try:
            note = msgspec.msgpack.decode(data, type=_Note)
        except msgspec.DecodeError:
            self._note(
                "unreadable", f"an unreadable message from another worker about session {sid}"
            )
            return
        if note.origin == self.worker:
            return
        live = self.sessions.get(sid)
        if live is None:
            return
        if note.kind == "ended":
            self.sessions.pop(sid, None)
            self._close(live)
        elif note.kind in ("answer", "note"):
            try:
                peek = read_client.decode(note.data)
            except (msgspec.DecodeError, ValueError, RecursionError):
                return
            if note.kind == "answer" and peek.id not in live.waiting:
                return
            for event in live.session.receive(note.data):
                if isinstance(event, Initialized):
                    live.ready = True
                elif not isinstance(event, RequestReceived):
                    settle(live, event)
            live.session.data_to_send()  # what a copy would say is said by the one asked
        elif note.kind in ("attached", "detached"):
            stream = live.streams.get(note.data.decode(errors="replace"))
            if stream is None:
                return
            if note.kind == "attached":
                stream.remote += 1
                stream.attached()
            else:
                stream.remote = max(0, stream.remote - 1)
                stream.detached()

    async def _owner_of(self, sid: str) -> tuple[str | None, ...]:
        """(the principal that opened session ``sid``,), or () when there is no such session."""
        live = self.sessions.get(sid)
        if live is not None or not self._shared:
            return () if live is None else (live.owner,)
        record = await self.store.load_session(sid, self.session_idle_timeout + SESSION_RECHECK)
        try:
            return () if record is None else (msgspec.msgpack.decode(record, type=_Record).owner,)
        except msgspec.DecodeError:
            return ()

    def _close(self, live: Live) -> None:
        """The session ended here: its handlers are cancelled, its readers end, what its
        streams awaited from the client raises ``ConnectionError``, and ``on_close`` hears."""
        if self.on_close is not None and live.sid is not None:
            self.on_close(live.sid)
        for task in live.tasks.values():
            task.cancel()
        for reader in live.readers:
            if not reader.done():
                reader.set_result(Stop("end"))
        for stream in list(live.streams.values()):
            stream.abandon()
            if stream.orphaned is not None:
                stream.orphaned.cancel()
                stream.orphaned = None
            if stream.pump is not None:
                stream.pump.cancel()
        live.streams.clear()
        live.standalone = None
