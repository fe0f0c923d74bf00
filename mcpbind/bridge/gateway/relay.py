"""Input rounds across gateway processes: a round-trip client's retry that reaches another process
than the one holding its input round is carried there, and its answer back (docs/bridge.md,
"Several processes, and Redis").

The gateway holds an input round (the server's request waiting for the client's input, and the
request it belongs to) in the memory of the process that asked. With a shared store (Redis) each
process listens on a channel of its own, named by a random ``worker`` id, and its request states
name it: ``<STATE_PREFIX><worker>.<token>``. The token is what it always was, random and
unguessable (``Crossing.new_state``); the worker id only says where to ask, and the holder still
takes the retry only for the round's own client identity and method, as it does locally.

A retry for another process is sent to its channel (``Relay.forward``): nobody listening there
(the process is gone) fails it at once; the holder acknowledges it at once, resumes the round as
if the retry had arrived there, says every ``HOLDER_CHECK`` seconds that it still works on it,
and sends back what it answers (the request's result, the next input round, or an error), with
the progress and notifications on the request's stream on the way. While it waits, the
forwarding process checks every ``HOLDER_CHECK`` seconds that the holder still listens; it fails
the retry when the store reports an error (or does not answer that check within
``holder_silence``), when nothing came from the holder for ``holder_silence`` seconds (no
acknowledgement, or the answer lost with a connection to the store), and after
``relay_timeout`` (in each case the round is then cancelled on the holder); at most
``max_relayed`` retries wait at once. A client that leaves cancels the round on the holder.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ...errors import CONNECTION_CLOSED, INTERNAL_ERROR, ProtocolError
from ...transports.store import Store
from ..limits import STATE_PREFIX

__all__ = [
    "HOLDER_CHECK",
    "HOLDER_SILENCE",
    "MAX_RELAYED",
    "RELAY_TIMEOUT",
    "Relay",
    "RelayedCall",
]

MAX_RELAYED = 256  # retries one process has sent to the processes holding their rounds, waiting
RELAY_TIMEOUT = 300.0  # seconds such a retry waits for the holder's answer
HOLDER_CHECK = 1.0  # seconds between checks that the holder of a waiting retry still listens
# Seconds a waiting retry goes without a word from its holder (its acknowledgement, then one
# every HOLDER_CHECK seconds while it works on the retry) before it fails; also how long the
# store has to answer a check of the holder.
HOLDER_SILENCE = 5.0
MAX_OUTBOX = 1024  # progress and notifications queued for other processes (more are dropped)

_WORKER_LENGTH = 16  # hex digits of a worker id
_HEX = frozenset("0123456789abcdef")


class _RelayNote(msgspec.Struct, array_like=True, omit_defaults=True):
    """One message between gateway processes about one relayed retry (``ref``)."""

    kind: str  # retry | cancel | taken | result | error | progress | notify
    ref: str
    origin: str = ""  # the worker that forwarded the retry (where answers go)
    state: str = ""
    identity: str = ""
    method: str = ""
    revision: str = ""
    body: bytes = b""  # JSON: params, result, error data, notification params
    code: int = 0
    message: str = ""
    progress: float = 0.0
    total: float | None = None


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_RelayNote).decode


def _channel(worker: str) -> str:
    return f"gateway:{worker}"


class RelayedCall:
    """A retry that arrived at another process, as the holder's link sees it (in place of the
    HTTP server's ``Call``): its revision, method and params, and its stream reached through the
    process it arrived at."""

    __slots__ = ("id", "message", "method", "params", "ref", "relay", "revision", "to")

    def __init__(self, relay: Relay, note: _RelayNote, params: Any) -> None:
        self.relay, self.ref, self.to = relay, note.ref, note.origin
        self.id = note.ref
        self.method, self.revision, self.params = note.method, note.revision, params
        self.message = None

    def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        self.relay.post(
            self.to,
            _RelayNote("progress", self.ref, progress=progress, total=total, message=message or ""),
        )

    def notify(self, method: str, params: Any = None) -> None:
        body = msgspec.json.encode(msgspec.to_builtins(params))
        self.relay.post(self.to, _RelayNote("notify", self.ref, method=method, body=body))

    async def request(self, method: str, params: Any = None) -> Any:
        raise ProtocolError(
            INTERNAL_ERROR,
            f"Internal error: {method!r} cannot reach the client: its retry arrived at another "
            "gateway process",
        )


Resume = Callable[[RelayedCall, str, str], Awaitable[Any]]


class _Waiting:
    """A retry this process forwarded: its answer to come, the client's call, and when the
    holder was last heard of (``time.monotonic``)."""

    __slots__ = ("answer", "call", "heard")

    def __init__(self, answer: asyncio.Future[_RelayNote], call: Any) -> None:
        self.answer, self.call, self.heard = answer, call, time.monotonic()


class Relay:
    """This process's end of the relayed retries: its ``worker`` id (in every request state it
    issues), the retries it forwarded and awaits, and those it serves for other processes.
    ``resume(call, state, identity)`` is the gateway's: the answer to a retry of a round held
    here."""

    def __init__(
        self,
        store: Store,
        resume: Resume,
        *,
        max_relayed: int = MAX_RELAYED,
        timeout: float = RELAY_TIMEOUT,
        silence: float = HOLDER_SILENCE,
        log: Callable[[str], None],
    ) -> None:
        self.store = store
        self.worker = secrets.token_hex(_WORKER_LENGTH // 2)
        self.max_relayed = max_relayed
        self.timeout = timeout
        self.silence = silence
        self._resume = resume
        self._log = log
        self._waiting: dict[str, _Waiting] = {}  # ref -> the retry forwarded
        self._serving: dict[str, asyncio.Task[None]] = {}  # ref -> the retry served here
        self._outbox: asyncio.Queue[tuple[str, _RelayNote]] = asyncio.Queue(MAX_OUTBOX)
        self._sender: asyncio.Task[None] | None = None
        self._late: set[asyncio.Task[int]] = set()  # answers sent past a full outbox
        self._started = False

    async def start(self) -> None:
        """Listen on this process's channel (before any request state naming it is issued)."""
        if not self._started:
            await self.store.listen(_channel(self.worker), self._received)
            self._sender = asyncio.ensure_future(self._send_all())
            self._started = True

    async def close(self) -> None:
        for task in [*self._serving.values(), *([self._sender] if self._sender else [])]:
            task.cancel()
        self._sender = None
        for waiting in self._waiting.values():
            if not waiting.answer.done():
                waiting.answer.set_exception(
                    ProtocolError(
                        CONNECTION_CLOSED, "Connection closed: the gateway is shutting down"
                    )
                )
        if self._started:
            self._started = False
            with contextlib.suppress(Exception):
                await self.store.unlisten(_channel(self.worker))

    # -- request states ---------------------------------------------------------------------------

    def state(self, token: str) -> str:
        """The request state of a round held here (``token``: ``Crossing.new_state()``)."""
        return f"{STATE_PREFIX}{self.worker}.{token[len(STATE_PREFIX):]}"

    def holder(self, state: str) -> str | None:
        """The worker id a request state of this gateway names (None: none well formed)."""
        worker = state[len(STATE_PREFIX) : len(STATE_PREFIX) + _WORKER_LENGTH]
        if (
            len(worker) == _WORKER_LENGTH
            and state[len(STATE_PREFIX) + _WORKER_LENGTH : len(STATE_PREFIX) + _WORKER_LENGTH + 1]
            == "."
            and _HEX.issuperset(worker)
        ):
            return worker
        return None

    # -- forwarding a retry -----------------------------------------------------------------------

    async def forward(self, holder: str, state: str, identity: str, call: Any) -> Any:
        """The answer to ``call``, a retry of the round ``state`` held by worker ``holder``: the
        result (plain JSON), or ``ProtocolError`` naming why not."""
        if len(self._waiting) >= self.max_relayed:
            raise ProtocolError(
                INTERNAL_ERROR,
                f"Server busy: {self.max_relayed} retries of input rounds held by other gateway "
                "processes already await their answers here (the gateway's max_relayed)",
                {"max_relayed": self.max_relayed},
            )
        ref = secrets.token_urlsafe(12)
        waiting = self._waiting[ref] = _Waiting(asyncio.get_running_loop().create_future(), call)
        note = _RelayNote(
            "retry",
            ref,
            origin=self.worker,
            state=state,
            identity=identity,
            method=call.method,
            revision=call.revision,
            body=msgspec.json.encode(msgspec.to_builtins(call.params)),
        )
        try:
            if await self._store(self.store.send(_channel(holder), _encode(note)), _SENDING) == 0:
                raise _gone(holder, "before the retry")
            answer = await self._await(waiting, holder)
        except asyncio.CancelledError:
            # The client cancelled or left: the holder cancels the request on the server.
            self.post(holder, _RelayNote("cancel", ref, origin=self.worker))
            raise
        except ProtocolError as error:
            if isinstance(error.data, dict) and error.data.get("reason") in _NOBODY_WAITS:
                self.post(holder, _RelayNote("cancel", ref, origin=self.worker))
            raise
        finally:
            self._waiting.pop(ref, None)
        if answer.kind == "error":
            data = msgspec.json.decode(answer.body) if answer.body else None
            raise ProtocolError(answer.code, answer.message, data)
        return msgspec.json.decode(answer.body)

    async def _await(self, waiting: _Waiting, holder: str) -> _RelayNote:
        deadline = time.monotonic() + self.timeout
        while True:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                raise ProtocolError(
                    CONNECTION_CLOSED,
                    "Connection closed: the gateway process holding this input round did not "
                    f"answer the retry within relay_timeout ({self.timeout:g} s)",
                    {"reason": "timeout", "relay_timeout": self.timeout},
                )
            if now - waiting.heard > self.silence:
                raise ProtocolError(
                    CONNECTION_CLOSED,
                    "Connection closed: the gateway process holding this input round (worker "
                    f"{holder}) said nothing of the retry for holder_silence ({self.silence:g} "
                    "s): it did not acknowledge it, or its answer was lost on the way; the "
                    "request must be sent again without requestState",
                    {"reason": "holder silent", "worker": holder, "holder_silence": self.silence},
                )
            with contextlib.suppress(TimeoutError):
                return await asyncio.wait_for(
                    asyncio.shield(waiting.answer), min(left, HOLDER_CHECK)
                )
            if await self._store(self.store.listeners(_channel(holder)), _CHECKING) == 0:
                raise _gone(holder, "while the retry waited for its answer")

    async def _store(self, work: Awaitable[int], when: str) -> int:
        """``work``, an operation of the store on a forwarded retry (``when``: what it does),
        its failure or a wait past ``silence`` a ``ProtocolError``."""
        try:
            return await asyncio.wait_for(work, self.silence)
        except TimeoutError:
            raise _store_failed(when, f"no answer within {self.silence:g} s") from None
        except Exception as error:  # noqa: BLE001 - the store's client's errors (redis's, OSError)
            raise _store_failed(when, error) from None

    # -- what other processes send ----------------------------------------------------------------

    def _received(self, data: bytes) -> None:
        try:
            note = _decode(data)
        except msgspec.DecodeError:
            self._log("relay: a message no gateway process sent: ignored")
            return
        if note.kind == "retry":
            if note.ref in self._serving:
                return
            self.post(note.origin, _RelayNote("taken", note.ref), always=True)
            task = asyncio.ensure_future(self._serve(note))
            self._serving[note.ref] = task
            task.add_done_callback(functools.partial(self._served, note.ref))
        elif note.kind == "cancel":
            serving = self._serving.get(note.ref)
            if serving is not None:
                serving.cancel()
        else:
            waiting = self._waiting.get(note.ref)
            if waiting is None:
                return
            waiting.heard = time.monotonic()  # (taken: the acknowledgement, or still working)
            future, call = waiting.answer, waiting.call
            if note.kind in ("result", "error"):
                if not future.done():
                    future.set_result(note)
            elif note.kind == "progress":
                with contextlib.suppress(ProtocolError, ConnectionError):
                    call.progress(note.progress, note.total, note.message or None)
            elif note.kind == "notify":
                with contextlib.suppress(ProtocolError, ConnectionError, msgspec.DecodeError):
                    call.notify(note.method, msgspec.json.decode(note.body))

    def _served(self, ref: str, _: asyncio.Task[None]) -> None:
        self._serving.pop(ref, None)

    async def _serve(self, note: _RelayNote) -> None:
        """Resume the round a retry from another process names, and send it the answer."""
        beat = asyncio.ensure_future(self._working(note))
        try:
            params = msgspec.json.decode(note.body)
            result = await self._resume(RelayedCall(self, note, params), note.state, note.identity)
            answer = _RelayNote(
                "result", note.ref, body=msgspec.json.encode(msgspec.to_builtins(result))
            )
        except ProtocolError as error:
            body = b"" if error.data is None else msgspec.json.encode(error.data)
            answer = _RelayNote(
                "error", note.ref, code=error.code, message=error.message, body=body
            )
        except msgspec.DecodeError:
            answer = _RelayNote(
                "error", note.ref, code=INTERNAL_ERROR, message="Internal error: unreadable retry"
            )
        finally:
            beat.cancel()
        self.post(note.origin, answer, always=True)

    async def _working(self, note: _RelayNote) -> None:
        """Say to the process that forwarded ``note`` every ``HOLDER_CHECK`` seconds that its
        retry is still worked on here (``holder_silence``)."""
        while True:
            await asyncio.sleep(HOLDER_CHECK)
            self.post(note.origin, _RelayNote("taken", note.ref))

    # -- sending, in order ------------------------------------------------------------------------

    def post(self, worker: str, note: _RelayNote, always: bool = False) -> None:
        """Queue ``note`` for ``worker`` (in order with what was queued before); past
        ``MAX_OUTBOX`` a progress or notification is dropped (said in the log), an answer not."""
        try:
            self._outbox.put_nowait((worker, note))
        except asyncio.QueueFull:
            if always:
                task = asyncio.ensure_future(self.store.send(_channel(worker), _encode(note)))
                self._late.add(task)  # kept until sent
                task.add_done_callback(self._late.discard)
            else:
                self._log(f"relay: {note.kind} of a relayed retry dropped: {MAX_OUTBOX} queued")

    async def _send_all(self) -> None:
        while True:
            worker, note = await self._outbox.get()
            try:
                await self.store.send(_channel(worker), _encode(note))
            except Exception as error:  # noqa: BLE001 - the store is down: said, and go on
                self._log(f"relay: {note.kind} of a relayed retry not sent: {error}")


# The failures after which nobody waits for the holder's answer: the round is cancelled there.
_NOBODY_WAITS = frozenset({"timeout", "holder silent", "store failed"})


_SENDING = "sending this retry of an input round to the gateway process holding it"
_CHECKING = "checking that the gateway process holding this retry's input round still listens"


def _store_failed(when: str, error: Any) -> ProtocolError:
    return ProtocolError(
        INTERNAL_ERROR,
        f"Internal error: the shared store (--redis) failed {when}: {error}; the request must "
        "be sent again without requestState",
        {"reason": "store failed"},
    )


def _gone(holder: str, when: str) -> ProtocolError:
    return ProtocolError(
        CONNECTION_CLOSED,
        f"Connection closed: the gateway process holding this input round (worker {holder}) is "
        f"gone ({when}); the request must be sent again without requestState",
        {"reason": "holder gone", "worker": holder},
    )
