"""The tasks extension (SEP-2663) on the client side of a session: a call the server answered
with a task, and the extension's own requests (get, update, cancel) and their answers, each of
the generated classes of ``mcpbind._extension_tasks`` (facts from ``mcpbind._extensions``).

The revision's codec knows only the revision's methods: the answer to a call of a client that
declared the extension, when its result says it made a task, and the answers to the
extension's requests, come out of it as the revision's open ``Result``; they are converted here
into their exact class (or refused with the JSON path of what is wrong).
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec
from msgspec import UNSET

from .._extension_tasks import TASK_TYPES, TaskTypes
from .._extensions import TASKS, TasksFacts
from .._support import convert
from ..codec import encode_json
from ..errors import INVALID_PARAMS, METHOD_NOT_FOUND, ProtocolError
from ..events import Event, NotificationReceived, ResultReceived, TaskCreated
from ..packages import bindings


class RevisionSpeech(Protocol):
    """What the extension's requests read of a session's revision (``_common``'s speech)."""

    revision: str
    version: str
    facts: Any


__all__ = ["TaskSpeech", "declares", "with_extension"]

# The wire key of the params' _meta of each revision the extension extends, bound once:
# ``declares`` reads it for every task-augmented request a validator or bridge sees.
_META_KEYS = {revision: bindings(revision).FACTS.meta_key for revision in TASKS}


class TaskSpeech:
    """The extension as one revision's sessions read it: its facts and classes (only for the
    revision the extension extends)."""

    __slots__ = ("facts", "types", "methods", "messages", "kind", "listen", "_filter")

    def __init__(
        self, facts: TasksFacts, types: TaskTypes, kind: str, listen: str | None = None
    ) -> None:
        self.facts = facts
        self.types = types
        self.methods = frozenset(types.requests)
        # Every message of the extension by its method: its requests (the client's) and its
        # status notification (the server's), each its generated class.
        self.messages = {m: wire for m, (wire, _) in types.requests.items()}
        self.messages[facts.notification] = types.notification
        self.kind = kind  # the revision's result discriminator (what says a result is a task)
        # The revision's listen method where the extension's classes hold a filter naming tasks
        # (``TaskTypes.listen``), and the listen params member holding the filter; else None.
        self.listen = listen if types.listen is not None and types.listen_filter else None
        self._filter = types.listen_filter[0] if types.listen_filter is not None else ""

    @classmethod
    def of(cls, revision: str) -> TaskSpeech | None:
        facts, types = TASKS.get(revision), TASK_TYPES.get(revision)
        if facts is None or types is None:
            return None
        revision_facts = bindings(revision).FACTS
        kinds = revision_facts.result_kinds
        if kinds is None:
            return None
        return cls(facts, types, kinds.key, revision_facts.lifecycle.get("listen"))

    def names_tasks(self, params: Any) -> bool:
        """Whether the params of a listen request (plain JSON, or a generated params Struct)
        have a filter naming tasks: they are then sent in the extension's classes
        (``TaskTypes.listen``), which keep the task ids the revision's filter class lacks."""
        if type(params) is dict:
            wanted = params.get(self._filter)
            return type(wanted) is dict and self.facts.listen_filter in wanted
        assert self.types.listen is not None  # (only asked where there is a listen)
        return type(params) is self.types.listen[1]

    def notification(self, data: bytes, revision: str) -> Event | None:
        """The event of ``data`` (one message the revision's codec did not know the method of)
        when it is the extension's status notification: a ``NotificationReceived`` carrying the
        generated ``TaskStatusNotification`` (its params one class per status); None when it is
        not one. Raises ``ProtocolError`` (-32602, the JSON path) for one that does not fit."""
        try:
            message = msgspec.json.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return None
        if (
            type(message) is not dict
            or message.get("method") != self.facts.notification
            or "id" in message  # a request of that name: the codec's refusal stands
        ):
            return None
        try:
            typed = convert(message, self.types.notification)
        except msgspec.ValidationError as exc:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid {self.facts.notification!r} notification (MCP {revision}, "
                f"{self.facts.extension}): {exc}",
            ) from None
        return NotificationReceived(
            method=self.facts.notification, params=typed.params, message=typed, revision=revision
        )

    def answer(self, id: Any, method: str, params: Any, result: Any) -> Event | None:
        """The event of ``result`` (the revision's open ``Result``) answering a ``method``
        request sent with ``params``: ``TaskCreated`` for a call that became a task, the exact
        result of one of the extension's requests, or None when the extension has nothing to
        say about it. Raises ``ProtocolError`` (-32602, the path under ``$.result``) for an
        answer that does not fit its class."""
        f = self.facts
        if method == f.eligible:
            if result.get(self.kind) != f.task_result or not declares(params, f):
                return None
            task = self._typed(self.types.create_result, result, method, id)
            return TaskCreated(id=id, method=method, task_id=task.task_id, result=task)
        target = self.types.results.get(method)
        if target is None:
            return None
        return ResultReceived(id=id, method=method, result=self._typed(target, result, method, id))

    def _typed(self, cls: Any, result: Any, method: str, id: Any) -> Any:
        try:
            return convert(dict(result), cls)
        except msgspec.ValidationError as exc:
            text = str(exc)
            text = (
                text.replace(" - at `$", " - at `$.result", 1)
                if " - at `$" in text
                else f"{text} - at `$.result`"
            )
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid result: the result of {method!r} (MCP {self.facts.revision}, "
                f"{self.facts.extension}): {text}",
                id=id,
            ) from None

    def request(
        self,
        sp: RevisionSpeech,
        method: str,
        id: Any,
        params: dict[str, Any],
        capabilities: Any,
        info: Any,
    ) -> tuple[Any, bytes]:
        """(params Struct, JSON) of the extension's ``method`` request: ``params`` (plain JSON)
        with the revision's per-request ``_meta`` envelope, the extension declared in its client
        capabilities (the server refuses these requests without it)."""
        found = self.types.requests.get(method)
        meta = sp.facts.request_meta
        if found is None or meta is None:
            raise ProtocolError(
                METHOD_NOT_FOUND,
                f"Method not found: {method!r} is not a request of the {self.facts.extension} "
                f"extension of MCP {sp.revision}",
                {"method": method},
            )
        wire, params_class = found
        envelope = {
            meta.version_key: sp.version,
            meta.capabilities_key: with_extension(capabilities, self.facts),
        }
        if info is not None:
            envelope[meta.info_key] = msgspec.to_builtins(info)
        key = sp.facts.meta_key
        data = {**params, key: {**envelope, **(params.get(key) or {})}}
        try:
            typed = convert(data, params_class)
        except msgspec.ValidationError as exc:
            raise ProtocolError(
                INVALID_PARAMS,
                f"Invalid params for {method!r} (MCP {sp.revision}, {self.facts.extension}): "
                f"{exc}",
            ) from None
        return typed, encode_json(wire(id=id, jsonrpc="2.0", params=typed))


def with_extension(capabilities: Any, facts: TasksFacts) -> dict[str, Any]:
    """``capabilities`` (a Struct or plain JSON, or None) as plain JSON declaring the
    extension."""
    caps = dict(msgspec.to_builtins(capabilities)) if capabilities else {}
    key = facts.extensions_key
    caps[key] = {**(caps.get(key) or {}), facts.extension: {}}
    return caps


def declares(params: Any, facts: TasksFacts) -> bool:
    """Whether request params (the Struct a session sent, or the plain JSON of the wire, as a
    validator reads it) declare the extension in their ``_meta`` client capabilities."""
    meta = (
        params.get(_META_KEYS[facts.revision])
        if type(params) is dict
        else getattr(params, "meta", UNSET)
    )
    if not isinstance(meta, dict):
        return False
    caps = msgspec.to_builtins(meta.get(facts.capabilities_key))
    extensions = caps.get(facts.extensions_key) if isinstance(caps, dict) else None
    return isinstance(extensions, dict) and isinstance(extensions.get(facts.extension), dict)
