"""A server's surface, and its lock file: every tool, prompt, resource and resource template as
the server sent it, each with the sha256 of its RFC 8785 canonical JSON and the JSON Schema
dialect of each of its schemas (docs/surface.md, "The lock file").

The file is JSON with sorted keys, two-space indents and a final newline, so that the same
surface always writes the same bytes and a review sees only what changed."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._revisions import REVISIONS
from .canonical import digest
from .kinds import KINDS, Speech, speech

__all__ = ["FORMAT", "MAX_ITEMS", "Item", "Lock", "LockError", "item_of"]

FORMAT = "mcpbind-surface-lock/1"
MAX_ITEMS = 100_000  # items of one kind a surface may hold (read, locked or guarded)


class LockError(ValueError):
    """A lock file that cannot be read, or a surface that cannot be locked: names the file (or
    the item) and why."""


@dataclass(frozen=True)
class Item:
    """One item of a surface: its kind, the name it is used by (a tool's or prompt's name, a
    resource's URI, a template's URI template), its whole definition as received, the sha256
    of that definition's canonical JSON, and the dialect of each schema it holds."""

    kind: str
    name: str
    definition: Mapping[str, Any]
    sha256: str
    dialects: Mapping[str, str] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``tool 'echo'``: how reports name it."""
        return f"{self.kind.replace('_', ' ')} {self.name!r}"


def item_of(kind: str, definition: Mapping[str, Any], sp: Speech) -> Item:
    """The item ``definition`` (a JSON object as received) of ``kind``, in revision ``sp``.
    Raises ``LockError`` when it has no name of the right type."""
    k = sp.kinds[kind]
    name = definition.get(k.id_key)
    if not isinstance(name, str):
        raise LockError(f"a {kind.replace('_', ' ')} without a string {k.id_key!r}: {definition!r}")
    dialects: dict[str, str] = {}
    if kind == "tool":
        for attribute in ("input_schema", "output_schema"):
            key = sp.tool_keys.get(attribute)
            schema = definition.get(key) if key is not None else None
            if isinstance(schema, dict):
                declared = schema.get("$schema")
                dialects[key or ""] = declared if isinstance(declared, str) else sp.dialect
    return Item(kind, name, dict(definition), digest(definition), dialects)


@dataclass
class Lock:
    """A surface: the server's revision and info, and its items by kind and name. ``path`` is the
    file it was read from (None for a live surface)."""

    revision: str
    server: Mapping[str, Any]
    items: dict[str, dict[str, Item]]
    instructions: str | None = None
    path: str | None = None

    def __iter__(self) -> Iterator[Item]:
        for kind in KINDS:
            for name in sorted(self.items.get(kind, {})):
                yield self.items[kind][name]

    def get(self, kind: str, name: str) -> Item | None:
        return self.items.get(kind, {}).get(name)

    def __len__(self) -> int:
        return sum(len(v) for v in self.items.values())

    @property
    def where(self) -> str:
        """How reports name this surface: its file, or "the live surface"."""
        return self.path if self.path is not None else "the live surface"

    def digest(self) -> str:
        """The sha256 of everything the lock approves (the revision, the server, its
        instructions and every item's digest), from the items' digests."""
        return digest(
            {
                "revision": self.revision,
                "server": dict(self.server),
                "instructions": self.instructions,
                "items": {k: {n: i.sha256 for n, i in v.items()} for k, v in self.items.items()},
            }
        )

    # -- the file -----------------------------------------------------------------------------

    def to_json(self) -> str:
        """The lock file's text."""
        body: dict[str, Any] = {
            "format": FORMAT,
            "revision": self.revision,
            "server": dict(self.server),
            "items": {
                kind: {
                    name: {
                        "sha256": item.sha256,
                        **({"dialects": dict(item.dialects)} if item.dialects else {}),
                        "definition": item.definition,
                    }
                    for name, item in self.items.get(kind, {}).items()
                }
                for kind in KINDS
            },
        }
        if self.instructions is not None:
            body["instructions"] = self.instructions
        return json.dumps(body, sort_keys=True, indent=2, ensure_ascii=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the lock file (atomically: a reader sees the old file or the new one)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(self.to_json(), encoding="utf-8")
        os.replace(tmp, target)
        self.path = str(target)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> Lock:
        """The lock in file ``path``; ``LockError`` naming the file and what is wrong with it."""
        where = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise LockError(f"{where}: cannot read the lock: {exc}") from None
        return cls.loads(text, where)

    @classmethod
    def loads(cls, text: str, where: str = "<lock>") -> Lock:
        """The lock in ``text`` (the file's content); ``where`` names it in errors."""
        try:
            body = json.loads(text)
        except ValueError as exc:
            raise LockError(f"{where}: not JSON: {exc}") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            found = body.get("format") if isinstance(body, dict) else None
            raise LockError(f"{where}: not a {FORMAT} lock (format {found!r})")
        revision = body.get("revision")
        if revision not in REVISIONS:
            raise LockError(
                f"{where}: revision {revision!r} is not one mcpbind knows ({', '.join(REVISIONS)})"
            )
        server, instructions = body.get("server", {}), body.get("instructions")
        if not isinstance(server, dict) or not isinstance(instructions, str | None):
            raise LockError(f"{where}: 'server' must be an object and 'instructions' a string")
        groups = body.get("items")
        if not isinstance(groups, dict) or set(groups) - set(KINDS):
            raise LockError(f"{where}: 'items' must be an object with the keys {', '.join(KINDS)}")
        items: dict[str, dict[str, Item]] = {}
        kinds = speech(revision).kinds
        for kind in KINDS:
            items[kind] = {}
            for name, entry in (groups.get(kind) or {}).items():
                item = items[kind][name] = _entry(kind, name, entry, where)
                named = item.definition.get(kinds[kind].id_key) if kind in kinds else name
                if named != name:
                    raise LockError(
                        f"{where}: items.{kind}[{name!r}] holds the definition of {named!r}"
                    )
        return cls(revision, server, items, instructions, where)


def _entry(kind: str, name: str, entry: Any, where: str) -> Item:
    at = f"{where}: items.{kind}[{name!r}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("definition"), dict):
        raise LockError(f"{at}: an object with 'sha256' and 'definition' was expected")
    definition, sha = entry["definition"], entry.get("sha256")
    dialects = entry.get("dialects", {})
    if not isinstance(dialects, dict) or not all(isinstance(v, str) for v in dialects.values()):
        raise LockError(f"{at}: 'dialects' must map schema keys to dialect URIs")
    actual = digest(definition)
    if sha != actual:
        # A lock is written only by `mcpbind surface lock`: an edited definition is refused, so
        # that what was approved is what is enforced.
        raise LockError(
            f"{at}: sha256 {sha!r} is not the digest of its definition ({actual}); the lock was "
            "edited by hand: lock the server again"
        )
    return Item(kind, name, definition, actual, dialects)
