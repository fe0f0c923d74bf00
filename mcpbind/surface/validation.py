"""A server's own JSON Schemas checked by ``jsonschema`` (the ``surface`` extra), in the dialect
each declares or its revision defaults to; what is wrong named by its JSON path.

Used where no generated type says all of a schema: by ``Guard`` for every schema, and by the
generated packages for the parts of a schema msgspec cannot say (docs/surface.md). No reference
is ever fetched: a ``$ref`` to another document is an error."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .canonical import MissingExtra

__all__ = ["Checker", "json_path"]


def _jsonschema() -> Any:
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError:
        raise MissingExtra("jsonschema") from None
    return jsonschema


def json_path(where: str, path: Iterable[Any]) -> str:
    """``$.arguments.city``, ``$.items[2]`` (keys that are not identifiers quoted)."""
    out = [where]
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif isinstance(part, str) and part.isidentifier():
            out.append(f".{part}")
        else:
            out.append(f"[{part!r}]")
    return "".join(out)


class Checker:
    """One schema, ready to check instances against (built once: compiling a schema costs far
    more than checking one instance)."""

    def __init__(self, schema: Mapping[str, Any] | bool, dialect: str) -> None:
        jsonschema = _jsonschema()
        default = jsonschema.validators.validator_for({"$schema": dialect}, default=None)
        if default is None:
            raise ValueError(f"unknown JSON Schema dialect {dialect!r}")
        cls = (
            jsonschema.validators.validator_for(schema, default=default)
            if isinstance(schema, Mapping)
            else default
        )
        self.schema = schema
        self.dialect = dialect
        self._validator = cls(schema)
        self._best_match = jsonschema.exceptions.best_match

    def error(self, instance: Any, where: str = "$") -> str | None:
        """Why ``instance`` is not valid (its JSON path first), or None when it is."""
        try:
            found = self._best_match(self._validator.iter_errors(instance))
        except Exception as exc:  # an unresolvable $ref, an invalid pattern: the schema's fault
            return f"{where}: the schema cannot be applied ({type(exc).__name__}: {exc})"
        if found is None:
            return None
        return f"{json_path(where, found.absolute_path)}: {found.message}"

    def valid(self, instance: Any) -> bool:
        try:
            return bool(self._validator.is_valid(instance))
        except Exception:
            return False
