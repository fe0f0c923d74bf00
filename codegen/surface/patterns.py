"""JSON Schema patterns are ECMA-262 regular expressions; msgspec checks a ``pattern`` with
Python's ``re.search``. This module rewrites the constructs whose meaning differs (``$``, ``.``,
``\\d``, ``\\w``, ``\\s``, ``\\b`` and their negations, named groups) into Python's spelling of the
ECMA meaning, and gives up (None) on what it cannot say exactly (``\\p{...}``, ``\\c``, ``\\u{...}``,
a negated class escape inside brackets, anything Python does not compile). A pattern it gives up
on is checked by the fallback validator instead (docs/surface.md)."""

from __future__ import annotations

import re

__all__ = ["python_pattern"]

_WORD = "A-Za-z0-9_"
_SPACE = "\\t\\n\\x0b\\x0c\\r \\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"
_LINE_END = "\\n\\r\\u2028\\u2029"
_OUTSIDE = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": f"[{_WORD}]",
    "W": f"[^{_WORD}]",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
    "b": f"(?:(?<=[{_WORD}])(?![{_WORD}])|(?<![{_WORD}])(?=[{_WORD}]))",
    "B": f"(?:(?<=[{_WORD}])(?=[{_WORD}])|(?<![{_WORD}])(?![{_WORD}]))",
}
_INSIDE = {"d": "0-9", "w": _WORD, "s": _SPACE}
# Escapes that mean the same character in both languages.
_SAME = set("tnrvf0^$\\.*+?()[]{}|/-")


def python_pattern(pattern: str) -> str | None:
    """``pattern`` (ECMA-262, no flags) as a Python pattern with the same matches, or None."""
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            if i + 1 >= n:
                return None
            nxt = pattern[i + 1]
            i += 2
            if nxt in _OUTSIDE and not in_class:
                out.append(_OUTSIDE[nxt])
            elif nxt in _INSIDE and in_class:
                out.append(_INSIDE[nxt])
            elif nxt in "DWSbB" and in_class:
                if nxt == "b":
                    out.append("\\x08")  # [\b] is a backspace in both
                    continue
                return None
            elif (
                nxt == "u"
                and pattern[i : i + 4]
                and re.fullmatch(r"[0-9A-Fa-f]{4}", pattern[i : i + 4])
            ):
                out.append("\\u" + pattern[i : i + 4])
                i += 4
            elif nxt == "x" and re.fullmatch(r"[0-9A-Fa-f]{2}", pattern[i : i + 2] or "-"):
                out.append("\\x" + pattern[i : i + 2])
                i += 2
            elif nxt == "k" and pattern[i : i + 1] == "<" and not in_class:
                end = pattern.find(">", i)
                if end < 0:
                    return None
                out.append(f"(?P={pattern[i + 1 : end]})")
                i = end + 1
            elif nxt.isdigit() and nxt != "0":
                out.append("\\" + nxt)  # a back reference
            elif nxt in _SAME or not nxt.isalnum():
                out.append("\\" + nxt if nxt != "/" else "/")
            else:
                return None  # \p{..}, \c, \u{..} and the like
            continue
        if in_class:
            if ch == "]":
                in_class = False
            elif ch == "[":
                out.append("\\[")  # (Python warns on a nested set)
                i += 1
                continue
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            if pattern[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                return None  # [] and [^] mean nothing and anything in ECMA-262
        elif ch == "$":
            out.append("\\Z")
        elif ch == ".":
            out.append(f"[^{_LINE_END}]")
        elif (
            ch == "(" and pattern.startswith("(?<", i) and pattern[i + 3 : i + 4] not in ("=", "!")
        ):
            out.append("(?P<")
            i += 3
            continue
        else:
            out.append(ch)
        i += 1
    if in_class:
        return None
    text = "".join(out)
    try:
        re.compile(text)
    except (re.error, OverflowError):
        return None
    return text
