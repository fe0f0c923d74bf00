"""Where the generator finds its inputs and writes its output."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PINS_FILE = REPO_ROOT / "schema" / "revisions.toml"
OVERLAY_FILE = REPO_ROOT / "schema" / "overlay.toml"
TEMPLATES_DIR = REPO_ROOT / "templates"
GENERATED_DIR = REPO_ROOT / "generated" / "mcpbind"
CHANGES_DIR = REPO_ROOT / "docs" / "changes"
CACHE_DIR = REPO_ROOT / ".cache" / "schemas"


def package_name(revision: str) -> str:
    """The generated package of a revision: ``2025-11-25`` -> ``v2025_11_25``, ``draft`` -> ``draft``."""
    return revision if not revision[:1].isdigit() else "v" + revision.replace("-", "_")
