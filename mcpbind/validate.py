"""Check a JSON-RPC transcript (JSON Lines) against one revision: ``mcpbind validate``.

Plain runtime code (msgspec only); the click command in ``mcpbind/cli.py`` is a thin wrapper.

A transcript holds both directions of one session, one JSON-RPC message (or batch) a line, with
no direction marks, so the direction of each line is worked out from what it is:

- a request or notification is sent by the side the revision's generated ``METHODS`` table
  names as its sender;
- for a method both sides send, a request comes from the side that has not used its id yet
  (a sender never reuses an id, so when exactly one side has used it, the other sends it);
  when neither has, a request naming a task (``tasks/get``, the payload request, ...) comes from
  the side that asked for that task (``Codec.requested_task``); otherwise, and for every such
  notification, the line is read as the client's, and the request's sender stays open: a
  response from either side answers it;
- a response answers the pending request with its id, so it goes the other way; ids are per
  sender, so requests of both sides may wait on the same id: the response answers the one
  sent last (a peer answers the request it just received before its own earlier one completes);
- a batch comes from the sender of its members (members of both sides are a finding).

Each message is then decoded by the ``Codec`` of the side that receives it, told beforehand
(``expect_request``) which request a response answers, so results decode to their precise type
(a task-augmented request's to the task's creation result, a task's payload to the result of the
method that created the task, in either direction); the two
codecs share what each learned of the other side's capabilities, so capability gates hold in
both directions. Besides what the codec refuses, a request id its sender used before and a
response to an id no request waits on are findings (-32600). Each ``Finding`` carries the line
number, the JSON-RPC error code and the JSON path (``$[i]...`` inside a batch). A request sent by
the side that may not send it reads, unmarked, like the same request sent the right way: it is
checked as its table sender's.

``strict`` also walks each decoded message beside its raw JSON and reports every key the revision
does not define there, with the revisions that do define it (from the generated field provenance).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import msgspec

from ._support import convert
from .codec import Codec, ErrorResponse, Request, Response
from .errors import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, ProtocolError
from .packages import bindings
from .projection import revision_of_class
from .session.tasks import TaskSpeech, declares

__all__ = ["Finding", "UnreadableTranscript", "read_transcript", "validate_lines"]

_SIDES = ("client", "server")
_OTHER = {"client": "server", "server": "client"}
# Keys of a JSON-RPC message itself, around what the revision defines (params, result, error).
_ENVELOPE_KEYS = frozenset(("jsonrpc", "id", "method", "params", "result", "error"))
_AT = re.compile(r"- at `(\$[^`]*)`")


class Finding(msgspec.Struct, frozen=True):
    """One way a line breaks the revision: the JSON-RPC error code a receiver would answer with,
    and the JSON path of the offending value (``$`` for the whole line)."""

    line: int
    code: int
    path: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: [{self.code}] {self.path}: {self.message}"


class UnreadableTranscript(ValueError):
    """The input is not a UTF-8 text transcript (binary data, another encoding)."""


def read_transcript(data: bytes) -> list[str]:
    """The lines of a transcript given as bytes; raises ``UnreadableTranscript`` unless it is
    UTF-8 text. Lines end at ``\\n`` only (a JSON string may hold U+2028 and friends)."""
    nul = data.find(b"\0")
    if nul >= 0:  # JSON text never holds a raw NUL: binary data, or UTF-16/32
        raise UnreadableTranscript(
            f"not a UTF-8 text transcript: NUL byte at offset {nul} (binary data?)"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise UnreadableTranscript(
            f"not a UTF-8 text transcript: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}) is not UTF-8"
        ) from None
    text = text.removeprefix("\ufeff")
    return [line.removesuffix("\r") for line in text.split("\n")]


def validate_lines(
    lines: Iterable[str], revision: str, *, strict: bool = False
) -> Iterator[Finding]:
    """The findings for a transcript of one session, one message a line (blank lines are skipped);
    ``revision`` must be one of ``mcpbind.REVISIONS``."""
    session = _Transcript(revision, strict)
    for number, line in enumerate(lines, 1):
        if line.strip():
            yield from session.check(number, line)


@dataclass
class _Pending:
    method: str | None  # None: a method this revision lacks (its response decodes generically)
    sender: str | None  # None: a "both" request whose sender the transcript does not tell
    params: Any  # as on the wire: they may decide what answers it (a task-augmented request)
    extension: str | None = None  # a request of the tasks extension: its method


class _Transcript:
    """Both sides of one transcript: a codec per receiving side, and the request ids per sender."""

    def __init__(self, revision: str, strict: bool) -> None:
        self.revision = revision
        self.strict = strict
        self.methods = bindings(revision).METHODS
        # The tasks extension where it extends this revision: its requests (sent by the client)
        # and the answers it gives a call, read with its generated classes.
        self.ext = TaskSpeech.of(revision)
        self.codecs = {side: Codec(revision, role=side) for side in _SIDES}
        # Decodes responses to ids nobody asked for: it is never told an id, so it never waits
        # for one (the session's codec may, when a response it was told of failed early).
        self.stray = Codec(revision, role="client")
        self.pending: dict[Any, list[_Pending]] = {}  # id -> requests awaiting it, oldest first
        self.used: dict[str, dict[Any, int]] = {side: {} for side in _SIDES}  # sender -> id -> line
        # What the message being checked is to the extension: its request (the method), or the
        # answer to the request it names (set by _place, read by _decode).
        self._extension_request: str | None = None
        self._answering: _Pending | None = None
        self._open_result = bindings(revision).FACTS.result
        # Keys the extension adds to a class of the revision, with their types: the listen
        # filter's task ids.
        self.added: dict[type, dict[str, Any]] = {}
        if self.ext is not None and self.ext.types.listen_filter is not None:
            cls = self.ext.types.listen_filter[1]
            self.added[cls] = {self.ext.facts.listen_filter: list[str]}

    def check(self, number: int, line: str) -> Iterator[Finding]:
        try:
            raw = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError, ValueError):
            raw = None  # not JSON: the codec says why below
        if isinstance(raw, list):
            yield from self._batch(number, line, raw)
        else:
            yield from self._message(number, line, raw, "$")

    # -- one message ------------------------------------------------------------------------------

    def _message(self, number: int, data: str | bytes, raw: Any, root: str) -> Iterator[Finding]:
        """Place one message in the session and decode it as its receiver does."""
        _, codec, findings = self._place(number, raw, root)
        yield from findings
        yield from self._decode(number, codec, data, raw, root)

    def _place(self, number: int, raw: Any, root: str) -> tuple[str | None, Codec, list[Finding]]:
        """Who sends ``raw`` (None when the transcript does not tell) and the codec that receives
        it; keeps the request ids, and tells that codec which method a response answers."""
        sender: str | None = None
        findings: list[Finding] = []
        if isinstance(raw, dict):
            raw_id = raw.get("id")
            id_ = (
                raw_id if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None
            )
            has_id = id_ is not None
            method = raw.get("method")
            if isinstance(method, str) and _of_extension(self.ext, method, self.methods):
                assert self.ext is not None
                self._extension_request = method
                if method not in self.ext.methods:  # its notification: the server's
                    return "server", self.codecs["client"], findings
                if has_id:
                    sent = _Pending(None, "client", raw.get("params"), extension=method)
                    findings = self._request(number, id_, sent, root)
                return "client", self.codecs["server"], findings
            if isinstance(method, str):
                spec = self.methods.get(method)
                sender = spec.sender if spec is not None else None
                if sender == "both":
                    sender = self._both_sender(id_, raw) if has_id else None
                if has_id and (spec is None or spec.kind == "request"):
                    sent = _Pending(method if spec is not None else None, sender, raw.get("params"))
                    findings = self._request(number, id_, sent, root)
            elif ("result" in raw or "error" in raw) and id_ is not None:
                request = self._answered(id_)
                if request is None:
                    findings.append(
                        Finding(
                            number,
                            INVALID_REQUEST,
                            _join(root, "id"),
                            f"Invalid Request: a response to id {id_!r}, which no pending request of either side has",
                        )
                    )
                    return None, self.stray, findings
                self._answering = request
                requester = request.sender or "client"
                if request.method is not None:
                    self.codecs[requester].expect_request(
                        {"id": id_, "method": request.method, "params": request.params}
                    )
                return _OTHER[requester], self.codecs[requester], findings
        return sender, self.codecs[_OTHER[sender or "client"]], findings

    def _both_sender(self, id_: Any, raw: dict[str, Any]) -> str | None:
        used = [side for side in _SIDES if id_ in self.used[side]]
        if len(used) == 1:
            return _OTHER[used[0]]
        if not used:  # a request about a task comes from the side that asked for the task
            asked = [side for side in _SIDES if self.codecs[side].requested_task(raw) is not None]
            if len(asked) == 1:
                return asked[0]
        return None

    def _request(self, number: int, id_: Any, request: _Pending, root: str) -> list[Finding]:
        findings = []
        sender = request.sender
        if sender is not None:
            first = self.used[sender].get(id_)
            if first is not None:
                findings.append(
                    Finding(
                        number,
                        INVALID_REQUEST,
                        _join(root, "id"),
                        f"Invalid Request: the {sender} already used request id {id_!r} on line {first} "
                        "(a sender never reuses an id within a session)",
                    )
                )
            else:
                self.used[sender][id_] = number
        self.pending.setdefault(id_, []).append(request)
        return findings

    def _answered(self, id_: Any) -> _Pending | None:
        """The pending request a response with ``id_`` answers (the latest), no longer pending."""
        waiting = self.pending.get(id_)
        if not waiting:
            return None
        request = waiting.pop()
        if not waiting:
            del self.pending[id_]
        return request

    def _decode(
        self, number: int, codec: Codec, data: str | bytes, raw: Any, root: str
    ) -> list[Finding]:
        extension_request, self._extension_request = self._extension_request, None
        answering, self._answering = self._answering, None
        if extension_request is not None:
            return self._extension_message(number, extension_request, data, root)
        try:
            decoded = codec.decode(data)
        except ProtocolError as exc:
            return [Finding(number, exc.code, _path(exc.message, root), exc.message)]
        finally:
            self._share_capabilities()
        found = []
        if answering is not None and type(decoded) is Response:
            found = self._extension_answer(number, answering, decoded.result, root)
        if not self.strict:
            return found
        return found + [
            Finding(number, code, path, message)
            for code, path, message in _undefined_keys(
                raw, decoded, self.revision, root, self.added
            )
        ]

    def _extension_message(
        self, number: int, method: str, data: str | bytes, root: str
    ) -> list[Finding]:
        """A message of the tasks extension, checked against its generated class."""
        assert self.ext is not None  # (only its messages are placed so)
        wire = self.ext.messages[method]
        try:
            convert(msgspec.json.decode(data), wire)
        except msgspec.ValidationError as exc:
            message = (
                f"Invalid params for {method!r} (MCP {self.revision}, "
                f"{self.ext.facts.extension}): {exc}"
            )
            return [Finding(number, INVALID_PARAMS, _path(message, root), message)]
        except (msgspec.DecodeError, RecursionError, ValueError) as exc:
            return [Finding(number, PARSE_ERROR, root, f"Parse error: {exc}")]
        return []

    def _extension_answer(
        self, number: int, request: _Pending, result: Any, root: str
    ) -> list[Finding]:
        """The answer to ``request`` where the tasks extension decides what it is: the result of
        one of its requests, or a task made of a call; a task made of the call of a client that
        did not declare the extension is a finding."""
        ext = self.ext
        method = request.extension or request.method
        if ext is None or method is None or type(result) is not self._open_result:
            return []
        f = ext.facts
        if (
            request.extension is None
            and method == f.eligible
            and result.get(ext.kind) == f.task_result
            and not declares(request.params, f)
        ):
            message = (
                f"Invalid result: the result of {method!r} (MCP {self.revision}) is a task of "
                f"the {f.extension} extension, which the request did not declare"
            )
            return [Finding(number, INVALID_PARAMS, _join(root, "result"), message)]
        try:
            ext.answer(None, method, request.params, result)
        except ProtocolError as exc:
            return [Finding(number, exc.code, _path(exc.message, root), exc.message)]
        return []

    def _share_capabilities(self) -> None:
        """Each codec learns the other side's capabilities from what it receives; the codec
        of that side needs them as its own to check the gates of what it receives."""
        for side in _SIDES:
            learned = self.codecs[_OTHER[side]].peer_capabilities
            if learned is not None and self.codecs[side].capabilities is not learned:
                self.codecs[side].capabilities = learned

    # -- batches --------------------------------------------------------------------------------

    def _batch(self, number: int, line: str, raw: list[Any]) -> Iterator[Finding]:
        """Each member decoded as its receiver does (paths ``$[i]...``), then the batch itself:
        allowed by the revision, not empty, not nested, from one sender."""
        members = msgspec.json.decode(line, type=list[msgspec.Raw])
        found: list[Finding] = []
        senders: set[str] = set()
        for i, (member, value) in enumerate(zip(members, raw, strict=True)):
            if isinstance(value, list):
                continue  # a batch inside a batch: the batch's own finding
            root = f"$[{i}]"
            sender, codec, placed = self._place(number, value, root)
            found += placed
            found += self._decode(number, codec, bytes(member), value, root)
            if sender is not None:
                senders.add(sender)
        yield from found
        if len(senders) > 1:
            yield Finding(
                number,
                INVALID_REQUEST,
                "$",
                "Invalid Request: a batch holds messages of both the client and the server",
            )
            return
        # The codec's rules on the batch itself, on a codec of its own (the session's state plays
        # no part); an error a member already gave is not repeated.
        receiver = _OTHER[senders.pop()] if senders else "server"
        try:
            Codec(self.revision, role=receiver).decode(line)
        except ProtocolError as exc:
            if all(exc.message != f.message for f in found):
                yield Finding(number, exc.code, _path(exc.message, "$"), exc.message)


def _of_extension(ext: TaskSpeech | None, method: str, methods: Any) -> bool:
    """Whether ``method`` is a message of the tasks extension (and none of the revision's)."""
    return ext is not None and method in ext.messages and method not in methods


def _path(message: str, root: str) -> str:
    """The JSON path a codec error names, under ``root`` (a batch member's ``$[i]``)."""
    found = _AT.search(message)
    path = found.group(1) if found else "$"
    return root + path[1:]


# ---------------------------------------------------------------------------------------------
# strict: keys the revision does not define


def _undefined_keys(
    raw: Any, decoded: Any, revision: str, root: str, added: dict[type, dict[str, Any]]
) -> Iterator[tuple[int, str, str]]:
    """(code, path, message) for each key of ``raw`` that its decoded type in ``revision`` lacks
    (and an extension does not add to it: ``added``, class -> key -> the type of its value):
    -32600 for a key of the message itself, -32602 for one inside its params or result, or an
    added key whose value is not of its type."""
    if not isinstance(raw, dict):
        return
    if isinstance(decoded, (Response, ErrorResponse)):
        for key in raw:
            if key not in _ENVELOPE_KEYS:
                yield INVALID_REQUEST, _join(
                    root, key
                ), f"a JSON-RPC response does not define {key!r}"
        if isinstance(decoded, Response):
            yield from _walk(
                raw.get("result"),
                decoded.result,
                revision,
                _join(root, "result"),
                added,
                message=False,
            )
        return
    yield from _walk(
        raw,
        decoded.message if isinstance(decoded, Request) else decoded,
        revision,
        root,
        added,
        message=True,
    )


def _walk(
    raw: Any,
    obj: Any,
    revision: str,
    root: str,
    added: dict[type, dict[str, Any]],
    *,
    message: bool,
) -> Iterator[tuple[int, str, str]]:
    """Raw JSON beside its decoded value, depth first without recursion (values can be deep);
    ``message``: ``root`` is a request or notification, whose envelope keys JSON-RPC defines."""
    fields = _provenance()
    stack = [(raw, obj, root)]
    while stack:
        raw, obj, path = stack.pop()
        if isinstance(obj, list) and isinstance(raw, list):
            stack.extend(
                (r, o, f"{path}[{i}]")
                for i, (r, o) in reversed(list(enumerate(zip(raw, obj, strict=False))))
            )
            continue
        if isinstance(obj, dict) and isinstance(raw, dict):
            stack.extend((raw[k], obj[k], _join(path, k)) for k in reversed(raw) if k in obj)
            continue
        if not isinstance(obj, msgspec.Struct) or not isinstance(raw, dict):
            continue
        shape = _shape(type(obj))
        if shape is None:
            continue  # not a generated type: nothing the revision defines
        name, by_wire, tag_field = shape
        top = message and path == root
        inner = []
        for key, value in raw.items():
            if key in by_wire:
                inner.append((value, getattr(obj, by_wire[key]), _join(path, key)))
            elif key == tag_field or (top and key in _ENVELOPE_KEYS):
                continue  # the tag is a class attribute; the envelope keys belong to JSON-RPC
            elif key in added.get(type(obj), ()):
                try:
                    msgspec.convert(value, added[type(obj)][key])
                except msgspec.ValidationError as exc:
                    yield INVALID_PARAMS, _join(path, key), f"Invalid {key!r}: {exc}"
            else:
                where = fields.get(name, {}).get(key, ())
                known = f" (defined by {name} in {', '.join(where)})" if where else ""
                code = INVALID_REQUEST if top else INVALID_PARAMS
                yield code, _join(path, key), f"{name} in {revision} does not define {key!r}{known}"
        stack.extend(reversed(inner))


@lru_cache(maxsize=4096)  # the generated classes of a few revisions
def _shape(cls: type) -> tuple[str, dict[str, str], str | None] | None:
    """A generated Struct's schema name, attribute names by wire key and tag key; None for a
    class no revision package defines."""
    try:
        revision_of_class(cls)
    except TypeError:
        return None
    by_wire = {f.encode_name: f.name for f in msgspec.structs.fields(cls)}
    return cls.__name__.rstrip("_"), by_wire, cls.__struct_config__.tag_field  # type: ignore[attr-defined]


def _provenance() -> dict[str, dict[str, tuple[str, ...]]]:
    """The revisions defining each type's wire keys (generated; loaded on the first strict check)."""
    from ._provenance import FIELDS

    return FIELDS


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{msgspec.json.encode(key).decode()}]"
