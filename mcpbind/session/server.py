"""The server side of a session: answering the handshake of any configured revision, sans-IO."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from .._revisions import LATEST, REVISIONS
from .._support import open_class
from ..codec import Codec
from ..errors import INTERNAL_ERROR, INVALID_REQUEST, ProtocolError, UnsupportedRevision
from ..events import Event, Initialized, Negotiated, NegotiationFailed
from ..negotiate import negotiate
from ._common import Session
from ._speech import SessionSpeech, checked, make, speech, wire_fields
from .states import INITIALIZING, READY, SERVER

__all__ = ["ServerSession"]

_RELEASED = REVISIONS[: REVISIONS.index(LATEST) + 1]
# Codecs a server session keeps per revision for the sessions spawned from it (``release``): as
# many as requests of that revision run at once, which a server bounds otherwise.
MAX_SPARE = 256


# A message ``ServerSession.read`` decoded, with the codec and revision it was read in.
Read = tuple[Any, Codec, SessionSpeech]


class ServerSession(Session):
    """The protocol state of one server connection: bytes in, typed events and bytes out.

    The server speaks every revision of ``revisions``: an initialize is answered by the
    initialize rule (``mcpbind.negotiate``), a discover from ``capabilities`` and ``info``, and
    a request of a revision with the per-request ``_meta`` envelope in the revision its
    ``_meta`` names, so one session may serve requests of several such revisions (a stateless
    HTTP deployment). ``revision`` is the revision agreed by initialize, else that of the last
    request. Pings are answered by the session itself.

    States (``states.SessionState``, moves allowed by ``states.SERVER``): ``"idle"``,
    ``"initializing"`` (initialize answered, the client's initialized notification awaited),
    ``"ready"``.
    """

    role = "server"
    peer = "client"
    _transitions = SERVER

    def __init__(
        self,
        revisions: Iterable[str] | str = _RELEASED,
        capabilities: Any = None,
        info: Any = None,
        *,
        instructions: str | None = None,
        cache_scope: str = "private",
        ttl_ms: int = 0,
    ) -> None:
        super().__init__(revisions, capabilities, info)
        self.instructions = instructions
        self.cache_scope = cache_scope  # of discover results: "private" or "public"
        self.ttl_ms = ttl_ms  # how long a client may cache a discover result
        plan = _plan(self.revisions)
        self._initialize_revisions = plan.initialize_revisions
        self._discover_revisions = plan.discover_revisions
        self._opening = plan.opening
        self._versions = plan.versions
        self.supported_versions = list(plan.supported_versions)
        self._peek = plan.peek
        # Codecs that served sessions spawned from this one and kept nothing of them, by
        # revision, for the next ones (``spawn``, ``release``); shared with those sessions.
        self._spare: dict[str, list[Codec]] = {}

    def _begin(self) -> None:
        super()._begin()
        self._bound = False  # an initialize fixed the revision of this connection
        self._peer_capabilities: Any = None  # what the client's agreed initialize advertised

    def spawn(self) -> ServerSession:
        """A new session configured as this one (revisions, capabilities, info, instructions,
        the discover result's caching), in state ``"idle"``: what ``ServerSession(...)`` with
        the same arguments builds, without working the configuration out again (a stateless
        HTTP server builds a session per request). The configuration's objects are shared,
        read only; ``supported_versions`` is a copy. Its codecs come from those that sessions
        spawned from this one gave back (``release``), when there are some. A subclass that
        keeps state of its own overrides this."""
        new = object.__new__(type(self))
        new.__dict__ = self.__dict__.copy()  # a copy of the whole is cheaper than an update
        new._begin()
        new.supported_versions = list(self.supported_versions)
        return new

    def release(self) -> None:
        """Done with this session (a stateless HTTP server calls it once the POST's request is
        answered): its codecs go to the session it was spawned from, for the next sessions
        spawned, unless they keep something of this one (capabilities learned, requests this
        side sent, a bound revision); at most ``MAX_SPARE`` a revision. The session is not used
        after."""
        if self._bound or self._asked:
            return
        spare = self._spare
        for revision, codec in self._codecs.items():
            if not codec.knows_capabilities():
                free = spare.get(revision)
                if free is None:
                    free = spare.setdefault(revision, [])
                if len(free) < MAX_SPARE:
                    free.append(codec)
        self._codecs.clear()  # they may serve another session now

    def _codec_for(self, revision: str) -> Codec:
        codec = self._codecs.get(revision)
        if codec is None:
            free = self._spare.get(revision)
            codec = None
            if free:
                try:  # noqa: SIM105 (contextlib.suppress costs a context manager a request)
                    codec = free.pop()
                except IndexError:  # another thread took the last one meanwhile
                    pass
            if codec is None:
                codec = Codec(revision, role=self.role, wire_results=True)
            self._codecs[revision] = codec
        return codec

    def receive(self, data: bytes | str, *, version: str | None = None) -> list[Event]:
        """The events of one message (or batch) from the client; handshakes, pings and
        undecodable requests are answered in ``data_to_send`` at once. ``version``: the protocol
        version the message's ``_meta`` names, when the caller has read it already (a stateless
        HTTP server does, to check the request's headers against it), not read again here."""
        # surrogatepass: a lone surrogate becomes bytes the codec refuses as invalid UTF-8
        raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
        events: list[Event] = []
        if self._bound and self._codec is not None and self._speech is not None:
            codec, sp = self._codec, self._speech
        else:
            route = self._route(raw, events, version)
            if route is None:
                return events
            codec, sp = route
        if sp.batches:
            self._receive(codec, sp, raw, events)
            return events
        try:
            msg = codec.decode(raw)
        except ProtocolError as err:
            self._refuse(raw, err, events)
            return events
        self._dispatch(codec, sp, msg, events)
        return events

    def read(self, data: bytes, version: str) -> Read | None:
        """``data`` decoded as ``receive(data, version=version)`` decodes it, nothing done with it
        yet: for a caller (a stateless HTTP server) to check the message against what came
        with it before ``receive_read`` acts on it as ``receive`` would. None when ``receive``
        would do more than decode it (the session is bound, ``version`` names no revision of
        it, the revision reads batches) or it cannot be read (``receive`` then answers it: the
        caller calls that)."""
        if self._bound or not self._discover_revisions:
            return None
        if self._peek is None or (len(self.revisions) == 1):  # (as _route chooses)
            found = self._discover_revisions[0]
        elif version in self._versions:
            found = self._versions[version]
        else:
            return None
        sp = speech(found)
        if sp.batches:
            return None
        codec = self._codec_for(found)
        try:
            return codec.decode(data), codec, sp
        except (ProtocolError, RecursionError):
            return None

    def receive_read(self, read: Read) -> list[Event]:
        """What ``receive`` makes of the message ``read`` decoded."""
        events: list[Event] = []
        self._dispatch(read[1], read[2], read[0], events)
        return events

    def _route(
        self, raw: bytes, events: list[Event], known: str | None = None
    ) -> tuple[Codec, SessionSpeech] | None:
        """The revision to read a message in before initialize fixed one (``known``: the version
        its ``_meta`` names, read by the caller)."""
        if not self._discover_revisions:
            r = self._initialize_revisions[0]
            return self._codec_for(r), speech(r)
        if self._peek is None or (len(self.revisions) == 1):
            r = self._discover_revisions[0]
            return self._codec_for(r), speech(r)
        found = self._versions.get(known) if known is not None else None
        if found is not None:
            return self._codec_for(found), speech(found)  # what the peek below would find
        try:
            peek = self._peek.decode(raw)
        except (msgspec.DecodeError, ValueError, RecursionError):
            peek = None
        method = getattr(peek, "method", None)
        params = getattr(peek, "params", None)
        meta = getattr(params, "meta", None)
        version = getattr(meta, "version", None)
        revision = self._versions.get(version) if isinstance(version, str) else None
        # The _meta version decides first: a method its revision lacks is then not found there,
        # even when an initialize revision has it; without one, the opening stays initialize's.
        opening = self._initialize_revisions and method in self._opening
        if opening and revision is None:
            r = self._initialize_revisions[0]
            return self._codec_for(r), speech(r)
        if version is None:
            r = self._discover_revisions[0]
            return self._codec_for(r), speech(r)
        if revision is None:
            facts = speech(self._discover_revisions[0]).facts.request_meta
            assert facts is not None  # a discover revision has the envelope
            rid = getattr(peek, "id", None)
            error = ProtocolError(
                facts.unsupported_version_code,
                "Unsupported protocol version",
                {"supported": self.supported_versions, "requested": version},
                rid if type(rid) in (str, int) else None,
            )
            self._refuse(raw, error, events)
            return None
        return self._codec_for(revision), speech(revision)

    def _on_request(
        self, codec: Codec, sp: SessionSpeech, id: Any, message: Any, events: list[Event]
    ) -> None:
        role = sp.roles.get(message.method)
        if role == "initialize":
            if self.state is READY and not self._bound:
                self._reject_request(codec, self._serving_per_request(message.method, id), events)
                return
            self._on_initialize(codec, sp, id, message, events)
            return
        if sp.handshake == "initialize":
            if not self._bound and role != "ping":
                self._refuse(
                    b'{"id":0,"method":""}',
                    ProtocolError(
                        INVALID_REQUEST,
                        f"Invalid Request: {message.method!r} before initialize (the server "
                        f"session is in state {self.state!r})",
                        id=id,
                    ),
                    events,
                )
                return
        else:
            self._codec, self._speech, self.revision = codec, sp, sp.revision
            self._ready()
            if role == "discover":
                self._on_discover(codec, sp, id, message, events)
                return
        super()._on_request(codec, sp, id, message, events)

    def _on_initialize(
        self, codec: Codec, sp: SessionSpeech, id: Any, message: Any, events: list[Event]
    ) -> None:
        if self._bound:
            # Decoding it taught the codec the capabilities it carries: the agreed ones stand.
            codec.peer_capabilities = self._peer_capabilities
            self._reject_request(
                codec,
                ProtocolError(
                    INVALID_REQUEST,
                    f"Invalid Request: initialize again (the session agreed on {self.revision})",
                    id=id,
                ),
                events,
            )
            return
        params = message.params
        try:
            revision = negotiate(params.protocol_version, self._initialize_revisions, id=id)
        except UnsupportedRevision as error:
            self._out.append(codec.error_response(error))
            events.append(NegotiationFailed(error=error))
            return
        agreed = speech(revision)
        method = agreed.facts.lifecycle["initialize"]
        if revision != sp.revision:
            try:
                params = checked(
                    msgspec.to_builtins(params), agreed.send(method).params, revision, "$.params"
                )
            except ProtocolError as error:  # it fits the revision it was read in, not this one
                error.id = id
                self._reject_request(codec, error, events)
                return
        try:
            result = make(
                agreed.facts.wires[method].result,
                revision,
                protocol_version=agreed.version,
                capabilities=self.capabilities,
                server_info=self.info,
                instructions=self.instructions,
            )
        except ProtocolError as error:
            self._cannot_answer(codec, revision, id, error, events)
            return
        new = self._use(revision)
        new.peer_capabilities = params.capabilities
        self._out.append(new.respond(id, result))
        self._peer_capabilities = new.peer_capabilities
        self._bound = True
        self.revision = revision
        self._move(INITIALIZING)
        events.append(
            Negotiated(revision=revision, capabilities=params.capabilities, info=params.client_info)
        )

    def _cannot_answer(
        self, codec: Codec, revision: str, id: Any, error: ProtocolError, events: list[Event]
    ) -> None:
        """This server's own capabilities, info or instructions do not fit the handshake result
        of ``revision``: the client gets -32603 and the application ``NegotiationFailed``."""
        failed = UnsupportedRevision(revision, list(self.revisions), id, INTERNAL_ERROR)
        failed.message = (
            f"Internal error: this server cannot answer the handshake in MCP {revision}: its "
            f"capabilities, info or instructions do not fit ({error.message})"
        )
        failed.args, failed.data = (failed.message,), None
        self._out.append(codec.error_response(failed))
        events.append(NegotiationFailed(error=failed))

    def _serving_per_request(self, method: str, id: Any) -> ProtocolError:
        """The refusal of an initialize on a connection that serves requests of a revision with
        the per-request ``_meta`` envelope: binding it to an initialize revision would read the
        client's next requests in the wrong revision."""
        return ProtocolError(
            INVALID_REQUEST,
            f"Invalid Request: {method!r} on a connection that serves MCP {self.revision} per "
            f"request (each request names its revision in _meta); this session does not switch "
            f"to an initialize revision: open a new connection to initialize",
            {"revision": self.revision},
            id,
        )

    def _notification(
        self, codec: Codec, sp: SessionSpeech, msg: Any, role: str | None, events: list[Event]
    ) -> None:
        if role == "initialized" and self.state is INITIALIZING:
            self._ready()
            events.append(Initialized())
            return
        super()._notification(codec, sp, msg, role, events)

    def _on_discover(
        self, codec: Codec, sp: SessionSpeech, id: Any, message: Any, events: list[Event]
    ) -> None:
        facts = sp.facts
        cls = facts.wires[message.method].result
        names = wire_fields(cls)
        data: dict[str, Any] = {
            names["supported_versions"]: self.supported_versions,
            names["capabilities"]: self.capabilities,
            names["cache_scope"]: self.cache_scope,
            names["ttl_ms"]: self.ttl_ms,
        }
        if facts.result_kinds is not None:
            data[facts.result_kinds.key] = facts.result_kinds.own
        if self.instructions is not None:
            data[names["instructions"]] = self.instructions
        meta_class = open_class(cls, "meta")
        info_key = meta_class._attributes.get("server_info") if meta_class is not None else None
        if info_key is not None and self.info is not None:
            data[names["meta"]] = {info_key: self.info}
        try:
            result = checked(data, cls, sp.revision, "$.result")
        except ProtocolError as error:
            self._cannot_answer(codec, sp.revision, id, error, events)
            return
        self._out.append(codec.respond(id, result))
        meta = message.params.meta
        envelope = facts.request_meta
        assert envelope is not None  # a discover revision has the envelope
        events.append(
            Negotiated(
                revision=sp.revision,
                capabilities=meta.get(envelope.capabilities_key),
                info=meta.get(envelope.info_key),
            )
        )


class _Plan(NamedTuple):
    """What a server session reads off its revisions alone, worked out once per set of revisions:
    a stateless HTTP server builds a session per request."""

    initialize_revisions: tuple[str, ...]
    discover_revisions: tuple[str, ...]
    # What opens a connection of an initialize revision. A tuple: the method peeked from the raw
    # message may be any JSON value, and ``in`` a tuple hashes nothing.
    opening: tuple[str, ...]
    versions: dict[str, str]  # version string -> revision; read only
    supported_versions: tuple[str, ...]
    peek: msgspec.json.Decoder[Any] | None


@functools.lru_cache(maxsize=64)  # sets of revisions a process serves: a handful
def _plan(revisions: tuple[str, ...]) -> _Plan:
    initialize = tuple(r for r in revisions if speech(r).handshake == "initialize")
    discover = tuple(r for r in revisions if speech(r).handshake != "initialize")
    opening = {speech(r).facts.lifecycle["initialize"] for r in initialize}
    opening |= {
        speech(r).facts.lifecycle["ping"] for r in initialize if "ping" in speech(r).facts.lifecycle
    }
    # Version string -> revision: a revision's own name wins over a later one carrying it.
    versions: dict[str, str] = {}
    for r in reversed(discover):
        for v in speech(r).facts.versions:
            if v == r or v not in versions:
                versions[v] = r
    return _Plan(
        initialize,
        discover,
        tuple(sorted(opening)),
        versions,
        tuple(dict.fromkeys(speech(r).version for r in revisions)),
        _peek_decoder(discover),
    )


def _peek_decoder(revisions: Sequence[str]) -> msgspec.json.Decoder[Any] | None:
    """A decoder reading only a message's method, id and ``_meta`` protocol version (the
    generated ``RequestMeta.peek`` of the newest revision with the per-request envelope)."""
    envelope = speech(revisions[0]).facts.request_meta if revisions else None
    return None if envelope is None else _DECODERS.get(envelope.peek) or _decoder(envelope.peek)


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}  # one per generated peek Struct
_LOCK = threading.Lock()


def _decoder(peek: Any) -> msgspec.json.Decoder[Any]:
    with _LOCK:
        return _DECODERS.setdefault(peek, msgspec.json.Decoder(peek))
