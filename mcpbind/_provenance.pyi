# The shape of generated/mcpbind/_provenance.py, for type checkers (see _revisions.pyi).
TYPES: dict[str, tuple[str, ...]]
FIELDS: dict[str, dict[str, tuple[str, ...]]]
