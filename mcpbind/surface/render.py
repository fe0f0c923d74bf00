"""A surface review as markdown (for people) or JSON (for tools, format ``mcpbind.surface-diff/1``,
docs/surface.md)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from .compare import Change, Report

__all__ = ["FORMAT", "markdown", "to_json"]

FORMAT = "mcpbind.surface-diff/1"


def _side(report: Report, which: str) -> dict[str, Any]:
    lock = report.old if which == "old" else report.new
    return {"where": lock.where, "revision": lock.revision, "server": dict(lock.server)}


def to_json(report: Report) -> str:
    changes = report.changes
    body = {
        "format": FORMAT,
        "from": _side(report, "old"),
        "to": _side(report, "new"),
        "summary": {
            "total": len(changes),
            "breaking": sum(c.breaking for c in changes),
            "drifted": report.drifted,
            "by_kind": dict(Counter(c.kind for c in changes)),
        },
        "changes": [c.to_dict() for c in changes],
    }
    return json.dumps(body, indent=2, ensure_ascii=False, default=str) + "\n"


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split()).replace("|", "\\|").replace("`", "'")
    if len(text) > 120:
        text = text[:117] + "..."
    return f"`{text}`"


def _row(c: Change) -> str:
    breaks = "**yes**" if c.breaking else ""
    path = f"`{c.path}`" if c.path else ""
    return f"| {c.kind} | {c.label} | {path} | {_cell(c.before)} | {_cell(c.after)} | {breaks} |"


def markdown(report: Report) -> str:
    old, new = report.old, report.new
    changes = report.changes
    lines = [
        f"# Surface changes: {old.where} -> {new.where}",
        "",
        f"Server {_cell(old.server.get('name'))} {_cell(old.server.get('version'))} "
        f"({old.revision}) -> {_cell(new.server.get('name'))} {_cell(new.server.get('version'))} "
        f"({new.revision}).",
        "",
    ]
    if not changes:
        lines.append("No changes: the surfaces are the same.")
        return "\n".join(lines) + "\n"
    breaking = sum(c.breaking for c in changes)
    lines += [
        f"{len(changes)} changes, {breaking} breaking for a caller"
        + ("; the surface drifted from the lock." if report.drifted else "."),
        "",
        "| kind | count |",
        "| --- | ---: |",
        *(f"| `{k}` | {n} |" for k, n in Counter(c.kind for c in changes).items()),
        "",
        "| change | item | path | before | after | breaks a caller |",
        "| --- | --- | --- | --- | --- | --- |",
        *(_row(c) for c in changes),
    ]
    texts = [
        c
        for c in changes
        if c.note and "\n" in c.note or (c.note and c.note.startswith(("-", "+")))
    ]
    if texts:
        lines += ["", "## Text changes", ""]
        for c in texts:
            lines += [f"{c.label}, `{c.path}`:", "", "```diff", c.note or "", "```", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
