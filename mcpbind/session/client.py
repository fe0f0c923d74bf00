"""The client side of a session: the opening handshake and everything after it, sans-IO."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from .._revisions import LATEST, REVISIONS
from ..codec import Codec, ErrorObject, Response, encode_json
from ..errors import INVALID_PARAMS, INVALID_REQUEST, ProtocolError, UnsupportedRevision
from ..events import Event, InputRequired, Negotiated, NegotiationFailed, ResultReceived
from ._common import Outgoing, RequestId, Session
from ._speech import NOT_READY, SessionSpeech, checked, make, open_get, speech
from .states import CLIENT, FAILED, IDLE, NEGOTIATING, READY

__all__ = ["ClientSession"]

# Released revisions: a client offers the draft only when asked to.
_RELEASED = REVISIONS[: REVISIONS.index(LATEST) + 1]


class ClientSession(Session):
    """The protocol state of one client connection: bytes in, typed events and bytes out.

    ``revisions`` are the revisions this client speaks (it prefers the newest); ``capabilities``
    and ``info`` are its ``ClientCapabilities`` and ``Implementation`` (generated Structs of any
    revision, or plain JSON). ``connect()`` queues the opening; ``receive`` turns each message
    from the server into events (a ``Negotiated`` once the handshake is done), after which
    ``request`` and ``notify`` send by method name in the agreed revision.

    States (``states.SessionState``, moves allowed by ``states.CLIENT``): ``"idle"`` (before
    ``connect``), ``"negotiating"``, ``"ready"``, ``"failed"`` (no common revision, or
    ``give_up``). Anything called in the wrong state raises ``ProtocolError`` naming it.
    """

    role = "client"
    peer = "server"
    _transitions = CLIENT

    def __init__(
        self,
        revisions: Iterable[str] | str = _RELEASED,
        capabilities: Any = None,
        info: Any = None,
    ) -> None:
        super().__init__(revisions, capabilities, info)
        self._initialize_revisions = [
            r for r in self.revisions if speech(r).handshake == "initialize"
        ]
        self._discover_revisions = [
            r for r in self.revisions if speech(r).handshake != "initialize"
        ]
        self._tried: set[str] = set()  # revisions whose handshake the server refused
        self._retried: set[str] = set()  # of those, the ones probed again once (no more)

    def connect(self) -> None:
        """Queue the opening: a discover probe in the newest revision that has one, else
        initialize in the newest revision."""
        if self.state is not IDLE:
            raise ProtocolError(
                INVALID_REQUEST,
                f"ClientSession is in state {self.state!r}: connect() opens an idle session once",
            )
        if self._discover_revisions:
            self._probe(self._discover_revisions[0])
        else:
            self._initialize(self._initialize_revisions[0])
        self._move(NEGOTIATING)

    def receive(self, data: bytes | str) -> list[Event]:
        """The events of one message (or batch) from the server."""
        sp = self._speech
        if sp is None:  # (the codec is set with it)
            raise ProtocolError(
                INVALID_REQUEST,
                f"ClientSession is in state {self.state!r}: call connect() before receive()",
            )
        codec: Codec = self._codec  # type: ignore[assignment]
        events: list[Event]
        if sp.batches:
            raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
            self._receive(codec, sp, raw, events := [])
            return events
        try:
            msg = codec.decode(data)
        except ProtocolError as err:
            # surrogatepass: a lone surrogate in a str is what the codec refused, not a crash
            self._refuse(
                data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data,
                err,
                events := [],
            )
            return events
        if type(msg) in sp.plain_answers:  # the common case, without a Response or the dispatch
            id = msg.id
            outgoing = self._outgoing.pop(id, None)
            if outgoing is not None and outgoing[3] is None:  # (a progress token: _on_response)
                return [ResultReceived(id=id, method=outgoing[0], result=msg.result)]
            self._on_response(Response(id=id, result=msg.result), outgoing, events := [])
            return events
        self._dispatch(codec, sp, msg, events := [])
        return events

    def answer(self, event: InputRequired, responses: Mapping[str, Any]) -> RequestId:
        """Retry the request ``event`` asked input for, carrying ``responses`` (input request
        name -> its result) and the request state the server sent; returns the new id."""
        _, sp = self._sending("answer an input request")
        trip = sp.facts.round_trip
        if trip is None:
            raise ProtocolError(
                INVALID_REQUEST, f"MCP {sp.revision} has no multi-round-trip requests"
            )
        params = dict(msgspec.to_builtins(event.params)) if event.params is not UNSET else {}
        params[trip.input_responses] = msgspec.to_builtins(dict(responses))
        if event.request_state is UNSET:
            params.pop(trip.request_state, None)
        else:
            params[trip.request_state] = event.request_state
        return self.request(event.method, params)

    def _extension_request(
        self, method: str, params: Any, id: RequestId | None, progress: bool
    ) -> RequestId | None:
        """A request of the tasks extension (``TASKS``: get, update, cancel) where the agreed
        revision has it: its params (plain JSON or the generated params Struct) with the
        revision's ``_meta`` envelope, the extension declared; its answer decodes to its
        generated class (``mcpbind._extension_tasks``). And a listen request whose filter names
        tasks (``TASKS.listen_filter``): sent in the extension's classes (``TaskTypes.listen``),
        which keep the task ids (-32602 with the JSON path for ids that are not strings); a
        listen naming none is the revision's own (None here)."""
        sp = self._speech
        ext = sp.ext if sp is not None and self.state is READY else None
        if ext is None or sp is None:
            return None
        listen = sp.tasks_listen if method == ext.listen and ext.names_tasks(params) else None
        if listen is None and method not in ext.methods:
            return None
        if progress and listen is None:
            raise ProtocolError(
                INVALID_REQUEST, f"{method!r} carries no progress token ({ext.facts.extension})"
            )
        if id is None:
            id = self._new_id()
        elif id in self._outgoing:
            raise ProtocolError(
                INVALID_REQUEST,
                f"duplicate request id {id!r}: a {self._outgoing[id][0]!r} request with it "
                "awaits its response",
            )
        token = None
        if listen is not None:
            token = id if progress else None
            typed = self._params(sp, listen, params, token)
            data = encode_json(listen.wire(id=id, jsonrpc="2.0", params=typed))
        else:
            plain = msgspec.to_builtins(params) if params is not None else {}
            if not isinstance(plain, dict):
                raise ProtocolError(INVALID_PARAMS, f"the params of {method!r} are an object")
            typed, data = ext.request(
                sp, method, id, plain, self._client_capabilities(), self._client_info()
            )
        codec: Codec = self._codec  # type: ignore[assignment]  # (ready: set)
        codec.expect(id, method)
        self._asked = True
        self._outgoing[id] = (method, sp, typed, token)
        if token is not None:
            self._tokens[token] = id
        self._out.append(data)
        return id

    def _extension_message(self, data: bytes, events: list[Event]) -> bool:
        """A task status notification of the tasks extension where the agreed revision has it:
        a ``NotificationReceived`` carrying its generated class (``TaskSpeech.notification``);
        one that does not fit it is refused (-32602, its JSON path)."""
        sp = self._speech
        ext = sp.ext if sp is not None and self.state is READY else None
        if ext is None or sp is None:
            return False
        try:
            event = ext.notification(data, sp.revision)
        except ProtocolError as err:
            events.append(self._rejected(err))
            return True
        if event is None:
            return False
        events.append(event)
        return True

    # -- the handshake --------------------------------------------------------------------------

    def _probe(self, revision: str) -> None:
        sp = speech(revision)
        self._use(revision)
        self._tried.add(revision)
        self._handshake_request(sp.facts.lifecycle["discover"], None)

    def _initialize(self, revision: str) -> None:
        sp = speech(revision)
        self._use(revision)
        self._tried.add(revision)
        method = sp.facts.lifecycle["initialize"]
        params = make(
            sp.send(method).params,
            revision,
            protocol_version=sp.version,
            capabilities=self.capabilities,
            client_info=self.info,
        )
        self._handshake_request(method, params)

    def _handshake_request(self, method: str, params: Any) -> None:
        """Send the request that opens the session (in the revision ``_use`` chose): the one
        request sent before the state is "ready"."""
        self._connecting = True
        try:
            self._handshake = self.request(method, params)
        finally:
            self._connecting = False

    def _handshake_answer(
        self, outgoing: Outgoing, result: Any, error: ErrorObject | None, events: list[Event]
    ) -> None:
        method, sp = outgoing[0], outgoing[1]
        discover = sp.roles.get(method) == "discover"
        if error is not None:
            self._refused(sp, discover, error, events)
            return
        expected = sp.facts.wires[method].result
        if type(result) is not expected:  # another kind of result: its resultType said so
            self._unreadable(
                f"the answer to {method!r} is a {type(result).__name__}, not "
                f"{expected.__name__} (MCP {sp.revision})",
                events,
            )
        elif discover:
            self._discovered(sp, result, events)
        else:
            self._initialized(sp, result, events)

    def _unreadable(self, why: str, events: list[Event]) -> None:
        """The server's answer to the handshake decoded but cannot open the session."""
        error = ProtocolError(INVALID_PARAMS, f"Invalid result: {why}", id=None)
        events.append(self._rejected(error))
        self._handshake_unreadable(error, events)

    def _open(self, revision: str, events: list[Event]) -> None:
        """Try the handshake of ``revision`` after the server's answer to another one; when this
        client's own capabilities or info do not fit that revision, negotiation fails."""
        try:
            if speech(revision).handshake == "initialize":
                self._initialize(revision)
            else:
                self._probe(revision)
        except ProtocolError as err:
            self._fail(
                None,
                f"this client's capabilities or info do not fit MCP {revision} ({err.message})",
                events,
                "Negotiation failed",
            )

    def _initialized(self, sp: SessionSpeech, result: Any, events: list[Event]) -> None:
        version = result.protocol_version
        revision = next(
            (r for r in self._initialize_revisions if version in speech(r).facts.versions), None
        )
        if revision is None:
            self._fail(version, f"the server answered initialize with {version!r}", events)
            return
        result = self._agree(sp, revision, result, events)
        if result is None:
            return
        agreed = speech(revision)
        self._notify(self._codec_for(revision), agreed, agreed.facts.lifecycle["initialized"], None)
        events.append(
            Negotiated(
                revision=revision,
                capabilities=result.capabilities,
                info=result.server_info,
                result=result,
            )
        )

    def _discovered(self, sp: SessionSpeech, result: Any, events: list[Event]) -> None:
        offered = list(result.supported_versions)
        revision = next((r for r in self._discover_revisions if speech(r).version in offered), None)
        if revision is not None:
            result = self._agree(sp, revision, result, events)
            if result is None:
                return
            events.append(
                Negotiated(
                    revision=revision,
                    capabilities=result.capabilities,
                    info=open_get(result.meta, "server_info"),
                    result=result,
                )
            )
            return
        older = self._common_initialize(offered)
        if older is not None:
            self._open(older, events)
            return
        self._fail(offered, f"the server offers {offered}", events)

    def _refused(
        self, sp: SessionSpeech, discover: bool, error: ErrorObject, events: list[Event]
    ) -> None:
        """The server refused the handshake: try what its error says it supports (a revision
        already tried once more at most, as a server may refuse the very version it lists),
        else (after a discover probe) initialize, as older servers know no discover."""
        data = error.data
        offered = data.get("supported") if isinstance(data, dict) else None
        offered = offered if isinstance(offered, list) else None
        listed = [
            r
            for r in self._discover_revisions
            if offered is not None and speech(r).version in offered
        ]
        retry = next((r for r in listed if r not in self._tried), None) or next(
            (r for r in listed if r not in self._retried), None
        )
        if retry is not None:
            if retry in self._tried:
                self._retried.add(retry)
            self._open(retry, events)
            return
        if offered is not None:
            older = self._common_initialize(offered)
        else:
            older = next((r for r in self._initialize_revisions if r not in self._tried), None)
            older = older if discover else None
        if older is not None and older not in self._tried:
            self._open(older, events)
            return
        what = "the discovery probe" if discover else "the handshake"
        reason = f"the server refused {what} ({error.code}: {error.message})"
        if offered is not None:
            reason += f" and offers {offered}"
        self._fail(offered, reason, events)

    def _common_initialize(self, offered: list[Any]) -> str | None:
        return next(
            (
                r
                for r in self._initialize_revisions
                if any(v in offered for v in speech(r).facts.versions)
            ),
            None,
        )

    def _agree(self, sp: SessionSpeech, revision: str, result: Any, events: list[Event]) -> Any:
        """Speak ``revision`` from now on; the handshake result as that revision's class (None,
        and negotiation failed, when it does not fit that revision)."""
        if revision != sp.revision:
            agreed = speech(revision)
            method = agreed.facts.lifecycle.get("initialize") or agreed.facts.lifecycle["discover"]
            try:
                result = checked(
                    msgspec.to_builtins(result),
                    agreed.facts.wires[method].result,
                    revision,
                    "$.result",
                )
                mine = checked(
                    self.capabilities, agreed.facts.client_capabilities, revision, "$.capabilities"
                )
            except ProtocolError as err:
                self._unreadable(f"in MCP {revision}, which it agreed on: {err.message}", events)
                return None
            codec = self._use(revision)
            codec.peer_capabilities = result.capabilities
            codec.capabilities = mine
        else:
            self._use(revision)
        self.revision = revision
        self._ready()
        return result

    def _handshake_unreadable(self, error: ProtocolError, events: list[Event]) -> None:
        self._fail(
            None,
            f"the server's answer to the handshake could not be read ({error.message})",
            events,
            "Negotiation failed",
        )

    def _fail(
        self,
        offered: Any,
        reason: str,
        events: list[Event],
        headline: str = "Unsupported protocol version",
    ) -> None:
        self.give_up()
        error = UnsupportedRevision(offered, list(self.revisions))
        error.message = f"{headline}: {reason}; this client offers {list(self.revisions)}"
        error.args = (error.message,)
        events.append(NegotiationFailed(error=error))

    def give_up(self) -> None:
        """Fail this session before it opens (state ``"failed"``): what a bridge does with the
        server side of a crossing whose client cannot be carried (--strict); nothing is sent."""
        self._move(FAILED)
        self._requests = NOT_READY
