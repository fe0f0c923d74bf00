"""Projection against decoding: a ListToolsResult of 100 tools, 2026-07-28 -> 2024-11-05.

    .venv/bin/python -m bench.projection      (also a row of `make bench`)

Prints the time to decode the JSON into 2026-07-28 types, the time to project the decoded value
to 2024-11-05, and their ratio (a benchmark, not a test).
"""

from __future__ import annotations

import json
import timeit
from collections.abc import Callable
from typing import Any

import mcpbind

from .workloads import list_tools_result


def payload(n: int = 100) -> bytes:
    return json.dumps(list_tools_result(n, modern=True)).encode()


def _timer(fn: Callable[[], Any], number: int = 200) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number


def measure(timer: Callable[[Callable[[], Any]], float] = _timer) -> dict[str, float]:
    """Seconds to decode the 2026-07-28 ListToolsResult, and to project the decoded value."""
    data = payload()
    tp = mcpbind.bindings("2026-07-28").ListToolsResult
    decoder = mcpbind.decoder(tp)
    value = decoder.decode(data)
    mcpbind.project(value, "2024-11-05")  # import the pair module before timing
    dec = timer(lambda: decoder.decode(data))
    proj = timer(lambda: mcpbind.project(value, "2024-11-05"))
    return {"decode": dec, "project": proj, "bytes": len(data)}


def main() -> None:
    m = measure()
    dec, proj = m["decode"], m["project"]
    print(
        f"decode  2026-07-28 ListToolsResult (100 tools, {m['bytes']:.0f} bytes): {dec * 1e6:8.1f} us"
    )
    print(f"project 2026-07-28 -> 2024-11-05:                          {proj * 1e6:8.1f} us")
    print(f"project / decode = {proj / dec:.2f}")


if __name__ == "__main__":
    main()
