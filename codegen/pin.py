"""Stage 1, pin: find each revision's upstream schema file and prove it is the pinned one.

The pins live in ``schema/revisions.toml``. A schema file is read from the schema
directory (``MCPBIND_SCHEMA_DIR``, else ``../shared/schemas`` beside the checkout), or
downloaded at the pinned commit into a git-ignored cache; either way its sha256 must
match the pin before anything reads it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .paths import CACHE_DIR, PINS_FILE, REPO_ROOT


class PinError(Exception):
    """A schema file is missing, unreadable or not the pinned one."""


@dataclass(frozen=True)
class Pin:
    revision: str
    upstream: str
    commit: str
    path: str
    sha256: str
    released: bool

    @property
    def url(self) -> str:
        owner_repo = self.upstream.removeprefix("https://github.com/")
        return f"https://raw.githubusercontent.com/{owner_repo}/{self.commit}/{self.path}"


@cache
def pins() -> tuple[Pin, ...]:
    """Every pinned revision, oldest first."""
    data = tomllib.loads(PINS_FILE.read_text(encoding="utf-8"))
    return tuple(
        Pin(
            revision=r["name"],
            upstream=data["upstream"],
            commit=data["commit"],
            path=r["path"],
            sha256=r["sha256"],
            released=r["released"],
        )
        for r in data["revision"]
    )


def pin(revision: str) -> Pin:
    for p in pins():
        if p.revision == revision:
            return p
    known = ", ".join(p.revision for p in pins())
    raise PinError(f"unknown revision {revision!r}; pinned revisions: {known}")


def schema_dir() -> Path | None:
    """The local schema directory, or None when schemas must be downloaded."""
    env = os.environ.get("MCPBIND_SCHEMA_DIR")
    if env:
        return Path(env)
    shared = REPO_ROOT.parent / "shared" / "schemas"
    return shared if shared.is_dir() else None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310 - pinned https URL
        return bytes(response.read())


def read_schema_bytes(p: Pin, fetch: Callable[[str], bytes] = _download) -> tuple[bytes, str]:
    """The verified bytes of the pinned file and where they came from."""
    local = schema_dir()
    if local is not None:
        source = local / p.revision / "schema.json"
        try:
            data = source.read_bytes()
        except OSError as exc:
            raise PinError(f"cannot read {source}: {exc.strerror}") from exc
    else:
        source = CACHE_DIR / p.commit / p.path
        if source.is_file() and _sha256(source.read_bytes()) == p.sha256:
            data = source.read_bytes()
        else:
            try:
                data = fetch(p.url)
            except OSError as exc:
                raise PinError(f"cannot download {p.url}: {exc}") from exc
            _verify(p, data, p.url)
            source.parent.mkdir(parents=True, exist_ok=True)
            source.write_bytes(data)
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
