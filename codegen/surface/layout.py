"""Laying generated code out as black does (line length 100), without running black.

A 1,000-tool server's package is some 30,000 lines, which black formats in tens of seconds
here; the surface generator's statements are few in kind (a field, a signature, a call, an
import list), so it lays each out the way black would, and hands black only a statement it
cannot (``black_block``: a few milliseconds each). tests/test_surface_generate.py holds the
output to ``black --check``."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["LINE", "annotated", "bracketed", "docstring", "pystr", "signature", "union_members"]

LINE = 100


def pystr(text: str) -> str:
    """A string literal as black writes it: double quotes unless that needs more escapes."""
    literal = repr(text)
    if literal.startswith("'") and '"' not in text:
        literal = '"' + literal[1:-1].replace("\\'", "'") + '"'
    return literal


def bracketed(
    head: str, items: list[str], tail: str, indent: int, *, is_def: bool = False
) -> list[str] | None:
    """``head(item, item)tail`` (``head`` ends with its opening bracket, ``tail`` starts with
    the closing one) at ``indent``, as black lays out a line with one bracket pair: on one
    line; else the items on one line of their own; else one per line with a trailing comma.
    None when even that leaves a line too long (black would split further). A ``def`` whose
    one parameter goes on its own line gets a trailing comma, as black gives it."""
    pad = " " * indent
    one = f"{pad}{head}{', '.join(items)}{tail}"
    if len(one) <= LINE:
        return [one]
    if len(f"{pad}{head}") > LINE or len(f"{pad}{tail}") > LINE:
        return None
    inner = " " * (indent + 4)
    body = f"{inner}{', '.join(items)}" + ("," if is_def and len(items) == 1 else "")
    if items and len(body) <= LINE and not items[-1].endswith(","):
        return [f"{pad}{head}", body, f"{pad}{tail}"]
    lines = [f"{inner}{item}," for item in items]
    if any(len(line) > LINE for line in lines):
        return None
    return [f"{pad}{head}", *lines, f"{pad}{tail}"]


def annotated(
    name: str, annotation: str, value: str | None, indent: int, comma: str = ""
) -> list[str] | None:
    """``name: annotation = value`` (a class field, or a parameter with ``comma``) as black lays
    it out, or None where black would do something else."""
    pad, inner = " " * indent, " " * (indent + 4)
    tail = f" = {value}" if value is not None else ""
    one = f"{pad}{name}: {annotation}{tail}{comma}"
    if len(one) <= LINE:
        return [one]
    # black splits the value's brackets first when the line up to them fits
    if value is not None and value.isidentifier():
        head = f"{pad}{name}: {annotation} = ("
        if len(head) <= LINE:
            return [head, f"{inner}{value}", f"{pad}){comma}"]
    if value is not None and value.startswith("field(") and not comma:
        laid = bracketed(f"{name}: {annotation} = field(", [value[6:-1]], ")", indent)
        if laid is not None and len(laid) == 3:
            return laid
    parts = union_members(annotation)
    if len(parts) < 2:
        opening = annotation.find("[")
        if value is not None or opening < 0 or not annotation.endswith("]"):
            return None
        items = split_top(annotation[opening + 1 : -1])
        return bracketed(f"{name}: {annotation[: opening + 1]}", items, f"]{comma}", indent)
    body = f"{inner}{' | '.join(parts)}"
    middle = (
        [body] if len(body) <= LINE else [inner + parts[0], *(f"{inner}| {p}" for p in parts[1:])]
    )
    out = [f"{pad}{name}: (", *middle, f"{pad}){tail}{comma}"]
    return out if all(len(line) <= LINE for line in out) else None


_MARKS = re.compile(r"[\\\"'()\[\]{},|]")


def _top(text: str) -> list[int]:
    """The indexes of ``text``'s commas and bars at bracket depth 0 outside string literals."""
    out: list[int] = []
    depth, quote, escaped = 0, "", -1
    for m in _MARKS.finditer(text):
        i, ch = m.start(), m.group()
        if quote:
            if ch == "\\" and i != escaped:
                escaped = i + 1
            elif ch == quote and i != escaped:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch in ",|":
            out.append(i)
    return out


def split_top(text: str) -> list[str]:
    """``text`` split at its top-level commas."""
    cuts = [i for i in _top(text) if text[i] == ","]
    bounds = [-1, *cuts, len(text)]
    return [text[a + 1 : b].strip() for a, b in zip(bounds, bounds[1:], strict=False)]


def union_members(annotation: str) -> list[str]:
    """The members of a union annotation, split at its top-level ``|``."""
    cuts = [
        i
        for i in _top(annotation)
        if annotation[i : i + 1] == "|" and annotation[i - 1 : i + 2] == " | "
    ]
    bounds = [-2, *cuts, len(annotation) + 1]
    return [annotation[a + 2 : b - 1] for a, b in zip(bounds, bounds[1:], strict=False)]


def signature(head: str, params: list[str], tail: str, indent: int) -> list[str] | None:
    """A ``def`` as black lays it out, its parameters given as written (``name: ann = v``)."""
    laid = bracketed(head, params, tail, indent, is_def=True)
    if laid is not None:
        return laid
    pad, inner = " " * indent, " " * (indent + 4)
    lines = [f"{pad}{head}"]
    for p in params:
        if ": " not in p:
            lines.append(f"{inner}{p},")
            continue
        name, rest = p.split(": ", 1)
        annotation, value = rest, None
        for default in (" = UNSET", " = None"):
            if rest.endswith(default):
                annotation, value = rest[: -len(default)], default[3:]
        found = annotated(name, annotation, value, indent + 4, ",")
        if found is None:
            return None
        lines += found
    return [*lines, f"{pad}{tail}"]


def docstring(text: str | None, indent: int) -> list[str] | None:
    """A docstring as black leaves it: continuation lines indented, trailing spaces gone."""
    from ..emit import docstring as literal

    quoted = literal(text)
    if quoted is None:
        return None
    pad = " " * indent
    lines = [line.expandtabs() for line in quoted.split("\n")]
    rest = [line for line in lines[1:] if line.strip()]
    common = min((len(line) - len(line.lstrip()) for line in rest), default=0)
    out = [pad + lines[0].rstrip()]
    for line in lines[1:]:
        kept = line[common:].rstrip()
        out.append(pad + kept if kept else "")
    last = out[-1]
    if len(out) > 1 and len(last) > LINE and last.endswith('"""') and last.strip() != '"""':
        out[-1] = last[:-3]
        out.append(pad + '"""')
    return out


def black_block(source: str) -> str:
    """``source`` (one complete statement or block, at column 0) formatted by black."""
    return _black(source)


@lru_cache(maxsize=4096)
def _black(source: str) -> str:
    import black

    mode = black.Mode(line_length=LINE, target_versions={black.mode.TargetVersion.PY311})
    return black.format_str(source, mode=mode)
