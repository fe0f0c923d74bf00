"""``WWW-Authenticate`` challenges (RFC 9110 section 11.6.1), read and written."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["Challenge", "parse_challenges", "render_challenge"]

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_SCHEME = re.compile(rf"[\s,]*({_TOKEN})(?=\s|,|$)")
_PARAM = re.compile(rf'[\s,]*({_TOKEN})\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]*)')
# A challenge header longer than this is not read (a peer could send megabytes of it).
MAX_HEADER = 8192


@dataclass
class Challenge:
    """One challenge: its scheme (``Bearer``, ``DPoP``...) and its parameters, names lowered."""

    scheme: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def scopes(self) -> list[str]:
        """The ``scope`` parameter, split on spaces (empty when absent)."""
        return self.params.get("scope", "").split()


def parse_challenges(header: str | None) -> list[Challenge]:
    """Every challenge of a ``WWW-Authenticate`` value, in order; what cannot be read is
    skipped (a challenge is advice, and a wrong one must not stop the others)."""
    if not header or len(header) > MAX_HEADER:
        return []
    out: list[Challenge] = []
    pos = 0
    while pos < len(header):
        scheme = _SCHEME.match(header, pos)
        if scheme is None:
            break
        challenge = Challenge(scheme.group(1))
        pos = scheme.end()
        while (param := _PARAM.match(header, pos)) is not None:
            value = param.group(2)
            if value.startswith('"'):
                value = re.sub(r"\\(.)", r"\1", value[1:-1])
            challenge.params[param.group(1).lower()] = value
            pos = param.end()
        out.append(challenge)
    return out


def render_challenge(scheme: str, params: dict[str, str]) -> str:
    """A challenge as a header value, every parameter quoted."""
    parts = []
    for name, value in params.items():
        quoted = value.replace("\\", "\\\\").replace('"', '\\"')
        parts.append(f'{name}="{quoted}"')
    return f"{scheme} {', '.join(parts)}" if parts else scheme
