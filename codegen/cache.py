"""A fingerprint of everything generation reads, so that a regeneration with nothing new is a no-op.

The fingerprint covers the pins (and so, through their sha256, the schema files), the overlay,
the templates, the generator's own source and the versions of the tools that shape the output.
It is stored with the sha256 of every file the last full generation wrote; when both still
match, the committed output is what generation would produce, and nothing needs rendering.
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib.metadata import version
from pathlib import Path

from .extensions import EXTENSIONS_FILE
from .paths import CACHE_DIR, OVERLAY_FILE, PINS_FILE, REPO_ROOT, TEMPLATES_DIR

STAMP = CACHE_DIR.parent / "generate.json"
_TOOLS = ("black", "jinja2", "libcst", "msgspec")


def fingerprint() -> str:
    h = hashlib.sha256()
    inputs = [
        PINS_FILE,
        EXTENSIONS_FILE,
        OVERLAY_FILE,
        *sorted(p for p in TEMPLATES_DIR.glob("*") if p.is_file()),  # (not surface/: its own)
        *sorted(Path(__file__).parent.glob("*.py")),
    ]
    for path in inputs:
        h.update(str(path.relative_to(REPO_ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    for tool in _TOOLS:
        h.update(f"{tool}={version(tool)}\0".encode())
    h.update(sys.version.encode())
    return h.hexdigest()


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def up_to_date() -> bool:
    """True when the inputs and every output are exactly as the last full generation left them."""
    try:
        stamp = json.loads(STAMP.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if stamp.get("fingerprint") != fingerprint():
        return False
    outputs: dict[str, str] = stamp.get("outputs", {})
    return bool(outputs) and all(
        _digest(REPO_ROOT / rel) == digest for rel, digest in outputs.items()
    )


def record(files: dict[Path, str]) -> None:
    """Remember the inputs and outputs of a full generation."""
    outputs = {
        str(path.relative_to(REPO_ROOT)): hashlib.sha256(text.encode("utf-8")).hexdigest()
        for path, text in files.items()
    }
    STAMP.parent.mkdir(parents=True, exist_ok=True)
    STAMP.write_text(
        json.dumps({"fingerprint": fingerprint(), "outputs": outputs}, indent=1), encoding="utf-8"
    )
