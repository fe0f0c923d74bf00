"""Projection against decoding: a ListToolsResult of 100 tools, 2026-07-28 -> 2024-11-05.

    .venv/bin/python bench/projection.py

Prints the time to decode the JSON into 2026-07-28 types, the time to project the decoded value
to 2024-11-05, and their ratio (a benchmark, not a test).
"""

from __future__ import annotations

import json
import timeit

import mcpbind


def payload(n: int = 100) -> bytes:
    tools = [
        {
            "name": f"tool_{i}",
            "title": f"Tool {i}",
            "description": "Does a thing with its arguments and returns a result.",
            "inputSchema": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["path"],
            },
            "annotations": {"readOnlyHint": True, "title": f"Tool {i}"},
            "icons": [{"src": "https://example.com/icon.png", "mimeType": "image/png"}],
            "_meta": {"vendor/key": i},
        }
        for i in range(n)
    ]
    return json.dumps(
        {"tools": tools, "resultType": "complete", "cacheScope": "public", "ttlMs": 60000}
    ).encode()


def main() -> None:
    data = payload()
    tp = mcpbind.bindings("2026-07-28").ListToolsResult
    decoder = mcpbind.decoder(tp)
    value = decoder.decode(data)
    mcpbind.project(value, "2024-11-05")  # import the pair module before timing
    number = 200
    dec = min(timeit.repeat(lambda: decoder.decode(data), number=number, repeat=5)) / number
    proj = min(timeit.repeat(lambda: mcpbind.project(value, "2024-11-05"), number=number, repeat=5)) / number
    print(f"decode  2026-07-28 ListToolsResult (100 tools, {len(data)} bytes): {dec * 1e6:8.1f} us")
    print(f"project 2026-07-28 -> 2024-11-05:                          {proj * 1e6:8.1f} us")
    print(f"project / decode = {proj / dec:.2f}")


if __name__ == "__main__":
    main()
