# The shape of generated/mcpbind/_revisions.py (generated from schema/revisions.toml), for type
# checkers: they resolve `mcpbind.*` inside this directory and do not see the generated one.
REVISIONS: tuple[str, ...]
RELEASED: tuple[str, ...]
LATEST: str
PACKAGES: dict[str, str]
SHA256: dict[str, str]
SOURCES: dict[str, str]
