"""Capability checks: does a capabilities object advertise a dotted path, and what is missing.

Both functions take a generated ``ClientCapabilities`` / ``ServerCapabilities`` Struct of any
revision or the plain JSON object (dict) a peer sent (read with the rules of ``revision``, by
default the newest released one). Rules:

- a path is advertised when every key on it is present with a value that is not ``null`` or
  ``false`` (``{"resources": {"subscribe": true}}`` advertises ``resources.subscribe``), so a
  sub-capability implies its parent;
- a bare capability object declares what the revision's ``FACTS.capability_implied`` says
  (``elicitation: {}`` is form mode only);
- the capabilities in ``FACTS.capability_names`` (``experimental``, ``extensions``) are maps of
  names to settings: ``experimental.<name>`` is advertised by the presence of the key ``<name>``,
  whatever its value, and names keep their dots (``extensions.io.modelcontextprotocol/tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from ._support import dec_hook

__all__ = ["missing_capabilities", "supports"]

T = TypeVar("T")


def _facts(caps: Any, revision: str | None) -> Any:
    """The facts record of the revision whose rules read ``caps``."""
    from . import bindings
    from ._revisions import LATEST, PACKAGES

    if revision is None:
        package = type(caps).__module__.split(".")[1:2]
        by_package = {p: r for r, p in PACKAGES.items()}
        revision = by_package.get(package[0], LATEST) if package else LATEST
    return bindings(revision).FACTS


def _plain(caps: Any) -> Any:
    if caps is None or isinstance(caps, dict):
        return caps
    return msgspec.to_builtins(caps)


def _split(path: str | Sequence[str], names: tuple[str, ...]) -> list[str]:
    if not isinstance(path, str):
        return list(path)
    parts = path.split(".")
    if parts[0] in names and len(parts) > 2:
        return [parts[0], ".".join(parts[1:])]
    return parts


def _present(value: Any) -> bool:
    return value is not None and value is not False


def _with_implied(node: Any, implied: Any) -> Any:
    """``node`` as read: an object with none of its sub-capabilities declares what its revision
    says such an object implies."""
    if isinstance(node, dict) and implied and not any(k in node for k in implied[0]):
        return {**node, **implied[1]}
    return node


def supports(caps: Any, path: str | Sequence[str], revision: str | None = None) -> bool:
    """Whether ``caps`` advertises the dotted capability ``path`` (``"sampling.tools"``)."""
    facts = _facts(caps, revision)
    node = _plain(caps)
    keys = _split(path, facts.capability_names)
    for i, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node or not _present(node[key]):
            return False
        node = _with_implied(node[key], facts.capability_implied.get(key) if i == 0 else None)
    return True


def _missing(required: Any, declared: Any, parent: str | None, facts: Any) -> Any:
    if not isinstance(required, dict):
        # A leaf requirement (`true`, a setting): met by any advertised value.
        return None if _present(declared) else required
    if not isinstance(declared, dict):
        return required if _present(required) or not _present(declared) else None
    out: dict[str, Any] = {}
    for key, want in required.items():
        if want is None or want is False:
            continue  # nothing required
        if parent in facts.capability_names:
            if key not in declared:
                out[key] = want
            continue
        if key not in declared or not _present(declared[key]):
            out[key] = want
            continue
        have = _with_implied(
            declared[key], facts.capability_implied.get(key) if parent is None else None
        )
        sub = _missing(want, have, key, facts)
        if sub is not None:
            out[key] = sub
    return out or None


def missing_capabilities(required: T, declared: Any, revision: str | None = None) -> T | None:
    """The capabilities object holding exactly the requirements ``declared`` does not meet.

    ``None`` when every requirement is met. The result has the type of ``required`` (a generated
    capabilities Struct, or a dict): it is the ``requiredCapabilities`` payload of the
    missing-required-client-capability error.
    """
    want = _plain(required)
    have = _plain(declared) or {}
    if not isinstance(want, Mapping):
        raise TypeError(f"required capabilities must be an object, not {type(required).__name__}")
    out = _missing(dict(want), have, None, _facts(required, revision))
    if out is None:
        return None
    if isinstance(required, dict) or required is None:
        return out  # type: ignore[no-any-return]
    return msgspec.convert(out, type(required), dec_hook=dec_hook)
