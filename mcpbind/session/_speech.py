"""A revision's facts as a session reads them (``SessionSpeech``, one per revision), how to send
each of its methods (``SendPlan``), and the helpers that build and read its generated classes by
attribute name. Every fact comes from the generated ``FACTS`` record and ``METHODS`` table."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from .._extensions import TASKS
from .._support import Facts, MethodSpec, OpenObject, convert, open_class, ready
from ..errors import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError

if TYPE_CHECKING:
    from .tasks import TaskSpeech

__all__ = [
    "NOT_READY",
    "SendPlan",
    "SessionSpeech",
    "checked",
    "make",
    "open_get",
    "speech",
    "wire_fields",
]


def wire_fields(cls: Any) -> dict[str, str]:
    """Attribute name -> wire key of a generated Struct's fields (or an open object's keys)."""
    if isinstance(cls, type) and issubclass(cls, OpenObject):
        return dict(cls._attributes)
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):
        return {f.name: f.encode_name for f in msgspec.structs.fields(cls)}
    return {}


def open_get(obj: Any, attribute: str) -> Any:
    """The value of a declared key of an open object, by its attribute name (None if absent)."""
    if not isinstance(obj, OpenObject):
        return None
    key = type(obj)._attributes.get(attribute)
    return obj.get(key) if key is not None else None


def make(cls: Any, revision: str, **attributes: Any) -> Any:
    """A generated Struct of ``revision`` from attribute values of any revision (or plain JSON);
    unset (None) values are left out. Bad values raise ``ProtocolError`` (-32602, path named)."""
    names = wire_fields(cls)
    data = {names[k]: msgspec.to_builtins(v) for k, v in attributes.items() if v is not None}
    return checked(data, cls, revision, "$")


def checked(data: Any, cls: Any, revision: str, where: str) -> Any:
    """``data`` (plain JSON) converted into ``cls``; -32602 naming the path and revision."""
    try:
        return convert(data, cls)
    except msgspec.ValidationError as exc:
        text = str(exc)
        text = (
            text.replace(" - at `$", f" - at `{where}", 1)
            if " - at `$" in text
            else f"{text} - at `{where}`"
        )
        name = getattr(cls, "__name__", repr(cls))
        raise ProtocolError(INVALID_PARAMS, f"Invalid {name} (MCP {revision}): {text}") from None


@dataclass(frozen=True, slots=True)
class SendPlan:
    """How to send one method of one revision."""

    spec: MethodSpec
    request: bool
    wire: Any  # the class it travels in (``FACTS.wires``), which the codec encodes as it is
    params: Any  # its params class
    meta_key: str | None  # wire key of the params' _meta
    meta_class: Any  # the open class of the params' _meta, or None
    version_key: str | None  # the _meta key a request must carry its revision in, or None
    opening: bool  # the request that opens a session (initialize): sent by connect() alone
    speech: SessionSpeech  # the revision's facts it belongs to


class SessionSpeech:
    """One revision's facts as a session reads them, built once per revision."""

    def __init__(self, revision: str) -> None:
        from ..packages import bindings

        self.revision = revision
        self.module = bindings(revision)
        self.facts: Facts = self.module.FACTS
        self.methods: Mapping[str, MethodSpec] = self.module.METHODS
        self.roles = {m: r for r, m in self.facts.lifecycle.items()}
        # The generated message class -> (method, is a request): what a decoded message is.
        self.kinds = {s.message: (s.method, s.kind == "request") for s in self.methods.values()}
        self.handshake = self.facts.handshake
        self.version = self.facts.versions[0]
        progress = self.methods.get(self.facts.lifecycle.get("progress", ""))
        self.progress_key = (
            wire_fields(progress.params).get("progress_token") if progress is not None else None
        )
        trip = self.facts.round_trip
        # The result class that asks for input instead of answering, or None.
        self.input_required: Any = trip.result if trip is not None else None
        tasks = self.facts.tasks
        # The result classes that answer a request with something else than its result (a task
        # created, input asked): a response of any other class is its request's plain result.
        self.unplain = frozenset(
            c
            for c in (self.input_required, tasks.result if tasks is not None else None)
            if c is not None
        )
        self.batches = self.facts.batches
        # The classes a session's codec (``wire_results``) gives a result response in that it
        # read in one pass: the response classes of ``FACTS.wires``, each result its method's own.
        self.answers = frozenset(
            w.response for w in self.facts.wires.values() if w.response is not None
        )
        # Of those, the ones whose result is the plain answer of a request sent once the session
        # is ready (not the opening's, no result class of ``unplain``): a ``ResultReceived``.
        opening = {self.facts.lifecycle.get("initialize"), self.facts.lifecycle.get("discover")}
        self.plain_answers = frozenset(
            w.response
            for m, w in self.facts.wires.items()
            if w.response is not None and m not in opening and w.result not in self.unplain
        )
        # The class of a result no method of the revision claims (what the answers of the tasks
        # extension decode to), and the extension where it extends this revision, else None.
        self.open_result: Any = self.facts.result
        self.ext: TaskSpeech | None = None
        if revision in TASKS:  # (its classes are imported only for that revision)
            from .tasks import TaskSpeech

            self.ext = TaskSpeech.of(revision)
            if self.ext is not None:  # such a result may be a task, or an extension's answer
                self.unplain = self.unplain | {self.open_result}
        self._send: dict[str, SendPlan] = {}
        # The send plans of the requests a session in state "ready" sends without more checks
        # (every request but the one that opens a session), as they are first sent.
        self.requests: dict[str, SendPlan] = {}
        # The revision's methods whose requests the extension may send in its own classes (a
        # listen naming tasks: ``tasks_listen``), never in ``requests``, so that each goes by
        # ``_extension_request`` first.
        self.extended: frozenset[str] = frozenset()
        self.tasks_listen: SendPlan | None = None
        if self.ext is not None and self.ext.listen is not None:
            assert self.ext.types.listen is not None
            wire, params = self.ext.types.listen
            ready(params)
            self.tasks_listen = dataclasses.replace(
                self.send(self.ext.listen),
                wire=wire,
                params=params,
                meta_class=open_class(params, "meta"),
            )
            self.extended = frozenset({self.ext.listen})

    def send(self, method: str) -> SendPlan:
        found = self._send.get(method)
        if found is None:
            spec = self.methods.get(method)
            if spec is None:
                raise ProtocolError(
                    METHOD_NOT_FOUND,
                    f"Method not found: {method!r} is not part of MCP {self.revision}",
                    {"method": method},
                )
            params = spec.params
            meta_key = wire_fields(params).get("meta") if params is not None else None
            ready(params) if params is not None else None
            envelope = self.facts.request_meta
            request = spec.kind == "request"
            found = SendPlan(
                spec,
                request,
                self.facts.wires[method].wire,
                params,
                meta_key,
                open_class(params, "meta") if params is not None else None,
                envelope.version_key if envelope is not None and request else None,
                self.roles.get(method) == "initialize",
                self,
            )
            self._send[method] = found
        return found


_SPEECH: dict[str, SessionSpeech] = {}  # one per pinned revision at most
NOT_READY: dict[str, SendPlan] = {}  # (never written)


def speech(revision: str) -> SessionSpeech:
    found = _SPEECH.get(revision)
    if found is None:
        found = _SPEECH.setdefault(revision, SessionSpeech(revision))
    return found
