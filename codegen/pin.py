"""Stage 1, pin: find each revision's upstream schema file and prove it is the pinned one.

The pins live in ``schema/revisions.toml``: per revision its source (a URL or the name of the
file it was pinned from), sha256, size and whether it is released. The files themselves live in
the schema directory (``MCPBIND_SCHEMA_DIR``, else ``../shared/schemas`` beside the checkout,
else a per-user cache), never in the repository. A file missing there is downloaded from its
source when that is a URL; either way its sha256 must match the pin before anything reads it.
``pin_revision`` (``mcpbind pin``) adds or re-pins a revision.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .paths import PINS_FILE, REPO_ROOT


class PinError(Exception):
    """A schema file is missing, unreadable, not an MCP schema or not the pinned one."""


_RAW_GITHUB = re.compile(r"https://raw\.githubusercontent\.com/([^/]+/[^/]+)/([0-9a-f]{40})/(.+)")
# A revision name becomes a package name (``v2025_11_25``, ``draft``), so it must make an identifier.
_REVISION_NAME = re.compile(r"\d{4}-\d{2}-\d{2}|[a-z][a-z0-9_]*")
# Definitions every MCP schema revision has; a JSON file without them is some other schema.
_MCP_DEFINITIONS = (
    "JSONRPCMessage",
    "ClientRequest",
    "ServerResult",
    "ClientCapabilities",
    "ServerCapabilities",
)


@dataclass(frozen=True)
class Pin:
    revision: str
    source: str  # the URL the file was downloaded from, or the name of the file it was read from
    sha256: str
    size: int
    released: bool
    examples: int = 0  # how many official example files were pinned beside the schema

    @property
    def url(self) -> str | None:
        """The source when it is a URL (a file missing locally is downloaded from it)."""
        return self.source if self.source.startswith(("https://", "http://")) else None

    @property
    def path(self) -> str:
        """The file's path at its source (``schema/2025-11-25/schema.json`` upstream)."""
        m = _RAW_GITHUB.fullmatch(self.source)
        return m.group(3) if m else self.source.rsplit("/", 1)[-1]

    @property
    def browse(self) -> str:
        """Where a person reads the file: the GitHub page of a raw GitHub URL, else the source."""
        m = _RAW_GITHUB.fullmatch(self.source)
        return (
            f"https://github.com/{m.group(1)}/blob/{m.group(2)}/{m.group(3)}" if m else self.source
        )


def read_pins(path: Path | None = None) -> tuple[Pin, ...]:
    """The pins recorded in ``path`` (default ``schema/revisions.toml``), in file order (the project's one revision order)."""
    data = tomllib.loads((path or PINS_FILE).read_text(encoding="utf-8"))
    return tuple(
        Pin(
            revision=r["name"],
            source=r["source"],
            sha256=r["sha256"],
            size=r["bytes"],
            released=r["released"],
            examples=r.get("examples", 0),
        )
        for r in data.get("revision", [])
    )


@cache
def pins() -> tuple[Pin, ...]:
    """Every pinned revision, oldest first."""
    return read_pins()


def pin(revision: str) -> Pin:
    for p in pins():
        if p.revision == revision:
            return p
    known = ", ".join(p.revision for p in pins())
    raise PinError(f"unknown revision {revision!r}; pinned revisions: {known}")


def _user_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcpbind" / "schemas"


def schema_dir() -> Path:
    """Where the schema files live: ``MCPBIND_SCHEMA_DIR``, else ``../shared/schemas``, else a per-user cache."""
    env = os.environ.get("MCPBIND_SCHEMA_DIR")
    if env:
        return Path(env)
    shared = REPO_ROOT.parent / "shared" / "schemas"
    return shared if shared.is_dir() else _user_cache()


def schema_file(revision: str) -> Path:
    return schema_dir() / revision / "schema.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - a URL the user pinned
        return bytes(response.read())


def _fetch(url: str, fetch: Callable[[str], bytes]) -> bytes:
    try:
        return fetch(url)
    except urllib.error.HTTPError as exc:
        raise PinError(f"cannot download {url}: HTTP {exc.code} {exc.reason}") from exc
    except (OSError, ValueError) as exc:  # URLError is an OSError; a malformed URL a ValueError
        raise PinError(f"cannot download {url}: {getattr(exc, 'reason', exc)}") from exc


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".pin-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_schema_bytes(p: Pin, fetch: Callable[[str], bytes] = _download) -> tuple[bytes, str]:
    """The verified bytes of the pinned file and where they came from.

    A file missing from the schema directory is downloaded from a URL source and stored there;
    a file pinned from a local file cannot be fetched again, so its absence is an error.
    """
    source = schema_file(p.revision)
    try:
        data = source.read_bytes()
    except FileNotFoundError:
        if p.url is None:
            raise PinError(
                f"{source}: pinned file of revision {p.revision} is missing from the schema directory "
                f"(pinned from {p.source}; pin it again with `mcpbind pin {p.revision} --file PATH --update`)"
            ) from None
        data = _fetch(p.source, fetch)
        _verify(p, data, p.source)
        _write_atomic(source, data)
    except OSError as exc:
        raise PinError(f"cannot read {source}: {exc.strerror}") from exc
    _verify(p, data, str(source))
    return data, str(source)


def _verify(p: Pin, data: bytes, where: str) -> None:
    actual = _sha256(data)
    if actual != p.sha256:
        raise PinError(
            f"{where}: sha256 mismatch for revision {p.revision}: "
            f"expected {p.sha256}, got {actual}"
        )


@cache
def load_schema(revision: str) -> dict[str, Any]:
    """The parsed, verified upstream schema of one revision (never modified in place)."""
    data, _ = read_schema_bytes(pin(revision))
    return json.loads(data)  # type: ignore[no-any-return]


# -- adding a pin ------------------------------------------------------------------------------------


def check_mcp_schema(data: bytes, where: str) -> None:
    """Raise ``PinError`` unless ``data`` is a JSON Schema with the definitions every MCP revision has."""
    try:
        schema = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PinError(f"{where}: not an MCP schema: not JSON ({exc})") from None
    defs = (schema.get("$defs") or schema.get("definitions")) if isinstance(schema, dict) else None
    if not isinstance(defs, dict):
        raise PinError(f"{where}: not an MCP schema: no $defs or definitions object")
    missing = [name for name in _MCP_DEFINITIONS if name not in defs]
    if missing:
        raise PinError(f"{where}: not an MCP schema: no definition {', '.join(missing)}")


def _example_files(directory: Path) -> list[Path]:
    """The official examples: ``<Type>/<name>.json`` files under ``directory``."""
    return sorted(directory.glob("*/*.json"))


def _copy_examples(directory: Path, target: Path) -> int:
    files = _example_files(directory)
    if not files:
        raise PinError(f"{directory}: no examples (<Type>/<name>.json files) found")
    for f in files:
        try:
            json.loads(f.read_bytes())
        except (OSError, ValueError) as exc:
            raise PinError(f"{f}: example is not readable JSON ({exc})") from None
    if target.exists():
        shutil.rmtree(target)
    for f in files:
        dest = target / f.parent.name / f.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, dest)
    return len(files)


def _insert(existing: list[Pin], new: Pin) -> list[Pin]:
    """``existing`` with ``new`` in place: a re-pin stays where it was; a dated revision goes before
    the first later or undated one (so ``draft`` stays last); an undated one goes last."""
    names = [p.revision for p in existing]
    if new.revision in names:
        return [new if p.revision == new.revision else p for p in existing]
    if not new.revision[:1].isdigit():
        return [*existing, new]
    at = next(
        (
            i
            for i, p in enumerate(existing)
            if not p.revision[:1].isdigit() or p.revision > new.revision
        ),
        len(existing),
    )
    return [*existing[:at], new, *existing[at:]]


_HEADER = """\
# Pinned upstream schemas, one table per revision, oldest first; written by `mcpbind pin`.
# The files live in the schema directory (MCPBIND_SCHEMA_DIR, else ../shared/schemas, else a
# per-user cache), never in the repository; the generator refuses a file whose sha256 differs.
# This order is the one revision order of the project: everything else reads it from here.
"""


def render_pins(ps: list[Pin]) -> str:
    out = [_HEADER]
    for p in ps:
        out.append("\n[[revision]]\n")
        out.append(f"name = {json.dumps(p.revision)}\n")
        out.append(f"source = {json.dumps(p.source)}\n")
        out.append(f"sha256 = {json.dumps(p.sha256)}\n")
        out.append(f"bytes = {p.size}\n")
        out.append(f"released = {'true' if p.released else 'false'}\n")
        if p.examples:
            out.append(f"examples = {p.examples}\n")
    return "".join(out)


def pin_revision(
    revision: str,
    *,
    url: str | None = None,
    file: Path | None = None,
    examples: Path | None = None,
    released: bool | None = None,
    update: bool = False,
    pins_file: Path | None = None,
    fetch: Callable[[str], bytes] = _download,
) -> Pin:
    """Fetch or read a revision's schema, check it, store it in the schema directory and record its pin.

    ``released`` defaults to whether the name is a date. Re-pinning a pinned revision needs ``update``.
    """
    if (url is None) == (file is None):
        raise PinError("give exactly one of --url or --file")
    if not _REVISION_NAME.fullmatch(revision):
        raise PinError(
            f"{revision!r} is not a revision name (YYYY-MM-DD, or lower-case letters like draft)"
        )
    pins_file = pins_file or PINS_FILE
    existing = list(read_pins(pins_file))
    pinned = any(p.revision == revision for p in existing)
    if pinned and not update:
        raise PinError(f"{revision} is already pinned; pass --update to re-pin it")
    if update and not pinned:
        raise PinError(f"{revision} is not pinned yet; drop --update to pin it")
    if url is not None:
        data, source = _fetch(url, fetch), url
    else:
        assert file is not None
        try:
            data = file.read_bytes()
        except OSError as exc:
            raise PinError(f"cannot read {file}: {exc.strerror}") from exc
        source = file.name
    check_mcp_schema(data, source if url else str(file))
    target = schema_file(revision)
    if target.is_file() and target.read_bytes() != data and not update:
        raise PinError(
            f"{target} already holds another file for {revision}; pass --update to replace it"
        )
    count = _copy_examples(examples, target.parent / "examples") if examples is not None else 0
    if examples is None and update:
        count = next(p.examples for p in existing if p.revision == revision)
    _write_atomic(target, data)
    new = Pin(
        revision=revision,
        source=source,
        sha256=_sha256(data),
        size=len(data),
        released=revision[:1].isdigit() if released is None else released,
        examples=count,
    )
    _write_atomic(pins_file, render_pins(_insert(existing, new)).encode("utf-8"))
    pins.cache_clear()
    load_schema.cache_clear()
    return new
