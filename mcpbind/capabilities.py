"""Capability checks: does a capabilities object advertise a dotted path, and what is missing.

Both functions take a generated ``ClientCapabilities`` / ``ServerCapabilities`` Struct of any
revision or the plain JSON object (dict) a peer sent. Rules:

- a path is advertised when every key on it is present with a value that is not ``null`` or
  ``false`` (``{"resources": {"subscribe": true}}`` advertises ``resources.subscribe``), so a
  sub-capability implies its parent;
- a bare ``elicitation: {}`` (no ``form`` and no ``url``) means form mode only;
- ``experimental`` and ``extensions`` are maps of names to settings: ``experimental.<name>``
  is advertised by the presence of the key ``<name>``, whatever its value, and names keep their
  dots (``extensions.io.modelcontextprotocol/tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from ._support import dec_hook

__all__ = ["missing_capabilities", "supports"]

_MAPS = frozenset({"experimental", "extensions"})
_MODES = ("form", "url")
T = TypeVar("T")


def _plain(caps: Any) -> Any:
    if caps is None or isinstance(caps, dict):
        return caps
    return msgspec.to_builtins(caps)


def _split(path: str | Sequence[str]) -> list[str]:
    if not isinstance(path, str):
        return list(path)
    parts = path.split(".")
    if parts[0] in _MAPS and len(parts) > 2:
        return [parts[0], ".".join(parts[1:])]
    return parts


def _present(value: Any) -> bool:
    return value is not None and value is not False


def supports(caps: Any, path: str | Sequence[str]) -> bool:
    """Whether ``caps`` advertises the dotted capability ``path`` (``"sampling.tools"``)."""
    node = _plain(caps)
    keys = _split(path)
    for i, key in enumerate(keys):
        if not isinstance(node, dict):
            return False
        if (
            key in _MODES
            and i > 0
            and keys[i - 1] == "elicitation"
            and not any(m in node for m in _MODES)
        ):
            # A bare `elicitation: {}` declares form mode only.
            return key == "form"
        if key not in node or not _present(node[key]):
            return False
        node = node[key]
    return True


def _missing(required: Any, declared: Any, parent: str | None) -> Any:
    if not isinstance(required, dict):
        # A leaf requirement (`true`, a setting): met by any advertised value.
        return None if _present(declared) else required
    if not isinstance(declared, dict):
        return required if _present(required) or not _present(declared) else None
    out: dict[str, Any] = {}
    for key, want in required.items():
        if want is None or want is False:
            continue  # nothing required
        if parent in _MAPS:
            if key not in declared:
                out[key] = want
            continue
        if parent == "elicitation" and key in _MODES and not any(m in declared for m in _MODES):
            if key == "url":
                out[key] = want
            continue
        if key not in declared or not _present(declared[key]):
            out[key] = want
            continue
        sub = _missing(want, declared[key], key)
        if sub is not None:
            out[key] = sub
    return out or None


def missing_capabilities(required: T, declared: Any) -> T | None:
    """The capabilities object holding exactly the requirements ``declared`` does not meet.

    ``None`` when every requirement is met. The result has the type of ``required`` (a generated
    capabilities Struct, or a dict): it is the ``requiredCapabilities`` payload of the
    missing-required-client-capability error.
    """
    want = _plain(required)
    have = _plain(declared) or {}
    if not isinstance(want, Mapping):
        raise TypeError(f"required capabilities must be an object, not {type(required).__name__}")
    out = _missing(dict(want), have, None)
    if out is None:
        return None
    if isinstance(required, dict) or required is None:
        return out  # type: ignore[no-any-return]
    return msgspec.convert(out, type(required), dec_hook=dec_hook)
