"""The digest of a definition: sha256 of its RFC 8785 canonical JSON (the JSON Canonicalization
Scheme, by the ``rfc8785`` package of the ``surface`` extra)."""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["MissingExtra", "canonical", "digest"]

# RFC 8785 writes numbers as IEEE 754 doubles; integers beyond this magnitude are not exact there,
# and the rfc8785 package refuses them, so they are hashed as the double a JSON parser reads.
_EXACT = 2**53 - 1


class MissingExtra(ImportError):
    """A part of ``mcpbind.surface`` needs a package of the ``surface`` extra."""

    def __init__(self, module: str) -> None:
        super().__init__(
            f'mcpbind surface needs {module} (missing): pip install "mcpbind[surface]"',
            name=module,
        )


def _jcs() -> Any:
    try:
        import rfc8785
    except ImportError:
        raise MissingExtra("rfc8785") from None
    return rfc8785


def _doubles(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value) if not -_EXACT <= value <= _EXACT else value
    if isinstance(value, dict):
        return {k: _doubles(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_doubles(v) for v in value]
    return value


def canonical(value: Any) -> bytes:
    """The RFC 8785 canonical JSON of a JSON value (dicts, lists, str, int, float, bool, None)."""
    jcs = _jcs()
    try:
        data: bytes = jcs.dumps(value)
    except jcs.IntegerDomainError:
        data = jcs.dumps(_doubles(value))
    return data


def digest(value: Any) -> str:
    """The hex sha256 of ``canonical(value)``."""
    return hashlib.sha256(canonical(value)).hexdigest()
