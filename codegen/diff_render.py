"""Render a ``Diff`` for people (Markdown, from ``templates/changes.md.j2``) and for tools (JSON)."""

from __future__ import annotations

import json

import jinja2

from .diff import SECTIONS, Diff
from .emit import environment


def _cell(text: str | None, side: str | None = None, note: str | None = None) -> str:
    """One Markdown table cell: code-formatted, pipes escaped, side and note appended."""
    out = "—" if text is None else "`" + text.replace("|", "\\|") + "`"
    if side:
        out = f"{side}: {out}"
    if note:
        out += f" ({note})"
    return out


def _env() -> jinja2.Environment:
    env = environment()
    env.filters["cell"] = _cell
    return env


def markdown(d: Diff) -> str:
    """The review document: summary counts, then one table per section in a stable order."""
    sections = [
        {"title": title, "changes": d.section(key)}
        for key, title in SECTIONS.items()
        if d.section(key)
    ]
    return _env().get_template("changes.md.j2").render(d=d, summary=d.summary(), sections=sections)


def to_json(d: Diff) -> str:
    """The documented JSON shape (``docs/diff.md``), keys in a fixed order, trailing newline."""
    return json.dumps(d.as_json(), indent=2, ensure_ascii=False) + "\n"
