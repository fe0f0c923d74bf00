"""What a message becomes on its way from one side of a bridge to the other, whatever carries it:
the rules both fronts of ``mcpbind bridge`` (stdio, ``core.Bridge``; HTTP, ``gateway``) share.

``Crossing`` is the part of a bridge facing the server: its ``ClientSession`` (``back``), what
the client said about itself, and every translation between the client's revision and the
server's (params down, results up, notifications, progress, the server's requests, input rounds
both ways), with the ``[[loss]]`` rules applied and each loss logged with its JSON path
(``log``). It does no I/O and keeps no request table: each front keeps its own.

Every fact about a revision comes from the generated ``FACTS``/``METHODS`` (through the sessions'
``speech``); no method or revision is named here.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
from msgspec import UNSET

from .._repeats import Repeats
from .._support import convert, open_class
from ..errors import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from ..events import Negotiated
from ..projection import ProjectionError
from ..session import ClientSession
from ..session._common import checked, speech, wire_fields
from .limits import LOSSY, NOT_SENT, STATE_PREFIX
from .losses import Lost, convey, conveyor
from .task_facts import undeclared_tasks, untranslated_tasks

__all__ = ["Back", "Crossing", "Edge"]

_ASKS = itertools.count(1)  # names of the input requests a bridge asks (unique per process)

_SHOWN = 3  # JSON paths shown per kind of loss in one log line


class Edge:
    """What a bridge asks of each of its sessions beyond their public API."""

    _out: list[bytes]
    _outgoing: dict[Any, Any]

    def awaits(self, id: Any) -> bool:
        """Whether this side's request ``id`` still awaits its response (the session has not
        read one, nor dropped it as unreadable)."""
        return id in self._outgoing

    def reject(self, error: ProtocolError) -> None:
        """Queue ``error`` as the answer to a message the session never read (``error.id``)."""
        self._out.append(error.to_json())


class Back(Edge, ClientSession):
    """The session facing the server."""


class Crossing:
    """The server side of a bridge and the translations to and from it (module docstring).

    ``strict``: a message that cannot cross without a loss raises ``ProtocolError`` (``LOSSY``,
    the paths in ``data``) instead of crossing with the loss logged.
    """

    def __init__(self, server_revisions: Iterable[str] | str, *, strict: bool = False) -> None:
        self.back = Back(server_revisions)
        self.strict = strict
        self.log: list[str] = []
        self._client_caps: Any = None  # the client's capabilities, in its own revision
        self._failed: ProtocolError | None = None  # the server side could not be opened
        self._envelope_cache: tuple[str, Any, dict[str, Any]] | None = None
        self._target_methods: tuple[str, Any] | None = None  # the server side's methods
        # The last class of params gone down and of result gone up, their target and route.
        self._down_way: tuple[type, str, Any] | None = None
        self._up_way: tuple[type, str, Any] | None = None
        self._typed_cache: tuple[Any, dict[str, Any]] | None = None
        self.tasks_translated = False  # a core client's tasks served by the gateway (gateway/tasks_core_to_extension.py)
        self._repeats: Repeats | None = None  # lines about a peer's repeated misdeeds, once any

    def take_log(self) -> list[str]:
        out, self.log = self.log, []
        return out

    def note(self, kind: str, line: str) -> None:
        """Log ``line``, about a misdeed a peer may repeat on every message (``kind``, a name
        fixed by the code): the first of its kind at once, then a count per interval
        (``Repeats``)."""
        repeats = self._repeats
        if repeats is None:
            repeats = self._repeats = Repeats(self._noted, wake=self._noted_later)
        repeats(kind, line)

    def flush_notes(self) -> None:
        """Log the counts of misdeeds not said yet (the peer is gone)."""
        if self._repeats is not None:
            self._repeats.flush()

    def _noted(self, line: str) -> None:
        self.log.append(line)

    def _noted_later(self) -> None:
        """A count was logged by a timer of the loop, outside any call: the front that drains
        ``log`` may say it now."""

    # -- values -----------------------------------------------------------------------------

    def _cross(self, obj: Any, target: str, what: str) -> tuple[Any, list[Lost]]:
        """``obj`` into ``target``; every loss is logged (and returned, for --strict)."""
        if obj is UNSET or obj is None:
            return obj, []
        try:
            value, lost = convey(obj, target)
        except ProjectionError as exc:
            return self._unprojected(obj, exc, what)
        if lost:
            self._said_lost(what, target, lost)
        return value, lost

    @staticmethod
    def _unprojected(obj: Any, exc: ProjectionError, what: str) -> tuple[Any, list[Lost]]:
        if exc.path != "$":
            raise ProtocolError(INVALID_PARAMS, f"{what} cannot cross: {exc}") from None
        # The type has another name there (2026-07-28's ElicitRequestFormParams is
        # 2025-06-18's ElicitRequestParams): the session checks the plain value into the
        # method's own class of the target revision.
        return msgspec.to_builtins(obj), []

    def _said_lost(self, what: str, target: str, lost: list[Lost]) -> None:
        """A refused loss raises; the others are logged."""
        refused = [one for one in lost if one.rule == "refuse"]
        if refused:
            raise self._lossy_error(what, target, refused, "")
        self._log_losses(what, target, lost)

    def carry(self, obj: Any, target: str, what: str) -> Any:
        """``obj`` into ``target``; with --strict, a loss raises the ``LOSSY`` error."""
        value, lost = self._cross(obj, target, what)
        if lost and self.strict:
            raise self._lossy_error(what, target, lost)
        return value

    def _log_losses(self, what: str, target: str, lost: list[Lost]) -> None:
        """One line per kind of loss: its first paths and how many there were (a list of 100
        tools loses the same field 100 times)."""
        kinds: dict[tuple[str, str, str], list[Lost]] = {}
        for one in lost:
            kinds.setdefault((one.type, one.field, one.rule), []).append(one)
        for same in kinds.values():
            first = same[0].describe()
            if len(same) > 1:
                more = ", ".join(x.path for x in same[1:_SHOWN])
                rest = f", ... ({len(same)} in all)" if len(same) > _SHOWN else ""
                first = first.replace(": ", f", {more}{rest}: ", 1)
            self.log.append(f"loss: {what} into MCP {target}: {first}")

    def _lossy_error(
        self, what: str, target: str, lost: list[Lost], why: str = "--strict: "
    ) -> ProtocolError:
        return ProtocolError(
            LOSSY,
            f"{why}{what} cannot be carried to MCP {target} without loss at "
            + ", ".join(one.path for one in lost)
            + "".join(f" ({one.reason})" for one in lost if one.rule == "refuse"),
            {"lost": [{"path": one.path, "rule": one.rule, "reason": one.reason} for one in lost]},
        )

    # -- opening ----------------------------------------------------------------------------

    @staticmethod
    def client_identity(sp: Any, message: Any) -> tuple[Any, Any]:
        """The capabilities and info a client's first message (an initialize, or any request of
        a revision with the per-request ``_meta`` envelope) gives, in its own revision."""
        if sp.handshake == "initialize":
            return message.params.capabilities, message.params.client_info
        meta = message.params.meta if message.params is not UNSET else None
        envelope = sp.facts.request_meta
        assert envelope is not None  # a revision without initialize has the envelope
        caps = meta.get(envelope.capabilities_key) if meta else None
        info = meta.get(envelope.info_key) if meta else None
        if isinstance(caps, dict):
            caps = checked(caps, sp.facts.client_capabilities, sp.revision, "$.capabilities")
        return caps, info

    def _open_back(self, caps: Any, info: Any, connect: bool = True) -> None:
        """Open the server side (queue its handshake; ``connect=False``: only prepare it, for a
        transport that connects the session itself) with the client's capabilities and info;
        with --strict, capabilities the server's revision cannot carry fail it (``_failed``)."""
        self._client_caps = caps
        target = self.back.revisions[0]
        if caps is not None:
            projected, lost = self._cross(caps, target, "the client's capabilities")
            if lost and self.strict:
                self._failed = self._lossy_error("the client's capabilities", target, lost)
                self.back.give_up()
                return
            plain = msgspec.to_builtins(projected)
            self.back.capabilities = undeclared_tasks(plain, caps, target, self.log)
        self.back.info = msgspec.to_builtins(info) if info is not None else None
        if connect:
            self.back.connect()

    def _back_agreed(self, e: Negotiated) -> None:
        """The server side agreed on ``e.revision``: the client's capabilities go in that one."""
        if self._client_caps is not None and e.revision != self.back.revisions[0]:
            caps, _ = self._cross(self._client_caps, e.revision, "the client's capabilities")
            plain = msgspec.to_builtins(caps)
            self.back.capabilities = undeclared_tasks(
                plain, self._client_caps, e.revision, self.log
            )

    def server_face(self, e: Negotiated, revision: str | None) -> tuple[Any, Any, Any]:
        """What a client of ``revision`` is told of the server the handshake ``e`` opened: its
        capabilities, info and instructions, as plain JSON (raises the ``LOSSY`` error with
        --strict when the capabilities lose anything)."""
        caps = e.capabilities
        if revision is not None:
            caps, lost = self._cross(caps, revision, "the server's capabilities")
            if lost and self.strict:
                raise self._lossy_error("the server's capabilities", revision, lost)
        info = e.info
        if revision is not None and isinstance(info, msgspec.Struct):
            info, _ = self._cross(info, revision, "the server's info")
        instructions = getattr(e.result, "instructions", UNSET)
        plain = msgspec.to_builtins(caps)
        if (
            revision is not None
        ):  # tasks of the extension a core client cannot use (tasks_extension_to_core.py)
            plain = untranslated_tasks(plain, e.revision, revision, self.log, self.tasks_translated)
        return (
            plain,
            msgspec.to_builtins(info) if info is not None else None,
            None if instructions is UNSET else instructions,
        )

    # -- the client's messages, down ----------------------------------------------------------

    def down_params(self, method: str, params: Any, revision: str) -> tuple[Any, Any]:
        """The params of the client's ``method`` request (of ``revision``) for the server's
        revision, and the client's progress token (None: none); ``ProtocolError`` when the
        request cannot go down (the server's revision has no such method, a refused loss)."""
        target = self.back.revision
        assert target is not None
        known = self._target_methods
        if known is None or known[0] != target:
            known = self._target_methods = (target, speech(target).methods)
        if method not in known[1]:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {method!r} is not part of MCP {target}, "
                "the revision the server speaks",
                {"method": method},
            )
        cache = self._envelope_cache
        if cache is not None and cache[0] == target and cache[1] is self.back.capabilities:
            envelope = cache[2]
        else:
            envelope = self._envelope(target)
        token = None
        if envelope or getattr(params, "meta", None):  # else nothing to take out or put in
            params, token = _rewrite_meta(params, speech(revision), envelope, self)
        if params is UNSET or params is None:
            return params, token
        # _cross and _carry inline: on every request
        try:
            way = self._down_way
            if way is None or way[0] is not type(params) or way[1] != target:
                way = self._down_way = (type(params), target, conveyor(params, target))
            params, lost = way[2](params)
        except ProjectionError as exc:
            params, lost = self._unprojected(params, exc, self._params_of(method))
        if lost:
            what = self._params_of(method)
            self._said_lost(what, target, lost)
            if self.strict:
                raise self._lossy_error(what, target, lost)
        return params, token

    @staticmethod
    def _params_of(method: str) -> str:
        return _PARAMS_OF.get(method) or _said(_PARAMS_OF, "the params of", method)

    def _envelope(self, target: str) -> dict[str, Any]:
        """The per-request ``_meta`` envelope of the server's revision (empty if it has none),
        built once per agreed revision and capabilities."""
        cache = self._envelope_cache
        if cache is not None and cache[0] == target and cache[1] is self.back.capabilities:
            return cache[2]
        out = self._build_envelope(target)
        self._envelope_cache = (target, self.back.capabilities, out)
        return out

    def typed_envelope(self, envelope: dict[str, Any], cls: Any) -> dict[str, Any]:
        """``envelope`` with its values in the types ``cls`` (the client side's ``_meta`` class,
        which declares the envelope's keys) gives them, so that it projects; built once."""
        key = (id(envelope), cls)
        if self._typed_cache is not None and self._typed_cache[0] == key:
            return self._typed_cache[1]
        out = dict(convert(envelope, cls))
        self._typed_cache = (key, out)
        return out

    def _build_envelope(self, target: str) -> dict[str, Any]:
        envelope = speech(target).facts.request_meta
        if envelope is None:
            return {}
        out = {
            envelope.version_key: speech(target).version,
            envelope.capabilities_key: self.back.capabilities,
        }
        if self.back.info is not None:
            out[envelope.info_key] = self.back.info
        return out

    def _notification(self, method: str, params: Any, target: str, whose: str) -> Any:
        """The params of ``whose`` ``method`` notification for ``target``; ``_NOT_SENT`` (said in
        the log) when ``target`` has no such notification, or it would lose data under
        --strict."""
        if method not in speech(target).methods:
            self.note(
                f"{whose} notification unknown",
                f"loss: {whose} {method!r} notification does not exist in MCP {target}: "
                "not forwarded",
            )
            return NOT_SENT
        what = f"{whose} {method!r} notification"
        params, lost = self._cross(params, target, what)
        if lost and self.strict:
            self.note(
                f"{whose} notification lossy",
                f"--strict: {what} not forwarded (it would lose data)",
            )
            return NOT_SENT
        return None if params is UNSET else params

    def _client_answer(self, result: Any, revision: str, method: str) -> Any:
        """The client's result of the server's ``method`` request, in the server's ``revision``."""
        return self.carry(result, revision, f"the client's result of {method!r}")

    # -- the server's messages, up ------------------------------------------------------------

    def up_result(self, result: Any, revision: str, method: str) -> Any:
        """The server's result of the client's ``method`` request, in the client's ``revision``."""
        if result is UNSET or result is None:
            return result
        # _cross and _carry inline: on every result
        try:
            way = self._up_way
            if way is None or way[0] is not type(result) or way[1] != revision:
                way = self._up_way = (type(result), revision, conveyor(result, revision))
            result, lost = way[2](result)
        except ProjectionError as exc:
            result, lost = self._unprojected(result, exc, self._result_of(method))
        if lost:
            what = self._result_of(method)
            self._said_lost(what, revision, lost)
            if self.strict:
                raise self._lossy_error(what, revision, lost)
        return result

    @staticmethod
    def _result_of(method: str) -> str:
        return _RESULT_OF.get(method) or _said(_RESULT_OF, "the result of", method)

    def _progress_message(self, revision: str, message: Any) -> Any:
        """The message of a progress notification for a client of ``revision`` (None, logged as
        a loss, when its progress notification has none)."""
        progress = speech(revision).facts.lifecycle.get("progress")
        spec = speech(revision).methods.get(progress or "")
        if message is not None and spec is not None and "message" not in wire_fields(spec.params):
            self.log.append(
                f"loss: the server's progress message {message!r} into MCP {revision}: "
                "its progress notification has no message; dropped"
            )
            return None
        return message

    def _server_request(self, method: str, params: Any, target: str) -> Any:
        """The params of the server's ``method`` request for a client of ``target``, which has
        the method (``ProtocolError`` otherwise, or on a refused loss)."""
        if method not in speech(target).methods:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {method!r} is not part of MCP {target}, "
                "the revision the client speaks",
                {"method": method},
            )
        params = self.carry(params, target, f"the params of the server's {method!r}")
        return None if params is UNSET else params

    # -- input rounds -------------------------------------------------------------------------

    @staticmethod
    def asks_through(method: str, revision: str) -> bool:
        """Whether the server's own ``method`` request reaches a client of ``revision`` as
        input asked through the result of one of its requests (an input-required result,
        answered by its retry): its revision has no such request and round trips carry it."""
        sp = speech(revision)
        trip = sp.facts.round_trip
        return trip is not None and method not in sp.methods and method in trip.requests.values()

    @staticmethod
    def input_name() -> str:
        """A name for one server request asked of a round-trip client (``_round_trip_ask``)."""
        return f"input-{next(_ASKS)}"

    @staticmethod
    def new_state() -> str:
        """A fresh request state naming one held input round (``round_trip_retry`` reads it
        back; a state without ``STATE_PREFIX`` is the server's own and passes through)."""
        return STATE_PREFIX + secrets.token_urlsafe(18)

    def _input_request(self, method: str, params: Any, asking: str, revision: str) -> Any:
        """The params of an input request (``method``) a server of the round-trip revisions
        needs to answer the client's ``asking``, for an older client of ``revision`` to be asked
        as its own request."""
        if method not in speech(revision).methods:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"the server needs {method!r} input to answer {asking!r}, which MCP "
                f"{revision} (the client's revision) cannot ask for",
            )
        params, _ = self._cross(params, revision, f"the server's {method!r}")
        return None if params is UNSET else params

    def _input_answer(self, result: Any) -> Any:
        """An older client's answer to an input request, for the server's retry."""
        target = self.back.revision
        assert target is not None
        value, _ = self._cross(result, target, "the client's input")
        return value

    def _round_trip_ask(
        self, asked: Mapping[str, tuple[str, Any]], revision: str, state: str
    ) -> Any:
        """The result asking a client of a round-trip ``revision`` for input: ``asked`` are the
        server's own requests (name -> method, params in the server's revision), ``state`` what
        the client's retry hands back. The reverse of ``_input_request``."""
        sp = speech(revision)
        trip, kinds = sp.facts.round_trip, sp.facts.result_kinds
        assert trip is not None
        requests = {}
        for name, (method, params) in asked.items():
            request: dict[str, Any] = {"method": method}
            params = self.carry(params, revision, f"the params of the server's {method!r}")
            if params is not None and params is not UNSET:
                request["params"] = msgspec.to_builtins(params)
            requests[name] = request
        data: dict[str, Any] = {trip.input_requests: requests, trip.request_state: state}
        if kinds is not None:
            kind = next((k for k, c in kinds.classes.items() if c is trip.result), None)
            if kind is not None:
                data[kinds.key] = kind
        return checked(data, trip.result, revision, "$.result")

    @staticmethod
    def round_trip_retry(params: Any, revision: str) -> tuple[str | None, dict[str, Any]]:
        """The request state and input responses a request of a round-trip ``revision``
        carries (None and nothing: it is not a retry)."""
        trip = speech(revision).facts.round_trip
        if trip is None or params is UNSET or params is None:
            return None, _NO_ANSWERS
        names = {key: attr for attr, key in wire_fields(type(params)).items()}
        state_attr, answers_attr = names.get(trip.request_state), names.get(trip.input_responses)
        state = getattr(params, state_attr, UNSET) if state_attr else UNSET
        answers = getattr(params, answers_attr, UNSET) if answers_attr else UNSET
        return (
            state if isinstance(state, str) else None,
            dict(answers) if isinstance(answers, Mapping) else {},
        )

    def _input_response(self, method: str, response: Any) -> Any:
        """A round-trip client's response to the server's own ``method`` request, as the result
        of that request in the server's revision."""
        target = self.back.revision
        assert target is not None
        result_class = speech(target).facts.wires[method].result
        value = self.carry(response, target, f"the client's result of {method!r}")
        return checked(msgspec.to_builtins(value), result_class, target, "$.result")


# What a request's params and result are called in errors and the log, by method (built once:
# the methods are those of the revisions, which the sessions checked before).
_PARAMS_OF: dict[str, str] = {}
_RESULT_OF: dict[str, str] = {}


def _said(names: dict[str, str], what: str, method: str) -> str:
    said = f"{what} {method!r}"
    if len(names) < 256:  # (a bound all the same)
        names[method] = said
    return said


_NO_ANSWERS: dict[str, Any] = {}  # (never changed: round_trip_retry's answers of a first try)


def _rewrite_meta(
    params: Any, sp: Any, envelope: dict[str, Any], crossing: Crossing
) -> tuple[Any, Any]:
    """``params`` with the client side's per-request ``_meta`` envelope and progress token
    taken out and the server side's ``envelope`` put in (so that it projects into a revision
    that requires one; in the types of the client side's ``_meta`` class where that declares
    the envelope's keys); and the token (the server side sets its own)."""
    if params is UNSET:
        return params, None
    meta = getattr(params, "meta", UNSET)
    token = None
    if isinstance(meta, dict) and meta:
        drop = set()
        own = sp.facts.request_meta
        if own is not None:
            drop |= {own.version_key, own.capabilities_key, own.info_key}
        token = meta.get(sp.progress_key) if sp.progress_key is not None else None
        if token is not None:
            drop.add(sp.progress_key)
        if not envelope and not drop.intersection(meta):
            return params, token
        kept = {k: v for k, v in meta.items() if k not in drop}
    elif envelope:
        kept = {}
    else:
        return params, None
    cls = type(meta) if isinstance(meta, dict) else _meta_class(type(params))
    if cls is None:
        return params, token
    if envelope:
        kept.update(crossing.typed_envelope(envelope, cls) if sp.facts.request_meta else envelope)
    return msgspec.structs.replace(params, meta=cls(kept)), token


_META_CLASSES: dict[type, Any] = {}  # params class -> the open class of its _meta (generated: few)


def _meta_class(params_class: type) -> Any:
    """The open class of a params class's ``_meta`` (looked up once per class: reading a
    class's type information evaluates its annotations)."""
    found = _META_CLASSES.get(params_class, _META_CLASSES)
    if found is _META_CLASSES:
        found = _META_CLASSES.setdefault(params_class, open_class(params_class, "meta"))
    return found
