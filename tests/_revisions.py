"""Revision lists for the tests, read from the pins (the one revision order of the project)."""

import json
from pathlib import Path

from codegen.pin import pins, schema_dir

REVISIONS = [p.revision for p in pins()]
SCHEMAS = schema_dir()


def upstream_schema(revision: str) -> dict:
    from codegen.pin import load_schema

    return load_schema(revision)


def definitions(schema: dict) -> dict:
    return schema.get("$defs") or schema.get("definitions") or {}


def load_json(path: Path) -> object:
    return json.loads(path.read_bytes())
