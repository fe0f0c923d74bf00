"""MCP's stdio framing, bounded: one JSON-RPC message a line, each at most ``max_line`` bytes.

``LineReader`` reads lines from an asyncio ``StreamReader``; a line over the bound is read to its
end without being kept whole and comes out as ``Overlong``, so a peer cannot make a reader hold
more than about ``max_line`` bytes. ``envelope`` says what kind of message some bytes are (a
request, a notification, a response, or none of these) and its id, for answering a message that
could not be handled; an ``Overlong`` line says the same from its first and last bytes. Only the
standard library and msgspec: the bridge and the stdio examples both read their peers with it.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any, NamedTuple

import msgspec

from ..errors import ProtocolError

__all__ = ["MAX_LINE", "Envelope", "LineReader", "Overlong", "envelope"]

MAX_LINE = 16 * 1024 * 1024  # bytes of one message, its line break not counted
# Bytes kept of an over-long line's beginning and of its end, to read its envelope from. The end
# is searched backwards from every comma in it, so it is kept short.
_HEAD = 4096
_TAIL = 1024


class Envelope(NamedTuple):
    """What a JSON-RPC message is: ``kind`` is ``"request"``, ``"notification"``, ``"response"``
    or ``"invalid"`` (not an object, or its method or id of the wrong type); ``id`` its id where
    it could be read (a string or an integer), else None."""

    kind: str
    id: str | int | None

    def answer(self, code: int, message: str, data: Any = None) -> bytes | None:
        """The JSON-RPC error response answering this message (with id null when its id could
        not be read), or None for a notification or a response, which JSON-RPC never answers."""
        if self.kind in ("notification", "response"):
            return None
        return ProtocolError(code, message, data, self.id).to_json()


class Overlong(NamedTuple):
    """A line over the reader's bound, read and dropped: its ``size`` in bytes (line break not
    counted), and the ``envelope`` read from its first and last bytes (see ``envelope``)."""

    size: int
    envelope: Envelope


class LineReader:
    """The lines of ``reader``, each at most ``max_line`` bytes; ``read`` gives them one by one.

    The reader's own ``limit`` only sets how much it reads at once: lines longer than it are
    put together here, up to ``max_line``.
    """

    def __init__(self, reader: asyncio.StreamReader, max_line: int = MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError(f"max_line must be at least 1 byte, not {max_line}")
        self.reader = reader
        self.max_line = max_line

    async def read(self) -> bytes | Overlong | None:
        """The next line without its line break (``b""`` for an empty line), an ``Overlong``
        for a line over ``max_line`` bytes (read to its end, not kept), or None at the end of
        the input. A last line without a line break counts as a line."""
        pieces: list[bytes] = []
        size = 0
        while True:
            piece, end = await self._piece()
            if not piece and not pieces and end:
                return None
            pieces.append(piece)
            size += len(piece)
            if end:
                line = pieces[0] if len(pieces) == 1 else b"".join(pieces)
                line = _unterminated(line)
                if len(line) <= self.max_line:
                    return line
                return Overlong(len(line), _envelope_of_parts(line[:_HEAD], line[-_TAIL:]))
            if size > self.max_line + 2:  # over the bound whatever line break ends it
                return await self._discard(pieces, size)

    async def _piece(self) -> tuple[bytes, bool]:
        """What the reader holds of the current line: the rest of it (True) or a part (False)."""
        try:
            return await self.reader.readuntil(b"\n"), True
        except asyncio.LimitOverrunError as exc:
            return await self.reader.readexactly(exc.consumed), False
        except asyncio.IncompleteReadError as exc:
            return exc.partial, True

    async def _discard(self, start: list[bytes], size: int) -> Overlong:
        """Read the rest of an over-long line that began with the ``size`` bytes of ``start``
        (emptied), keeping only its ends."""
        head = _ends(start, _HEAD)
        tail = _ends(start, -_TAIL)
        start.clear()
        end = False
        while not end:
            piece, end = await self._piece()
            size += len(piece)
            tail = (tail + piece)[-_TAIL:] if len(piece) < _TAIL else piece[-_TAIL:]
            del piece  # not held while the next is read
        kept = _unterminated(tail)
        return Overlong(size - (len(tail) - len(kept)), _envelope_of_parts(head, kept))


def _ends(pieces: list[bytes], n: int) -> bytes:
    """The first ``n`` bytes of ``pieces`` put together (the last ``-n`` when ``n`` is
    negative), without joining them all."""
    out = b""
    if n >= 0:
        for piece in pieces:
            out += piece[: n - len(out)]
            if len(out) >= n:
                break
    else:
        for piece in reversed(pieces):
            out = piece[max(0, len(piece) + n + len(out)) :] + out
            if len(out) >= -n:
                break
    return out


def _unterminated(line: bytes) -> bytes:
    """``line`` without its line break (``\\n`` or ``\\r\\n``)."""
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    return line


# -- envelopes ------------------------------------------------------------------------------------


class _Keys(msgspec.Struct):
    """The envelope keys of a message, their values left raw."""

    id: msgspec.Raw = msgspec.Raw(b"")
    method: msgspec.Raw = msgspec.Raw(b"")
    result: msgspec.Raw = msgspec.Raw(b"")
    error: msgspec.Raw = msgspec.Raw(b"")


_KEYS = msgspec.json.Decoder(_Keys)
_ID: msgspec.json.Decoder[str | int | None] = msgspec.json.Decoder(str | int | None)


def envelope(data: bytes) -> Envelope:
    """What the message ``data`` is, by the JSON-RPC keys it holds (see ``Envelope``)."""
    try:
        keys = _KEYS.decode(data)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return Envelope("invalid", None)
    values = {k: bytes(getattr(keys, k)) for k in ("id", "method", "result", "error")}
    return _classify({k: v for k, v in values.items() if v})


def _classify(found: dict[str, bytes]) -> Envelope:
    """The envelope of a message whose keys ``found`` hold these raw JSON values (``b"{"`` or
    ``b"["`` where only the start of a nested value is known)."""
    id_ok, id = _read_id(found.get("id"))
    if "result" in found or "error" in found:
        return Envelope("response", id)
    method = found.get("method")
    if method is None or not method.startswith(b'"') or not id_ok:
        return Envelope("invalid", id)
    return Envelope("request" if "id" in found else "notification", id)


def _read_id(raw: bytes | None) -> tuple[bool, str | int | None]:
    """Whether a raw id is absent or of a JSON-RPC id's type, and its value."""
    if raw is None:
        return True, None
    try:
        return True, _ID.decode(raw)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return False, None


# A JSON string, and the scalars an envelope key can hold; a nested value is only its opening.
_STRING = rb'"(?:[^"\\]|\\.)*"'
_VALUE = rb"(?:" + _STRING + rb"|-?[0-9][0-9.eE+-]*|true|false|null)"
_FIRST = re.compile(rb"\s*(" + _STRING + rb")\s*:\s*(" + _VALUE + rb"|[\[{])\s*([,}]?)", re.S)
_LAST = re.compile(rb"([{,])\s*(" + _STRING + rb")\s*:\s*(" + _VALUE + rb")\s*\Z", re.S)


def _envelope_of_parts(head: bytes, tail: bytes) -> Envelope:
    """The envelope of a message known only by its first bytes ``head`` and last bytes
    ``tail``: the keys with a plain value before its first nested value, and after its last.
    Encoders write the envelope there (``{"jsonrpc", "id", "method", "params"}`` or
    ``{"result", "jsonrpc", "id"}``); a message whose keys stand elsewhere is ``invalid``."""
    found: dict[str, bytes] = {}
    text = head.lstrip()
    if text.startswith(b"{"):
        at = 1
        while (m := _FIRST.match(text, at)) is not None:
            found.setdefault(_key(m.group(1)), m.group(2))
            if m.group(2) in (b"[", b"{") or m.group(3) != b",":
                break
            at = m.end()
    text = tail.rstrip()
    if text.endswith(b"}"):
        text = text[:-1]
        while (m := _LAST.search(text)) is not None:
            found.setdefault(_key(m.group(2)), m.group(3))
            if m.group(1) == b"{":
                break
            text = text[: m.start()]
    return _classify(found)


def _key(raw: bytes) -> str:
    try:
        return str(msgspec.json.decode(raw))
    except (msgspec.DecodeError, ValueError):
        return ""
