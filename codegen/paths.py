"""Where the generator finds its inputs and writes its output."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_HERE = Path(__file__).resolve().parent
# In a checkout the pins and templates are top-level folders; an installed wheel carries them
# inside this package (pyproject.toml's force-include), and caches downloads in the user's cache.
INSTALLED = not (REPO_ROOT / "schema" / "revisions.toml").is_file() and (_HERE / "_schema").is_dir()
SCHEMA_DIR = _HERE / "_schema" if INSTALLED else REPO_ROOT / "schema"
PINS_FILE = SCHEMA_DIR / "revisions.toml"
OVERLAY_FILE = SCHEMA_DIR / "overlay.toml"
TEMPLATES_DIR = _HERE / "_templates" if INSTALLED else REPO_ROOT / "templates"
GENERATED_DIR = REPO_ROOT / "generated" / "mcpbind"
CHANGES_DIR = REPO_ROOT / "docs" / "changes"
CACHE_DIR = (Path.home() / ".cache" / "mcpbind" if INSTALLED else REPO_ROOT / ".cache") / "schemas"


def package_name(revision: str) -> str:
    """The generated package of a revision: ``2025-11-25`` -> ``v2025_11_25``, ``draft`` -> ``draft``."""
    return revision if not revision[:1].isdigit() else "v" + revision.replace("-", "_")
