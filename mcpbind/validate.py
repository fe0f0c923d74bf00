"""Check a JSON-RPC transcript (JSON Lines) against one revision: ``mcpbind validate``.

Plain runtime code (msgspec only); the click command in ``codegen/cli.py`` is a thin wrapper.
Each line is decoded by the codec of the side that would receive it (a request the server
receives, a response the client receives, ...); a request teaches the other side's codec the
method of its id, so responses decode to their precise result type. ``strict`` also walks the
decoded value beside the raw JSON and reports every key the revision does not define there,
with the revisions that do define it (from the generated field provenance).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from .codec import Codec, ErrorResponse, Request, Response
from .errors import ProtocolError
from .projection import revision_of

__all__ = ["Finding", "validate_lines"]


class Finding(msgspec.Struct, frozen=True):
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def _provenance() -> tuple[dict[str, tuple[str, ...]], dict[str, dict[str, tuple[str, ...]]]]:
    from ._provenance import FIELDS, TYPES

    return TYPES, FIELDS


def validate_lines(lines: Iterable[str], revision: str, *, strict: bool = False) -> Iterator[Finding]:
    """The findings for a transcript, one message a line (blank lines are skipped)."""
    codecs = {"server": Codec(revision, role="server"), "client": Codec(revision, role="client")}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        decoded, errors = None, []
        for role in ("server", "client"):
            try:
                decoded = codecs[role].decode(line)
            except ProtocolError as exc:
                errors.append(f"as received by the {role}: {exc.code} {exc.message}")
                continue
            other = codecs["client" if role == "server" else "server"]
            msg = decoded.message if isinstance(decoded, Request) else decoded
            if getattr(msg, "id", None) is not None and hasattr(msg, "method") and hasattr(type(msg), "method"):
                other.expect(msg.id, msg.method)
            elif isinstance(decoded, Request):
                other.expect(decoded.id, decoded.method)
            break
        if decoded is None:
            yield Finding(number, f"does not decode under {revision}: " + "; ".join(errors))
            continue
        if strict:
            raw = json.loads(line)
            for message in _undefined_keys(raw, decoded, revision, "$"):
                yield Finding(number, message)


def _undefined_keys(raw: Any, obj: Any, revision: str, path: str) -> Iterator[str]:
    if isinstance(obj, Request):
        yield from _undefined_keys(raw, obj.message, revision, path)
        return
    if isinstance(obj, Response):
        if isinstance(raw, dict) and "result" in raw:
            yield from _undefined_keys(raw["result"], obj.result, revision, path + ".result")
        return
    if isinstance(obj, ErrorResponse):
        return
    if isinstance(obj, list) and isinstance(raw, list):
        for i, (r, o) in enumerate(zip(raw, obj, strict=False)):
            yield from _undefined_keys(r, o, revision, f"{path}[{i}]")
        return
    if not isinstance(obj, msgspec.Struct) or not isinstance(raw, dict):
        return
    try:
        revision_of(obj)
    except TypeError:
        return
    info = msgspec.structs.fields(type(obj))
    by_wire = {f.encode_name: f.name for f in info}
    tag_field = type(obj).__struct_config__.tag_field
    types, fields = _provenance()
    name = type(obj).__name__.rstrip("_")
    for key, value in raw.items():
        if key in by_wire:
            yield from _undefined_keys(value, getattr(obj, by_wire[key]), revision, _join(path, key))
        elif key == tag_field or (key in ("jsonrpc", "id") and path == "$"):
            continue  # the tag is a class attribute; the envelope keys belong to JSON-RPC
        else:
            where = fields.get(name, {}).get(key, ())
            known = f" (defined by {name} in {', '.join(where)})" if where else ""
            yield f"{_join(path, key)}: {name} in {revision} does not define {key!r}{known}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if key.isidentifier() else f"{path}[{json.dumps(key)}]"
