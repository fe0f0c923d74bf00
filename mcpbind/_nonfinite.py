"""The guard against NaN and infinities in what a codec encodes (msgspec writes them as null,
which JSON-RPC peers read as a value): ``refuse_nonfinite`` of a message whose JSON has a null
or is too long to search in place (``SCAN_MAX``); docs/design.md, "Runtime codec"."""

from __future__ import annotations

import _thread  # not threading: its import would add to the codec's
import math
import re
from typing import Any

import msgspec

from .messages import Response

__all__ = ["SCAN_MAX", "encode_json", "refuse_nonfinite"]

_encode = msgspec.json.encode
# What the NaN guard searches in a long message: MessagePack, written into a buffer each thread
# keeps (up to _SCRATCH_MAX bytes), since a fresh megabyte costs more in page faults than to encode
_pack = msgspec.msgpack.encode
_pack_into = msgspec.msgpack.Encoder().encode_into
_BIG = 64 << 10  # from this size, into the thread's buffer (a fresh one would be mmapped)
_SCRATCH_MAX = 4 << 20


class _Scratch(_thread._local):
    def __init__(self) -> None:  # (once in each thread)
        self.buffer = bytearray()


_scratch = _Scratch()
_null = re.compile(b"null").search  # on a long message twice as fast as ``bytes.find``
SCAN_MAX = (
    512  # up to this many bytes JSON is searched for a null in place; longer: refuse_nonfinite
)
_TEXT_MIN = 1024  # longer ones may be searched as text (refuse_nonfinite)
# message or result class (with the bit length of the size, past _BIG) -> whether its last long
# message was made of structure; any result class may be encoded, so bounded by a count
_STRUCTURED: dict[Any, bool] = {}
_KINDS_MAX = 4096
_NONFINITE = re.compile(b"[\x7f\xff][\xf0-\xff]").match


def refuse_nonfinite(msg: Any, out: bytes) -> None:
    """Refuse ``msg`` if it holds NaN or an infinity, which msgspec writes as null.

    Called when the JSON ``out`` has a null, or is too long to have been searched for one in
    place. No null, no non-finite number. Two searches, each costing by what it reads
    (docs/design.md, "Runtime codec"): the JSON text for a null, by the byte; the MessagePack
    form, by the value, where every float is the byte 0xcb and its 8 bytes, found with
    ``memchr``. Structure (tool lists, schemas) is cheaper to read as text; one long string (a
    file, an image) as MessagePack. What a class's messages over 1 KiB are made of is learned
    from the MessagePack form of the first (past 64 KiB, per power-of-two size): it is shorter
    than the JSON by its quotes, colons and commas, much shorter when values are many and small.
    Only a null in the text, or a float in MessagePack whose exponent is all ones, sends the
    value to the exact walk.
    """
    n = len(out)
    if n > SCAN_MAX:
        kind: Any = None  # what it is made of is learned past _TEXT_MIN (shorter: packed)
        dense: bool | None = False
        big = False
        if n > _TEXT_MIN:
            # By class, and past 64 KiB by power-of-two size too: a result class may be small
            # structure one time and a megabyte of text the next.
            kind = type(msg.result) if type(msg) is Response else type(msg)
            big = n > _BIG
            if big:
                kind = (kind, n.bit_length())
            dense = _STRUCTURED.get(kind)
            if dense and _null(out) is None:
                return
        packed: bytes | bytearray
        try:
            if big:
                packed = _scratch.buffer
                _pack_into(msg, packed)
            else:
                packed = _pack(msg)
        except Exception:  # noqa: BLE001 - JSON holds what it may not (ints past 64 bits): walk
            at = 0
        else:
            at = packed.find(b"\xcb")
            while at >= 0 and not _NONFINITE(packed, at + 1):  # exponent all ones: not finite
                at = packed.find(b"\xcb", at + 1)
            if dense is None or dense:  # (first seen, or a null in what was structure)
                if len(_STRUCTURED) >= _KINDS_MAX:
                    _STRUCTURED.clear()
                # MessagePack under 7/8 of the JSON: many small values, cheaper to search as text
                _STRUCTURED[kind] = len(packed) * 8 < n * 7
        if big and len(_scratch.buffer) > _SCRATCH_MAX:
            _scratch.buffer = bytearray()  # the memory of the long one goes
        if at < 0:
            return
    if _nonfinite(msgspec.to_builtins(msg)):
        raise ValueError("JSON has no NaN or Infinity: the message holds a non-finite number")


def _nonfinite(value: Any) -> bool:
    if type(value) is float:
        return not math.isfinite(value)
    if type(value) is dict:
        return any(_nonfinite(v) for v in value.values())
    return type(value) is list and any(_nonfinite(v) for v in value)


def encode_json(msg: Any) -> bytes:
    """``msg`` (a message of a class no codec's tables hold: an extension's, which a session
    encodes itself) as JSON, refused as ``Codec.encode`` refuses one holding NaN or an infinity
    (``ValueError``; msgspec would write null)."""
    out = _encode(msg)
    if len(out) > SCAN_MAX or out.partition(b"null")[1]:
        refuse_nonfinite(msg, out)
    return out
